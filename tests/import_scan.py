"""The imports of alf's modules, read from their source (AST; nothing is imported), for
``tests/test_declared_imports.py``.

Each import is recorded with where it is (file, line), whether it is deferred (inside a
function: it runs only when that code does) and whether it is guarded (inside a ``try``
whose handlers catch ``ImportError``, so its absence is reported by alf itself). String
module names given to ``importlib.import_module`` by ``alf/_registry.py`` count as imports
of that module, and every module under ``alf/examples`` (gin files import them) is part of
every command.
"""
import ast
import os
import sys
from dataclasses import dataclass
from typing import Dict, Iterator, List, Set

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALF = os.path.join(REPO, "alf")
# handlers that catch a failed import
_IMPORT_CATCHERS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


@dataclass(frozen=True)
class Import:
    """One imported module name as written (``optuna.trial``), made absolute."""
    module: str
    file: str  # relative to the repository
    line: int
    deferred: bool
    guarded: bool

    @property
    def top(self) -> str:
        return self.module.split(".")[0]

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def alf_modules() -> Dict[str, str]:
    """Module name (``alf.bin.train``, ``alf`` for the package) -> its source file."""
    out = {}
    for d, _, names in os.walk(ALF):
        for n in names:
            if n.endswith(".py"):
                path = os.path.join(d, n)
                parts = os.path.relpath(path, REPO)[:-3].split(os.sep)
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                out[".".join(parts)] = path
    return out


def _catches_import_errors(node: ast.Try) -> bool:
    for handler in node.handlers:
        if handler.type is None:
            return True
        kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        if any(isinstance(k, ast.Name) and k.id in _IMPORT_CATCHERS for k in kinds):
            return True
    return False


def _names(node: ast.AST, module: str, is_package: bool) -> List[str]:
    """The modules an import statement may load, absolute (``from a import b``: ``a`` and,
    if it is a module, ``a.b``)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module
    return [source] + [f"{source}.{a.name}" for a in node.names]


def imports_of(module: str, path: str) -> List[Import]:
    """Every import in ``path`` (the source of ``module``), deferred and guarded ones too."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    is_package = os.path.basename(path) == "__init__.py"
    rel = os.path.relpath(path, REPO)
    out: List[Import] = []

    def visit(node: ast.AST, deferred: bool, guarded: bool) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for name in _names(node, module, is_package):
                out.append(Import(name, rel, node.lineno, deferred, guarded))
        for field, value in ast.iter_fields(node):
            children = value if isinstance(value, list) else [value]
            inside_try = (isinstance(node, ast.Try) and field == "body"
                          and _catches_import_errors(node))
            in_function = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            for child in children:
                if isinstance(child, ast.AST):
                    visit(child, deferred or in_function, guarded or inside_try)

    visit(tree, False, False)
    if module == "alf._registry":  # importlib.import_module("alf....") of each name listed
        out += [Import(n.value, rel, n.lineno, False, False) for n in ast.walk(tree)
                if isinstance(n, ast.Constant) and isinstance(n.value, str)
                and n.value.startswith("alf.")]
    return out


def is_third_party(name: str) -> bool:
    top = name.split(".")[0]
    return top != "alf" and top not in sys.stdlib_module_names


class Scan:
    """Every alf module's imports, and which modules a command may load."""

    def __init__(self) -> None:
        self.files = alf_modules()
        self.imports = {m: imports_of(m, p) for m, p in self.files.items()}

    def closure(self, command: str) -> Set[str]:
        """The alf modules ``python -m command`` may load: ``alf`` itself (and everything
        ``import alf`` registers), the command, the examples, and every alf module any of
        them imports, deferred imports included, with the packages above each."""
        todo = ["alf", command] + [m for m in self.files if m.startswith("alf.examples.")]
        seen: Set[str] = set()
        while todo:
            module = todo.pop()
            if module in seen or module not in self.files:
                continue
            seen.add(module)
            parts = module.split(".")
            todo += [".".join(parts[:i]) for i in range(1, len(parts))]
            todo += [i.module for i in self.imports[module] if i.module.split(".")[0] == "alf"]
        return seen

    def third_party(self, modules: Set[str]) -> Iterator[Import]:
        for module in sorted(modules):
            for imp in self.imports[module]:
                if is_third_party(imp.module):
                    yield imp
