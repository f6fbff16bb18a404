"""What a rank says when a collective fails: a rank that is gone, or one that is still
running but never joined (a timed-out collective: stuck, not exited). The real processes
are in test_torchrun_cli.py (a rank killed, a rank stopped with SIGSTOP)."""
import os

from alf.distributed.faults import PeerInfo, PeerTable
from alf.distributed.local_reduce import LateRanksError

MACHINE = "host/boot/ns"
GLOO_TIMEOUT = RuntimeError("[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] "
                            "Timed out waiting 30000ms for recv operation to complete")


def _table(world: int) -> PeerTable:
    """Rank 0 is this process; the others are live processes (this one's pid too)."""
    pids = [os.getpid(), os.getppid(), os.getpid()]
    return PeerTable([PeerInfo(r, "host", pids[r], r, MACHINE) for r in range(world)], 0)


def test_a_gloo_timeout_with_one_other_rank_names_it_as_stuck():
    why = _table(2).describe_failure(GLOO_TIMEOUT, wait_s=0, timeout_s=30)
    assert why == (f"rank 1 (pid {os.getppid()}) was still running but did not join within "
                   "30 s: stuck (hung, or starved of CPU), not exited")


def test_a_gloo_timeout_with_several_ranks_names_the_suspects():
    why = _table(3).describe_failure(GLOO_TIMEOUT, wait_s=0, timeout_s=30)
    assert why == (f"the other ranks did not all join within 30 s and none has exited: one of "
                   f"rank 1 (pid {os.getppid()}), rank 2 (pid {os.getpid()}) is stuck (hung, "
                   "or starved of CPU)")


def test_the_shared_memory_reducer_names_exactly_the_late_rank():
    why = _table(3).describe_failure(LateRanksError([2], 30.0), wait_s=0, timeout_s=30)
    assert why == (f"rank 2 (pid {os.getpid()}) was still running but did not join within "
                   "30 s: stuck (hung, or starved of CPU), not exited")
