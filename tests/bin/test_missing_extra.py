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


_PBT_ARGS = ["--population=2", "--interval=1000", "--num_env_steps=2000",
             "--param", "lr/LinearSchedule.start=loguniform(1e-5, 1e-2)"]
_SWEEP_ARGS = ["--param", "PPOLoss.entropy_regularization=[0.0, 0.01]"]


@pytest.mark.parametrize("module, url, missing, shown, hint", [
    ("alf.bin.sweep", "postgresql://alf@127.0.0.1:1/alf", "psycopg", "'psycopg' package",
     'install the [postgres] extra: pip install -e ".[postgres]"'),
    ("alf.bin.pbt", "postgresql://alf@127.0.0.1:1/alf", "psycopg", "'psycopg' package",
     'install the [postgres] extra: pip install -e ".[postgres]"'),
    ("alf.bin.sweep", "postgresql+psycopg://alf:secret@127.0.0.1:1/alf", "psycopg",
     "'psycopg' package", 'install the [postgres] extra: pip install -e ".[postgres]"'),
    ("alf.bin.sweep", "postgresql+psycopg2://alf@127.0.0.1:1/alf", "psycopg2",
     "'psycopg2-binary' package (module psycopg2)",
     'pip install psycopg2-binary (or use postgresql://, whose driver the [postgres] extra '
     'installs)'),
    ("alf.bin.sweep", "mysql://alf@127.0.0.1:1/alf", "MySQLdb",
     "'mysqlclient' package (module MySQLdb)", "pip install mysqlclient"),
])
def test_a_database_driver_missing_names_its_package(tmp_path, module, url, missing, shown,
                                                     hint):
    """Reported: docs/experiments.md offers ``--storage=postgresql://user@host/db``, but
    in a fresh ``pip install -e ".[sweep]"`` it failed with Optuna's "ImportError: Failed
    to import DB access module for the specified storage URL. Please install appropriate
    one.", naming no package: SQLAlchemy 2.1 maps ``postgresql://`` to psycopg (v3),
    which nothing installed. The line names the driver SQLAlchemy wants for the URL and
    how to install it, never the URL's password; nothing is written."""
    done = _run(tmp_path, [missing], module, ["--conf=ppo_cart_pole.gin",
                                              f"--study_dir={tmp_path / 'study'}",
                                              f"--storage={url}"]
                + (_PBT_ARGS if module.endswith("pbt") else _SWEEP_ARGS))
    assert done.returncode == 2, done.stderr
    shown_url = url.replace(":secret@", ":***@")
    scheme = url.split("://")[0]
    assert done.stderr.splitlines() == [
        f"{module}: error: --storage {shown_url}: cannot open it: SQLAlchemy's driver for "
        f"{scheme}://, the {shown}, is not installed; {hint}"], done.stderr
    assert not (tmp_path / "study").exists()
