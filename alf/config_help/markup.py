"""Docstring text made fit for a terminal: reST roles and literals unwrapped, one-line summaries.

Shared by ``--list_configurables`` (one summary per configurable) and
``--describe`` (summaries and parameter help), which print docstrings written
for Sphinx to a plain terminal.
"""
import inspect
import re
from typing import Any

_ROLE = re.compile(r":\w+:`~?([^`]+)`")


def plain(text: str) -> str:
    """reST markup made terminal-friendly: ``:class:`~a.B``` -> ``B``, double backticks -> one."""
    text = _ROLE.sub(lambda m: m.group(1).split(".")[-1] if "~" in m.group(0)
                     else m.group(1), text)
    return text.replace("``", "`")


def summary(obj: Any) -> str:
    """The first paragraph of ``obj``'s docstring on one line ('' when it has none)."""
    doc = (inspect.getdoc(obj) or "").strip()
    return plain(doc.split("\n\n")[0].replace("\n", " ").strip()) if doc else ""
