"""Gin glue: ``alf.configurable``, conf-file resolution, overrides, saved config.

Why gin: experiments are files a researcher can diff; every constructor
argument is bindable without registration code. The guard rails here make its
failure modes cheap: unknown names and bad values become one
:class:`alf.errors.ConfigError` naming file, line and parameter (with close
matches), ``include`` resolves from any working directory, and the full config
text is saved so a run can be resumed or rebuilt in a subprocess.
"""
import contextlib
import difflib
import inspect
import logging
import os
import re
import sys
from typing import Callable, Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple, Union

import gin

from alf.config_checks import check_bindings
from alf.config_hints import called_reference_hint, unknown_reference_hint
from alf.config_subclass import check_forwarded_params, check_parent_bindings, forwarded_params
from alf.errors import ConfigError

EXAMPLES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "examples")


def configurable(fn_or_name=None, *, module: Optional[str] = None, allowlist=None,
                 denylist=None, mutable: Union[str, Sequence[str]] = ()):
    """Make a class or function bindable from gin files.

    Usable as ``@alf.configurable``, ``@alf.configurable("Name")`` or with keyword
    arguments. Names are registered both bare (``PPOAlgorithm.x``) and module-qualified
    (``alf.algorithms.ppo_algorithm.PPOAlgorithm.x``).

    Args:
        fn_or_name: the class/function (bare decorator) or the name to register.
        module, allowlist, denylist: as for ``gin.configurable``.
        mutable: parameters population-based training may change in the middle of a run
            (``alf.bin.pbt --param``; see :mod:`alf.studies.pbt_params`), e.g.
            ``@alf.configurable(mutable=("v_max",))``. Declare only values read from the
            config when the object is built and kept outside its ``state_dict`` (a
            plain attribute, not a parameter or registered buffer) that do not shape
            anything saved: a resumed segment builds the object again with the new value
            and then loads the checkpoint. A name that is not a parameter (its own or,
            for a class that forwards ``**kwargs``, its parent's) is a
            :class:`ConfigError` when the module is imported.
    """
    def register(fn, name):
        if mutable:
            _declare_mutable(name or fn.__name__, fn, mutable)
        return gin.configurable(name, module=module, allowlist=allowlist,
                                denylist=denylist)(fn)

    if callable(fn_or_name) and not isinstance(fn_or_name, str):
        return register(fn_or_name, None)
    return lambda fn: register(fn, fn_or_name)


# configurable name (as registered, without module) -> parameters declared mutable with
# ``alf.configurable(mutable=...)``; read by alf.studies.pbt_params
_declared_mutable: Dict[str, FrozenSet[str]] = {}


def _declare_mutable(name: str, fn: Callable, params: Union[str, Sequence[str]]) -> None:
    names = (params,) if isinstance(params, str) else tuple(params)
    valid = forwarded_params(fn)
    if valid is None:
        try:
            sig = inspect.signature(fn.__init__ if inspect.isclass(fn) else fn)
        except (TypeError, ValueError):
            sig = None
        valid = {} if sig is None else {
            n: fn for n, p in sig.parameters.items() if n != "self" and p.kind in (
                p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    for p in names:
        if p not in valid:
            close = difflib.get_close_matches(p, list(valid), n=3)
            hint = (f" Did you mean: {', '.join(close)}?" if close else
                    f" Its parameters: {', '.join(valid) or 'none'}.")
            raise ConfigError(f"alf.configurable(mutable=...) of {name}: '{p}' is not a "
                              f"parameter of {name}.{hint}")
    short = name.split(".")[-1]
    _declared_mutable[short] = _declared_mutable.get(short, frozenset()) | frozenset(names)


def declared_mutable() -> Dict[str, FrozenSet[str]]:
    """Configurable name -> the parameters declared with ``alf.configurable(mutable=...)``
    by the modules imported so far."""
    return dict(_declared_mutable)


def resolve_conf_file(conf: str) -> str:
    """Find ``conf``: as given, then relative to cwd, then in ``alf/examples/``.

    Raises :class:`ConfigError` listing the example files when it is not found.
    """
    candidates = [conf, os.path.join(os.getcwd(), conf), os.path.join(EXAMPLES_DIR, conf)]
    if not conf.endswith(".gin"):
        candidates.append(os.path.join(EXAMPLES_DIR, conf + ".gin"))
    for c in candidates:
        if os.path.isfile(c):
            return os.path.abspath(c)
    for c in candidates:
        if os.path.isdir(c):
            inside = sorted(f for f in os.listdir(c) if f.endswith(".gin"))
            hint = (f": pass one of its files, e.g. {os.path.join(conf, inside[0])} "
                    f"(it holds {', '.join(inside)})" if inside else " and holds no .gin file")
            raise ConfigError(f"--conf '{conf}' is a directory, not a gin file{hint}")
    examples = _example_files()
    close = difflib.get_close_matches(os.path.basename(conf), examples, n=3, cutoff=0.5)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    raise ConfigError(
        f"Config file '{conf}' not found (looked as given, in {os.getcwd()} and in "
        f"{EXAMPLES_DIR}).{hint} Bundled examples: {', '.join(examples)}")


_IMPORT_PATH_LINE = "# alf import path: "


def import_path_header(dirs: Sequence[str]) -> str:
    """Comment lines for a saved ``config.gin`` that put ``dirs`` back on ``sys.path`` when
    it is parsed again (so ``import my_alg`` next to the original .gin keeps working for
    resume and ``play`` from any working directory)."""
    return "".join(f"{_IMPORT_PATH_LINE}{d}\n" for d in dirs)


def import_dirs_in(text: str) -> List[str]:
    """The directories named by :func:`import_path_header` lines in ``text``."""
    return [line[len(_IMPORT_PATH_LINE):].strip() for line in text.splitlines()
            if line.startswith(_IMPORT_PATH_LINE)]


def _add_import_dirs(dirs: Sequence[str]) -> None:
    """Like running a script: the conf file's folder goes first on ``sys.path``, so a gin
    ``import my_alg`` finds ``my_alg.py`` next to the .gin file from any cwd."""
    for d in reversed(list(dirs)):
        if d and os.path.isdir(d) and d not in sys.path:
            sys.path.insert(0, d)


def _known_configurables() -> List[str]:
    names = set()
    # gin 0.5's SelectorMap has items() (no keys()); selectors are 'module.Name'.
    for selector, _ in gin.config._REGISTRY.items():  # pylint: disable=protected-access
        names.add(str(selector).split(".")[-1])
    return sorted(names)


class _DropGinResourceReaderLogs(logging.Filter):
    """gin's system-path file reader logs INFO/ERROR "Path not found" lines for
    every search prefix it probes while resolving ``include``; they are noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.pathname.replace("\\", "/").endswith("gin/resource_reader.py")


@contextlib.contextmanager
def _quiet_gin_file_probing():
    root, flt = logging.getLogger(), _DropGinResourceReaderLogs()
    root.addFilter(flt)
    try:
        yield
    finally:
        root.removeFilter(flt)


def _error_location(exc: Exception, text: str, source: str) -> str:
    """``"file, line N"`` for a gin error, from its message or attributes ('' if unknown)."""
    m = re.search(r'In file "([^"]+)", line (\d+)', text)
    if m:
        return f"{m.group(1)}, line {m.group(2)}"
    m = re.search(r"In bindings string line (\d+)", text)
    if m:
        return f"{source}, line {m.group(1)}"
    if isinstance(exc, SyntaxError) and exc.lineno:  # gin's parser: filename/lineno set
        return f"{exc.filename or source}, line {exc.lineno}"
    loc = getattr(exc, "location", None)
    if loc is not None and getattr(loc, "lineno", None):
        return f"{getattr(loc, 'filename', None) or source}, line {loc.lineno}"
    return ""


def _friendly_gin_error(exc: Exception, source: str, single_line_source: bool = False) -> ConfigError:
    """Turn gin's multi-line error into one line naming file, line and parameter, with a hint.

    Args:
        exc: what gin raised.
        source: the file (or ``--conf_param ...``) being parsed, used when the
            error itself does not say where it happened.
        single_line_source: ``source`` is one binding (no line number needed).
    """
    text = str(exc).strip()
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    location = "" if single_line_source else _error_location(exc, text, source)
    head = lines[0] if lines else type(exc).__name__
    hint = ""
    if isinstance(exc, SyntaxError):
        head = re.sub(r"\s*\([^()]*line \d+\)$", "", head)  # we name the location ourselves
        head = f"syntax error: {head}"
    m = re.search(r"Failed to parse token '(.*)'", text)  # a bare name where a value goes
    if m and "malformed node or string" in text:
        token = m.group(1)
        rhs = _bound_text(source, location)
        if rhs and rhs.startswith(token) and re.fullmatch(r"[\w.\-/:+]+", rhs):
            token = rhs  # gin's tokenizer splits 'CartPole-v1' at the '-': quote it whole
        refs = (f", or a reference (@{token}, @{token}() or %{token})"
                if re.fullmatch(r"[A-Za-z_][\w.]*", token) else "")
        head = (f"{token} is not a value: write a string in quotes ('{token}'), a number, "
                f"True/False/None or a list/tuple of those{refs}")
    m = re.match(r"\('([^']*)', \((\d+), \d+\)\)$", text)  # tokenize.TokenError
    if m:
        head = (f"syntax error: {m.group(1).replace('EOF', 'end of file')} "
                "(an unclosed bracket or quote?)")
    m = re.search(r"No configurable matching (reference )?'@?([^'(]+)", text)
    if m:
        kind = "reference" if m.group(1) else "configurable"
        head = f"unknown {kind} '{m.group(2)}'"
        close = difflib.get_close_matches(m.group(2).split(".")[-1], _known_configurables(), n=3)
        hint = unknown_reference_hint(m.group(2)) or (
            f" Did you mean: {', '.join(close)}?" if close else "")
    m = re.search(r"Configurable '([^']+)' doesn't have a parameter named '([^']+)'", text)
    if m:
        params = _configurable_params(m.group(1))
        close = difflib.get_close_matches(m.group(2), params, n=3)
        hint = (f" Did you mean: {', '.join(close)}?" if close else
                (f" Valid parameters: {', '.join(params)}." if params else ""))
    m = re.search(r"Unable to open file: (.+?)\. Searched config paths: (\[.*?\])", text)
    if m:
        wanted = m.group(1)
        head = f"included file '{wanted}' not found (searched {m.group(2)})"
        close = difflib.get_close_matches(os.path.basename(wanted), _example_files(), n=3, cutoff=0.5)
        if close:
            hint = f" Did you mean: {', '.join(close)}?"
    return ConfigError(f"Config error ({location or source}): {head}.{hint}"
                       if not head.endswith((".", "?")) else
                       f"Config error ({location or source}): {head}{hint}")


def _bound_text(source: str, location: str) -> Optional[str]:
    """The right-hand side of the binding an error is about: from ``--conf_param '...'``
    or from the file line in ``location`` ("file, line N"); None if unknown."""
    line = None
    if source.startswith("--conf_param '") and source.endswith("'"):
        line = source[len("--conf_param '"):-1]
    else:
        m = re.fullmatch(r"(.+), line (\d+)", location or "")
        if m and os.path.isfile(m.group(1)):
            with open(m.group(1)) as f:
                lines = f.read().splitlines()
            n = int(m.group(2))
            line = lines[n - 1] if 0 < n <= len(lines) else None
    if line is None or "=" not in line:
        return None
    return line.split("=", 1)[1].split("#", 1)[0].strip()


def _example_files() -> List[str]:
    return sorted(f for f in os.listdir(EXAMPLES_DIR) if f.endswith(".gin"))


def _configurable_params(name: str) -> List[str]:
    try:
        selector = gin.config._REGISTRY.get_match(name)  # pylint: disable=protected-access
    except Exception:  # noqa: BLE001 - best-effort hint only
        return []
    if selector is None:
        return []
    fn = selector.wrapped
    try:
        sig = inspect.signature(fn.__init__ if inspect.isclass(fn) else fn)
    except (TypeError, ValueError):
        return []
    return [p for p in sig.parameters if p not in ("self", "args", "kwargs")]


# (source, line number or None, text) of every statement line parsed by the last
# parse_config, in the order gin applied them (includes expanded in place), so a bad
# *value* found later, when a configurable is called, can be traced to where it was set.
_parsed_lines: List[Tuple[str, Optional[int], str]] = []
_INCLUDE = re.compile(r"""^\s*include\s+['"]([^'"]+)['"]""")


def _record_lines(source: str, text: str, prefixes: Sequence[str], numbered: bool = True,
                  depth: int = 0) -> None:
    for i, line in enumerate(text.splitlines(), 1):
        m = _INCLUDE.match(line)
        if m and depth < 32:
            name = m.group(1)
            for d in ([""] if os.path.isabs(name) else prefixes):
                path = os.path.join(d, name)
                if os.path.isfile(path):
                    with open(path) as f:
                        _record_lines(path, f.read(), prefixes, True, depth + 1)
                    break
        else:
            _parsed_lines.append((source, i if numbered else None, line))


def _include_cycle(path: str, prefixes: Sequence[str], chain: Tuple[str, ...] = ()
                   ) -> Optional[List[str]]:
    """The chain of files ``[a, b, ..., a]`` if following ``include`` s from ``path`` (resolved
    like gin: each prefix in order) comes back to a file already on the chain; else None."""
    path = os.path.abspath(path)
    if path in chain:
        return list(chain[chain.index(path):]) + [path]
    if len(chain) > 32 or not os.path.isfile(path):
        return None
    with open(path) as f:
        text = f.read()
    for line in text.splitlines():
        m = _INCLUDE.match(line)
        if not m:
            continue
        name = m.group(1)
        for d in ([""] if os.path.isabs(name) else prefixes):
            candidate = os.path.join(d, name)
            if os.path.isfile(candidate):
                cycle = _include_cycle(candidate, prefixes, chain + (path,))
                if cycle:
                    return cycle
                break
    return None


def binding_location(key: str) -> Optional[str]:
    """Where ``[scope/]Configurable.param`` (optionally module-qualified) was last bound
    by :func:`parse_config`: ``"file, line N"`` or ``"--conf_param '...'"``; None if unknown."""
    scope, _, key = key.rpartition("/")
    configurable, _, param = key.rpartition(".")
    if not configurable:
        return None
    scopes = re.escape(scope) + "/" if scope else r"(?:[\w.]+/)*"
    pattern = re.compile(r"^\s*" + scopes + r"(?:[\w.]+\.)?" + re.escape(configurable) + r"\."
                         + re.escape(param) + r"\s*=")
    for source, lineno, line in reversed(_parsed_lines):
        if pattern.match(line):
            return source if lineno is None else f"{source}, line {lineno}"
    return None


def parse_config(conf_file: Optional[str] = None, conf_params: Sequence[str] = (),
                 config_text: Optional[str] = None, config_name: str = "<config text>") -> None:
    """Clear gin and parse a conf file (or saved ``config_text``) plus overrides.

    Every problem becomes one :class:`ConfigError` naming file and line.

    Args:
        conf_file: resolved with :func:`resolve_conf_file`.
        conf_params: bindings applied after the file, e.g. ``["A.b = 1"]``.
        config_text: gin text parsed after ``conf_file`` (e.g. a saved ``config.gin``).
        config_name: how messages name ``config_text`` (e.g. the saved file's path).
    """
    # Every configurable is registered already: importing this module ran alf/__init__.py
    # (alf._registry) first, as importing any alf module does.
    gin.clear_config()
    del _parsed_lines[:]
    search_dirs = [EXAMPLES_DIR, os.getcwd()]
    source = config_name
    if conf_file is not None:
        conf_file = resolve_conf_file(conf_file)
        search_dirs.insert(0, os.path.dirname(conf_file))
        source = conf_file
        _add_import_dirs([os.path.dirname(conf_file)])
    if config_text is not None:
        _add_import_dirs(import_dirs_in(config_text))
    # gin keeps search prefixes in a module global that clear_config() does not
    # reset (it grew by 2-3 entries per call); rebuild it so earlier parses (other
    # dirs, other cwd) cannot leak in. `include` looks next to the conf file first.
    prefixes = gin.config._LOCATION_PREFIXES  # pylint: disable=protected-access
    prefixes[:] = [d for i, d in enumerate(search_dirs) if d not in search_dirs[:i]]
    try:
        with _quiet_gin_file_probing():
            if conf_file is not None:
                gin.parse_config_file(conf_file)
                with open(conf_file) as f:
                    _record_lines(conf_file, f.read(), list(prefixes))
            if config_text is not None:
                gin.parse_config(config_text)
                _record_lines(config_name, config_text, list(prefixes))
    except RecursionError:
        cycle = _include_cycle(conf_file, list(prefixes)) if conf_file is not None else None
        if cycle is None:
            raise
        raise ConfigError(
            "include cycle: " + " -> ".join(cycle) + ". `include` looks next to the conf file "
            "first, then in alf/examples and the working directory, so a file of yours named "
            f"like a bundled example ('{os.path.basename(cycle[0])}') shadows it: rename "
            "it.") from None
    except Exception as e:  # noqa: BLE001 - gin raises many types (IOError for includes)
        raise _friendly_gin_error(e, source) from None
    for param in conf_params:
        _record_lines(f"--conf_param '{param}'", param, list(prefixes), numbered=False)
        binding = element_binding(param)
        try:
            with _quiet_gin_file_probing():
                gin.parse_config(binding)
        except Exception as e:  # noqa: BLE001
            raise _friendly_gin_error(e, f"--conf_param '{param}'", single_line_source=True) from None
    check_forwarded_params(binding_location)  # a name gin let through (a **kwargs subclass)
    check_bindings(binding_location)
    check_parent_bindings(binding_location)


def binding_key(binding: str) -> Tuple[str, str]:
    """``scope/module.Name.param[i] = value`` -> ``("module.Name", "param")``: the
    configurable (as written, module kept) and the parameter a binding or key sets, with
    the value, the scope and an element index ``[i]`` (:func:`element_binding`) dropped.
    The one parsing of a key for the checks that decide what a binding may change (a
    resume's, alf/trainers/resume_overrides.py; PBT's, alf/studies/pbt_params.py)."""
    key = binding.split("=", 1)[0].strip().rsplit("/", 1)[-1]
    key = key.split("[", 1)[0].strip()  # Agent.reward_weights[1]: the list
    configurable, _, param = key.rpartition(".")
    return configurable, param


_ELEMENT = re.compile(r"^\s*(?P<key>[\w./]+)\s*\[\s*(?P<index>\d+)\s*\]\s*=(?P<value>.*)$",
                      re.S)


def element_binding(param: str) -> str:
    """``Name.param[i] = value`` (one element of a list or tuple bound already, e.g. one
    reward weight: ``Agent.reward_weights[1]=0.5``) -> the binding of the whole sequence
    with element ``i`` replaced, as gin text; any other binding is returned unchanged.

    Raises:
        ConfigError: one line: the parameter is not bound, not a sequence, or has no
            element ``i``.
    """
    match = _ELEMENT.match(param)
    if match is None:
        return param
    key, index, value = match.group("key"), int(match.group("index")), match.group("value")
    where = f"--conf_param '{param}'"
    try:
        current = gin.query_parameter(key)
    except ValueError:
        raise ConfigError(f"{where}: {key} is not set in the config, so it has no element "
                          f"{index}: bind the whole list, e.g. {key}=[...]") from None
    if not isinstance(current, (list, tuple)):
        raise ConfigError(f"{where}: {key} is {current!r}, not a list or tuple: bind it "
                          f"whole ({key}=...)")
    if index >= len(current):
        raise ConfigError(f"{where}: {key} has {len(current)} elements (0 to "
                          f"{len(current) - 1}): {current!r}")
    items = [repr(x) for x in current]
    items[index] = value.strip()
    body = ", ".join(items)
    body = f"[{body}]" if isinstance(current, list) else f"({body}{',' if len(items) == 1 else ''})"
    return f"{key} = {body}"


def config_text() -> str:
    """The full current config (all bindings) as parseable gin text."""
    return gin.config_str()


def operative_config_text() -> str:
    """Only the bindings actually used so far (after construction)."""
    return gin.operative_config_str()


def unused_bindings() -> List[str]:
    """Bindings parsed from the config that no constructor/function call has used.

    Typical causes: a typo in a *class* name that still exists (binding a
    parameter of ``ActorDistributionRNNNetwork`` while the experiment builds an
    ``ActorDistributionNetwork``), or a parameter the caller passes explicitly,
    which overrides gin. Returns strings like ``"scope/Name.param"``.
    """
    config = gin.config._CONFIG  # pylint: disable=protected-access
    used = set()
    for (scope, selector), params in list(gin.config._OPERATIVE_CONFIG.items()):  # pylint: disable=W0212
        # a call in scope "a/b" reads the bindings of "", "a" and "a/b", the longest
        # scope that binds a parameter winning (gin's _get_bindings): mark that one
        parts = scope.split("/") if scope else []
        partial = ["/".join(parts[:i]) for i in range(len(parts), -1, -1)]
        for name in params:
            for s in partial:
                if name in config.get((s, selector), {}):
                    used.add((s, selector, name))
                    break
    unused = []
    for (scope, selector), params in config.items():
        for name in params:
            if (scope, selector, name) not in used:
                short = selector.split(".")[-1]
                unused.append(f"{scope + '/' if scope else ''}{short}.{name}")
    return sorted(unused)


def describe_call_error(exc: Exception) -> Optional[str]:
    """If ``exc`` came from calling a configurable with bad bindings, a one-line message."""
    text = str(exc)
    m = re.search(r"In call to configurable '([^']+)' \(([^)]*)\)", text)
    if not m:
        return None
    first = text.splitlines()[0].strip()
    return f"Config error in '{m.group(1)}': {first}{called_reference_hint(m.group(1), first)}"


def iter_conf_params(values: Optional[Iterable[str]]) -> List[str]:
    return [v for v in (values or []) if v and v.strip()]
