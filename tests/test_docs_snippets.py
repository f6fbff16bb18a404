"""docs/writing_an_algorithm.md cannot drift from the code: every python snippet
shows imports that run, every name a snippet uses is imported or defined (in it
or an earlier snippet), and the complete A2C example trains and plays as printed,
from a directory other than the one holding its files."""
import ast
import builtins
import os
import re
import textwrap
from typing import List, Set

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(REPO_ROOT, "docs", "writing_an_algorithm.md")
# a fenced block, possibly indented (inside a list item): ```lang ... ```
FENCE = re.compile(r"^(?P<indent>[ ]*)```(?P<lang>\w*)[ ]*\n(?P<body>.*?)^(?P=indent)```[ ]*$",
                   re.M | re.S)


def _blocks(lang: str) -> List[str]:
    with open(DOC) as f:
        text = f.read()
    return [textwrap.dedent(m.group("body")) for m in FENCE.finditer(text)
            if m.group("lang") == lang]


PYTHON = _blocks("python")


def _imports(tree: ast.Module) -> List[ast.stmt]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


def _bound(tree: ast.Module) -> Set[str]:
    """Every name the block binds anywhere (scopes ignored: an over-approximation)."""
    names = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            names.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, ast.arg):
            names.add(n.arg)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.add(n.name)
    return names


def test_the_doc_has_python_snippets():
    assert len(PYTHON) >= 6, len(PYTHON)


@pytest.mark.parametrize("index", range(len(PYTHON)))
def test_snippet_imports_run(index):
    tree = ast.parse(PYTHON[index])
    imports = _imports(tree)
    assert imports, f"python snippet {index} shows no imports:\n{PYTHON[index][:300]}"
    exec(compile(ast.Module(body=imports, type_ignores=[]), f"<snippet {index}>", "exec"), {})


@pytest.mark.parametrize("index", range(len(PYTHON)))
def test_snippet_names_are_imported_or_defined(index):
    earlier = set()  # top-level classes/functions of earlier snippets (e.g. ReinforceInfo)
    for text in PYTHON[:index]:
        earlier.update(n.name for n in ast.parse(text).body
                       if isinstance(n, (ast.ClassDef, ast.FunctionDef)))
    tree = ast.parse(PYTHON[index])
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    missing = used - _bound(tree) - earlier - set(dir(builtins))
    assert not missing, f"python snippet {index} uses {sorted(missing)} without importing them"


def _a2c_files():
    code = [b for b in PYTHON if b.startswith("# my_a2c.py\n")]
    gin = [b for b in _blocks("") if b.startswith("# my_a2c.gin\n")]
    assert len(code) == 1 and len(gin) == 1
    return code[0], gin[0]


def test_a2c_example_trains_and_plays_from_another_directory(alf_cli, tmp_path):
    code, gin = _a2c_files()
    assert "import my_a2c\n" in gin
    folder, elsewhere = tmp_path / "my_project", tmp_path / "elsewhere"
    folder.mkdir()
    elsewhere.mkdir()
    (folder / "my_a2c.py").write_text(code)
    (folder / "my_a2c.gin").write_text(gin)
    train = alf_cli.run("alf.bin.train", [
        f"--conf={folder / 'my_a2c.gin'}", "--root_dir=runs/a2c",
        "--conf_param", "TrainerConfig.num_iterations=3",
        "--conf_param", "TrainerConfig.num_env_steps=0"], elsewhere, timeout=180)
    assert train.returncode == 0, train.stderr[-3000:]
    assert re.search(r"iter 3/3 \| env steps 384 \|", train.stderr), train.stderr[-2000:]
    assert "TrainerConfig.algorithm_ctor = @MyA2C" in (
        elsewhere / "runs" / "a2c" / "config.gin").read_text()
    play = alf_cli.run("alf.bin.play", ["--root_dir=runs/a2c", "--num_episodes", "1"],
                       elsewhere, timeout=120)
    assert play.returncode == 0, play.stderr[-3000:]
    assert re.search(r"^episode 1: return [\d.]+, length \d+$", play.stdout, re.M), play.stdout


REINFORCE_SOURCE = os.path.join(REPO_ROOT, "alf", "examples", "reinforce_algorithm.py")
REINFORCE_GIN = os.path.join(REPO_ROOT, "alf", "examples", "reinforce_cart_pole.gin")


def _without_docstring(body: List[ast.stmt]) -> List[ast.stmt]:
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[1:]
    return body


def _signature(fn: ast.FunctionDef) -> str:
    """Argument names and defaults (the doc leaves the type hints out)."""
    args = fn.args
    return ast.dump(ast.arguments(
        posonlyargs=[], args=[ast.arg(a.arg) for a in args.args], vararg=args.vararg,
        kwonlyargs=[ast.arg(a.arg) for a in args.kwonlyargs], kw_defaults=args.kw_defaults,
        kwarg=args.kwarg, defaults=args.defaults))


def _reinforce_functions_in_doc() -> List[ast.FunctionDef]:
    """The ReinforceAlgorithm methods the doc shows: in the class snippet, or as
    ``# method(s) of ReinforceAlgorithm`` top-level functions."""
    found = []
    for text in PYTHON:
        tree = ast.parse(text)
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == "ReinforceAlgorithm":
                found += [n for n in node.body if isinstance(n, ast.FunctionDef)]
            elif isinstance(node, ast.FunctionDef) and "of ReinforceAlgorithm" in text:
                found.append(node)
    return found


def test_snippets_elide_nothing():
    """A reader copies the snippets: no ``...`` in place of code (the constructor was)."""
    elided = [i for i, text in enumerate(PYTHON) for n in ast.walk(ast.parse(text))
              if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
              and n.value.value is Ellipsis]
    assert not elided, [PYTHON[i][:200] for i in elided]


def test_reinforce_snippets_are_the_example_code():
    """Every ReinforceAlgorithm method the doc shows is alf/examples/reinforce_algorithm.py's,
    statement for statement (comments, docstrings and type hints aside)."""
    source = ast.parse(open(REINFORCE_SOURCE).read())
    cls = next(n for n in source.body if isinstance(n, ast.ClassDef)
               and n.name == "ReinforceAlgorithm")
    methods = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}
    shown = _reinforce_functions_in_doc()
    assert {f.name for f in shown} >= {"__init__", "predict_step", "rollout_step", "calc_loss"}
    for fn in shown:
        real = methods[fn.name]
        assert _signature(fn) == _signature(real), fn.name
        assert [ast.dump(s) for s in _without_docstring(fn.body)] == \
            [ast.dump(s) for s in _without_docstring(real.body)], f"{fn.name} differs"


def test_the_gin_file_shown_is_the_example():
    """The doc's gin block is reinforce_cart_pole.gin, less its header comment."""
    shown = [b for b in _blocks("") if b.startswith("import alf.examples.reinforce_algorithm")]
    assert len(shown) == 1
    lines = open(REINFORCE_GIN).read().splitlines()
    body = "\n".join(lines[next(i for i, l in enumerate(lines) if not l.startswith("#")):])
    assert shown[0].strip() == body.strip()
