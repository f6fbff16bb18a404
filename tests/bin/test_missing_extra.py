"""A command whose extra is not installed says which ``pip install`` to run, in one line,
exit status 2 (alf.bin.extras).

Reported: in a fresh ``pip install -e ".[sweep]"``, ``python -m alf.bin.compare`` died
with a 10-line ``ModuleNotFoundError: No module named 'scipy'`` traceback, exit 1. Here a
package is made missing the way a fresh venv has it missing: a module of its name first on
``PYTHONPATH`` that raises the same ``ModuleNotFoundError`` the import system would.
"""
import os
import subprocess
import sys

import pytest

from alf.trainers.progress_log import EVAL_HEADER, HEADER
from tests.conftest import cli_env


def _run(tmp_path, missing, module, args):
    blocker = tmp_path / "blocked"
    blocker.mkdir(exist_ok=True)
    for name in missing:
        (blocker / f"{name}.py").write_text(
            f"raise ModuleNotFoundError(\"No module named '{name}'\", name={name!r})\n")
    env = cli_env()
    env["PYTHONPATH"] = str(blocker) + os.pathsep + env["PYTHONPATH"]
    return subprocess.run([sys.executable, "-m", module, *args], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("missing, module", [
    ("scipy", "alf.bin.compare"), ("optuna", "alf.bin.sweep"), ("optuna", "alf.bin.pbt")])
def test_a_package_missing_when_the_command_loads_is_one_line_exit_2(tmp_path, missing,
                                                                      module):
    done = _run(tmp_path, [missing], module, ["--group", "a=runs/*"]
                if module.endswith("compare") else ["--conf=ppo_cart_pole.gin"])
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"{module}: error: the '{missing}' package is not installed; {module} needs the "
        "[sweep] extra: pip install -e \".[sweep]\""], done.stderr
    assert done.stdout == ""


def test_a_package_missing_when_the_command_runs_is_one_line_exit_2(tmp_path):
    """compare imports matplotlib only to write its plots (--out_dir)."""
    run = tmp_path / "runs" / "a_seed0"
    run.mkdir(parents=True)
    (run / "eval.csv").write_text(",".join(EVAL_HEADER) + "\n"
                                  "1,1000,1.0,10.0,1.0,0.0,1.0,10.0,5\n"
                                  "2,2000,2.0,20.0,1.0,0.0,1.0,10.0,5\n")
    (run / "progress.csv").write_text(",".join(HEADER) + "\n")
    done = _run(tmp_path, ["matplotlib"], "alf.bin.compare",
                ["--group", "a=runs/a_seed*", "--out_dir", "out"])
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1] == (
        "alf.bin.compare: error: the 'matplotlib' package is not installed; alf.bin.compare "
        "needs the [sweep] extra: pip install -e \".[sweep]\""), done.stderr
    assert "Traceback" not in done.stderr
    # --debug: the full traceback, as for any error
    debug = _run(tmp_path, ["matplotlib"], "alf.bin.compare",
                 ["--group", "a=runs/a_seed*", "--out_dir", "out", "--debug"])
    assert debug.returncode == 1
    assert "Traceback (most recent call last)" in debug.stderr
    assert debug.stderr.rstrip().splitlines()[-1] == \
        "ModuleNotFoundError: No module named 'matplotlib'"
