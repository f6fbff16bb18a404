"""The text ``--describe NAME`` prints: a configurable's parameter table, or one parameter.

Each parameter is shown as ``name = default`` (or, with a parsed config,
``name = value  (default: d)`` where the config binds another value) followed
by its help, wrapped to the terminal. A name matching several configurables
lists them; one matching none is a :class:`UserError` with close names.
"""
import difflib
import inspect
import re
import shutil
import textwrap
from typing import List

from alf.config_help.markup import summary
from alf.config_help.params import Parameter, bindable, bound_value
from alf.config_help.registry import Configurable, configurables, find
from alf.errors import UserError


def _wrap(head: str, doc: str, width: int, column: int) -> List[str]:
    """``head`` with ``doc`` wrapped beside it from ``column`` (below it when ``head`` is wider)."""
    if not doc:
        return [head]
    indent = " " * column
    if len(head) + 2 > column:
        return [head] + textwrap.wrap(doc, width, initial_indent=indent, subsequent_indent=indent)
    return textwrap.wrap(doc, width, initial_indent=head.ljust(column),
                         subsequent_indent=indent)


def _width() -> int:
    """The line width to wrap to: the terminal's, within 60..110 (100 when not a terminal)."""
    return max(60, min(110, shutil.get_terminal_size((100, 24)).columns))


def _heads(c: Configurable, params: List[Parameter], show_bound: bool,
           prefix: str = "") -> List[str]:
    """``name = default`` per parameter, or ``name = value  (default: d)`` when the parsed
    config binds another value."""
    heads = []
    for p in params:
        bound = bound_value(c.selector, p.name) if show_bound else None
        if bound is not None and bound != p.default:
            heads.append(f"{prefix}{p.name} = {bound}  (default: {p.default or 'required'})")
        else:
            heads.append(prefix + (f"{p.name} (required)" if p.required
                                   else f"{p.name} = {p.default}"))
    return heads


def _help(p: Parameter) -> str:
    """A parameter's help line: its doc, then its declared range (``Must be in [0, 1].``)."""
    doc = p.doc or "(undocumented)"
    if not p.range:
        return doc
    rule = (f"Items must be {p.range[len('items '):]}" if p.range.startswith("items ")
            else f"Must be {p.range}")
    return f"{doc}{'' if doc.endswith('.') else '.'} {rule}."


def format_parameter(matches: List[Configurable], param: str, show_bound: bool = False) -> str:
    """``--describe Name.param``: one entry per configurable, ``Name.param = default  help``."""
    rows = []
    for c in matches:
        params = [p for p in bindable(c)[0] if p.name == param]
        rows += [(h, _help(p)) for h, p in zip(_heads(c, params, show_bound, c.name + "."),
                                               params)]
    column = min(44, max(len(h) for h, _ in rows) + 2)
    lines = []
    for head, doc in rows:
        lines += _wrap(head, doc, _width(), column)
    return "\n".join(lines)


def format_description(c: Configurable, show_bound: bool = False) -> str:
    """The text ``--describe`` prints for one configurable."""
    params, var_kw = bindable(c)
    width = _width()
    heads = _heads(c, params, show_bound)
    column = min(38, max([len(h) for h in heads] + [0]) + 4)
    kind = "class" if inspect.isclass(c.target) else "function"
    lines = [f"{c.name}  ({kind} {c.target.__module__}.{c.target.__qualname__})"]
    intro = summary(c.target)
    if intro:
        lines += textwrap.wrap(intro, width, initial_indent="  ", subsequent_indent="  ")
    example = next((p for p in params if re.match(r"^-?[\d.]+(e-?\d+)?$|^True$|^False$",
                                                  p.default)), params[0] if params else None)
    key = f"{c.name}.{example.name if example else 'param'}"
    header = ("Parameters (name = " + ("value in this config" if show_bound else "default")
              + ", then help). Set one in a gin file as " + f"`{key} = ...` or on the command "
              + f"line with --conf_param '{key}=...':")
    lines += [""] + textwrap.wrap(header, width)
    for p, head in zip(params, heads):
        lines += _wrap("  " + head, _help(p), width, column)
    if not params:
        lines.append("  (none)")
    if var_kw:
        lines.append("  **kwargs are passed through (see the docstring).")
    return "\n".join(lines)


def describe(query: str, show_bound: bool = False) -> str:
    """What ``--describe query`` prints; raises :class:`UserError` when nothing matches.

    ``query`` is a configurable (``PPOAlgorithm``, ``alf.optimizers.Adam``), one
    parameter of it (``PPOAlgorithm.gamma``), or part of a name (``PPO``,
    ``networks``: several matches are listed with their summaries).
    """
    query = query.strip()
    matches = find(query)
    if not matches and "." in query:
        head, _, param = query.rpartition(".")
        with_param = [c for c in find(head) if param in [p.name for p in bindable(c)[0]]]
        if with_param:
            return format_parameter(with_param, param, show_bound)
        owners = find(head)
        if len(owners) == 1:
            names = [p.name for p in bindable(owners[0])[0]]
            close = difflib.get_close_matches(param, names, n=3, cutoff=0.5)
            hint = f" Did you mean: {', '.join(close)}?" if close else \
                f" Its parameters: {', '.join(names)}."
            raise UserError(f"{owners[0].name} has no parameter '{param}'.{hint}")
    if len(matches) == 1:
        return format_description(matches[0], show_bound)
    if matches:
        width = max(len(c.name) for c in matches) + 2
        return "\n".join([f"{len(matches)} configurables match '{query}' "
                          "(--describe one of them for its parameters):"]
                         + [f"  {c.name:<{width}}{summary(c.target)}" for c in matches])
    names = sorted({c.selector.split(".")[-1] for c in configurables(include_user=True)})
    close = difflib.get_close_matches(query, names, n=3, cutoff=0.5) or \
        difflib.get_close_matches(query.lower(), [n.lower() for n in names], n=3, cutoff=0.5)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    raise UserError(f"unknown configurable '{query}'.{hint} "
                    "--list_configurables lists them all.")
