"""Find every shell command that README.md and docs/*.md show a reader.

Where a command can be:

- a fenced block tagged ``bash``/``sh``/``shell``/``console``: every line is a
  command (or, after a ``$ `` prompt line, the output it shows);
- an untagged fenced block or an indented (4-space) code block: the lines that
  start like a command (``python``, ``pip``, ``torchrun``, ``alf-train``, an
  ``A=B`` environment prefix, a ``$ `` prompt, ...); other lines are output,
  gin bindings or formulas; a block of nothing but ``--flag`` lines is a flag
  *fragment*, which the runner appends to the file's previous command;
- an inline code span in prose (it may wrap over two source lines) that starts
  with ``python -m alf...``, ``python bench/...``, ``torchrun``, ``alf-...``,
  ``tensorboard`` or ``pip install`` and has arguments (a bare
  ``python -m alf.bin.export_dataset`` is a mention, not a command).

Continuation lines (``\\`` at the end) are joined. Why: so that a test can run
them all (``test_doc_commands.py``) and a doc command cannot rot unnoticed.
"""
import dataclasses
import os
import re
from typing import Dict, Iterator, List, Optional, Tuple

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHELL_LANGS = ("bash", "sh", "shell", "console")

_FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w-]*)\s*$")
_ENV_PREFIX = r"(?:[A-Z_][A-Z0-9_]*=\S*\s+)*"
# what a command line in a code block starts with (after an optional `$ ` prompt)
_BLOCK_COMMAND = re.compile(
    r"^" + _ENV_PREFIX + r"(?:python3?|pip3?|torchrun|tensorboard|alf-[\w-]+|minari|bash|sh|cd|"
    r"export|git|kill|pkill|nvidia-smi|docker|conda|make|\./\S+)(?:\s|$)")
# what an inline code span must start with to count as a command
_INLINE_COMMAND = re.compile(
    r"^" + _ENV_PREFIX + r"(?:python3? -m alf[\w.]*\s+\S|python3? bench/\S+|torchrun\s+\S|"
    r"alf-[\w-]+\s+\S|tensorboard\s+\S|pip3? install\s+\S|python3? -m pytest)")
_INLINE_SPAN = re.compile(r"(?<!`)`([^`]+)`(?!`)")


@dataclasses.dataclass(frozen=True)
class DocCommand:
    """One command shown in a doc.

    Attributes:
        file: path relative to the repository root (``docs/offline.md``).
        line: 1-based line of the doc where the command starts.
        text: the command, continuation lines joined with single spaces.
        source: ``"block"`` (code block), ``"inline"`` (code span in prose) or
            ``"fragment"`` (a block of flags meant to be added to a command).
        output: the lines a ``$ `` prompt block shows after the command (its
            expected output), else empty.
    """
    file: str
    line: int
    text: str
    source: str
    output: Tuple[str, ...] = ()

    def where(self) -> str:
        return f"{self.file}:{self.line}"


def doc_files(root: str = REPO_ROOT) -> List[str]:
    """README.md and docs/*.md (not docs/design/, which shows no commands), relative."""
    docs = sorted(f"docs/{f}" for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
    return ["README.md"] + docs


def _code_blocks(lines: List[str]
                 ) -> Iterator[Tuple[int, Optional[str], List[str], range]]:
    """(index of the first body line, fence language or None for an indented block,
    dedented body lines, the indices of every line of the block, fences included).

    A fence language is ``""`` for an untagged fence."""
    i, n = 0, len(lines)
    prev_blank = True
    while i < n:
        m = _FENCE.match(lines[i])
        if m:
            indent, lang = len(m.group("indent")), m.group("lang")
            body, j = [], i + 1
            while j < n and not re.match(r"^\s{0,%d}```\s*$" % indent, lines[j]):
                body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
                j += 1
            yield i + 1, lang, body, range(i, j + 1)
            i, prev_blank = j + 1, False
            continue
        if prev_blank and lines[i].startswith("    ") and lines[i].strip():
            body, j = [], i
            # an indented block runs on over blank lines while the next text is indented
            while j < n and (lines[j].startswith("    ") or (not lines[j].strip() and j + 1 < n
                                                             and lines[j + 1].startswith("    "))):
                body.append(lines[j])
                j += 1
            width = min(len(l) - len(l.lstrip(" ")) for l in body if l.strip())
            yield i, None, [l[width:] for l in body], range(i, j)
            i, prev_blank = j, False
            continue
        prev_blank = not lines[i].strip()
        i += 1


def _logical_lines(body: List[str]) -> Iterator[Tuple[int, str]]:
    """(offset in ``body``, line) with ``\\`` continuations joined."""
    i = 0
    while i < len(body):
        start, text = i, body[i].rstrip()
        while text.endswith("\\") and i + 1 < len(body):
            i += 1
            text = text[:-1].rstrip() + " " + body[i].strip()
        yield start, text
        i += 1


def _block_commands(file: str, first: int, lang: Optional[str], body: List[str]
                    ) -> List[DocCommand]:
    """The commands of one code block whose first body line has index ``first``."""
    shell = lang in SHELL_LANGS
    if lang not in (None, "") and not shell:
        return []  # python, gin, text, ...
    out: List[DocCommand] = []
    flags: List[Tuple[int, str]] = []
    prompted = any(l.lstrip().startswith("$ ") for l in body)
    current: Optional[Tuple[int, str]] = None
    output: List[str] = []

    def close() -> None:
        if current is not None:
            out.append(DocCommand(file, first + 1 + current[0], current[1], "block",
                                  tuple(output)))

    for offset, text in _logical_lines(body):
        stripped = text.strip()
        if prompted:
            if stripped.startswith("$ "):
                close()
                current, output = (offset, stripped[2:].strip()), []
            elif current is not None and stripped:
                output.append(stripped)
            continue
        if not stripped or stripped.startswith("#"):
            continue
        if shell or _BLOCK_COMMAND.match(stripped):
            out.append(DocCommand(file, first + 1 + offset, stripped, "block"))
        elif re.match(r"^--[a-z]", stripped):
            flags.append((offset, stripped))
    close()
    if flags and not out:  # a block of nothing but flags: a fragment of a command
        out.append(DocCommand(file, first + 1 + flags[0][0], " ".join(t for _, t in flags),
                              "fragment"))
    return out


def _inline_commands(file: str, lines: List[str], code_lines: set) -> List[DocCommand]:
    """Code spans of the prose (code blocks excluded) that are commands."""
    out = []
    paragraph: List[Tuple[int, str]] = []

    def flush() -> None:
        if not paragraph:
            return
        text = "\n".join(l for _, l in paragraph)
        for m in _INLINE_SPAN.finditer(text):
            span = " ".join(m.group(1).split())
            if _INLINE_COMMAND.match(span):
                line = paragraph[0][0] + text[:m.start()].count("\n")
                out.append(DocCommand(file, line + 1, span, "inline"))
        paragraph.clear()

    for i, line in enumerate(lines):
        if i in code_lines or not line.strip():
            flush()
            continue
        paragraph.append((i, line))
    flush()
    return out


def commands_in(file: str, root: str = REPO_ROOT) -> List[DocCommand]:
    """Every command of one doc (``file`` relative to ``root``), in document order."""
    with open(os.path.join(root, file)) as f:
        lines = f.read().splitlines()
    found: List[DocCommand] = []
    code_lines = set()
    for first, lang, body, span in _code_blocks(lines):
        code_lines.update(span)
        found += _block_commands(file, first, lang, body)
    found += _inline_commands(file, lines, code_lines)
    return sorted(found, key=lambda c: c.line)


def all_commands(root: str = REPO_ROOT) -> List[DocCommand]:
    """The commands of README.md and docs/*.md, file by file, in document order."""
    return [c for f in doc_files(root) for c in commands_in(f, root)]


def fenced_files(file: str, root: str = REPO_ROOT) -> Dict[str, str]:
    """Files a doc asks the reader to save: fenced blocks whose first line is
    ``# name.py`` or ``# name.gin`` (e.g. ``my_a2c.py``), by name."""
    with open(os.path.join(root, file)) as f:
        lines = f.read().splitlines()
    files = {}
    for _, lang, body, _ in _code_blocks(lines):
        m = re.match(r"^# ([\w.-]+\.(?:py|gin))\s*$", body[0]) if lang is not None and body \
            else None
        if m:
            files[m.group(1)] = "\n".join(body) + "\n"
    return files
