"""ReplayBuffer: ring layout, wrap-around, keep-last clearing, sampling, checkpoints, sizing.

Every stored item carries its own absolute position (``pos``) and env row
(``env``) as data, so the content of any read can be checked against the
indices the buffer claims it came from.
"""
import io
from typing import Tuple

import pytest
import torch

from alf import nest
from alf.data_structures import BatchInfo
from alf.errors import UserError
from alf.replay_buffers import ReplayBuffer
from alf.replay_buffers import replay_buffer as rb_module
from alf.tensor_specs import TensorSpec


def _spec(x_dim: int = 2, x_dtype=torch.float32):
    return {"pos": TensorSpec((), torch.int64), "env": TensorSpec((), torch.int64),
            "x": TensorSpec((x_dim,), x_dtype)}


def _buffer(num_envs: int = 3, capacity: int = 5, **kwargs) -> ReplayBuffer:
    return ReplayBuffer(_spec(), num_envs, capacity, **kwargs)


def _step(pos, env_ids):
    """One step ``[B]``: item ``pos`` of each env in ``env_ids`` (``pos`` scalar or ``[B]``)."""
    env_ids = torch.as_tensor(env_ids, dtype=torch.int64)
    pos = torch.as_tensor(pos, dtype=torch.int64).expand_as(env_ids).clone()
    return {"pos": pos, "env": env_ids.clone(),
            "x": torch.stack([pos.float(), 10.0 * env_ids.float()], -1)}


def _seq(start, T, env_ids):
    """Time-major ``[T, B]`` steps ``start .. start+T-1`` (``start`` scalar or ``[B]``)."""
    start = torch.as_tensor(start, dtype=torch.int64)
    steps = [_step(start + t, env_ids) for t in range(T)]
    return {k: torch.stack([s[k] for s in steps]) for k in steps[0]}


def _fill(buf: ReplayBuffer, n: int):
    for t in range(n):
        buf.add_batch(_step(t, list(range(buf.num_envs))))


def _check_consistent(data, env_ids, positions, L):
    """Content of ``data [B, L]`` is what lives at ``(env_ids, positions + 0..L-1)``."""
    expected_pos = positions[:, None] + torch.arange(L)[None, :]
    assert torch.equal(data["pos"], expected_pos)
    assert torch.equal(data["env"], env_ids[:, None].expand(-1, L))
    assert torch.equal(data["x"][..., 0], expected_pos.float())
    assert torch.equal(data["x"][..., 1], 10.0 * env_ids[:, None].expand(-1, L).float())


# ------------------------------------------------------------------------- writing
def test_add_batch_layout_and_counters():
    buf = _buffer(3, 5)
    assert buf.total_size() == 0 and buf.nbytes == (8 + 8 + 2 * 4) * 3 * 5
    _fill(buf, 3)
    assert torch.equal(buf.current_size(), torch.tensor([3, 3, 3]))
    assert buf.total_size() == 9
    storage = buf._storage  # layout is the contract: [num_envs, capacity, ...]
    assert storage["x"].shape == (3, 5, 2)
    assert torch.equal(storage["pos"][:, :3], torch.tensor([[0, 1, 2]] * 3))
    assert torch.equal(storage["env"][:, :3], torch.tensor([[0] * 3, [1] * 3, [2] * 3]))
    everything = buf.gather_all()
    assert everything["x"].shape == (3, 3, 2)
    assert torch.equal(everything["pos"], torch.tensor([[0, 1, 2]] * 3))


def test_add_sequence_is_add_batch_per_step():
    a, b = _buffer(3, 5), _buffer(3, 5)
    seq = _seq(0, 4, [0, 1, 2])  # time-major [T=4, B=3], as an unroll returns it
    a.add_sequence(seq)
    for t in range(4):
        b.add_batch({k: v[t] for k, v in seq.items()})
    sa, sb = a.state_dict(), b.state_dict()
    for x, y in zip(sa["storage"], sb["storage"]):
        assert torch.equal(x, y)
    assert torch.equal(sa["current_pos"], sb["current_pos"])
    assert torch.equal(sa["current_size"], sb["current_size"])
    assert torch.equal(a.gather_all()["pos"], torch.tensor([[0, 1, 2, 3]] * 3))


def test_add_sequence_longer_than_capacity_raises():
    buf = _buffer(2, 3)
    with pytest.raises(ValueError, match="cannot add 4 steps to a buffer of length 3"):
        buf.add_sequence(_seq(0, 4, [0, 1]))


def test_wrap_around_keeps_newest_and_gather_all_is_time_ordered():
    buf = _buffer(3, 5)
    _fill(buf, 7)  # positions 0..6; 0 and 1 were overwritten by 5 and 6
    assert torch.equal(buf.current_size(), torch.tensor([5, 5, 5]))
    assert torch.equal(buf._storage["pos"][0], torch.tensor([5, 6, 2, 3, 4]))
    assert torch.equal(buf.gather_all()["pos"], torch.tensor([[2, 3, 4, 5, 6]] * 3))
    # a sequence write that itself crosses the end of the ring
    buf2 = _buffer(2, 5)
    buf2.add_sequence(_seq(0, 3, [0, 1]))
    buf2.add_sequence(_seq(3, 4, [0, 1]))
    assert torch.equal(buf2._storage["pos"][1], torch.tensor([5, 6, 2, 3, 4]))
    assert torch.equal(buf2.gather_all()["pos"], torch.tensor([[2, 3, 4, 5, 6]] * 2))


def test_env_ids_subset_add():
    buf = _buffer(3, 4)
    buf.add_batch(_step(0, [2, 0]), env_ids=torch.tensor([2, 0]))
    assert torch.equal(buf.current_size(), torch.tensor([1, 0, 1]))
    assert buf._storage["env"][2, 0] == 2 and buf._storage["env"][0, 0] == 0
    assert buf._storage["pos"][1].eq(0).all() and buf._storage["env"][1].eq(0).all()  # untouched
    buf.add_sequence(_seq(0, 2, [1]), env_ids=torch.tensor([1]))
    buf.add_batch(_step(1, [0]), env_ids=torch.tensor([0]))
    assert torch.equal(buf.current_size(), torch.tensor([2, 2, 1]))
    with pytest.raises(RuntimeError, match="same number of steps"):
        buf.gather_all()
    data, info = buf.get_batch(64, 2, generator=torch.Generator().manual_seed(0))
    assert set(info.env_ids.tolist()) == {0, 1}  # env 2 holds no 2-step sequence
    _check_consistent(data, info.env_ids, info.positions, 2)


# ------------------------------------------------------------------------ clearing
def test_clear_keep_last_keeps_newest_step_and_next_add_continues():
    buf = _buffer(3, 5)
    _fill(buf, 7)
    buf.clear(keep_last=True)
    assert torch.equal(buf.current_size(), torch.tensor([1, 1, 1]))
    assert torch.equal(buf.gather_all()["pos"], torch.tensor([[6]] * 3))
    buf.add_sequence(_seq(7, 2, [0, 1, 2]))
    assert torch.equal(buf.gather_all()["pos"], torch.tensor([[6, 7, 8]] * 3))
    assert torch.equal(buf.gather_all()["env"], torch.tensor([[0] * 3, [1] * 3, [2] * 3]))


def test_clear_forgets_everything():
    buf = _buffer(2, 5)
    _fill(buf, 3)
    buf.clear()
    assert buf.total_size() == 0
    assert buf.gather_all()["pos"].shape == (2, 0)
    with pytest.raises(RuntimeError, match="not enough data for sequences of length 1"):
        buf.get_batch(4, 1)
    buf.add_batch(_step(3, [0, 1]))  # positions keep counting after a clear
    assert torch.equal(buf.gather_all()["pos"], torch.tensor([[3], [3]]))


# ------------------------------------------------------------------------ sampling
def test_get_batch_sequences_are_consecutive_within_one_env_and_behind_the_head():
    num_envs, capacity, L = 3, 6, 3
    buf = _buffer(num_envs, capacity)
    _fill(buf, 10)  # each env holds positions 4..9; the write head is at 10 (slot 4)
    gen = torch.Generator().manual_seed(0)
    seen = set()
    for _ in range(20):
        data, info = buf.get_batch(16, L, generator=gen)
        assert isinstance(info, BatchInfo)
        assert data["x"].shape == (16, L, 2) and data["pos"].shape == (16, L)
        assert info.env_ids.shape == (16,) and info.positions.shape == (16,)
        assert info.importance_weights.dtype == torch.float32
        assert torch.equal(info.importance_weights, torch.ones(16))
        assert info.replay_buffer is buf
        _check_consistent(data, info.env_ids, info.positions, L)
        # oldest stored is 4, newest is 9: a sequence never reaches past the write head
        assert bool((info.positions >= 4).all()) and bool((info.positions + L - 1 <= 9).all())
        seen.update(zip(info.env_ids.tolist(), info.positions.tolist()))
    assert seen == {(e, p) for e in range(num_envs) for p in range(4, 8)}  # every valid start


def test_get_batch_never_crosses_the_ring_boundary_into_stale_data():
    buf = _buffer(1, 4)
    _fill(buf, 6)  # slots hold [4, 5, 2, 3]; a length-4 read must start at 2
    data, info = buf.get_batch(8, 4, generator=torch.Generator().manual_seed(1))
    assert torch.equal(info.positions, torch.full((8,), 2))
    assert torch.equal(data["pos"], torch.tensor([[2, 3, 4, 5]] * 8))


def test_get_batch_too_long_raises():
    buf = _buffer(2, 5)
    _fill(buf, 2)
    with pytest.raises(RuntimeError, match=r"not enough data for sequences of length 3 \(have 4 steps\)"):
        buf.get_batch(2, 3)


# ------------------------------------------------------------------- checkpointing
def test_state_dict_round_trip_is_exact():
    buf = _buffer(3, 5)
    _fill(buf, 7)
    buf.add_batch(_step(7, [1]), env_ids=torch.tensor([1]))
    blob = io.BytesIO()
    torch.save(buf.state_dict(), blob)  # what the checkpointer does
    blob.seek(0)
    state = torch.load(blob, weights_only=True)  # tensors, strings and lists only
    fresh = _buffer(3, 5)
    fresh.load_state_dict(state)
    for x, y in zip(fresh.state_dict()["storage"], buf.state_dict()["storage"]):
        assert torch.equal(x, y)
    assert torch.equal(fresh.current_size(), buf.current_size())
    assert torch.equal(fresh._current_pos, buf._current_pos)
    a = buf.get_batch(32, 2, generator=torch.Generator().manual_seed(3))
    b = fresh.get_batch(32, 2, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a[0]["x"], b[0]["x"]) and torch.equal(a[1].positions, b[1].positions)
    # the restored buffer continues the sequence
    fresh.add_batch(_step(torch.tensor([7, 8, 7]), [0, 1, 2]))
    assert fresh.get_by_position(torch.tensor([1]), torch.tensor([6]), 3)["pos"].tolist() == [[6, 7, 8]]


def test_load_with_mismatched_shape_or_dtype_names_the_field():
    buf = _buffer(2, 4)
    _fill(buf, 2)
    state = buf.state_dict()
    other = ReplayBuffer(_spec(x_dim=3), 2, 4, name="OfflineBuffer")
    with pytest.raises(UserError, match=r"OfflineBuffer: field 'x' holds \(2,\) torch.float32 "
                                        r"items in the saved buffer but \(3,\) torch.float32"):
        other.load_state_dict(state)
    assert other.total_size() == 0 and other._storage["pos"].eq(0).all()  # nothing half-loaded
    other = ReplayBuffer(_spec(x_dtype=torch.float64), 2, 4)
    with pytest.raises(UserError, match="field 'x'.*torch.float64"):
        other.load_state_dict(state)
    with pytest.raises(UserError, match="holds 2 envs x 4 steps but this one 2 envs x 6 steps"):
        ReplayBuffer(_spec(), 2, 6).load_state_dict(state)
    with pytest.raises(UserError, match="holds 2 envs x 4 steps but this one 3 envs x 4 steps"):
        ReplayBuffer(_spec(), 3, 4).load_state_dict(state)


def _save_load(state: dict) -> Tuple[dict, int]:
    """``state`` through ``torch.save`` / ``torch.load(weights_only=True)`` (what the
    checkpointer does: no pickled objects allowed) and the saved size in bytes."""
    blob = io.BytesIO()
    torch.save(state, blob)
    size = blob.tell()
    blob.seek(0)
    return torch.load(blob, weights_only=True), size


def _assert_same_buffer(a: ReplayBuffer, b: ReplayBuffer, batch_length: int = 2) -> None:
    """Storage (every slot), counters, priorities and sampling all identical."""
    for x, y in zip(a._storage.values(), b._storage.values()):
        assert torch.equal(x, y)
    assert torch.equal(a.current_pos(), b.current_pos())
    assert torch.equal(a.current_size(), b.current_size())
    if a.prioritized:
        assert torch.equal(a._tree.state_dict()["tree"], b._tree.state_dict()["tree"])
        assert torch.equal(a._tree.max_value(), b._tree.max_value())
    da, ia = a.get_batch(64, batch_length, generator=torch.Generator().manual_seed(5), beta=0.7)
    db, ib = b.get_batch(64, batch_length, generator=torch.Generator().manual_seed(5), beta=0.7)
    assert torch.equal(ia.env_ids, ib.env_ids) and torch.equal(ia.positions, ib.positions)
    assert torch.equal(ia.importance_weights, ib.importance_weights)
    for k in da:
        assert torch.equal(da[k], db[k])


@pytest.mark.parametrize("prioritized", [False, True])
def test_checkpoint_of_a_big_buffer_holds_only_the_written_slots(prioritized):
    """600 transitions in a 1M-slot buffer: the file is ~the 600 items, not 1M slots
    (it was 33 MB: 24 MB of storage plus the 9 MB priority tree)."""
    big = ReplayBuffer(_spec(), 2, 500_000, prioritized=prioritized)
    _fill(big, 300)
    if prioritized:
        gen = torch.Generator().manual_seed(0)
        for _ in range(4):
            _, info = big.get_batch(32, 1, generator=gen)
            big.update_priority(info.env_ids, info.positions, torch.rand(32, generator=gen) * 5)
    state, nbytes = _save_load(big.state_dict())
    item = 8 + 8 + 2 * 4 + (8 if prioritized else 0)  # pos, env, x (+ priority)
    assert nbytes < 600 * item + 16_000  # the items plus a few KB of zip/pickle framing
    assert state["storage"][0].shape == (2, 300)
    fresh = ReplayBuffer(_spec(), 2, 500_000, prioritized=prioritized)
    fresh.load_state_dict(state)
    _assert_same_buffer(big, fresh)


@pytest.mark.parametrize("prioritized", [False, True])
def test_round_trip_of_uneven_wrapped_and_cleared_rings_is_exact(prioritized):
    """Env 0 wrapped twice, env 1 half full, env 2 empty, then a keep-last clear: the slots
    before the oldest stored step (read by prev_action and frame re-stacking) come back."""
    buf = _buffer(3, 8, prioritized=prioritized)
    buf.add_sequence(_seq(0, 5, [0, 1]), env_ids=torch.tensor([0, 1]))
    buf.add_sequence(_seq(5, 7, [0]), env_ids=torch.tensor([0]))
    buf.add_sequence(_seq(12, 8, [0]), env_ids=torch.tensor([0]))
    if prioritized:
        buf.update_priority(torch.tensor([0, 0, 1]), torch.tensor([13, 18, 2]),
                            torch.tensor([4.0, 0.5, 9.0]))
    for clear in (False, True):
        if clear:
            buf.clear(keep_last=True)
            buf.add_sequence(_seq(torch.tensor([20, 5]), 3, [0, 1]), env_ids=torch.tensor([0, 1]))
        state, _ = _save_load(buf.state_dict())
        assert state["storage"][0].shape == (3, 8)  # env 0 has written every slot
        fresh = _buffer(3, 8, prioritized=prioritized)
        _fill(fresh, 9)  # loading replaces whatever was there
        fresh.load_state_dict(state)
        _assert_same_buffer(buf, fresh, batch_length=2)
    # a cleared step before the stored ones is still readable, as before the save
    assert fresh.current_size().tolist() == [4, 4, 0]
    assert fresh.get_by_position(torch.tensor([1]), torch.tensor([3]), 5)["pos"].tolist() == [
        [3, 4, 5, 6, 7]]
    for b in (buf, fresh):  # and both go on identically
        b.add_batch(_step(torch.tensor([23, 8, 0]), [0, 1, 2]))
    _assert_same_buffer(buf, fresh)


def test_partly_written_prioritized_round_trip_rebuilds_the_tree_bit_for_bit():
    buf = _buffer(2, 1000, prioritized=True, priority_alpha=0.6)
    buf.add_sequence(_seq(0, 700, [0, 1]))
    gen = torch.Generator().manual_seed(4)
    for _ in range(20):
        _, info = buf.get_batch(64, 3, generator=gen)
        buf.update_priority(info.env_ids, info.positions, torch.rand(64, generator=gen) * 3)
    state, _ = _save_load(buf.state_dict())
    assert state["priority_tree"]["leaves"].shape == (2, 700)
    fresh = _buffer(2, 1000, prioritized=True, priority_alpha=0.6)
    fresh.load_state_dict(state)
    _assert_same_buffer(buf, fresh, batch_length=3)


@pytest.mark.parametrize("prioritized", [False, True])
def test_old_full_capacity_states_still_load(prioritized):
    buf = _buffer(2, 6, prioritized=prioritized)
    buf.add_sequence(_seq(0, 5, [0, 1]))
    buf.add_sequence(_seq(5, 4, [0, 1]))
    if prioritized:
        buf.update_priority(torch.tensor([0, 1]), torch.tensor([4, 7]), torch.tensor([3.0, 0.2]))
    paths_and_leaves = nest.flatten_with_paths(buf._storage)
    old = {"storage": [leaf for _, leaf in paths_and_leaves],
           "fields": [path for path, _ in paths_and_leaves],
           "current_pos": buf.current_pos(), "current_size": buf.current_size()}
    if prioritized:
        old["priority_tree"] = {k: v.clone() for k, v in buf._tree.state_dict().items()}
    state, _ = _save_load(old)
    fresh = _buffer(2, 6, prioritized=prioritized)
    fresh.load_state_dict(state)
    _assert_same_buffer(buf, fresh)


def test_damaged_counters_or_priorities_are_user_errors():
    buf = _buffer(2, 8, prioritized=True)
    _fill(buf, 3)
    state = buf.state_dict()
    with pytest.raises(UserError, match=r"current_pos.*do not match the 3 saved slots"):
        ReplayBuffer(_spec(), 2, 8).load_state_dict({**state, "current_pos": torch.tensor([3, 5])})
    with pytest.raises(UserError, match=r"saved current_size is \(3,\) torch.int64, expected \(2,\)"):
        ReplayBuffer(_spec(), 2, 8).load_state_dict({**state,
                                                      "current_size": torch.tensor([1, 1, 1])})
    tree = {**state["priority_tree"], "leaves": torch.ones(2, 2, dtype=torch.float64)}
    other = _buffer(2, 8, prioritized=True)
    with pytest.raises(UserError, match=r"priority tree has \(2, 2\) priorities, expected \(2, 3\)"):
        other.load_state_dict({**state, "priority_tree": tree})
    assert other.total_size() == 0 and other._tree.total().item() == 0  # nothing half-loaded


def test_load_with_different_fields_names_them():
    state = _buffer(2, 4).state_dict()
    renamed = {"pos": TensorSpec((), torch.int64), "env": TensorSpec((), torch.int64),
               "y": TensorSpec((2,), torch.float32)}  # same shapes, different name
    with pytest.raises(UserError, match="missing field.*'y'.*unexpected field.*'x'"):
        ReplayBuffer(renamed, 2, 4).load_state_dict(state)
    fewer = {"pos": TensorSpec((), torch.int64), "x": TensorSpec((2,), torch.float32)}
    with pytest.raises(UserError, match="unexpected field.*'env'"):
        ReplayBuffer(fewer, 2, 4).load_state_dict(state)
    # a state without field names (older format) is still checked by count
    legacy = {k: v for k, v in state.items() if k != "fields"}
    with pytest.raises(UserError, match="saved buffer has 3 fields, expected 2"):
        ReplayBuffer(fewer, 2, 4).load_state_dict(legacy)


# -------------------------------------------------------------------------- sizing
def test_capacity_that_does_not_fit_in_memory_raises(monkeypatch):
    monkeypatch.setattr(rb_module, "_available_memory_bytes", lambda: 10 * 1024)
    with pytest.raises(UserError) as err:
        ReplayBuffer(_spec(), 4, 1000, name="ReplayBuffer")  # 24 B x 4 x 1000 = 93.8 KiB
    msg = str(err.value)
    assert "4 envs x 1000 steps needs 93.8 KiB" in msg
    assert "only 10.0 KiB of memory is available" in msg
    assert "replay_buffer_length" in msg
    ReplayBuffer(_spec(), 4, 100)  # 9.4 KiB fits
