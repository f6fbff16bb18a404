"""Async env workers that fail: the real ``alf.bin.train`` command, in a subprocess.

An env that raises in ``step``, an env that hangs, and an env worker killed with
SIGKILL: training finishes its iterations and the restart is reported (named
worker, reason, count). Ctrl-C: exit 130 within 10 s with a checkpoint, no
process of the run left, ``/dev/shm`` unchanged. The learner killed with SIGKILL:
its workers exit on their own.
"""
import csv
import glob
import os
import signal
import subprocess
import time

import pytest
import torch

from shm_check import shm_entries, shm_left_since

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")

# DQN on a CartPole that can fail, 2 envs in 1 worker x 2 groups, 8-step trajectories.
ASYNC_DQN = """
create_environment.env_name = "tests.unrollers.faulty_env:FaultyCartPole-v0"
create_environment.num_parallel_environments = 2
create_environment.backend = "sync"
QNetwork.fc_layer_params = (8,)
DqnAlgorithm.optimizer = @alf.optimizers.Adam()
DqnAlgorithm.epsilon_greedy = 0.1
TrainerConfig.algorithm_ctor = @DqnAlgorithm
TrainerConfig.random_seed = 0
TrainerConfig.unroll_length = 8
TrainerConfig.mini_batch_size = 8
TrainerConfig.num_updates_per_train_iter = 1
TrainerConfig.replay_buffer_length = 1000
TrainerConfig.num_threads = 1
TrainerConfig.evaluate = False
TrainerConfig.summary_interval = 1
TrainerConfig.checkpoint_interval = 1000000
TrainerConfig.progress_interval_seconds = 0.2
TrainerConfig.async_unroll = True
TrainerConfig.env_groups_per_worker = 2
TrainerConfig.unroll_parameter_update_period = 1
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _descendants(pid: int):
    """pids of every live process below ``pid``."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            if _alive(c):
                out.append(c)
                todo.append(c)
    return out


def _worker_pids(pid: int):
    """The env worker processes (named alf-env-worker-N by multiprocessing's spawn)."""
    found = []
    for c in _descendants(pid):
        try:
            with open(f"/proc/{c}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if b"multiprocessing.spawn" in cmd and b"resource_tracker" not in cmd:
            found.append(c)
    return found


def _wait_for_rows(proc, root, rows: int, timeout: float = 120):
    progress = root / "progress.csv"
    deadline = time.monotonic() + timeout
    while not (progress.exists() and len(progress.read_text().splitlines()) >= rows + 1):
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "no training progress"
        time.sleep(0.1)


def _last_row(root):
    with open(root / "progress.csv") as f:
        return list(csv.DictReader(f))[-1]


def _conf(alf_cli, tmp_path, fault: str = "none", at_step: int = 30, extra: str = "") -> str:
    marker = tmp_path / "fault.marker"
    text = ASYNC_DQN + (f'create_environment.env_kwargs = {{"fault": "{fault}", '
                        f'"at_step": {at_step}, "marker": "{marker}"}}\n') + extra
    alf_cli.write_gin(tmp_path, text, "async_dqn.gin")
    return "async_dqn.gin"


@pytest.mark.parametrize("fault,expected", [
    ("raise", "raised RuntimeError: injected fault"),
    ("hang", "has not reported for"),
])
def test_env_that_raises_or_hangs_is_restarted_and_training_finishes(alf_cli, tmp_path, fault,
                                                                      expected):
    conf = _conf(alf_cli, tmp_path, fault, extra="TrainerConfig.num_iterations = 12\n"
                                                  "TrainerConfig.env_worker_timeout_s = 4\n")
    root = tmp_path / "run"
    t0 = time.monotonic()
    result = alf_cli.run("alf.bin.train", ["--conf", conf, "--root_dir", str(root)], tmp_path,
                         timeout=240)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "fault.marker").exists()  # the fault did happen
    assert expected in result.stderr, result.stderr
    assert "env worker 0 (envs 0-1" in result.stderr, result.stderr
    assert "restarting it with fresh envs" in result.stderr, result.stderr
    assert "restart 1/5" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert int(_last_row(root)["iteration"]) == 12
    assert "worker restarts 1" in result.stderr  # on the progress line
    if fault == "hang":
        assert time.monotonic() - t0 < 200


def test_sigkilled_env_worker_is_restarted(alf_cli, tmp_path):
    conf = _conf(alf_cli, tmp_path, extra="TrainerConfig.num_iterations = 1000000\n"
                                          "TrainerConfig.num_env_steps = 0\n")
    root = tmp_path / "run"
    proc = alf_cli.start("alf.bin.train", ["--conf", conf, "--root_dir", str(root)], tmp_path,
                         stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_for_rows(proc, root, 3)
        workers = _worker_pids(proc.pid)
        assert len(workers) == 1, workers
        os.kill(workers[0], signal.SIGKILL)
        rows_at_kill = int(_last_row(root)["iteration"])
        deadline = time.monotonic() + 60
        while int(_last_row(root)["iteration"]) < rows_at_kill + 5:
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "training did not go on after the kill"
            time.sleep(0.2)
        new_workers = _worker_pids(proc.pid)
        assert len(new_workers) == 1 and new_workers != workers
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert "was killed by signal 9; restarting it with fresh envs" in stderr, stderr
    assert f"pid {workers[0]})" in stderr, stderr
    assert proc.returncode == 130, stderr


@pytest.mark.parametrize("mode", ["processes", "deterministic"])
def test_ctrl_c_stops_within_10_s_with_checkpoint_and_leaves_nothing(alf_cli, tmp_path, mode):
    shm_before = shm_entries()
    conf = _conf(alf_cli, tmp_path, extra="TrainerConfig.num_iterations = 1000000\n"
                                          "TrainerConfig.num_env_steps = 0\n"
                                          f'TrainerConfig.async_mode = "{mode}"\n')
    root = tmp_path / "run"
    proc = alf_cli.start("alf.bin.train", ["--conf", conf, "--root_dir", str(root)], tmp_path,
                         stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_for_rows(proc, root, 3)
        family = _descendants(proc.pid)
        assert _worker_pids(proc.pid)
        t0 = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)  # a terminal Ctrl-C reaches the whole group
        _, stderr = proc.communicate(timeout=60)
        elapsed = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, stderr
    assert elapsed < 10, f"took {elapsed:.1f} s to stop"
    ckpts = glob.glob(str(root / "train" / "ckpt-*.pt"))
    assert len(ckpts) == 1 and f"state saved in {ckpts[0]}" in stderr, stderr
    assert torch.load(ckpts[0], weights_only=True)["context"]["iteration"] >= 3
    assert "Traceback" not in stderr, stderr
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in family) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in family if _alive(p)], stderr
    if os.path.isdir("/dev/shm"):
        assert not shm_left_since(shm_before)


def test_killed_learner_takes_its_workers_with_it(alf_cli, tmp_path):
    conf = _conf(alf_cli, tmp_path, extra="TrainerConfig.num_iterations = 1000000\n"
                                          "TrainerConfig.num_env_steps = 0\n")
    root = tmp_path / "run"
    proc = alf_cli.start("alf.bin.train", ["--conf", conf, "--root_dir", str(root)], tmp_path,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        _wait_for_rows(proc, root, 2)
        family = _descendants(proc.pid)
        assert _worker_pids(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in family) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in family if _alive(p)]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_learner_crash_stops_every_worker_and_keeps_the_last_checkpoint(alf_cli, tmp_path):
    import shutil
    shutil.copy(os.path.join(os.path.dirname(__file__), "crashing_dqn.py"), tmp_path)
    conf = _conf(alf_cli, tmp_path, extra="import crashing_dqn\n"
                                          "TrainerConfig.algorithm_ctor = @CrashingDqn\n"
                                          "CrashingDqn.optimizer = @alf.optimizers.Adam()\n"
                                          "CrashingDqn.epsilon_greedy = 0.1\n"
                                          "CrashingDqn.crash_at_update = 12\n"
                                          "TrainerConfig.checkpoint_interval = 5\n"
                                          "TrainerConfig.num_iterations = 1000\n")
    root = tmp_path / "run"
    proc = alf_cli.start("alf.bin.train", ["--conf", conf, "--root_dir", str(root)], tmp_path,
                         stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_for_rows(proc, root, 2)
        family = _descendants(proc.pid)
        assert _worker_pids(proc.pid)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 1, stderr
    assert "RuntimeError: learner crashed" in stderr, stderr
    # the crash saved nothing: the newest checkpoint is the last good one (iteration 10)
    ckpts = sorted(glob.glob(str(root / "train" / "ckpt-*.pt")))
    assert ckpts and ckpts[-1].endswith("ckpt-0000000010.pt"), ckpts
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in family) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in family if _alive(p)], stderr
