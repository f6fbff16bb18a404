"""The gin-bindable parameters of a configurable: name, default as gin text, help, bound value.

The data behind ``--describe`` (which formats it, see
:mod:`alf.config_help.description`) and behind the test that every configurable
parameter has a help line (:func:`undocumented`).
"""
import dataclasses
import inspect
import re
import typing
from typing import Any, Dict, List, Optional, Sequence, Tuple

import gin

from alf.config_help.docstrings import param_doc
from alf.config_ranges import declared_range
from alf.config_help.markup import plain
from alf.config_help.registry import Configurable, configurables


@dataclasses.dataclass
class Parameter:
    """One parameter of a configurable, as ``--describe`` shows it."""
    name: str
    default: str     # gin syntax, or "" when required
    required: bool
    doc: str
    range: str = ""  # the declared range (alf.config_ranges), e.g. "in [0, 1]"; "" if none


def gin_names() -> Dict[int, str]:
    """``{id(target): name}`` of every configurable, to write a default as ``@Name``."""
    return {id(c.target): c.name for c in configurables(include_external=True)}


def format_default(value: Any, names: Optional[Dict[int, str]] = None) -> str:
    """``value`` as a gin file would write it: ``@PPOLoss`` for a configurable, ``'auto'``,
    ``(64, 64)``, ``None``; other classes/functions as their dotted path."""
    names = gin_names() if names is None else names
    if id(value) in names:
        return "@" + names[id(value)]
    if inspect.isclass(value) or inspect.isfunction(value) or inspect.isbuiltin(value):
        module = getattr(value, "__module__", None) or ""
        qual = getattr(value, "__qualname__", getattr(value, "__name__", repr(value)))
        return f"{module}.{qual}" if module else qual
    return repr(value)


def parameters(target: Any, allowlist: Optional[Sequence[str]] = None,
               denylist: Optional[Sequence[str]] = None) -> Tuple[List[Parameter], bool]:
    """The gin-bindable parameters of ``target`` and whether it also takes ``**kwargs``."""
    fn = target.__init__ if inspect.isclass(target) else target
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return [], False
    names = gin_names()
    declared = _declared_hints(fn)
    out, var_kw = [], False
    for p in sig.parameters.values():
        if p.kind == p.VAR_KEYWORD:
            var_kw = True
        if p.name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if (allowlist and p.name not in allowlist) or (denylist and p.name in denylist):
            continue
        required = p.default is inspect.Parameter.empty
        out.append(Parameter(p.name, "" if required else format_default(p.default, names),
                             required, plain(param_doc(target, p.name)),
                             declared_range(declared.get(p.name))))
    for p in out:  # documented only inside a sibling's entry (``priority_replay_alpha``)
        if not p.doc:
            mention = re.compile(rf"`{p.name}`" if "_" not in p.name else rf"\b{p.name}\b")
            owner = next((q.name for q in out if q.doc and mention.search(q.doc)), None)
            if owner:
                p.doc = f"(see {owner})"
    return out, var_kw


def _declared_hints(fn: Any) -> Dict[str, Any]:
    """``fn``'s type hints with their ``Annotated`` range declarations ({} if unresolvable)."""
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception:  # noqa: BLE001 - forward references that do not resolve: no ranges
        return {}


def bindable(c: Configurable) -> Tuple[List[Parameter], bool]:
    """:func:`parameters` of ``c`` less those its registration's allow/denylist excludes."""
    registered = gin.config._REGISTRY.get(c.selector)  # pylint: disable=protected-access
    return parameters(c.target, getattr(registered, "allowlist", None),
                      getattr(registered, "denylist", None))


def bound_value(selector: str, param: str) -> Optional[str]:
    """The value the currently parsed config binds (unscoped), as gin text; None if unbound."""
    try:
        value = gin.query_parameter(f"{selector}.{param}")
    except (ValueError, KeyError):
        return None
    if isinstance(value, gin.config.ConfigurableReference):
        return repr(value)  # gin syntax: @scope/Name() or %MACRO
    return format_default(value)


def undocumented() -> List[str]:
    """``Name.param`` of every alf configurable parameter without its own help line
    (none at all, or only a mention in a sibling's), for docstring upkeep."""
    return [f"{c.name}.{p.name}" for c in configurables()
            for p in parameters(c.target)[0] if not p.doc or p.doc.startswith("(see ")]
