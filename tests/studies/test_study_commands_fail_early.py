"""Sweeps, PBT and compare fail early and loudly (issue 29, item 3), run as real commands.

Before: a sweep whose every run failed exited 0; a conf that never evaluates trained every
run fully and only then failed ("wrote no eval_return point"); a ``--study_dir`` or
``--out_dir`` that is a file was a 28-line ``FileExistsError`` traceback (compare printed
its whole report first); ``--seeds=-1`` and ``--resample_probability=2`` were accepted;
a misspelled PBT parameter was "cannot change it in the middle of a run"; PBT's failure
lines quoted the run log's ``[sweep]`` header.
"""
import csv
import os
import re

import json
import subprocess
import sys

import pytest

SWEEP = ["--conf=ppo_cart_pole.gin", "--param", "PPOLoss.entropy_regularization=[0.0, 0.01]"]
PBT = ["--conf=ppo_cart_pole.gin", "--param", "lr/LinearSchedule.start=loguniform(1e-5, 1e-2)",
       "--interval=2048"]
APPO = ["--conf=appo_cart_pole.gin", "--study_dir=study"]
EVAL_FIX = ["does not evaluate (TrainerConfig.evaluate = False)",
            "--conf_param 'TrainerConfig.evaluate=True'", "--metric train_return"]

# (command, arguments, words of the one error line) -- run in a directory holding `afile`
BAD = {
    "sweep_no_eval": ("alf.bin.sweep", APPO + SWEEP[1:], EVAL_FIX),
    "pbt_no_eval": ("alf.bin.pbt", APPO + PBT[1:], EVAL_FIX),
    "sweep_dir_is_file": ("alf.bin.sweep", SWEEP + ["--study_dir=afile"],
                          ["--study_dir", "afile is an existing file, not a directory"]),
    "sweep_dir_under_file": ("alf.bin.sweep", SWEEP + ["--study_dir=afile/study"],
                             ["afile/study cannot be created", "afile is a file"]),
    "pbt_dir_is_file": ("alf.bin.pbt", PBT + ["--study_dir=afile"],
                        ["--study_dir", "afile is an existing file, not a directory"]),
    "sweep_seeds": ("alf.bin.sweep", SWEEP + ["--study_dir=study", "--seeds=0,-1"],
                    ["--seeds=0,-1 is out of range: item 2 must be >= 0"]),
    "sweep_sampler_seed": ("alf.bin.sweep", SWEEP + ["--study_dir=study", "--sampler_seed=-3"],
                           ["--sampler_seed=-3 is out of range: it must be in [0, "]),
    "sweep_n_trials": ("alf.bin.sweep", SWEEP + ["--study_dir=study", "--n_trials=-2"],
                       ["--n_trials=-2 is out of range: it must be >= 1"]),
    "pbt_resample": ("alf.bin.pbt", PBT + ["--study_dir=study", "--resample_probability=2"],
                     ["--resample_probability=2.0 is out of range: it must be in [0, 1]"]),
    "pbt_seed": ("alf.bin.pbt", PBT + ["--study_dir=study", "--seed=-1"],
                 ["--seed=-1 is out of range: it must be >= 0"]),
    "pbt_num_env_steps": ("alf.bin.pbt", PBT + ["--study_dir=study", "--num_env_steps=-5"],
                          ["--num_env_steps=-5 is out of range: it must be >= 1"]),
    "pbt_misspelled": ("alf.bin.pbt", ["--conf=ppo_cart_pole.gin", "--study_dir=study",
                                       "--interval=2048", "--param",
                                       "lr/LinearSchedule.strat=loguniform(1e-5, 1e-2)"],
                       ["--param lr/LinearSchedule.strat=", "doesn't have a parameter named "
                        "'strat'", "Did you mean: start?"]),
}


def _listing(root):
    return sorted(os.path.relpath(os.path.join(d, f), root)
                  for d, dirs, files in os.walk(root) for f in files + dirs)


@pytest.mark.parametrize("name", list(BAD))
def test_bad_input_is_one_line_exit_2_and_nothing_written(name, alf_cli, tmp_path):
    module, args, words = BAD[name]
    (tmp_path / "afile").write_text("not a directory\n")
    proc = alf_cli.run(module, args, tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{module}: error: "), proc.stderr[-3000:]
    for w in words:
        assert w in lines[0], lines[0]
    assert proc.stdout == ""
    assert _listing(tmp_path) == ["afile"]
    assert (tmp_path / "afile").read_text() == "not a directory\n"


def test_compare_out_dir_that_is_a_file_fails_before_the_report(alf_cli, tmp_path):
    run = tmp_path / "runs" / "a_seed0"
    run.mkdir(parents=True)
    (run / "eval.csv").write_text(
        "iteration,env_steps,wall_time_s,eval_return,eval_return_std,eval_return_min,"
        "eval_return_max,eval_episode_length,eval_episodes\n" +
        "".join(f"{i},{i * 1000},{i}.0,{10.0 * i},0,0,0,10,5\n" for i in range(1, 11)))
    (run / "progress.csv").write_text("iteration,env_steps\n")
    (tmp_path / "afile").write_text("not a directory\n")
    before = _listing(tmp_path)
    proc = alf_cli.run("alf.bin.compare", ["--group", "a=runs/a_seed*", "--out_dir=afile"],
                       tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert lines == [f"alf.bin.compare: error: --out_dir {tmp_path / 'afile'} is an existing "
                     "file, not a directory: give a directory (a new one is created)"]
    assert _listing(tmp_path) == before


BAD_ENV = """
create_environment.env_name = 'NoSuchEnv-v0'
"""


def test_a_sweep_with_a_failed_run_exits_1_and_says_how_many(alf_cli, tmp_path):
    alf_cli.write_gin(tmp_path, alf_cli.TINY_PPO, "tiny.gin")
    proc = alf_cli.run("alf.bin.sweep", [
        "--conf=tiny.gin", "--study_dir=study", "--metric=train_return", "--parallel=2",
        "--param", "create_environment.env_name=['CartPole-v1', 'NoSuchEnv-v0']"], tmp_path,
        timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    table = proc.stdout.strip().splitlines()
    assert len(table) == 4 and "failed [0]" in table[3] and "| – | – |" not in table[2], table
    errors = [l for l in proc.stderr.splitlines() if l.startswith("alf.bin.sweep: error: ")]
    assert errors == [proc.stderr.strip().splitlines()[-1]]
    assert errors[0].startswith("alf.bin.sweep: error: 1 of 2 runs failed"), errors
    assert "NoSuchEnv-v0_/seed_0: exit status 2: alf.bin.train: error: Unknown environment" \
        in errors[0] and errors[0].endswith("NoSuchEnv-v0_/seed_0/train.log)"), errors
    with open(tmp_path / "study" / "results.csv") as f:
        assert sorted(r["state"] for r in csv.DictReader(f)) == ["complete", "failed"]


def test_a_population_whose_members_all_fail_names_the_error_not_the_log_header(
        alf_cli, tmp_path):
    alf_cli.write_gin(tmp_path, alf_cli.TINY_PPO + BAD_ENV, "bad.gin")
    proc = alf_cli.run("alf.bin.pbt", [
        "--conf=bad.gin", "--study_dir=pop", "--metric=train_return", "--population=2",
        "--interval=32", "--num_env_steps=64", "--parallel=2",
        "--param", "lr/LinearSchedule.start=loguniform(1e-5, 1e-2)"], tmp_path, timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "[sweep]" not in proc.stderr, proc.stderr
    failed = [l for l in proc.stderr.splitlines() if re.match(r"\[pbt\] gen 0 m\d failed", l)]
    assert len(failed) == 2, proc.stderr
    assert all("exit status 2: alf.bin.train: error: " in l and "NoSuchEnv-v0" in l
               for l in failed), failed
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("alf.bin.pbt: error: every member failed in generation 0 (first "
                           "error: exit status 2: alf.bin.train: error: "), last


# the int/float flags the command defines itself, all its flags, and what RANGES declares
_FLAG_KINDS = """
import importlib, json, sys
from absl import flags
module = importlib.import_module(sys.argv[1])
own = flags.FLAGS.flags_by_module_dict()[sys.argv[1]]
numeric = [f.name for f in own if f.parser.flag_type() in ("int", "float")]
print(json.dumps([numeric, [f.name for f in own], list(module.RANGES)]))
"""


@pytest.mark.parametrize("module", ["alf.bin.sweep", "alf.bin.pbt", "alf.bin.compare"])
def test_every_numeric_flag_has_a_declared_range(module, alf_cli):
    proc = subprocess.run([sys.executable, "-c", _FLAG_KINDS, module], capture_output=True,
                          text=True, env=alf_cli.env(), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    numeric, own, declared = map(set, json.loads(proc.stdout))
    assert numeric and numeric <= declared <= own, (numeric - declared, declared - own)
