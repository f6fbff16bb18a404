"""Parameter help read from docstrings: Google-style ``Args:``/``Attributes:`` sections.

``--describe`` shows each parameter's help as its class (or ``__init__``, or
function) documents it. A parameter documented only in a base class -- an entry
``see :class:`RLAlgorithm```, or no entry at all -- takes that class's text, so
an algorithm need not repeat its base class's parameter docs.
"""
import importlib
import inspect
import re
import sys
from typing import Any, Dict, List, Optional, Tuple

from alf.config_help.registry import configurables

_SECTION = re.compile(r"^(\s*)(?:Args|Arguments|Parameters|Attributes|Fields|"
                      r"Keyword Args|Keyword Arguments):\s*(.*)$")
_NAMES = r"[*\w][\w/*]*(?:\s*,\s*[*\w][\w/*]*)*"
_ENTRY = re.compile(r"^(" + _NAMES + r"|\([\w ]+\))\s*(?:\([^)]*\))?\s*:(?:\s+(.*))?$")
_IDENT = re.compile(r"^[A-Za-z_]\w*$")


def parse_param_docs(doc: Optional[str]) -> Dict[str, str]:
    """``{parameter: help}`` from the Google-style ``Args:``/``Attributes:`` sections of ``doc``.

    Entries may name several parameters (``gamma, gae_lambda: ...``); an entry's
    continuation lines are joined into one line. Text after ``Args:`` on the header
    line (``Args: as :class:`X`, plus``) and its unindented continuation are skipped.
    """
    return {name: text for name, (text, _) in _parse_entries(doc).items()}


def _parse_entries(doc: Optional[str]) -> Dict[str, Tuple[str, int]]:
    """:func:`parse_param_docs` with, for each parameter, how many its entry names."""
    if not doc:
        return {}
    lines = inspect.cleandoc(doc).splitlines()
    docs: Dict[str, List] = {}
    i = 0
    while i < len(lines):
        m = _SECTION.match(lines[i])
        i += 1
        if not m:
            continue
        base, header_text = len(m.group(1)), m.group(2).strip()
        entry_indent, current = None, []
        while i < len(lines):
            line = lines[i]
            if not line.strip():
                i += 1
                continue
            indent = len(line) - len(line.lstrip())
            if indent <= base:
                if entry_indent is None and header_text and not _SECTION.match(line):
                    i += 1  # "Args: as :class:`X` (...),\n more of that sentence, plus"
                    continue
                break
            if entry_indent is None:
                entry_indent = indent
            if indent <= entry_indent:
                em = _ENTRY.match(line.strip())
                current = []
                if em:
                    names = [n.strip() for n in em.group(1).split(",")]
                    current = [n.lstrip("*") for n in names if _IDENT.match(n.lstrip("*"))]
                    for n in current:
                        docs[n] = [(em.group(2) or "").strip(), len(current)]
            else:
                for n in current:
                    docs[n][0] = (docs[n][0] + " " + line.strip()).strip()
            i += 1
    return {n: (text, count) for n, (text, count) in docs.items()}


def _own_docs(obj: Any) -> Dict[str, Tuple[str, int]]:
    """Entries of ``obj``'s docstring and, for a class, of its own ``__init__``'s."""
    docs = _parse_entries(getattr(obj, "__doc__", None))
    init = obj.__dict__.get("__init__") if inspect.isclass(obj) else None
    if init is not None:
        for k, v in _parse_entries(getattr(init, "__doc__", None)).items():
            docs.setdefault(k, v)
    return docs


_REFERENCE = re.compile(r":(?:class|func|meth):`~?([\w.]+)`")
_SEE = re.compile(r"^see\s+(?::\w+:)?`*~?([A-Za-z_][\w.]*)`*\s*(.*)$")


def _resolve(name: str, context: Any) -> Optional[Any]:
    """The class/function called ``name`` as seen from ``context`` (its MRO, its module,
    an importable dotted path, or a registered configurable); None if not found."""
    last = name.split(".")[-1]
    for base in getattr(context, "__mro__", ()):
        if base.__name__ == last:
            return base
    module = sys.modules.get(getattr(context, "__module__", "") or "")
    head, *rest = name.split(".")
    obj = getattr(module, head, None) if module else None
    for part in rest:
        obj = getattr(obj, part, None)
    if obj is not None:
        return obj
    if "." in name:
        mod_name, _, attr = name.rpartition(".")
        try:
            return getattr(importlib.import_module(mod_name), attr, None)
        except ImportError:
            return None
    for c in configurables():
        if c.selector.split(".")[-1] == name:
            return c.target
    return None


def _doc_sources(target: Any) -> List[Any]:
    """``target``, then its alf base classes, then alf classes its docstring refers to."""
    sources = [target]
    if inspect.isclass(target):
        sources += [b for b in target.__mro__[1:] if b.__module__.startswith("alf")]
    for name in _REFERENCE.findall(inspect.getdoc(target) or ""):
        obj = _resolve(name, target)
        if obj is not None and obj not in sources and \
                getattr(obj, "__module__", "").startswith("alf"):
            sources.append(obj)
    return sources


def param_doc(target: Any, param: str, _depth: int = 0) -> str:
    """The help of ``param`` of ``target`` ('' if undocumented), following "see X" links."""
    for source in _doc_sources(target):
        entry = _own_docs(source).get(param)
        if entry is None:
            continue
        text, shared_by = entry
        m = _SEE.match(text)
        if m and _depth < 5:
            linked = _resolve(m.group(1).rstrip("."), source)
            if linked is not None and linked is not source:
                found = param_doc(linked, param, _depth + 1)
                if found:
                    # a note after "see X" ("(DQN default: ...)") is kept only when the
                    # entry is about this parameter alone: in "a, b: see X (b's note)" it
                    # cannot be told which parameter the note is about.
                    rest = m.group(2).strip()
                    return f"{found} {rest}" if rest not in ("", ".") and shared_by == 1 \
                        else found
        if text:
            return text
    return ""
