"""Every command README.md and docs/*.md show runs, so a doc command cannot rot.

Commands are found by ``doc_command_parser.py`` (code blocks, ``$`` prompts, inline
``python -m alf...`` spans), classified by ``doc_command_plan.py`` (run, pip
checked, or listed in ``NOT_RUN`` with the reason; anything else fails) and run
by ``doc_command_runner.py``: each doc's commands in document order in a working
directory of their own, shortened to a couple of iterations, checking the exit
status (0, or 2 where the doc shows an error), the output a ``$`` block shows,
and its line count, no traceback, no "gin bindings never used" warning, and what
the command writes (``config.gin`` and a checkpoint, the dataset, the video). Two
docs run at a time (each command is one process with one torch thread), so the
whole run stays within 2 cores; ``python -m`` commands start as forks of a process
that imported alf once (``tests/fork_server.py``; ``ALF_DOC_COMMANDS_FORK=0`` starts
each as a fresh interpreter). ``-s`` shows the slowest commands and every command
that is not run, with the reason.
"""
import ast
import os
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List

import pytest

from doc_command_parser import REPO_ROOT, all_commands, doc_files
from doc_command_plan import NOT_RUN, plan, pip_extras
from doc_command_runner import CommandResult, run_file

COMMANDS = all_commands()
FILES = doc_files()
PARALLEL_DOCS = 2


def _selected_files(request) -> List[str]:
    """The doc files whose ``test_doc_commands_run`` is part of this pytest run."""
    chosen = {item.callspec.params["doc_file"] for item in request.session.items
              if item.originalname == "test_doc_commands_run" and hasattr(item, "callspec")}
    return [f for f in FILES if f in chosen]


@pytest.fixture(scope="module")
def doc_runs(request, tmp_path_factory, alf_cli) -> Dict[str, List[CommandResult]]:
    """Run the selected docs' commands, two docs at a time (the longest first)."""
    base = tmp_path_factory.mktemp("doc_commands")
    env = alf_cli.env()
    files = sorted(_selected_files(request),
                   key=lambda f: -sum(c.file == f for c in COMMANDS))
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=PARALLEL_DOCS) as pool:
        futures = {f: pool.submit(run_file, f, [c for c in COMMANDS if c.file == f],
                                  str(base / re.sub(r"\W", "_", f)), env) for f in files}
        results = {f: fut.result() for f, fut in futures.items()}
    ran = [r for rs in results.values() for r in rs if r.ran]
    print(f"\n[docs] {len(ran)} commands ran in {time.monotonic() - start:.0f} s "
          f"(load: {os.getloadavg()[0]:.1f})")
    for r in sorted(ran, key=lambda r: -r.seconds)[:10]:
        print(f"[docs]   {r.seconds:5.1f} s  {r.command.where()}  {r.command.text[:90]}")
    for r in (r for rs in results.values() for r in rs if r.not_run):
        print(f"[docs] not run: {r.command.where()}  {r.command.text[:90]}\n"
              f"[docs]          {'; '.join(sorted(set(r.not_run)))}")
    return results


@pytest.mark.timeout(900)
@pytest.mark.parametrize("doc_file", FILES)
def test_doc_commands_run(doc_runs, doc_file):
    bad = [r for r in doc_runs[doc_file] if r.problems]
    assert not bad, "\n\n".join(r.report() for r in bad)


def test_the_docs_show_commands():
    """The parser finds the commands (a parser that finds none would pass every test)."""
    per_file = {f: [c for c in COMMANDS if c.file == f] for f in FILES}
    assert len(per_file["README.md"]) >= 5
    assert len(per_file["docs/offline.md"]) >= 15
    assert any(c.output for c in per_file["docs/quickstart.md"])  # `$` blocks with output
    assert any(c.source == "inline" for c in COMMANDS)
    assert len(COMMANDS) >= 100


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.where())
def test_doc_command_is_valid_bash(command):
    """Pasted into bash, the command parses (prose inside a code block would not)."""
    check = subprocess.run(["bash", "-n"], input=command.text + "\n", capture_output=True,
                           text=True)
    assert check.returncode == 0, f"{command.where()}: {command.text}\n{check.stderr}"


def test_every_doc_command_is_run_or_listed():
    unknown = [f"{c.where()}: {c.text}\n  {p.reason}" for c in COMMANDS
               if c.source != "fragment" for p in plan(c) if p.action == "unknown"]
    assert not unknown, "\n".join(unknown)


def test_not_run_entries_all_match_a_doc_command():
    """An entry whose command left the docs must go (so the list shows what is skipped)."""
    stale = [pattern for pattern, _ in NOT_RUN
             if not any(re.search(pattern, c.text) for c in COMMANDS)]
    assert not stale, stale


def _setup_extras() -> List[str]:
    tree = ast.parse(open(os.path.join(REPO_ROOT, "setup.py")).read())
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "extras_require":
            return [k.value for k in node.value.keys]
    raise AssertionError("setup.py has no extras_require")


def test_pip_commands_name_existing_extras():
    """``pip install`` is not run (it would change this environment); what it names must
    exist (pip only warns about an unknown extra)."""
    extras = _setup_extras()
    pip_parts = [(c, p) for c in COMMANDS for p in plan(c) if p.action == "pip"]
    assert pip_parts
    wrong = [f"{c.where()}: .[{e}]" for c, p in pip_parts for e in pip_extras(p.argv)
             if e not in extras]
    assert not wrong, f"extras not in setup.py ({extras}): {wrong}"


def test_benchmark_scripts_exist():
    """Benchmarks are not run (NOT_RUN); the scripts the docs name must exist."""
    scripts = {m.group(1) for c in COMMANDS
               for m in [re.search(r"python3? (bench/\S+\.py)", c.text)] if m}
    assert scripts
    missing = sorted(s for s in scripts if not os.path.exists(os.path.join(REPO_ROOT, s)))
    assert not missing, missing
