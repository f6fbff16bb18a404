"""Policy workers that fail, with the real ``alf.bin.train`` command in a subprocess.

A policy worker that raises, hangs (SIGSTOP) or is SIGKILLed is named in the log
and restarted; the env workers it served re-send their unanswered requests to
its successor and training goes on. Ctrl-C afterwards: exit 130 within 10 s with
a checkpoint, no process of the run left, ``/dev/shm`` unchanged.
"""
import glob
import os
import shutil
import signal
import subprocess
import time

import pytest

from shm_check import shm_entries, shm_left_since
from tests.unrollers.test_async_faults import (_alive, _conf, _descendants, _last_row,
                                               _wait_for_rows)

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")

POLICY_WORKER = ("TrainerConfig.num_policy_workers = 1\n"
                 "TrainerConfig.env_worker_timeout_s = 4\n")


def _named(pid: int, name: str):
    """Live descendants of ``pid`` whose short name (``/proc/<pid>/comm``) is ``name``."""
    found = []
    for c in _descendants(pid):
        try:
            with open(f"/proc/{c}/comm") as f:
                if f.read().strip() == name:
                    found.append(c)
        except OSError:
            continue
    return found


def _go_on_then_ctrl_c(proc, root, shm_before, extra_rows: int = 5):
    """Wait for ``extra_rows`` more iterations, Ctrl-C the run; return its stderr."""
    rows = int(_last_row(root)["iteration"])
    deadline = time.monotonic() + 90
    while int(_last_row(root)["iteration"]) < rows + extra_rows:
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "training did not go on after the fault"
        time.sleep(0.2)
    family = _descendants(proc.pid)
    t0 = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)  # a terminal Ctrl-C reaches the whole group
    _, stderr = proc.communicate(timeout=60)
    assert time.monotonic() - t0 < 10, stderr
    assert proc.returncode == 130, stderr
    ckpts = glob.glob(str(root / "train" / "ckpt-*.pt"))
    assert len(ckpts) == 1 and f"state saved in {ckpts[0]}" in stderr, stderr
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in family) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in family if _alive(p)], stderr
    if os.path.isdir("/dev/shm"):
        assert not shm_left_since(shm_before)
    assert "Traceback" not in stderr, stderr
    return stderr


def _start(alf_cli, tmp_path, extra: str = ""):
    conf = _conf(alf_cli, tmp_path, extra=POLICY_WORKER + extra + (
        "TrainerConfig.num_iterations = 1000000\nTrainerConfig.num_env_steps = 0\n"))
    root = tmp_path / "run"
    proc = alf_cli.start("alf.bin.train", ["--conf", conf, "--root_dir", str(root)], tmp_path,
                         stdout=subprocess.DEVNULL, start_new_session=True)
    return proc, root


def test_killed_then_hung_policy_worker_is_named_restarted_and_ctrl_c_leaves_nothing(
        alf_cli, tmp_path):
    shm_before = shm_entries()
    proc, root = _start(alf_cli, tmp_path)
    try:
        _wait_for_rows(proc, root, 3)
        killed = _named(proc.pid, "alf-policy-0")
        assert len(killed) == 1 and len(_named(proc.pid, "alf-env-0")) == 1
        os.kill(killed[0], signal.SIGKILL)
        rows = int(_last_row(root)["iteration"])
        deadline = time.monotonic() + 90
        # its successor serves: rows go on and a new process bears the name (a spawned
        # child names itself only once it runs; trajectories already queued may carry
        # the learner a few rows before that on a busy machine)
        hung = []
        while (int(_last_row(root)["iteration"]) < rows + 3
               or not hung or hung == killed):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
            hung = _named(proc.pid, "alf-policy-0")
        assert len(hung) == 1 and hung != killed
        os.kill(hung[0], signal.SIGSTOP)
        stderr = _go_on_then_ctrl_c(proc, root, shm_before)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    for pid, reason, count in ((killed[0], "was killed by signal 9", 1),
                               (hung[0], "has not reported for", 2)):
        line = f"policy worker 0 (serves env worker(s) 0, pid {pid}) {reason}"
        assert line in stderr, stderr
        assert (f"restarting it (the env workers it serves re-send the requests it left "
                f"unanswered; restart {count}/5)") in stderr.split(line, 1)[1], stderr


def test_killed_env_worker_in_deterministic_mode_gets_a_new_pipe_and_the_run_goes_on(
        alf_cli, tmp_path):
    # the restarted incarnation's requests come first in the policy worker's fixed order
    # until it has caught up (a fault ends bit-identity, never the run)
    shm_before = shm_entries()
    proc, root = _start(alf_cli, tmp_path, 'TrainerConfig.async_mode = "deterministic"\n')
    try:
        _wait_for_rows(proc, root, 3)
        env = _named(proc.pid, "alf-env-0")
        assert len(env) == 1
        os.kill(env[0], signal.SIGKILL)
        stderr = _go_on_then_ctrl_c(proc, root, shm_before)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert (f"env worker 0 (envs 0-1, pid {env[0]}) was killed by signal 9; restarting it "
            "with fresh envs (its partial trajectory is discarded; restart 1/5)") in stderr, stderr


def test_policy_worker_that_raises_is_restarted_and_training_finishes(alf_cli, tmp_path):
    shutil.copy(os.path.join(os.path.dirname(__file__), "crashing_policy.py"), tmp_path)
    conf = _conf(alf_cli, tmp_path, extra=POLICY_WORKER + (
        "import crashing_policy\n"
        "TrainerConfig.algorithm_ctor = @CrashingPolicyDqn\n"
        "CrashingPolicyDqn.optimizer = @alf.optimizers.Adam()\n"
        "CrashingPolicyDqn.epsilon_greedy = 0.1\n"
        "CrashingPolicyDqn.crash_at_step = 40\n"
        f'CrashingPolicyDqn.marker = "{tmp_path / "crash.marker"}"\n'
        "TrainerConfig.num_iterations = 12\n"))
    root = tmp_path / "run"
    result = alf_cli.run("alf.bin.train", ["--conf", conf, "--root_dir", str(root)], tmp_path,
                         timeout=240)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "crash.marker").exists()
    assert "policy worker 0 (serves env worker(s) 0" in result.stderr, result.stderr
    assert "raised RuntimeError: policy crashed" in result.stderr, result.stderr
    assert "restart 1/5" in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert int(_last_row(root)["iteration"]) == 12
    assert "worker restarts 1" in result.stderr  # on the progress line
