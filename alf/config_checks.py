"""Check every gin binding's value against its parameter's type hint, right after parsing.

Why: gin stores whatever literal it parsed. A ``PPOAlgorithm.gamma='abc'`` used
to build fine, start training, write ``root_dir`` and only crash deep inside
torch at the first update (and the saved ``config.gin`` kept the bad value, so
every rerun crashed the same way). Every alf configurable has type hints, so a
literal that cannot match them is caught before anything is built or written,
with one line naming the parameter, the value, what was expected and where it
was set.

Only literals are checked (numbers, strings, booleans, None, lists, tuples,
dicts). Gin references (``@Name``, ``@Name()``, ``%MACRO``) are left alone:
what they evaluate to is only known when they are called. Annotations this
module does not understand (project classes, ``Any``) accept anything, so the
check can only reject values that are certainly wrong.

A number of the right type is then checked against the range its parameter
declares (``gamma: Discount``, see :mod:`alf.config_ranges`), so ``gamma=1.5``
or ``num_iterations=-5`` fail at the same point with a message of the same form.
:func:`check_ranges` applies the same declarations to values set from Python.
"""
import collections.abc
import inspect
import math
import typing
from typing import Any, Callable, Dict, List, Optional, Tuple

import gin

from alf.config_ranges import Range
from alf.config_subclass import forwarded_params
from alf.errors import ConfigError

_LITERAL_TYPES = (bool, int, float, complex, str, bytes, type(None), list, tuple, dict)


def check_bindings(location_of: Callable[[str], Optional[str]]) -> None:
    """Raise :class:`ConfigError` for the first bound literal that contradicts its type hint.

    Args:
        location_of: maps ``"[scope/]Configurable.param"`` to where it was set
            (``"file, line N"`` or ``"--conf_param '...'"``), or None.
    """
    for (scope, selector), params in _bindings().items():
        target = _signature_target(selector)
        if target is None:
            continue
        hints = _type_hints(target)
        declared = _type_hints(target, extras=True)  # with their Range declarations
        defaults = _defaults(target)
        forwarded = _forwarded_targets(selector)
        for name, bound in params.items():
            if name not in hints and name in forwarded:  # ``Sub.gamma`` through **kwargs
                hints[name] = _type_hints(forwarded[name]).get(name)
                declared[name] = _type_hints(forwarded[name], extras=True).get(name)
                defaults.setdefault(name, _defaults(forwarded[name]).get(name, _UNDEFINED))
            if hints.get(name) is None:
                continue
            key = f"{selector.split('.')[-1]}.{name}"
            shown = f"{scope}/{key}" if scope else key
            value, macro = _resolve_macros(bound)
            if macro is not None and value is _UNDEFINED:
                raise ConfigError(
                    f"Config error ({location_of(shown) or 'the config'}): {shown} = %{macro}, "
                    f"but the macro {macro} is not defined: add a line `{macro} = <value>`")
            if value is None and defaults.get(name, _UNDEFINED) is None:
                continue  # the parameter's own default (``x: float = None``)
            via = f" (through %{macro})" if macro else ""
            if matches(value, hints[name]) is False:
                raise ConfigError(
                    f"Config error ({location_of(shown) or 'the config'}): {shown} = {value!r}"
                    f"{via} is {_kind(value)}, but it must be {describe(hints[name])}")
            why = out_of_range(value, declared.get(name))
            if why:
                raise ConfigError(
                    f"Config error ({location_of(shown) or 'the config'}): {shown} = {value!r}"
                    f"{via} is out of range: {why}")


def check_ranges(owner: str, target: Callable, values: Dict[str, Any]) -> None:
    """Raise :class:`ConfigError` for the first of ``values`` (parameter name -> value) outside
    the range its parameter of ``target`` declares (:mod:`alf.config_ranges`), in the
    message form of :func:`check_bindings`. For values set from Python rather than gin
    (``TrainerConfig(num_iterations=-5)``); non-literals (schedules) are not judged."""
    declared = _type_hints(target, extras=True)
    for name, value in values.items():
        why = out_of_range(value, declared.get(name))
        if why:
            raise ConfigError(f"{owner}.{name} = {value!r} is out of range: {why}")


def out_of_range(value: Any, annotation: Any) -> Optional[str]:
    """Why the literal ``value`` lies outside the :class:`~alf.config_ranges.Range` that
    ``annotation`` declares (``"it must be in [0, 1]"``, ``"item 2 must be > 0"``), or None
    (inside, no range declared, or not a literal the annotation's type takes).

    >>> from alf.config_ranges import Discount
    >>> out_of_range(1.5, Discount), out_of_range(0.9, Discount)
    ('it must be in [0, 1]', None)
    """
    found = _range_violation(value, annotation)
    if found is None:
        return None
    where, rng = found
    return f"{where or 'it'} must be {rng.describe()}"


def _range_violation(value: Any, annotation: Any) -> Optional[Tuple[str, Range]]:
    if annotation is None or not isinstance(value, _LITERAL_TYPES):
        return None
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        inner = _range_violation(value, args[0])
        if inner is not None:
            return inner
        if _is_number(value):
            for rng in annotation.__metadata__:
                if isinstance(rng, Range) and value not in rng:
                    infinite = rng.finite and isinstance(value, float) and math.isinf(value)
                    return "", Range(finite=True) if infinite else rng
        return None
    if origin is typing.Union:  # the first arm the value fits decides
        for arm in args:
            if matches(value, arm) is True:
                return _range_violation(value, arm)
        return None
    if isinstance(value, (list, tuple)) and args and (
            origin in (list, tuple, collections.abc.Sequence)):
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            pairs = list(zip(value, args))
        else:
            pairs = [(v, args[0]) for v in value]
        for i, (v, a) in enumerate(pairs):
            inner = _range_violation(v, a)
            if inner is not None:
                return inner[0] or f"item {i + 1}", inner[1]
    return None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_UNDEFINED = object()


def _resolve_macros(value: Any) -> Tuple[Any, Optional[str]]:
    """``(value, None)`` for a non-macro; for ``%NAME`` (possibly a chain of macros) the
    literal it stands for (or ``_UNDEFINED``) and the first macro's name. Macros are
    constants fixed at parse time, so the value they carry is checked like a literal."""
    first = None
    for _ in range(32):
        if not isinstance(value, gin.config.ConfigurableReference) or \
                value.configurable.name != "macro":
            return value, first
        name = value.scoped_selector.rpartition("/")[0]
        first = first or name
        binding = _bindings().get((name, "gin.macro"), {})
        if "value" not in binding:
            return _UNDEFINED, first
        value = binding["value"]
    return None, first  # a cycle of macros: gin reports it when it is evaluated


def matches(value: Any, annotation: Any) -> Optional[bool]:
    """Whether the literal ``value`` fits ``annotation``: True, False, or None (cannot tell).

    >>> matches(2.5, int), matches(2, float), matches("abc", float), matches(None, Optional[int])
    (False, True, False, True)
    """
    if not isinstance(value, _LITERAL_TYPES):
        return None  # a gin reference or macro: checked when it is called
    if annotation in (Any, inspect.Parameter.empty, object):
        return True
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:  # a declared range (alf.config_ranges): the type inside
        return matches(value, args[0])
    if origin is typing.Union:
        results = [matches(value, a) for a in args]
        if any(r is True for r in results):
            return True
        return None if any(r is None for r in results) else False
    if origin is typing.Literal:
        return value in args
    if annotation is type(None) or annotation is None:
        return value is None
    if value is None:
        return False if _is_checkable(annotation) else None
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation is str:
        return isinstance(value, str)
    if annotation is collections.abc.Callable or origin is collections.abc.Callable:
        return False  # no literal is callable
    if annotation in (dict, typing.Dict) or origin in (dict, collections.abc.Mapping):
        return isinstance(value, dict)
    if annotation in (list, tuple) or origin in (list, tuple, collections.abc.Sequence):
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            return False
        return _elements_match(value, annotation, origin, args)
    return None


def _elements_match(value, annotation, origin, args) -> Optional[bool]:
    if not args:
        return True
    if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
        if len(args) != len(value):
            return False
        pairs = list(zip(value, args))
    else:
        pairs = [(v, args[0]) for v in value]
    results = [matches(v, a) for v, a in pairs]
    if any(r is False for r in results):
        return False
    return True if all(r is True for r in results) else None


def _is_checkable(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    return (annotation in (bool, int, float, str, list, tuple, dict, collections.abc.Callable)
            or origin in (list, tuple, dict, collections.abc.Sequence, collections.abc.Mapping,
                          collections.abc.Callable))


def describe(annotation: Any) -> str:
    """A reader's name for a type hint: ``Optional[int]`` -> ``"an int or None"``."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return describe(args[0])
    if origin is typing.Union:
        parts = [describe(a) for a in args if a is not type(None)]
        if type(None) in args:
            parts.append("None")
        if "a float (or int)" in parts:
            parts = [p for p in parts if p != "an int"]
        return " or ".join(dict.fromkeys(parts))
    if annotation is type(None):
        return "None"
    if annotation is collections.abc.Callable or origin is collections.abc.Callable:
        return "a callable (a gin reference such as @Name)"
    if origin in (list, tuple, collections.abc.Sequence) or annotation in (list, tuple):
        if origin is tuple and args and args[-1] is not Ellipsis:
            return "a tuple (" + ", ".join(describe(a) for a in args) + ")"
        return "a list/tuple" + (f" whose items are {describe(args[0])}" if args else "")
    if origin in (dict, collections.abc.Mapping) or annotation is dict:
        return "a dict"
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    name = getattr(annotation, "__name__", None) or repr(annotation)
    return {"int": "an int", "float": "a float (or int)", "bool": "True or False",
            "str": "a string in quotes"}.get(name, _a(name))


def _kind(value: Any) -> str:
    return {bool: "a bool", int: "an int", float: "a float", str: "a string", type(None): "None",
            list: "a list", tuple: "a tuple", dict: "a dict"}.get(type(value),
                                                               _a(type(value).__name__))


def _a(noun: str) -> str:
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


def _bindings() -> Dict[Tuple[str, str], Dict[str, Any]]:
    return gin.config._CONFIG  # pylint: disable=protected-access


def _signature_target(selector: str) -> Optional[Callable]:
    try:
        registered = gin.config._REGISTRY.get_match(selector)  # pylint: disable=protected-access
    except Exception:  # noqa: BLE001 - unknown selectors are reported by gin itself
        return None
    if registered is None:
        return None
    fn = registered.wrapped
    return fn.__init__ if inspect.isclass(fn) else fn


def _forwarded_targets(selector: str) -> Dict[str, Callable]:
    """For a class that takes ``**kwargs``: parameter name -> the ``__init__`` up its MRO
    that declares it (:func:`alf.config_subclass.forwarded_params`), so a forwarded binding
    is checked against the hint where the parameter is declared."""
    try:
        registered = gin.config._REGISTRY.get_match(selector)  # pylint: disable=protected-access
    except Exception:  # noqa: BLE001
        return {}
    owners = forwarded_params(registered.wrapped) if registered is not None else None
    return {n: k.__dict__["__init__"] for n, k in (owners or {}).items()}


def _defaults(target: Callable) -> Dict[str, Any]:
    try:
        return {n: p.default for n, p in inspect.signature(target).parameters.items()}
    except (TypeError, ValueError):
        return {}


def _type_hints(target: Callable, extras: bool = False) -> Dict[str, Any]:
    try:
        return typing.get_type_hints(target, include_extras=extras)
    except Exception:  # noqa: BLE001 - unresolvable forward references: nothing to check
        return {}


__all__: List[str] = ["check_bindings", "check_ranges", "matches", "describe", "out_of_range"]
