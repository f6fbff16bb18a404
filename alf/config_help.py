"""Discover what can be run and set without reading source: examples and configurables.

Backs ``--list_examples``, ``--list_configurables`` and ``--describe NAME`` of
``alf.bin.train`` / ``alf.bin.play``:

- every bundled ``alf/examples/*.gin`` with its one-line description (the first
  comment line of the file) and the pip extra its env needs; files that set no
  algorithm are listed apart as the shared settings that examples ``include``;
- every gin configurable, grouped by module, with the first line of its doc;
- one configurable's parameters, each with its default (written the way gin
  wants it, e.g. ``@PPOLoss``) and its help, taken from the Google-style
  ``Args:`` (or ``Attributes:``) section of the class / ``__init__`` /
  function docstring. A parameter documented only in a base class (``see
  :class:`RLAlgorithm```, or not mentioned at all) takes that class's text.

Everything is read from the live gin registry after ``import alf``, so a new
``@alf.configurable`` is described with no extra registration.
"""
import dataclasses
import difflib
import importlib
import inspect
import os
import pkgutil
import re
import shutil
import sys
import textwrap
from typing import Any, Dict, List, Optional, Sequence, Tuple

import gin

from alf.config import EXAMPLES_DIR
from alf.errors import UserError

# ---------------------------------------------------------------------------- examples


@dataclasses.dataclass
class Example:
    """A bundled ``.gin`` file: its bare name, first comment line, and whether it is a whole
    experiment (it binds ``TrainerConfig.algorithm_ctor``, itself or through an ``include``)
    rather than shared settings that experiments include."""
    name: str
    description: str
    runnable: bool
    env_name: Optional[str] = None   # the create_environment.env_name it binds, if any
    extra: Optional[str] = None      # the pip extra that env needs: "atari", "mujoco"


_INCLUDE = re.compile(r"""^\s*include\s+['"]([^'"]+)['"]""")
_SETS_ALGORITHM = re.compile(r"^\s*TrainerConfig\.algorithm_ctor\s*=", re.MULTILINE)
_ENV_NAME = re.compile(r"""^\s*create_environment\.env_name\s*=\s*['"]([^'"]+)['"]""",
                       re.MULTILINE)


def env_extra(env_name: str) -> Optional[str]:
    """The ``pip install -e ".[extra]"`` an env id needs (``atari``, ``mujoco``), or None."""
    if env_name.startswith("ALE/"):
        return "atari"
    import gymnasium
    spec = gymnasium.envs.registry.get(env_name)
    entry = str(getattr(spec, "entry_point", "") or "")
    return "mujoco" if "mujoco" in entry else None


NO_DESCRIPTION = "(no description: the file should start with a '# ...' line)"


def _first_comment_line(text: str) -> str:
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            description = stripped.lstrip("#").strip()
            if description:
                return description
            continue
        break  # a statement before any comment
    return NO_DESCRIPTION


def list_examples(directory: str = EXAMPLES_DIR) -> List[Example]:
    """The ``*.gin`` files of ``directory``, sorted by name."""
    texts = {}
    for name in sorted(os.listdir(directory)):
        if name.endswith(".gin"):
            with open(os.path.join(directory, name)) as f:
                texts[name] = f.read()

    def expanded(name: str, seen: Tuple[str, ...] = ()) -> str:
        """The file's text with its bundled includes in place (later bindings win)."""
        out = []
        for line in texts.get(name, "").splitlines():
            m = _INCLUDE.match(line)
            include = os.path.basename(m.group(1)) if m else None
            out.append(expanded(include, seen + (name,))
                       if include in texts and include not in seen else line)
        return "\n".join(out)

    examples = []
    for name, text in texts.items():
        full = expanded(name)
        envs = _ENV_NAME.findall(full)
        env = envs[-1] if envs else None
        examples.append(Example(name, _first_comment_line(text),
                                bool(_SETS_ALGORITHM.search(full)), env,
                                env_extra(env) if env else None))
    return examples


def format_examples(invocation: str = "python -m alf.bin.train") -> str:
    """The text ``--list_examples`` prints: one line per example, then how to run one."""
    examples = list_examples()
    runnable = [e for e in examples if e.runnable]
    shared = [e for e in examples if not e.runnable]
    width = max(len(e.name) for e in examples) + 2
    lines = [f"Bundled examples ({EXAMPLES_DIR}); pass the bare name to --conf:"]
    lines += [f"  {e.name:<{width}}{e.description}" + (f" [{e.extra}]" if e.extra else "")
              for e in runnable]
    if shared:
        lines += ["", "Shared settings that the examples above include (not run on their own):"]
        lines += [f"  {e.name:<{width}}{e.description}" for e in shared]
    extras = sorted({e.extra for e in runnable if e.extra})
    if extras:
        lines += ["", "[" + "], [".join(extras) + "]: needs that extra first, e.g. "
                  f"pip install -e \".[{extras[0]}]\" (see README.md)."]
    first = next((e.name for e in runnable if e.name == "ppo_cart_pole.gin"),
                 runnable[0].name if runnable else "ppo_cart_pole.gin")
    lines += ["", f"Run one:         {invocation} --conf={first} "
                  f"--root_dir=runs/{first[:-len('.gin')]}",
              f"What can be set: {invocation} --describe PPOAlgorithm "
              "(or any of --list_configurables)",
              f"What one sets:   {invocation} --conf={first} --describe PPOAlgorithm"]
    return "\n".join(lines)


# ---------------------------------------------------------------------------- registry


@dataclasses.dataclass
class Configurable:
    """One registered gin configurable."""
    name: str        # what a gin file writes: "PPOAlgorithm", "alf.optimizers.Adam", "torch.tanh"
    selector: str    # the registry key: module + name
    module: str
    target: Any      # the class or function


def register_all() -> None:
    """Import alf (every library configurable) and the example algorithms in alf/examples."""
    import alf  # noqa: F401
    import alf.examples as examples
    for info in pkgutil.iter_modules(examples.__path__):
        try:
            importlib.import_module(f"alf.examples.{info.name}")
        except ImportError:  # an example needing an optional extra that is not installed
            continue


def configurables(include_external: bool = False) -> List[Configurable]:
    """Every registered configurable, sorted by selector; gin's own (``gin.macro``) excluded.

    Args:
        include_external: also return ``gin.external_configurable`` entries that
            are not alf's (``torch.tanh``, usable as ``@torch.tanh`` references).
    """
    entries = [(str(s), c) for s, c in gin.config._REGISTRY.items()  # pylint: disable=W0212
               if not str(s).startswith("gin.")]
    shorts = [s.split(".")[-1] for s, _ in entries]
    out = []
    for (selector, c), short in zip(entries, shorts):
        module = c.module or selector.rpartition(".")[0]
        if not module.startswith("alf") and not include_external:
            continue
        # gin resolves a bare name when it is unique; alf.optimizers.* are conventionally
        # written with their module (alf.optimizers.Adam), externals always are.
        bare = shorts.count(short) == 1 and module.startswith("alf") and \
            module != "alf.optimizers"
        out.append(Configurable(short if bare else selector, selector, module, c.wrapped))
    return sorted(out, key=lambda c: c.selector)


_ROLE = re.compile(r":\w+:`~?([^`]+)`")


def plain(text: str) -> str:
    """reST markup made terminal-friendly: ``:class:`~a.B``` -> ``B``, double backticks -> one."""
    text = _ROLE.sub(lambda m: m.group(1).split(".")[-1] if "~" in m.group(0)
                     else m.group(1), text)
    return text.replace("``", "`")


def _summary(obj: Any) -> str:
    """The first paragraph of ``obj``'s docstring on one line."""
    doc = (inspect.getdoc(obj) or "").strip()
    return plain(doc.split("\n\n")[0].replace("\n", " ").strip()) if doc else ""


def format_configurable_list() -> str:
    """The text ``--list_configurables`` prints: configurables grouped by module."""
    entries = configurables(include_external=True)
    width = max(len(c.name) for c in entries if c.module.startswith("alf")) + 2
    lines = ["gin configurables (bind as Name.parameter = value; "
             "--describe Name shows the parameters):"]
    module = None
    externals = []
    for c in sorted(entries, key=lambda c: (_package(c.module), c.selector)):
        if not c.module.startswith("alf"):
            externals.append(c.name)
            continue
        if _package(c.module) != module:
            module = _package(c.module)
            lines += ["", f"{module}:"]
        lines.append(f"  {c.name:<{width}}{_summary(c.target)}")
    if externals:
        lines += ["", "Also usable as @references (e.g. activation functions): "
                  + ", ".join(f"@{n}" for n in externals)]
    return "\n".join(lines)


def _package(module: str) -> str:
    """``alf.networks.q_networks`` -> ``alf.networks``: the group a configurable is listed in."""
    return ".".join(module.split(".")[:2])


def find(query: str) -> List[Configurable]:
    """Configurables matching ``query``: an exact name/selector (also ignoring case), else
    every one whose module-qualified name contains it (``PPO``, ``networks``)."""
    entries = configurables()
    for same in (lambda a, b: a == b, lambda a, b: a.lower() == b.lower()):
        exact = [c for c in entries
                 if same(c.name, query) or same(c.selector, query)
                 or same(c.selector.split(".")[-1], query)
                 or c.selector.lower().endswith("." + query.lower()) and "." in query]
        if exact:
            return exact
    return [c for c in entries if query.lower() in c.selector.lower()]


# ---------------------------------------------------------------------------- docstrings

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


# ---------------------------------------------------------------------------- describe


@dataclasses.dataclass
class Parameter:
    name: str
    default: str     # gin syntax, or "" when required
    required: bool
    doc: str


def _gin_names() -> Dict[int, str]:
    return {id(c.target): c.name for c in configurables(include_external=True)}


def format_default(value: Any, names: Optional[Dict[int, str]] = None) -> str:
    """``value`` as a gin file would write it: ``@PPOLoss`` for a configurable, ``'auto'``,
    ``(64, 64)``, ``None``; other classes/functions as their dotted path."""
    names = _gin_names() if names is None else names
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
    names = _gin_names()
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
                             required, plain(param_doc(target, p.name))))
    for p in out:  # documented only inside a sibling's entry (``priority_replay_alpha``)
        if not p.doc:
            mention = re.compile(rf"`{p.name}`" if "_" not in p.name else rf"\b{p.name}\b")
            owner = next((q.name for q in out if q.doc and mention.search(q.doc)), None)
            if owner:
                p.doc = f"(see {owner})"
    return out, var_kw


def _bound_value(selector: str, param: str) -> Optional[str]:
    """The value the currently parsed config binds (unscoped), as gin text; None if unbound."""
    try:
        value = gin.query_parameter(f"{selector}.{param}")
    except (ValueError, KeyError):
        return None
    if isinstance(value, gin.config.ConfigurableReference):
        return repr(value)  # gin syntax: @scope/Name() or %MACRO
    return format_default(value)


def _wrap(head: str, doc: str, width: int, column: int) -> List[str]:
    if not doc:
        return [head]
    indent = " " * column
    if len(head) + 2 > column:
        return [head] + textwrap.wrap(doc, width, initial_indent=indent, subsequent_indent=indent)
    return textwrap.wrap(doc, width, initial_indent=head.ljust(column),
                         subsequent_indent=indent)


def _width() -> int:
    return max(60, min(110, shutil.get_terminal_size((100, 24)).columns))


def _heads(c: Configurable, params: List[Parameter], show_bound: bool,
           prefix: str = "") -> List[str]:
    """``name = default`` per parameter, or ``name = value  (default: d)`` when the parsed
    config binds another value."""
    heads = []
    for p in params:
        bound = _bound_value(c.selector, p.name) if show_bound else None
        if bound is not None and bound != p.default:
            heads.append(f"{prefix}{p.name} = {bound}  (default: {p.default or 'required'})")
        else:
            heads.append(prefix + (f"{p.name} (required)" if p.required
                                   else f"{p.name} = {p.default}"))
    return heads


def _bindable(c: Configurable) -> Tuple[List[Parameter], bool]:
    registered = gin.config._REGISTRY.get(c.selector)  # pylint: disable=protected-access
    return parameters(c.target, getattr(registered, "allowlist", None),
                      getattr(registered, "denylist", None))


def format_parameter(matches: List[Configurable], param: str, show_bound: bool = False) -> str:
    """``--describe Name.param``: one entry per configurable, ``Name.param = default  help``."""
    rows = []
    for c in matches:
        params = [p for p in _bindable(c)[0] if p.name == param]
        rows += [(h, p.doc) for h, p in zip(_heads(c, params, show_bound, c.name + "."), params)]
    column = min(44, max(len(h) for h, _ in rows) + 2)
    lines = []
    for head, doc in rows:
        lines += _wrap(head, doc or "(undocumented)", _width(), column)
    return "\n".join(lines)


def format_description(c: Configurable, show_bound: bool = False) -> str:
    """The text ``--describe`` prints for one configurable."""
    params, var_kw = _bindable(c)
    width = _width()
    heads = _heads(c, params, show_bound)
    column = min(38, max([len(h) for h in heads] + [0]) + 4)
    kind = "class" if inspect.isclass(c.target) else "function"
    lines = [f"{c.name}  ({kind} {c.target.__module__}.{c.target.__qualname__})"]
    summary = _summary(c.target)
    if summary:
        lines += textwrap.wrap(summary, width, initial_indent="  ", subsequent_indent="  ")
    example = next((p for p in params if re.match(r"^-?[\d.]+(e-?\d+)?$|^True$|^False$",
                                                  p.default)), params[0] if params else None)
    key = f"{c.name}.{example.name if example else 'param'}"
    header = ("Parameters (name = " + ("value in this config" if show_bound else "default")
              + ", then help). Set one in a gin file as " + f"`{key} = ...` or on the command "
              + f"line with --conf_param '{key}=...':")
    lines += [""] + textwrap.wrap(header, width)
    for p, head in zip(params, heads):
        lines += _wrap("  " + head, p.doc or "(undocumented)", width, column)
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
        with_param = [c for c in find(head) if param in [p.name for p in _bindable(c)[0]]]
        if with_param:
            return format_parameter(with_param, param, show_bound)
    if len(matches) == 1:
        return format_description(matches[0], show_bound)
    if matches:
        width = max(len(c.name) for c in matches) + 2
        return "\n".join([f"{len(matches)} configurables match '{query}' "
                          "(--describe one of them for its parameters):"]
                         + [f"  {c.name:<{width}}{_summary(c.target)}" for c in matches])
    names = sorted({c.selector.split(".")[-1] for c in configurables()})
    close = difflib.get_close_matches(query, names, n=3, cutoff=0.5) or \
        difflib.get_close_matches(query.lower(), [n.lower() for n in names], n=3, cutoff=0.5)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    raise UserError(f"unknown configurable '{query}'.{hint} "
                    "--list_configurables lists them all.")


def undocumented() -> List[str]:
    """``Name.param`` of every alf configurable parameter without its own help line
    (none at all, or only a mention in a sibling's), for docstring upkeep."""
    return [f"{c.name}.{p.name}" for c in configurables()
            for p in parameters(c.target)[0] if not p.doc or p.doc.startswith("(see ")]
