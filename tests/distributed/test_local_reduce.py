"""The shared-memory all-reduce between ranks of one host (ranks simulated by threads
here; the data-parallel training tests run it between processes)."""
import os
import threading

import pytest
import torch

from alf.distributed.local_reduce import LocalReducer, usable
from shm_check import shm_entries, shm_left_since


def _ranks(world, check_peers=lambda waited: None, timeout_s=30.0):
    """``world`` reducers wired with thread-based stand-ins for broadcast and barrier."""
    barrier = threading.Barrier(world)
    box = {}

    def broadcast_object(rank):
        def bcast(obj):
            if rank == 0:
                box["obj"] = obj
            barrier.wait()
            out = box["obj"]
            barrier.wait()
            return out
        return bcast

    flags = {}

    def all_ranks(rank):
        def agree(flag):
            flags[rank] = flag
            barrier.wait()
            out = all(flags.values())
            barrier.wait()
            return out
        return agree

    return [LocalReducer(r, world, broadcast_object(r), all_ranks(r), check_peers, timeout_s)
            for r in range(world)]


def _run(reducers, fn):
    out, errors = [None] * len(reducers), []

    def body(r):
        try:
            out[r] = fn(r, reducers[r])
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=body, args=(r,)) for r in range(len(reducers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out, errors


def test_sums_in_rank_order_identically_over_many_rounds_and_sizes():
    before = shm_entries()
    reducers = _ranks(3)

    def work(rank, red):
        results = []
        g = torch.Generator().manual_seed(rank)
        for n in (5, 3000, 5, 70_000, 1):  # the 70k round grows the buffer
            x = torch.randn(n, generator=g)
            mine = x.clone()
            red.all_reduce_sum_(x)
            results.append((mine, x))
        d = torch.tensor([1.0, float(rank)], dtype=torch.float64)  # its own dtype segment
        red.all_reduce_sum_(d)
        results.append((None, d))
        return results

    out, errors = _run(reducers, work)
    assert not errors, errors
    assert not any(red.disabled for red in reducers)
    for i in range(5):
        expect = out[0][i][0] + out[1][i][0] + out[2][i][0]  # rank order
        for r in range(3):
            assert torch.equal(out[r][i][1], expect)
    assert all(torch.equal(out[r][5][1], torch.tensor([3.0, 3.0], dtype=torch.float64))
               for r in range(3))
    assert not shm_left_since(before)  # unlinked as soon as mapped


def test_a_rank_that_never_comes_is_reported_not_waited_on():
    calls = []

    def check_peers(waited):
        calls.append(waited)
        if waited > 1.5:
            raise RuntimeError("a rank on this host has exited")

    reducers = _ranks(2, check_peers)

    def work(rank, red):
        red.all_reduce_sum_(torch.ones(4))  # both: round 1 maps the buffer
        if rank == 0:
            red.all_reduce_sum_(torch.ones(4))  # rank 1 never joins round 2

    _, errors = _run(reducers, work)
    assert len(errors) == 1 and "exited" in str(errors[0])
    assert calls and max(calls) > 1.5


def test_usable_only_on_one_host():
    assert not usable(["a", "b"])
    os.environ["ALF_DIST_LOCAL_REDUCE"] = "0"
    try:
        assert not usable(["a", "a"])
    finally:
        del os.environ["ALF_DIST_LOCAL_REDUCE"]


def test_no_room_in_dev_shm_falls_back_on_every_rank(monkeypatch):
    """posix_fallocate failing (a full /dev/shm) turns the reducer off on every rank, with
    one warning, instead of a SIGBUS at the first write."""
    before = shm_entries()

    def no_room(fd, offset, length):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", no_room)
    warnings = []
    reducers = _ranks(2)
    for red in reducers:
        red._warn = warnings.append

    out, errors = _run(reducers, lambda rank, red: red.all_reduce_sum_(torch.ones(3)))
    assert not errors and out == [False, False]
    assert all(red.disabled for red in reducers)
    assert len(warnings) == 1 and "/dev/shm has no room" in warnings[0]
    assert not shm_left_since(before)
