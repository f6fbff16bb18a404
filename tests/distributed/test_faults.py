"""What a rank says when a collective fails: a rank that is gone, or one that is still
running but never joined (a timed-out collective: stuck, not exited), which it then stops
so the launcher does not wait its own grace for it. The real processes are in
test_torchrun_cli.py (a rank killed, a rank stopped with SIGSTOP)."""
import os
import signal
import subprocess
import sys
import time

import pytest

from alf.distributed.faults import PeerInfo, PeerTable
from alf.distributed.local_reduce import LateRanksError

MACHINE = "host/boot/ns"
GLOO_TIMEOUT = RuntimeError("[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] "
                            "Timed out waiting 30000ms for recv operation to complete")


@pytest.fixture
def peers():
    """Two live processes standing in for ranks 1 and 2 (rank 0 is this process)."""
    procs = [subprocess.Popen([sys.executable, "-c",
                               "import time; print('ready', flush=True); time.sleep(120)"],
                              stdout=subprocess.PIPE, text=True) for _ in range(2)]
    for p in procs:  # started and sleeping: a signal now meets the interpreter, not exec
        assert p.stdout.readline().strip() == "ready"
    yield procs
    for p in procs:
        p.kill()
        p.wait()


def _table(world: int, procs) -> PeerTable:
    pids = [os.getpid()] + [p.pid for p in procs]
    return PeerTable([PeerInfo(r, "host", pids[r], r, MACHINE) for r in range(world)], 0)


def _wait_stopped(pid: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "T":
                return
        time.sleep(0.01)
    raise AssertionError(f"pid {pid} did not stop")


def _reaped(proc) -> int:
    return proc.wait(timeout=10)


def test_a_gloo_timeout_with_one_other_rank_names_it_as_stuck_and_stops_it(peers):
    why = _table(2, peers).describe_failure(GLOO_TIMEOUT, wait_s=0, timeout_s=30)
    assert why == (f"rank 1 (pid {peers[0].pid}) was still running but did not join within "
                   "30 s: stuck (hung, or starved of CPU), not exited; stopped it")
    # SIGTERM, or SIGKILL 3 s later if a loaded machine had not run it by then
    assert _reaped(peers[0]) in (-signal.SIGTERM, -signal.SIGKILL)
    assert peers[1].poll() is None  # not a rank of this table


def test_a_stopped_rank_that_cannot_answer_sigterm_is_killed(peers):
    os.kill(peers[0].pid, signal.SIGSTOP)  # what the torchrun test does to rank 1
    _wait_stopped(peers[0].pid)  # else a SIGTERM pending with the SIGSTOP is taken first
    why = _table(2, peers)._stop_local(_table(2, peers).peers[1:], grace_s=0.5)
    assert why == "; stopped it"
    assert _reaped(peers[0]) == -signal.SIGKILL


def test_a_gloo_timeout_with_several_ranks_names_the_suspects_and_stops_none(peers):
    why = _table(3, peers).describe_failure(GLOO_TIMEOUT, wait_s=0, timeout_s=30)
    assert why == (f"the other ranks did not all join within 30 s and none has exited: one of "
                   f"rank 1 (pid {peers[0].pid}), rank 2 (pid {peers[1].pid}) is stuck (hung, "
                   "or starved of CPU)")
    assert peers[0].poll() is None and peers[1].poll() is None


def test_the_shared_memory_reducer_names_exactly_the_late_rank(peers):
    why = _table(3, peers).describe_failure(LateRanksError([2], 30.0), wait_s=0, timeout_s=30)
    assert why == (f"rank 2 (pid {peers[1].pid}) was still running but did not join within "
                   "30 s: stuck (hung, or starved of CPU), not exited; stopped it")
    assert _reaped(peers[1]) in (-signal.SIGTERM, -signal.SIGKILL)
    assert peers[0].poll() is None
