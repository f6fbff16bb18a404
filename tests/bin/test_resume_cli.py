"""Resuming a run dir: mistakes are one line (exit 2, nothing changed), and a resume says
what it restored: overrides kept, progress.csv without duplicates, replay buffer status."""
import csv
import glob
import os
import re

import pytest
import torch

ENV_MISMATCH = "create_environment.env_name='Acrobot-v1'"


def _rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def mistakes(tmp_path_factory, alf_cli):
    """A 2-iteration CartPole run (trained in-process: what is checked is the commands
    below), then the user mistakes started together."""
    cwd = tmp_path_factory.mktemp("resume")
    conf = alf_cli.TINY_PPO + "TrainerConfig.num_iterations = 2\n"
    alf_cli.write_gin(cwd, conf, "tiny.gin")
    alf_cli.train_in_process(cwd / "run", conf)
    (cwd / "a_file").write_text("keep me")
    (cwd / "confs").mkdir()
    (cwd / "confs" / "x.gin").write_text(alf_cli.TINY_PPO)
    cases = {
        "root_is_file": ["--conf", "tiny.gin", "--root_dir", "a_file"],
        "root_under_file": ["--conf", "tiny.gin", "--root_dir", "a_file/sub"],
        "conf_is_dir": ["--conf", "confs", "--root_dir", "run_dir_conf"],
        "other_env": ["--root_dir", "run", "--conf_param", ENV_MISMATCH,
                      "--conf_param", "TrainerConfig.num_iterations=4"],
    }
    config_before = (cwd / "run" / "config.gin").read_text()
    procs = {k: alf_cli.start("alf.bin.train", a, cwd) for k, a in cases.items()}
    out = {}
    for k, p in procs.items():
        _, err = p.communicate(timeout=180)
        out[k] = (p.returncode, err)
    return cwd, out, config_before


def _one_line_error(out, key):
    code, err = out[key]
    assert code == 2, err
    # the replay buffer's info line (built before the checkpoint is compared) is not an error
    lines = [l for l in err.strip().splitlines() if not l.startswith("[alf] ReplayBuffer: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_root_dir_that_is_a_file(mistakes):
    cwd, out, _ = mistakes
    line = _one_line_error(out, "root_is_file")
    assert "a_file is an existing file, not a directory" in line
    assert (cwd / "a_file").read_text() == "keep me"


def test_root_dir_under_a_file(mistakes):
    cwd, out, _ = mistakes
    line = _one_line_error(out, "root_under_file")
    assert "a_file/sub cannot be created: " in line and "a_file is a file" in line, line
    assert (cwd / "a_file").read_text() == "keep me"


def test_conf_that_is_a_directory(mistakes):
    cwd, out, _ = mistakes
    line = _one_line_error(out, "conf_is_dir")
    assert "'confs' is a directory, not a gin file" in line and "confs/x.gin" in line
    assert not (cwd / "run_dir_conf").exists()


def test_resume_with_another_env_names_both(mistakes):
    cwd, out, config_before = mistakes
    line = _one_line_error(out, "other_env")
    assert ("holds a run of CartPole-v1 (observation float32[4], action int64[] in [0, 1]), "
            "but this config builds Acrobot-v1 (observation float32[6], action int64[] in "
            "[0, 2])") in line, line
    # nothing changed: the override was not written into the run's config, no new checkpoint
    assert (cwd / "run" / "config.gin").read_text() == config_before
    assert [os.path.basename(p) for p in glob.glob(str(cwd / "run" / "train" / "ckpt-*"))] == [
        "ckpt-0000000002.pt"]


def test_old_checkpoint_without_signature_still_gets_one_line(make_trainer, alf_cli, tmp_path):
    """Checkpoints written before signatures existed: the shape mismatch is still one line."""
    from alf.errors import IncompatibleSpecError
    root = tmp_path / "run"
    make_trainer(root, alf_cli.TINY_PPO, ["TrainerConfig.num_iterations=1"]).run()
    path = root / "train" / "ckpt-0000000001.pt"
    state = torch.load(path, weights_only=True)
    del state["experiment"]
    torch.save(state, path)
    other = make_trainer(root, alf_cli.TINY_PPO, ["TrainerConfig.num_iterations=2", ENV_MISMATCH])
    with pytest.raises(IncompatibleSpecError, match=r"size mismatch for .*\[8, 4\].*\[8, 6\]"):
        other.restore_checkpoint()
    other.close()


def test_resume_with_a_smaller_network_is_one_line(make_trainer, alf_cli, tmp_path):
    """A narrower layer used to fail in the optimizer load ("parameter group doesn't
    match"), a 43-line ValueError, before torch's own shape check ran."""
    from alf.errors import IncompatibleSpecError
    root = tmp_path / "run"
    make_trainer(root, alf_cli.TINY_PPO, ["TrainerConfig.num_iterations=1"]).run()
    other = make_trainer(root, alf_cli.TINY_PPO, ["TrainerConfig.num_iterations=2",
                                                  "ValueNetwork.fc_layer_params=(4,)"])
    with pytest.raises(IncompatibleSpecError, match=r"size mismatch for .*: \[8, 4\] in the "
                                                    r"checkpoint, \[4, 4\] here"):
        other.restore_checkpoint()
    other.close()


def test_kill_after_checkpoint_then_resume_keeps_each_row_once(make_trainer, alf_cli, tmp_path):
    """kill -9 after the checkpoint at iteration 2 but after rows 3-4 were written (simulated
    by removing the newer checkpoint): rows past 2 are dropped, wall time continues."""
    root = tmp_path / "run"
    params = ["TrainerConfig.num_iterations=4", "TrainerConfig.checkpoint_interval=2",
              "TrainerConfig.num_checkpoints=5"]
    make_trainer(root, alf_cli.TINY_PPO, params).run()
    os.remove(root / "train" / "ckpt-0000000004.pt")
    rows = _rows(root / "progress.csv")
    assert [r["iteration"] for r in rows] == ["1", "2", "3", "4"]
    time_at_two = float(rows[1]["wall_time_s"])
    again = make_trainer(root, alf_cli.TINY_PPO, params)
    again.run()
    rows = _rows(root / "progress.csv")
    assert [r["iteration"] for r in rows] == ["1", "2", "3", "4"]
    times = [float(r["wall_time_s"]) for r in rows]
    assert times == sorted(times) and times[2] >= time_at_two, times


@pytest.fixture(scope="module")
def resumed(tmp_path_factory, alf_cli):
    """A 2-iteration run (``num_iterations`` in its gin file, one ``--conf_param``), resumed
    to 3 iterations with every binding passed again, as a sweep or PBT resume does (one run
    for the two tests below: each then reruns the finished run its own way)."""
    cwd = tmp_path_factory.mktemp("overrides")
    alf_cli.write_gin(cwd, alf_cli.TINY_PPO + "TrainerConfig.num_iterations = 2\n", "tiny.gin")
    args = ["--conf", "tiny.gin", "--root_dir", "run"]
    first = alf_cli.run("alf.bin.train", args + ["--conf_param",
                                                 "PPOLoss.entropy_regularization=0.01"], cwd)
    assert first.returncode == 0, first.stderr
    again = ["--conf_param", "PPOLoss.entropy_regularization=1e-2",
             "--conf_param", "TrainerConfig.num_iterations=3"]
    resumed = alf_cli.run("alf.bin.train", args + again, cwd)
    assert resumed.returncode == 0, resumed.stderr
    return cwd, args, again, resumed.stderr


def test_overrides_persist_and_finished_rerun_writes_nothing(resumed, alf_cli):
    cwd, args, _, stderr = resumed
    assert ("applied to the saved config (kept for later resumes): "
            "TrainerConfig.num_iterations=3") in stderr
    events = sorted(glob.glob(str(cwd / "run" / "events.out.tfevents.*")))
    again = alf_cli.run("alf.bin.train", args, cwd)  # no override: the 3 is remembered
    assert again.returncode == 0, again.stderr
    assert "is already complete (iteration 3," in again.stderr, again.stderr
    assert sorted(glob.glob(str(cwd / "run" / "events.out.tfevents.*"))) == events


def test_config_without_checkpoint_says_it_starts_over(make_trainer, alf_cli, tmp_path, capsys):
    root = tmp_path / "run"
    root.mkdir()
    (root / "config.gin").write_text("# a run killed before its first checkpoint\n")
    trainer = make_trainer(root, alf_cli.TINY_PPO, ["TrainerConfig.num_iterations=1"])
    trainer.run()
    err = capsys.readouterr().err
    assert f"{root} has a config.gin but no checkpoint" in err
    assert "training starts from iteration 0" in err
    assert trainer.context.iteration == 1


DQN_TINY = """
create_environment.env_name = "CartPole-v1"
create_environment.num_parallel_environments = 2
QNetwork.fc_layer_params = (8,)
TrainerConfig.algorithm_ctor = @DqnAlgorithm
TrainerConfig.random_seed = 1
TrainerConfig.unroll_length = 4
TrainerConfig.initial_collect_steps = 16
TrainerConfig.num_updates_per_train_iter = 1
TrainerConfig.mini_batch_size = 8
TrainerConfig.replay_buffer_length = 64
TrainerConfig.evaluate = False
TrainerConfig.progress_interval_seconds = 100.0
"""


@pytest.mark.parametrize("save", [False, True])
def test_off_policy_resume_says_what_happened_to_the_buffer(make_trainer, tmp_path, capsys, save):
    """(The trainers are built quiet: warnings and resume notices show anyway.)"""
    root = tmp_path / "run"
    params = [f"TrainerConfig.save_replay_buffer={save}", "TrainerConfig.num_iterations=3"]
    first = make_trainer(root, DQN_TINY, params)
    first.run()
    stored = first.learner.replay_buffer.total_size()
    assert stored == 3 * 2 * 4
    again = make_trainer(root, DQN_TINY, params[:1] + ["TrainerConfig.num_iterations=4"])
    capsys.readouterr()
    assert again.restore_checkpoint()
    err = capsys.readouterr().err
    if save:
        assert f"restored the replay buffer: {stored:,} steps" in err
        assert again.learner.replay_buffer.total_size() == stored
    else:
        warning = [l for l in err.splitlines() if "replay buffer" in l]
        assert len(warning) == 1 and "empty buffer" in warning[0], err
        assert "TrainerConfig.save_replay_buffer=True" in warning[0]
    again.close()


def test_progress_log_drops_a_row_cut_short_by_a_kill(tmp_path):
    """A kill mid-write can leave '1' of a row '15,...' without a newline: it must not be
    kept as iteration 1, nor have the next row appended to it."""
    from alf.trainers.progress_log import HEADER, ProgressLog
    path = tmp_path / "progress.csv"
    path.write_text(",".join(HEADER) + "\n10,160,1.0,20.0,20.0,3,100.0\n1")
    log = ProgressLog(str(path), keep_through_iteration=10)
    log.write([11, 176, "1.1", "21.0", "21.0", 4, "100.0"])
    log.close()
    assert [r["iteration"] for r in _rows(path)] == ["10", "11"]
    assert log.dropped_rows == 1


def test_a_resume_names_only_the_overrides_that_change_the_saved_config(resumed, alf_cli):
    """A sweep or PBT resume passes every binding again: the resume said it "applied" all of
    them, unchanged ones included (entropy_regularization: 0.01 saved, 1e-2 passed)."""
    cwd, args, again, stderr = resumed
    applied = [l for l in stderr.splitlines() if "applied to the saved config" in l]
    assert applied == ["[alf] applied to the saved config (kept for later resumes): "
                       "TrainerConfig.num_iterations=3"], stderr
    complete = alf_cli.run("alf.bin.train", args + again, cwd)  # nothing changes now
    assert complete.returncode == 0, complete.stderr
    assert "is already complete (iteration 3," in complete.stderr
    assert "applied to the saved config" not in complete.stderr
