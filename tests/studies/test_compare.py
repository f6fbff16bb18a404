"""alf.bin.compare: the log readers (alf's and Stable-Baselines3's), the common grid and
per-run scores, and the command end to end on synthetic run directories: the table's
numbers, compare.json, the plots, and the one-line errors (exit status 2).

The SB3 files are written here in the exact layout SB3 2.x writes (checked against a real
``PPO`` run with ``make_vec_env(monitor_dir=...)``, ``configure(dir, ["csv"])`` and
``EvalCallback(log_path=...)``): monitor files with a ``#{json}`` first line and
``r,l,t`` rows, a logger ``progress.csv`` whose eval rows leave the rollout columns empty,
and ``evaluations.npz``.
"""
import json
import os

import numpy as np
import pytest
from absl import flags

from alf.bin import compare as compare_cli
from alf.studies import stats
from alf.studies.compare_curves import common_grid, score_runs
from alf.studies.compare_runs import load_group
from alf.studies.peer_logs import log_format, read_sb3_curve
from alf.studies.run_data import Curve
from alf.trainers.progress_log import EVAL_HEADER, HEADER

SB3_PROGRESS = """\
time/iterations,time/time_elapsed,rollout/ep_rew_mean,time/fps,time/total_timesteps,rollout/ep_len_mean,eval/mean_reward,eval/mean_ep_length,train/loss
1,0,18.5,1508,128,18.5,,,
,,,,256,,500.0,500.0,32.05
2,2,20.0,345,256,20.0,,,
3,4,19.25,477,384,19.25,,,40.01
,,,,512,,164.0,164.0,31.31
4,8,21.5,506,512,21.5,,,
"""


def _write_alf_run(d, steps, values, seconds_per_step=0.001):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "eval.csv"), "w") as f:
        f.write(",".join(EVAL_HEADER) + "\n")
        for i, (s, v) in enumerate(zip(steps, values)):
            f.write(f"{i + 1},{s},{s * seconds_per_step:.3f},{v:.6f},1.0,0.0,1.0,10.0,5\n")
    with open(os.path.join(d, "progress.csv"), "w") as f:
        f.write(",".join(HEADER) + "\n")


def _write_monitor(path, t_start, rows):
    with open(path, "w") as f:
        f.write(json.dumps({"t_start": t_start, "env_id": "CartPole-v1"}).join(["#", "\n"]))
        f.write("r,l,t\n" + "".join(f"{r},{l},{t}\n" for r, l, t in rows))


def _write_sb3_run(d, steps, values):
    """An SB3 run with EvalCallback's evaluations.npz (2 episodes per evaluation, whose
    mean is ``values``) and a logger progress.csv that gives the wall clock."""
    os.makedirs(d, exist_ok=True)
    results = np.stack([np.asarray(values) - 1.0, np.asarray(values) + 1.0], axis=1)
    np.savez(os.path.join(d, "evaluations.npz"), timesteps=np.asarray(steps),
             results=results, ep_lengths=np.full_like(results, 100, dtype=np.int64))
    with open(os.path.join(d, "progress.csv"), "w") as f:
        f.write("time/iterations,time/time_elapsed,time/total_timesteps\n"
                f"1,0,0\n2,{steps[-1] // 1000},{steps[-1]}\n")


# ----------------------------------------------------------------------------- readers
def test_sb3_monitor_files_of_a_vec_env_merge_into_a_rolling_train_return(tmp_path):
    # env 1 finishes its episodes between env 0's; t counts from each file's t_start
    _write_monitor(tmp_path / "0.monitor.csv", 100.0, [(10.0, 10, 1.0), (30.0, 30, 3.0)])
    _write_monitor(tmp_path / "1.monitor.csv", 100.5, [(20.0, 20, 1.0), (40.0, 40, 3.0)])
    with open(tmp_path / "1.monitor.csv", "a") as f:
        f.write("50.0,5")  # a row cut short by a kill
    assert log_format(str(tmp_path)) == "sb3"
    curve = read_sb3_curve(str(tmp_path), "train_return", window=2)
    # order of ending: 10 (t 101.0), 20 (101.5), 30 (103.0), 40 (103.5)
    np.testing.assert_array_equal(curve.env_steps, [10, 30, 60, 100])
    np.testing.assert_allclose(curve.values, [10.0, 15.0, 25.0, 35.0])
    np.testing.assert_allclose(curve.wall_time_s, [1.0, 1.5, 3.0, 3.5])


def test_sb3_logger_progress_csv_gives_both_metrics_and_its_clock(tmp_path):
    (tmp_path / "progress.csv").write_text(SB3_PROGRESS)
    assert log_format(str(tmp_path)) == "sb3"
    train = read_sb3_curve(str(tmp_path), "train_return")
    np.testing.assert_array_equal(train.env_steps, [128, 256, 384, 512])
    np.testing.assert_allclose(train.values, [18.5, 20.0, 19.25, 21.5])
    np.testing.assert_allclose(train.wall_time_s, [0, 2, 4, 8])
    ev = read_sb3_curve(str(tmp_path), "eval_return")
    np.testing.assert_array_equal(ev.env_steps, [256, 512])
    np.testing.assert_allclose(ev.values, [500.0, 164.0])
    # eval rows have no time/time_elapsed: read off the rows that do (by env steps)
    np.testing.assert_allclose(ev.wall_time_s, [2.0, 8.0])


def test_sb3_evaluations_npz_is_the_eval_return(tmp_path):
    _write_sb3_run(str(tmp_path), [1000, 2000, 4000], [5.0, 7.0, 9.0])
    curve = read_sb3_curve(str(tmp_path), "eval_return")
    np.testing.assert_array_equal(curve.env_steps, [1000, 2000, 4000])
    np.testing.assert_allclose(curve.values, [5.0, 7.0, 9.0])
    np.testing.assert_allclose(curve.wall_time_s, [1.0, 2.0, 4.0])  # 0 s at 0, 4 s at 4000


def test_groups_read_alf_and_sb3_runs_and_tell_them_apart(tmp_path):
    _write_alf_run(str(tmp_path / "alf_0"), [100, 200], [1.0, 2.0])
    _write_sb3_run(str(tmp_path / "sb3_0"), [100, 200], [3.0, 4.0])
    os.makedirs(tmp_path / "empty")
    assert log_format(str(tmp_path / "alf_0")) == "alf"
    assert log_format(str(tmp_path / "empty")) is None
    (tmp_path / "empty" / "config.gin").write_text("")  # an alf run that has just started
    assert log_format(str(tmp_path / "empty")) == "alf"
    group = load_group("both", str(tmp_path / "*_0"), "eval_return")
    assert group.formats == ["alf", "sb3"]
    np.testing.assert_allclose(group.curves[0].values, [1.0, 2.0])
    np.testing.assert_allclose(group.curves[1].values, [3.0, 4.0])


# ---------------------------------------------------------------------- grid and scores
def test_grid_spans_what_every_run_covers_and_scores_are_exact():
    a = Curve(np.array([0, 100, 200]), np.array([0.0, 1.0, 2.0]), np.array([0.0, 10.0, 10.0]))
    b = Curve(np.array([50, 150, 300]), np.array([0.0, 1.0, 2.0]), np.array([4.0, 8.0, 20.0]))
    grid = common_grid([a.env_steps, b.env_steps], points=7)
    np.testing.assert_allclose(grid, [50, 75, 100, 125, 150, 175, 200])
    scores = score_runs([a, b], "env_steps", grid, final_points=2, target=9.0)
    np.testing.assert_allclose(scores.curves[0], [5, 7.5, 10, 10, 10, 10, 10])  # linear
    np.testing.assert_allclose(scores.curves[1][:3], [4.0, 5.0, 6.0])
    # final: mean of the last 2 points at or before 200 (b's point at 300 is past the grid)
    np.testing.assert_allclose(scores.final, [10.0, 6.0])
    # AUC of a: trapezoids over [50, 200] = (6.25 + 8.75 + 10 * 4) * 25 / 150
    np.testing.assert_allclose(scores.auc[0], (6.25 + 8.75 + 40.0) * 25 / 150)
    np.testing.assert_array_equal(scores.to_target, [100.0, np.inf])  # b reaches 9 at 300
    assert scores.reached == 1
    np.testing.assert_allclose(common_grid([a.env_steps, b.env_steps], 4, max_x=110),
                               [50, 70, 90, 110])
    with pytest.raises(ValueError, match="share no x range"):
        common_grid([np.array([0, 10]), np.array([20, 30])])


# --------------------------------------------------------------------------- the command
def _run(capsys, *args):
    flags.FLAGS.unparse_flags()  # in-process: --group of an earlier call would accumulate
    status = compare_cli.main(["alf.bin.compare", *args])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def two_groups(tmp_path, monkeypatch):
    """Group ``fast`` (alf, 4 runs): eval return c * steps / 100 for c = 0.6 .. 1.2 at
    1,000 .. 10,000 steps; group ``flat`` (SB3, 3 runs): constant 40, 50, 60 at
    2,000 .. 12,000 steps. The grid is 2,000 .. 10,000."""
    monkeypatch.chdir(tmp_path)
    steps = np.arange(1000, 10001, 1000)
    for i, c in enumerate([0.6, 0.8, 1.0, 1.2]):
        _write_alf_run(f"runs/fast_seed{i}", steps, c * steps / 100)
    for i, v in enumerate([40.0, 50.0, 60.0]):
        _write_sb3_run(f"runs/flat_{i}", list(range(2000, 12001, 2000)), [v] * 6)
    os.makedirs("runs/noclock_0")  # SB3 evaluations alone: env steps, no wall clock
    np.savez("runs/noclock_0/evaluations.npz", timesteps=np.array([1000, 2000]),
             results=np.ones((2, 1)), ep_lengths=np.ones((2, 1), dtype=np.int64))
    return tmp_path


def _table(text):
    """The cells of the groups' table (the first one) by group name."""
    first = text.split("\n\n| ")[1].split("\n\n")[0]
    rows = [l for l in ("| " + first).splitlines() if "---" not in l]
    return {r.split(" | ")[0][2:]: [c.strip() for c in r.strip(" |").split(" | ")] for r in rows}


def test_compare_end_to_end_table_json_and_plots(two_groups, capsys):
    status, out, err = _run(capsys, "--group", "fast=runs/fast_seed*", "--group",
                            "flat=runs/flat_*", "--target", "50", "--out_dir", "cmp")
    assert status == 0, err
    rows = _table(out)
    fast, flat = rows["fast"], rows["flat"]
    # fast finals 60, 80, 100, 120: IQM (the middle two) 90; AUC over 2,000 .. 10,000 of
    # the line c * s / 100 is c * 60: 36, 48, 60, 72 -> 54; steps to 50: 9,000, 7,000,
    # 5,000, 5,000 -> 6,000
    assert fast[1] == "4" and fast[2].startswith("90.00 [") and fast[3].startswith("54.00 [")
    assert fast[4].startswith("6,000 [") and fast[5] == "4/4"
    # flat: IQM of 3 runs cuts none (int(0.75) = 0): the mean; the run at 40 never reaches
    # 50, so the time to the target is infinite
    assert flat[1] == "3" and flat[2].startswith("50.00 [") and flat[3].startswith("50.00 [")
    assert flat[4].startswith("∞ [2,000, ") and flat[5] == "2/3"
    # P(fast > flat): 60 beats 40, 50 and ties 60 (2.5); 80, 100, 120 beat all: 11.5 / 12
    assert "| fast | flat | 0.9583 [" in out
    data = json.loads((two_groups / "cmp" / "compare.json").read_text())
    g = {x["name"]: x for x in data["groups"]}
    assert g["fast"]["final"]["iqm"]["point"] == pytest.approx(90.0)
    expected = stats.bootstrap_interval([60.0, 80.0, 100.0, 120.0], "iqm", reps=2000, seed=0)
    assert g["fast"]["final"]["iqm"]["low"] == pytest.approx(expected.low)
    assert g["fast"]["final"]["iqm"]["high"] == pytest.approx(expected.high)
    assert g["flat"]["to_target"]["iqm"]["point"] is None and g["flat"]["reached"] == 2
    assert [r["format"] for r in g["flat"]["runs"]] == ["sb3"] * 3
    assert data["grid"] == {"start": 2000.0, "end": 10000.0, "points": 100,
                            "interpolation": "linear"}
    assert (two_groups / "cmp" / "compare.md").read_text() == out  # the same table
    for name in ("curves.png", "profile.png", "aggregates.png"):
        assert (two_groups / "cmp" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_on_wall_time_with_a_mean(two_groups, capsys):
    # fast's clock: 0.001 s per step (1 .. 10 s); flat's: 1 s per 1,000 steps (2 .. 12 s)
    status, out, _ = _run(capsys, "--group", "fast=runs/fast_seed*", "--group",
                          "flat=runs/flat_*", "--x", "wall_time", "--aggregate", "mean",
                          "--max_seconds", "5")
    assert status == 0
    assert "2.000 .. 5.000 wall-clock seconds" in out
    # finals at the last point <= 5 s (5,000 steps): c * 50 -> mean of 30, 40, 50, 60
    assert _table(out)["fast"][2].startswith("45.00 [")


@pytest.mark.parametrize("args, words", [
    (["--group", "ppo=runs/nothing_here*"],
     ["--group ppo=runs/nothing_here*", "matches no directory"]),
    (["--group", "ppo=runs"], ["runs (group ppo) is neither an alf run", "'runs/*'"]),
    (["--group", "fast=runs/fast_seed*", "--metric", "eval_retrun"],
     ["--metric 'eval_retrun'", "eval_return, train_return"]),
    (["--group", "fast=runs/fast_seed*", "--metric", "train_return"],
     ["runs/fast_seed0 (group fast) has no train_return point yet"]),
    (["--group", "fast"], ["--group 'fast': give NAME=GLOB"]),
    (["--group", "nc=runs/noclock_*", "--x", "wall_time"],
     ["runs/noclock_0 (group nc) has no wall-clock times", "--x env_steps"]),
    (["--group", "fast=runs/fast_seed*", "--aggregate", "trimmed"],
     ["--aggregate 'trimmed' is not one of iqm, mean, median"]),
    # declared ranges (alf.bin.flag_ranges): these were accepted
    (["--group", "fast=runs/fast_seed*", "--seed", "-1"],
     ["--seed=-1 is out of range: it must be >= 0"]),
    (["--group", "fast=runs/fast_seed*", "--max_steps", "0"],
     ["--max_steps=0 is out of range: it must be >= 1"]),
    (["--group", "fast=runs/fast_seed*", "--x", "wall_time", "--max_seconds", "-5"],
     ["--max_seconds=-5.0 is out of range: it must be > 0"]),
])
def test_bad_input_is_one_line_and_exit_status_2(two_groups, capsys, args, words):
    status, out, err = _run(capsys, *args)
    assert status == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("alf.bin.compare: error: "), err
    for w in words:
        assert w in lines[0]


def test_curves_too_short_for_the_statistics_get_one_warning(two_groups, capsys):
    """Runs with 2 evaluations each were compared without a word: their AUC and time to
    the target are interpolation between 2 points, whatever the intervals say."""
    for i, (a, b) in enumerate([(10.0, 20.0), (12.0, 25.0), (9.0, 30.0)]):
        _write_alf_run(f"runs/two_{i}", [1000, 2000], [a, b])
    status, out, err = _run(capsys, "--group", "two=runs/two_*", "--target", "22",
                            "--final_points", "3")
    assert status == 0 and _table(out)["two"][1] == "3"
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("alf.bin.compare: warning: 3 of 3 runs "
                                                   "have fewer than 5 eval_return points on "
                                                   "the grid (1,000 .. 2,000 env steps; "
                                                   "fewest: runs/two_0, 2): their AUC, curve "
                                                   "bands and time to the target are mostly "
                                                   "linear interpolation"), lines
    assert "3 run(s) have fewer than --final_points 3 points" in lines[0]
    assert "TrainerConfig.eval_interval" in lines[0]
    # enough points (fast: 9 on its 2,000 .. 10,000 grid, flat: 5): no warning
    status, out, err = _run(capsys, "--group", "fast=runs/fast_seed*", "--group",
                            "flat=runs/flat_*", "--target", "50")
    assert status == 0 and err == ""
