"""Copies of the user's own Python modules that a run's config imported.

A gin ``import my_alg`` makes the run depend on ``my_alg.py``, which the user may edit,
move or delete later. At each start the run keeps a copy in
``run_info/user_modules/`` (laid out as on ``sys.path``: ``my_pkg/__init__.py``,
``my_pkg/algo.py``), so ``alf.bin.train --rerun`` can import exactly the code the run
used. Copied: each module the config imports that is not part of alf or of an installed
package (site-packages, the standard library), its parent packages, and every other
module this process loaded from the same ``sys.path`` folders (the helpers those modules
import). What is not copied is still listed, with the reason.
"""
import hashlib
import os
import re
import shutil
import site
import sys
import sysconfig
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

USER_MODULES_DIR = "user_modules"
#: the most a start copies (files, bytes); the rest is listed as skipped
MAX_FILES = 500
MAX_BYTES = 20 * 1024 * 1024

_IMPORT = re.compile(r"^\s*import\s+([\w.]+)(?:\s+as\s+\w+)?\s*$")
_FROM_IMPORT = re.compile(r"^\s*from\s+([\w.]+)\s+import\s+(\w+)(?:\s+as\s+\w+)?\s*$")
_ALF_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


def gin_imports(config_text: str) -> List[str]:
    """The modules a gin config imports (``import a.b``, ``from a import b``: ``a.b``
    when that is a module, else ``a``), in order; gin's own ``from __gin__ import ...``
    is left out."""
    names: List[str] = []
    for line in config_text.splitlines():
        m = _IMPORT.match(line)
        if m:
            name = m.group(1)
        else:
            m = _FROM_IMPORT.match(line)
            if not m or m.group(1) == "__gin__":
                continue
            full = f"{m.group(1)}.{m.group(2)}"
            name = full if full in sys.modules else m.group(1)
        if name not in names:
            names.append(name)
    return names


def copy_user_modules(config_text: str, dest: str) -> Dict[str, Any]:
    """Replace ``dest`` with copies of the user modules of ``config_text`` (see the module
    docstring); returns what the start record says about them::

        {"imported": [{"module", "file", "kind": "user" | "alf" | "installed" | ...}],
         "copied": [{"module", "file", "path" (relative to dest), "sha256", "bytes"}],
         "skipped": [...]}   # over MAX_FILES / MAX_BYTES

    Raises OSError when ``dest`` cannot be written (the caller warns and goes on).
    """
    imported, roots = [], set()
    for name in _with_parents(gin_imports(config_text)):
        entry, root = _classify(name)
        imported.append(entry)
        if root:
            roots.add(root)
    files = _files_under(roots)
    copied, skipped, total = [], [], 0
    for name, src, rel in files:
        size = os.path.getsize(src)
        if len(copied) >= MAX_FILES or total + size > MAX_BYTES:
            skipped.append({"module": name, "file": src, "bytes": size})
            continue
        total += size
        copied.append({"module": name, "file": src, "path": rel, "bytes": size,
                       "sha256": _sha256(src)})
    _replace_dir(dest, [(c["file"], c["path"]) for c in copied])
    return {"imported": imported, "copied": copied, "skipped": skipped}


def _with_parents(names: Iterable[str]) -> List[str]:
    """``a.b.c`` -> ``a``, ``a.b``, ``a.b.c`` (a package's ``__init__`` runs first)."""
    out: List[str] = []
    for name in names:
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            if ".".join(parts[:i]) not in out:
                out.append(".".join(parts[:i]))
    return out


def _classify(name: str) -> Tuple[Dict[str, Any], Optional[str]]:
    """``(record entry, sys.path folder to copy from or None)`` for module ``name``."""
    module = sys.modules.get(name)
    if module is None:
        return {"module": name, "kind": "not imported"}, None
    placed = _placement(name, module)
    file = getattr(module, "__file__", None)
    if placed is None:
        return {"module": name, "file": file, "kind": "not a source file"}, None
    src, root, _ = placed
    kind = "alf" if _under(src, [_ALF_DIR]) else "installed" if _installed(src) else "user"
    return {"module": name, "file": src, "kind": kind}, root if kind == "user" else None


def _placement(name: str, module: Any) -> Optional[Tuple[str, str, str]]:
    """``(real file, its sys.path folder, path relative to it)`` of a ``.py`` module,
    or None (built-in, compiled extension, namespace package, loaded from a path)."""
    file = getattr(module, "__file__", None)
    if not isinstance(file, str) or not file.endswith(".py") or name == "__main__":
        return None
    src = os.path.realpath(file)
    package = os.path.basename(src) == "__init__.py"
    rel = os.path.join(*name.split(".")) + (os.sep + "__init__.py" if package else ".py")
    if not src.endswith(os.sep + rel):
        return None
    return src, src[:-len(rel) - 1], rel


def _files_under(roots: Set[str]) -> List[Tuple[str, str, str]]:
    """``(module, file, relative path)`` of every loaded user module under ``roots``."""
    if not roots:
        return []
    found = {}
    for name, module in list(sys.modules.items()):
        placed = _placement(name, module)
        if placed is None:
            continue
        src, root, rel = placed
        if root in roots and not _under(src, [_ALF_DIR]) and not _installed(src):
            found[rel] = (name, src, rel)
    return [found[rel] for rel in sorted(found)]


def _installed_dirs() -> List[str]:
    paths = sysconfig.get_paths()
    dirs = [paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths]
    try:
        dirs += site.getsitepackages() + [site.getusersitepackages()]
    except AttributeError:  # an old virtualenv's site module
        pass
    return [os.path.realpath(d) for d in dirs if d]


def _installed(path: str) -> bool:
    parts = path.split(os.sep)
    return ("site-packages" in parts or "dist-packages" in parts
            or _under(path, _installed_dirs()))


def _under(path: str, dirs: Iterable[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip(os.sep) + os.sep) for d in dirs)


def _sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _replace_dir(dest: str, files: List[Tuple[str, str]]) -> None:
    """Make ``dest`` hold exactly ``files`` (``(source, relative path)``): built beside it
    and swapped in, so a failed copy leaves the previous copies whole."""
    staging, old = dest + ".new", dest + ".old"
    for d in (staging, old):
        shutil.rmtree(d, ignore_errors=True)
    if not files:
        shutil.rmtree(dest, ignore_errors=True)
        return
    try:
        for src, rel in files:
            os.makedirs(os.path.dirname(os.path.join(staging, rel)), exist_ok=True)
            shutil.copyfile(src, os.path.join(staging, rel))
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if os.path.isdir(dest):
        os.replace(dest, old)
    os.replace(staging, dest)
    shutil.rmtree(old, ignore_errors=True)
