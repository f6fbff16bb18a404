"""Sweep internals without training: spaces, objectives, CPU slots, the study's trial
bookkeeping (seeds, n_trials, duplicates, stale owners) and the one-line errors."""
import os
import subprocess
import sys

import numpy as np
import optuna
import pytest
from optuna.trial import TrialState

from alf.errors import ConfigError, UserError
from alf.studies import run_process, study_store as store
from alf.studies.objective import Objective
from alf.studies.run_data import Curve
from alf.studies.search_space import SearchSpace, parse_param
from alf.studies.sweep import Sweep, SweepSettings

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_spaces_parse_into_optuna_distributions():
    p = parse_param("PPOLoss.entropy_regularization=[0.0, 0.01, @foo, 'a,b']")
    assert p.choices == ("0.0", "0.01", "@foo", "'a,b'")
    assert isinstance(p.distribution(), optuna.distributions.CategoricalDistribution)
    lr = parse_param("Adam.lr=loguniform(1e-4, 1e-2)")
    assert (lr.low, lr.high) == (1e-4, 1e-2) and lr.distribution().log
    n = parse_param("TrainerConfig.mini_batch_size = logint(16, 256)")
    assert n.distribution() == optuna.distributions.IntDistribution(16, 256, log=True)
    assert n.gin_text(64.0) == "64" and lr.gin_text(0.0012345678) == "0.00123457"


@pytest.mark.parametrize("text, message", [
    ("lr=[1, 2]", "expected Configurable.parameter=SPACE"),
    ("Adam.lr=normal(0, 1)", "cannot read the space"),
    ("Adam.lr=loguniform(0, 1)", "low > 0 for a log range"),
    ("Adam.lr=uniform(2, 1)", "need low < high"),
    ("A.n=int(1.5, 4)", "whole numbers"),
    ("A.b=[1, 1]", "repeats a value"),
    ("TrainerConfig.random_seed=[1, 2]", "--seeds"),
])
def test_bad_spaces_are_one_line_naming_the_part(text, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        parse_param(text)


def test_grid_and_config_names():
    space = SearchSpace.parse(["lr/LinearSchedule.start=[1e-3, 3e-4]", "B.c=[0, 1]"], [0, 1])
    grid = space.grid()
    assert grid[0] == {"lr/LinearSchedule.start": "1e-3", "B.c": "0"} and len(grid) == 4
    assert space.config_name(grid[1]) == "lr.start=1e-3,c=1"
    assert space.conf_params(grid[1], 7) == ["lr/LinearSchedule.start=1e-3", "B.c=1",
                                             "TrainerConfig.random_seed=7"]
    with pytest.raises(ConfigError, match="repeats a seed"):
        SearchSpace.parse([], [1, 1])


def test_objectives_score_a_curve():
    curve = Curve(np.array([0, 100, 300]), np.zeros(3), np.array([10.0, 20.0, 40.0]))
    assert Objective.parse("final").score(curve) == 40.0
    assert Objective.parse("mean").score(curve) == pytest.approx(70 / 3)
    # trapezoids: (10+20)/2*100 + (20+40)/2*200 = 1500 + 6000, over 300 steps
    assert Objective.parse("auc").score(curve) == pytest.approx(7500 / 300)
    steps = Objective.parse("steps_to:20")
    assert steps.score(curve) == 100.0 and steps.direction == "minimize"
    assert Objective.parse("steps_to:99").score(curve) == 600.0  # never: 2 x last steps
    with pytest.raises(ConfigError, match="final, mean, auc, steps_to:X"):
        Objective.parse("best")
    with pytest.raises(ConfigError, match="eval_return, train_return"):
        Objective.parse("final", metric="return")


def test_cpu_slots_split_the_usable_cpus(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4})
    monkeypatch.setattr(run_process, "usable_cpus", lambda: 5)
    assert run_process.cpu_slots(2) == [[0, 1, 2], [3, 4]]
    assert run_process.cpu_slots(7)[5:] == [[0], [1]]  # more runs than CPUs: shared
    monkeypatch.setattr(run_process, "usable_cpus", lambda: 2)  # a cgroup quota of 2
    assert run_process.cpu_slots(2) == [[0], [1]]


def _sweep(tmp_path, sampler="random", n_trials=2, seeds=(0, 1)):
    space = SearchSpace.parse(["Adam.lr=loguniform(1e-4, 1e-2)"], list(seeds))
    settings = SweepSettings("ppo_cart_pole.gin", space, Objective.parse("final"),
                             sampler=sampler, n_trials=n_trials)
    study = store.load_study(optuna.storages.InMemoryStorage(), "s", settings.spec(),
                             "maximize", settings.make_sampler(), settings.make_pruner())
    return Sweep(settings, study, str(tmp_path), lambda text: None)


def test_each_sampled_configuration_runs_once_per_seed_then_stops(tmp_path):
    sweep = _sweep(tmp_path)
    taken = []
    while (item := sweep._next_trial()) is not None:
        trial, values = item
        taken.append((trial.user_attrs["config"], trial.user_attrs["seed"], values["Adam.lr"]))
        sweep.study.tell(trial, 1.0)
    assert [seed for _, seed, _ in taken] == [0, 1, 0, 1]
    assert taken[0][0] == taken[1][0] and taken[0][2] == taken[1][2]  # same config, both seeds
    assert taken[2][0] != taken[0][0]
    assert taken[0][1:] != taken[2][1:]
    assert taken[1][0] == f"lr={taken[1][2]:.6g}"


def test_a_duplicate_run_is_dropped_and_a_stale_owner_is_replaced(tmp_path):
    sweep = _sweep(tmp_path, n_trials=1, seeds=(0,))
    first, values = sweep._next_trial()
    attrs = dict(first.user_attrs)
    store.enqueue_run(sweep.study, values, attrs)  # a second process enqueued it too
    assert sweep._next_trial() is None  # the copy is found when taken, and dropped
    ended = [t.user_attrs.get("ended") for t in sweep.study.get_trials()]
    assert ended == [None, "duplicate"]
    # its owner "dies": a pid that is not running on this host
    sweep.study._storage.set_trial_user_attr(first._trial_id, "owner",
                                             dict(attrs["owner"], pid=2 ** 22 + 7))
    assert store.recover_stale(sweep.study) == [attrs["key"]]
    again, again_values = sweep._next_trial()
    assert again.user_attrs["key"] == attrs["key"] and again_values == values
    states = [t.state for t in sweep.study.get_trials()]
    assert states == [TrialState.FAIL, TrialState.FAIL, TrialState.RUNNING]


class _RaisingAfterTrial(optuna.samplers.RandomSampler):
    """Raises after a trial, as the journal lock's release does when a starved process
    finds its lock was forcibly taken over: Optuna writes the state anyway (finally)."""

    def after_trial(self, study, trial, state, values):
        raise RuntimeError("Error: did not possess lock")


def test_a_tell_that_raises_after_writing_counts_and_one_ended_elsewhere_does_not(tmp_path):
    storage = store.open_storage(str(tmp_path), None)
    study = store.load_study(storage, "s", {"conf": "x"}, "maximize", _RaisingAfterTrial(),
                             optuna.pruners.NopPruner())
    said = []
    mine = study.ask()
    assert store.tell(study, mine, said.append, values=1.5)  # written: it counts
    assert study.get_trials()[0].state == TrialState.COMPLETE and said == []
    theirs = study.ask()  # another process judged its owner gone and ended it
    other = store.load_study(storage, "s", {"conf": "x"}, "maximize",
                             optuna.samplers.RandomSampler(), optuna.pruners.NopPruner())
    assert store.end_trial(other, theirs._trial_id, theirs.number, "owner gone")
    assert not store.tell(study, theirs, said.append, values=2.0)
    assert len(said) == 1 and "another process ended it meanwhile" in said[0]
    assert study.get_trials()[1].state == TrialState.FAIL


def test_two_processes_rewriting_one_file_never_collide(tmp_path):
    """Each process writes its own temporary file (two sweep processes finishing runs at
    the same moment both rewrite results.md; a shared ``results.md.tmp`` failed one)."""
    from alf.utils.atomic_write import atomic_write_text
    path = str(tmp_path / "results.md")
    code = ("import sys; from alf.utils.atomic_write import atomic_write_text as w\n"
            "for i in range(300): w(sys.argv[1], 'x' * 10000 + sys.argv[2])")
    procs = [subprocess.Popen([sys.executable, "-c", code, path, str(k)]) for k in range(2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    atomic_write_text(path, "done")
    assert open(path).read() == "done" and os.listdir(tmp_path) == ["results.md"]


def test_a_study_rerun_with_other_settings_is_refused(tmp_path):
    storage = store.open_storage(str(tmp_path), None)
    args = ("maximize", optuna.samplers.RandomSampler(), optuna.pruners.NopPruner())
    store.load_study(storage, "s", {"conf": "a.gin", "seeds": [0]}, *args)
    with pytest.raises(UserError, match=r"seeds: was \[0\], now \[0, 1\]"):
        store.load_study(storage, "s", {"conf": "a.gin", "seeds": [0, 1]}, *args)


@pytest.mark.parametrize("args, message", [
    (["--param", "PPOLoss.entropy_regularizaton=[0.0, 0.1]"], "entropy_regularizaton"),
    (["--param", "Adam.lr=uniform(0.1, 0.2)", "--sampler=grid"], "needs a list for every"),
    (["--param", "Adam.lr=uniform(0.1, 0.2)"], "needs --n_trials"),
    (["--seeds=0,x"], "give whole numbers"),
])
def test_sweep_command_errors_are_one_line_exit_2(tmp_path, args, message):
    cmd = [sys.executable, "-m", "alf.bin.sweep", "--conf=ppo_cart_pole.gin",
           f"--study_dir={tmp_path / 'study'}"] + args
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "alf.bin.sweep: error:" in lines[0]
    assert not (tmp_path / "study" / "runs").exists()


class _FakeRun:
    """A run process that has written ``eval.csv`` rows and stops when asked."""

    def __init__(self, run_dir):
        self.run_dir, self.log_path, self.pid = str(run_dir), str(run_dir / "train.log"), 1
        self.stop_requested = False

    def poll(self):
        return 130 if self.stop_requested else None

    def request_stop(self, signum=None):
        self.stop_requested = True

    def log_tail(self):
        return ""


def test_a_run_behind_the_median_is_pruned_at_equal_env_steps(tmp_path):
    from alf.studies.sweep import _Active
    space = SearchSpace.parse(["Adam.lr=loguniform(1e-4, 1e-2)"], [0])
    settings = SweepSettings("ppo_cart_pole.gin", space, Objective.parse("final"),
                             sampler="random", n_trials=6, prune=True)
    study = store.load_study(optuna.storages.InMemoryStorage(), "s", settings.spec(),
                             "maximize", settings.make_sampler(), settings.make_pruner())
    sweep = Sweep(settings, study, str(tmp_path), lambda text: None)
    for score in (100.0, 120.0, 140.0, 160.0):  # finished runs: eval 1000 at 2,048 steps
        trial, _ = sweep._next_trial()
        trial.report(score / 10, 1024)
        trial.report(score, 2048)
        study.tell(trial, score)
    trial, _ = sweep._next_trial()
    run_dir = tmp_path / "lagging"
    run_dir.mkdir()
    (run_dir / "eval.csv").write_text(
        "iteration,env_steps,wall_time_s,eval_return,eval_return_std,eval_return_min,"
        "eval_return_max,eval_episode_length,eval_episodes\n"
        "4,1024,1.0,50.0,0,50,50,50,1\n8,2048,2.0,20.0,0,20,20,20,1\n")
    fake = _FakeRun(run_dir)
    active = _Active(trial, trial.user_attrs["key"], fake, 0)
    assert sweep._check(active) is True  # reported, pruned (stop asked), ended
    assert fake.stop_requested and active.reported == 2
    assert study.trials[-1].state == TrialState.PRUNED
    assert study.trials[-1].intermediate_values == {1024: 50.0, 2048: 20.0}


@pytest.mark.parametrize("status", [130, 143, -2, -15, -9])
def test_a_run_stopped_by_a_signal_is_enqueued_again_not_failed(tmp_path, status):
    from alf.studies.sweep import _Active
    sweep = _sweep(tmp_path, n_trials=1, seeds=(0,))
    trial, _ = sweep._next_trial()
    (tmp_path / "r").mkdir()
    run = _FakeRun(tmp_path / "r")
    run.request_stop()  # the sweep asked it to stop (Ctrl-C)
    sweep._finish(_Active(trial, trial.user_attrs["key"], run, 0), status)
    first, again = sweep.study.get_trials()
    assert first.state == TrialState.FAIL and first.user_attrs["ended"] == "interrupted"
    assert again.state == TrialState.WAITING and again.user_attrs["key"] == first.user_attrs["key"]


def test_a_run_killed_from_elsewhere_fails_instead_of_looping(tmp_path):
    from alf.studies.sweep import _Active
    sweep = _sweep(tmp_path, n_trials=1, seeds=(0,))
    trial, _ = sweep._next_trial()
    (tmp_path / "r").mkdir()  # e.g. the OOM killer: nobody asked it to stop
    sweep._finish(_Active(trial, trial.user_attrs["key"], _FakeRun(tmp_path / "r"), 0), -9)
    (only,) = sweep.study.get_trials()
    assert only.state == TrialState.FAIL and "ended" not in only.user_attrs
    assert "exit status -9" in only.user_attrs["error"]


def test_a_grid_rerun_retries_runs_whose_every_try_failed(tmp_path):
    from alf.studies import results
    space = SearchSpace.parse(["A.b=[1, 2]"], [0])
    settings = SweepSettings("ppo_cart_pole.gin", space, Objective.parse("final"))
    study = store.load_study(optuna.storages.InMemoryStorage(), "s", settings.spec(),
                             "maximize", settings.make_sampler(), settings.make_pruner())
    sweep = Sweep(settings, study, str(tmp_path), lambda text: None)
    assert sweep.enqueue_missing() == 2
    first, _ = sweep._next_trial()
    study.tell(first, state=TrialState.FAIL)  # the run crashed
    second, _ = sweep._next_trial()
    study.tell(second, 7.0)
    assert sweep.enqueue_missing() == 1  # the rerun: only the failed run again
    again, values = sweep._next_trial()
    assert again.user_attrs["key"] == first.user_attrs["key"] and values == {"A.b": "1"}
    study.tell(again, 5.0)
    rows = {r.config: r for r in results.collect(study)}
    assert rows["b=1"].scores == {0: 5.0} and rows["b=1"].failed == []


def test_a_process_with_nothing_to_start_waits_for_the_others_runs(tmp_path):
    """The first of two sweep processes to run out of work exited at once and printed a
    table with the other's run still "running"; it waits, and its table is the final one."""
    import threading
    import time
    from alf.studies import results
    space = SearchSpace.parse(["A.b=[1]"], [0])
    settings = SweepSettings("ppo_cart_pole.gin", space, Objective.parse("final"))
    args = (settings.spec(), "maximize", settings.make_sampler(), settings.make_pruner())
    study = store.load_study(store.open_storage(str(tmp_path), None), "s", *args)
    said = []
    sweep = Sweep(settings, study, str(tmp_path), said.append)
    assert sweep.enqueue_missing() == 1
    # another sweep process (alive: this pid) took the only run; it ends 1.5 s later
    other = store.load_study(store.open_storage(str(tmp_path), None), "s", *args)
    theirs = other.ask()
    assert store.claim(other, theirs) and theirs.user_attrs["key"] == "b=1/seed_0"
    timer = threading.Timer(1.5, lambda: other.tell(theirs, 7.0))
    timer.start()
    start = time.monotonic()
    try:
        sweep.run()
    finally:
        timer.cancel()
    assert time.monotonic() - start >= 1.4
    (row,) = results.collect(study)
    assert row.scores == {0: 7.0} and row.running == []
    assert len(said) == 1 and said[0].startswith("[sweep] nothing left to start here; waiting "
                                                 "for 1 run(s) of other sweep processes "
                                                 "(b=1/seed_0)")
