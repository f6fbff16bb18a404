"""``"async"`` env workers exit quietly and promptly when their parent process is killed.

A SIGKILLed trainer cannot close its envs: each worker must notice on its own
(end of file on its command pipe, or the parent-pid watchdog when it is busy
in a long ``step``), close its env and exit, printing nothing. Processes are
found through ``/proc`` (Linux). An orphan that has exited but was not reaped
(a zombie: some container inits never reap) counts as gone.
"""
import os
import signal
import subprocess
import sys
import time
from typing import List

import pytest

from alf.environments.async_worker import WATCHDOG_PERIOD_S

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="finds processes through /proc (Linux)")

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _state(pid: int) -> str:
    """``/proc`` state letter of ``pid`` ("R", "S", "Z", ...), "" if it no longer exists."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def _children(pid: int) -> List[int]:
    kids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    kids.append(int(d))
        except (OSError, IndexError, ValueError):
            pass
    return kids


def _running(pids: List[int]) -> List[int]:
    return [p for p in pids if _state(p) not in ("", "Z")]


def _start(cmd: List[str], cwd: str, stdout=subprocess.DEVNULL) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen(cmd, cwd=cwd, env=env, stdout=stdout, stderr=subprocess.PIPE,
                            start_new_session=True)


def _wait_for_children(proc: subprocess.Popen, n: int, timeout: float = 90.0) -> List[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        kids = _running(_children(proc.pid))
        if len(kids) >= n:
            return kids
        if proc.poll() is not None:
            pytest.fail(f"exited early ({proc.returncode}): {proc.stderr.read().decode()[-2000:]}")
        time.sleep(0.1)
    proc.kill()
    pytest.fail(f"no {n} worker processes after {timeout} s")


def _kill_and_check(proc: subprocess.Popen, workers: List[int], within: float) -> None:
    """SIGKILL ``proc``; every worker must exit within ``within`` s, with nothing on stderr."""
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + within
    while _running(workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = _running(workers)
    for pid in left:  # do not leave them behind when the test fails
        os.kill(pid, signal.SIGKILL)
    stderr = proc.stderr.read().decode()
    proc.stderr.close()
    assert left == [], f"workers still running {within} s after the parent was killed"
    for word in ("Traceback", "EOFError", "BrokenPipeError", "ConnectionResetError"):
        assert word not in stderr, stderr[-3000:]


def test_killed_trainer_leaves_no_workers_and_no_tracebacks(tmp_path):
    """The real command with the async backend: SIGKILL it mid-training."""
    proc = _start([sys.executable, "-m", "alf.bin.train", "--conf=ppo_cart_pole.gin",
                   f"--root_dir={tmp_path / 'run'}",
                   "--conf_param", "create_environment.backend='async'",
                   "--conf_param", "create_environment.num_parallel_environments=2"],
                  cwd=str(tmp_path))
    workers = _wait_for_children(proc, 2)
    time.sleep(1.0)  # let them step (and the eval env's workers start)
    workers = _running(_children(proc.pid))
    assert len(workers) >= 2
    _kill_and_check(proc, workers, within=5.0)


_BUSY_SCRIPT = """
import sys, time
import gin
import gymnasium as gym
import numpy as np
from alf.environments import create_environment

if __name__ == "__main__":
    gin.parse_config(f"async_env_backend.context = '{sys.argv[1]}'")


class SlowStep(gym.Wrapper):
    def step(self, action):
        if action == 1:
            time.sleep(120)  # busy in step: only the watchdog can notice the parent's death
        return self.env.step(action)


if __name__ == "__main__":  # forkserver/spawn workers import this module
    env = create_environment("CartPole-v1", 2, backend="async", gym_wrappers=[SlowStep])
    env.reset()
    env.gym_env.step_async(np.array([1, 1]))
    print("stepping", flush=True)
    time.sleep(120)
"""


def _descendants(pid: int) -> List[int]:
    out, todo = [], [pid]
    while todo:
        kids = _children(todo.pop())
        out += kids
        todo += kids
    return out


@pytest.mark.parametrize("context", ["fork", "forkserver"])
def test_workers_busy_in_step_exit_when_the_parent_dies(tmp_path, context):
    """Workers stuck in a 120 s ``step`` (fork: children of the killed process; forkserver:
    children of the fork server) are ended by their parent watchdog."""
    script = tmp_path / "busy.py"
    script.write_text(_BUSY_SCRIPT)
    proc = _start([sys.executable, str(script), context], cwd=str(tmp_path),
                  stdout=subprocess.PIPE)
    line = proc.stdout.readline().decode()
    if line.strip() != "stepping":
        proc.kill()
        pytest.fail(f"the script did not start stepping: {proc.stderr.read().decode()[-2000:]}")
    time.sleep(0.3)  # the workers are inside the slow step now
    processes = _running(_descendants(proc.pid))
    assert len(processes) >= 2
    _kill_and_check(proc, processes, within=2.0 + 2 * WATCHDOG_PERIOD_S)
