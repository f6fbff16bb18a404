"""ReplayBuffer: ring layout, wrap-around, keep-last clearing, sampling, checkpoints, sizing.

Every stored item carries its own absolute position (``pos``) and env row
(``env``) as data, so the content of any read can be checked against the
indices the buffer claims it came from.
"""
import io

import pytest
import torch

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
    with pytest.raises(UserError, match=r"OfflineBuffer: field 'x' is \(2, 4, 2\) torch.float32"):
        other.load_state_dict(state)
    assert other.total_size() == 0 and other._storage["pos"].eq(0).all()  # nothing half-loaded
    other = ReplayBuffer(_spec(x_dtype=torch.float64), 2, 4)
    with pytest.raises(UserError, match="field 'x'.*torch.float64"):
        other.load_state_dict(state)
    with pytest.raises(UserError, match="holds 2 envs x 4 steps but this one 2 envs x 6 steps"):
        ReplayBuffer(_spec(), 2, 6).load_state_dict(state)
    with pytest.raises(UserError, match="holds 2 envs x 4 steps but this one 3 envs x 4 steps"):
        ReplayBuffer(_spec(), 3, 4).load_state_dict(state)


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
