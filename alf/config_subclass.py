"""Gin bindings and subclasses of configurables: ``**kwargs`` forwarding and parent bindings.

The documented way to vary an algorithm is a subclass that adds its own parameters and
hands the rest to the parent::

    @alf.configurable
    class ClippedDqn(DqnAlgorithm):
        def __init__(self, *args, v_max: float = 100.0, **kwargs):
            super().__init__(*args, **kwargs)

Two things go wrong with gin alone, and both are caught right after parsing:

- gin accepts *any* parameter name for a configurable whose ``__init__`` takes
  ``**kwargs``, so ``ClippedDqn.v_maxx = 5`` passed parsing and failed when the algorithm
  was built, as ``DqnAlgorithm.__init__() got an unexpected keyword argument`` with no
  file, line or suggestion. :func:`check_forwarded_params` follows ``**kwargs`` up the
  class's MRO (the ``super().__init__(*args, **kwargs)`` pattern) to the first
  ``__init__`` with a closed signature; a name that none of them takes is one
  :class:`ConfigError` naming ``ClippedDqn.v_maxx``, where it was bound and the closest
  valid names.
- A parent's bindings reach a subclass only for the parameters it forwards: gin wraps the
  parent's ``__init__`` too, so ``super().__init__(**kwargs)`` fills in
  ``DqnAlgorithm.gamma`` from the config whenever ``gamma`` is not passed explicitly. A
  subclass that takes ``gamma`` itself (to change its default, or to use it) passes it
  explicitly, and ``DqnAlgorithm.gamma = 0.99`` from an included file is silently
  dropped. :func:`check_parent_bindings` refuses that case when the parent itself is
  never referenced in the config (only the subclass runs), naming each dropped binding,
  where it was set and the line to write instead (``ClippedDqn.gamma = 0.99``). Binding
  the subclass's parameter, to any value, settles it. docs/design/config.md says why this
  is an error rather than the parent's value silently taking over the subclass's default.
"""
import difflib
import inspect
from typing import Any, Callable, Dict, Iterator, List, Optional, Set, Tuple

import gin
import torch

from alf.errors import ConfigError

# __init__s that take no keyword arguments a subclass could forward to (nn.Module's
# accepts **kwargs only to raise on them).
_ROOTS = (object, torch.nn.Module)


def _params(init: Callable) -> Tuple[List[str], bool]:
    """(keyword-bindable parameter names, takes ``**kwargs``) of an ``__init__``."""
    try:
        sig = inspect.signature(init)
    except (TypeError, ValueError):
        return [], True
    names = [n for n, p in sig.parameters.items() if n != "self" and p.kind in (
        p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return names, any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())


def _inits(cls: type) -> Iterator[Tuple[type, Callable]]:
    """``(class, its own __init__)`` along the MRO, up to (not including) the roots. A class
    that defines no ``__init__`` but is itself configurable has gin's wrapper of its
    parent's: that is not its own, so it is left out."""
    inits = [(k, k.__dict__.get("__init__")) for k in cls.__mro__]
    for i, (klass, init) in enumerate(inits):
        if klass in _ROOTS:
            return
        if init is None or _wraps_one_of(init, [f for _, f in inits[i + 1:] if f is not None]):
            continue
        yield klass, init


def _wraps_one_of(fn: Callable, others: List[Callable]) -> bool:
    for _ in range(16):
        fn = getattr(fn, "__wrapped__", None)
        if fn is None:
            return False
        if any(fn is o for o in others):
            return True
    return False


def forwarded_params(cls: Any) -> Optional[Dict[str, type]]:
    """For a class whose ``__init__`` takes ``**kwargs``: every parameter name it accepts,
    its own and those its ``**kwargs`` forward to along the MRO, mapped to the class whose
    ``__init__`` declares it (the nearest one). None when ``cls`` is not a class, takes no
    ``**kwargs`` (gin checks names itself), or its ``**kwargs`` reach ``object`` /
    ``nn.Module`` (they may go elsewhere: the accepted names are unknown)."""
    if not inspect.isclass(cls):
        return None
    accepted: Dict[str, type] = {}
    first = True
    for klass, init in _inits(cls):
        names, var_kw = _params(init)
        if first and not var_kw:
            return None
        first = False
        for n in names:
            accepted.setdefault(n, klass)
        if not var_kw:
            return accepted
    return None


def _registry() -> Dict[int, str]:
    """id(wrapped class or function) -> its registered selector (module-qualified)."""
    out: Dict[int, str] = {}
    for selector, configurable in gin.config._REGISTRY.items():  # pylint: disable=protected-access
        out.setdefault(id(configurable.wrapped), str(selector))
    return out


def _config() -> Dict[Tuple[str, str], Dict[str, Any]]:
    return gin.config._CONFIG  # pylint: disable=protected-access


def _short(selector: str) -> str:
    return selector.split(".")[-1]


def check_forwarded_params(location_of: Callable[[str], Optional[str]]) -> None:
    """Raise :class:`ConfigError` for a binding of a ``**kwargs`` configurable (see
    :func:`forwarded_params`) whose name neither it nor the classes its ``**kwargs`` go to
    take: one line with the binding, where it was set and the closest valid names."""
    for (scope, selector), params in _config().items():
        try:
            registered = gin.config._REGISTRY.get_match(selector)  # pylint: disable=protected-access
        except Exception:  # noqa: BLE001 - unknown selectors are reported by gin itself
            continue
        accepted = forwarded_params(registered.wrapped) if registered is not None else None
        if accepted is None:
            continue
        short = _short(selector)
        for name in params:
            if name in accepted:
                continue
            key = f"{scope}/{short}.{name}" if scope else f"{short}.{name}"
            parents = [k.__name__ for k in dict.fromkeys(accepted.values())
                       if k is not registered.wrapped]
            close = difflib.get_close_matches(name, list(accepted), n=3)
            hint = (f" Did you mean: {', '.join(close)}?" if close else
                    f" Valid parameters: {', '.join(accepted)}.")
            raise ConfigError(
                f"Config error ({location_of(key) or 'the config'}): Configurable '{short}' "
                f"doesn't have a parameter named '{name}' ({key}; checked {short}'s own "
                f"parameters and {', '.join(parents)}'s, which its **kwargs go to).{hint}")


def _references(value: Any, found: Set[int]) -> None:
    if isinstance(value, gin.config.ConfigurableReference):
        if value.configurable.name != "macro":
            found.add(id(value.configurable.wrapped))
    elif isinstance(value, dict):
        for v in value.values():
            _references(v, found)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _references(v, found)


def dropped_parent_bindings() -> List[Tuple[str, str, str, Any]]:
    """Bindings of a parent class that cannot reach the subclass the config runs:
    ``(subclass selector, parent selector, parameter, bound value)`` for each unscoped
    ``Parent.p`` where the config references a subclass (``@Sub``) but never the parent
    itself, some class from the subclass up to the parent declares ``p`` in its own
    ``__init__`` (so passes it explicitly), and no class on that way has ``p`` bound."""
    config = _config()
    referenced: Set[int] = set()
    for params in config.values():
        for value in params.values():
            _references(value, referenced)
    selector_of = _registry()
    bound_names = {}  # selector -> names bound in any scope
    for (_, selector), params in config.items():
        bound_names.setdefault(selector, set()).update(params)
    dropped = []
    seen = set()
    for sub in [obj for obj in _all_wrapped() if id(obj) in referenced]:
        if not inspect.isclass(sub):
            continue
        declared: Set[str] = set()
        settled: Set[str] = set()  # bound on a class between sub and the parent
        for klass, init in _inits(sub):
            selector = selector_of.get(id(klass))
            if klass is not sub and selector is not None and id(klass) not in referenced:
                for name, value in config.get(("", selector), {}).items():
                    if name in declared and name not in settled and (
                            selector, name) not in seen:
                        seen.add((selector, name))
                        dropped.append((selector_of[id(sub)], selector, name, value))
            if selector is not None:
                settled |= bound_names.get(selector, set())
            declared |= set(_params(init)[0])
    return dropped


def _all_wrapped() -> List[Any]:
    out, ids = [], set()
    for _, configurable in gin.config._REGISTRY.items():  # pylint: disable=protected-access
        if id(configurable.wrapped) not in ids:
            ids.add(id(configurable.wrapped))
            out.append(configurable.wrapped)
    return out


def check_parent_bindings(location_of: Callable[[str], Optional[str]]) -> None:
    """Raise :class:`ConfigError` (one line) listing the parent bindings that
    :func:`dropped_parent_bindings` finds, each with where it was set, and the subclass
    bindings to write instead."""
    dropped = dropped_parent_bindings()
    if not dropped:
        return
    sub = _short(dropped[0][0])
    keys = [f"{_short(parent)}.{name}" for _, parent, name, _ in dropped]
    where = [location_of(k) for k in keys]
    others = [f"{k} at {w}" if w else k for k, w in zip(keys[1:], where[1:])]
    fixes = [f"{_short(s)}.{name} = {value!r}" for s, _, name, value in dropped]
    subs = " and ".join(sorted({_short(d[0]) for d in dropped}))
    many = len(dropped) > 1
    raise ConfigError(
        f"Config error ({where[0] or 'the config'}): {keys[0]} is bound there"
        + (f" (and {'; '.join(others)})" if others else "")
        + f", but {subs} is what runs and takes {'those parameters' if many else 'it'} itself, "
        f"so {'those bindings never reach' if many else 'the binding never reaches'} it: bind "
        f"{', '.join(fixes)} (binding {sub}'s own parameter, to any value, even its default, "
        "settles it)")


__all__: List[str] = ["forwarded_params", "check_forwarded_params", "dropped_parent_bindings",
                      "check_parent_bindings"]
