"""Sweeps and PBT on a real PostgreSQL server (``--storage=postgresql://...``, the
documented way to share a study across machines), two processes on one study each.

Reported: in a fresh ``pip install -e ".[sweep]"`` the documented URL failed ("Failed to
import DB access module", naming no package): SQLAlchemy 2.1 opens ``postgresql://`` with
psycopg (v3), which nothing installed (now the ``[postgres]`` extra; the missing-driver
line is tested in tests/bin/test_missing_extra.py). Found here: two processes started
together on a new database both create Optuna's tables, and one died with "cannot open it
(IntegrityError: ... duplicate key value violates unique constraint
"pg_type_typname_nsp_index")".

The server is the test's own (tests/postgres_server.py): started for this module, stopped
and removed after it, skipped with a one-line reason where it cannot start.
"""
import csv
import glob
import os
import subprocess
import sys
import threading

import optuna
import pytest
from optuna.trial import TrialState

from alf.studies.study_store import open_storage
from tests.postgres_server import new_database, postgres_server

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# ppo_cart_pole.gin cut to 2 iterations of 256 env steps, an evaluation of 1 episode at the end
TINY = ["--conf_param", "TrainerConfig.num_env_steps=512",
        "--conf_param", "TrainerConfig.eval_interval=2",
        "--conf_param", "TrainerConfig.num_eval_episodes=1",
        "--conf_param", "TrainerConfig.num_eval_environments=1"]


@pytest.fixture(scope="module")
def server():
    with postgres_server() as url:
        yield url


def _run_two(tmp_path, cmd):
    """Start ``cmd`` twice at once; their exit statuses, stdouts and stderrs."""
    outs = [(open(tmp_path / f"out{i}.txt", "w"), open(tmp_path / f"err{i}.txt", "w"))
            for i in range(2)]
    procs = [subprocess.Popen(cmd, cwd=REPO, stdout=o, stderr=e) for o, e in outs]
    try:
        codes = [p.wait(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for o, e in outs:
            o.close()
            e.close()
    return (codes, [(tmp_path / f"out{i}.txt").read_text() for i in range(2)],
            [(tmp_path / f"err{i}.txt").read_text() for i in range(2)])


def _trials(url, name):
    return optuna.load_study(study_name=name, storage=url).get_trials(deepcopy=False)


def test_processes_opening_a_new_database_together_all_open_it(server, tmp_path):
    """Four at once on a database without Optuna's tables (each creates them)."""
    url = new_database(server, "opened_together")
    start, errors = threading.Barrier(4), []

    def open_it():
        start.wait()
        try:
            open_storage(str(tmp_path), url)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(str(e))

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []


def test_two_sweep_processes_share_one_study(server, tmp_path):
    url = new_database(server, "sweep")
    study = tmp_path / "study"
    codes, outs, errs = _run_two(tmp_path, [
        sys.executable, "-m", "alf.bin.sweep", "--conf=ppo_cart_pole.gin",
        f"--study_dir={study}", f"--storage={url}", "--seeds=0,1",
        "--param", "PPOLoss.entropy_regularization=[0.0, 0.01]", *TINY])
    assert codes == [0, 0], errs
    started = [err.count(": started ") + out.count(": started ") for out, err in zip(outs, errs)]
    assert sum(started) == 4 and min(started) >= 1, started  # both worked, 4 runs in all
    for run_dir in glob.glob(str(study / "runs/*/seed_*")):
        with open(os.path.join(run_dir, "train.log")) as f:
            assert f.read().count("[sweep] ") == 1, run_dir  # none ran twice
    for out in outs:  # both print the final table: its 2 configurations, 2 seeds each
        table = [line for line in out.splitlines() if line.startswith("| ")]
        assert table[0].startswith("| rank | PPOLoss.entropy_regularization |"), out
        assert len(table) == 3 and all("0: " in row and ", 1: " in row for row in table[1:])
    # the study lives in the database (no journal file); every run has one result
    assert not (study / "study.journal").exists()
    done = [t for t in _trials(url, "study") if t.state == TrialState.COMPLETE]
    assert sorted(t.user_attrs["key"] for t in done) == sorted(
        f"entropy_regularization={v}/seed_{s}" for v in ("0.0", "0.01") for s in (0, 1))


def test_two_pbt_processes_run_one_population(server, tmp_path):
    """2 members, 2 generations of one 256-step iteration: each segment trained once,
    each decision taken by one process, both processes print the final table."""
    url = new_database(server, "pbt")
    study = tmp_path / "pbt"
    codes, outs, errs = _run_two(tmp_path, [
        sys.executable, "-m", "alf.bin.pbt", "--conf=ppo_cart_pole.gin",
        f"--study_dir={study}", f"--storage={url}",
        "--param", "lr/LinearSchedule.start=loguniform(1e-5, 1e-2)",
        "--population=2", "--interval=256", "--num_env_steps=512", "--quantile=0.5",
        "--metric=train_return", *TINY[2:]])
    assert codes == [0, 0], errs
    for out in outs:
        assert "| member | final score |" in out, out
    with open(study / "lineage.csv") as f:
        rows = list(csv.DictReader(f))
    assert sorted((int(r["gen"]), int(r["member"])) for r in rows) == [(0, 0), (0, 1),
                                                                        (1, 0), (1, 1)]
    assert sum(r["event"].startswith("exploit") for r in rows) == 1  # the bottom half of 2
    for member in glob.glob(str(study / "members" / "m*")):
        with open(os.path.join(member, "train.log")) as f:
            assert f.read().count("[pbt] ") == 2, member  # its 2 segments, once each
    assert not (study / "study.journal").exists()
    done = [t.user_attrs["key"] for t in _trials(url, "pbt") if t.state == TrialState.COMPLETE]
    assert sorted(done) == ["decide/gen_0", "decide/gen_1", "m0/gen_0", "m0/gen_1",
                            "m1/gen_0", "m1/gen_1"]
