"""Prioritized ReplayBuffer: priorities of new/updated/overwritten/cleared items, sampling
frequencies over valid starts only, importance weights, checkpoints, gin flag, memory report.

As in test_replay_buffer.py, every item carries its own absolute position and env row as
data, so each sampled sequence can be checked against the indices the buffer reports.
"""
import io
import logging

import gin
import pytest
import torch

from alf.errors import UserError
from alf.replay_buffers import ReplayBuffer
from alf.replay_buffers.sum_tree import SumTree
from alf.tensor_specs import TensorSpec


def _spec():
    return {"pos": TensorSpec((), torch.int64), "env": TensorSpec((), torch.int64),
            "x": TensorSpec((2,), torch.float32)}


def _step(pos, env_ids):
    env_ids = torch.as_tensor(env_ids, dtype=torch.int64)
    pos = torch.as_tensor(pos, dtype=torch.int64).expand_as(env_ids).clone()
    return {"pos": pos, "env": env_ids.clone(),
            "x": torch.stack([pos.float(), 10.0 * env_ids.float()], -1)}


def _add(buf: ReplayBuffer, env: int, n: int):
    """Append ``n`` steps to env ``env`` (one add_batch each)."""
    for _ in range(n):
        p = int(buf.current_pos()[env])
        buf.add_batch(_step(p, [env]), env_ids=torch.tensor([env]))


def _pbuf(num_envs=1, capacity=4, **kwargs) -> ReplayBuffer:
    return ReplayBuffer(_spec(), num_envs, capacity, prioritized=True, **kwargs)


def _tree_values(alpha, eps, p):
    return (torch.as_tensor(p, dtype=torch.float64).abs() + eps) ** alpha


# ------------------------------------------------------------------- priorities
def test_new_items_get_max_priority_and_update_priority_stores_p_plus_eps_pow_alpha():
    buf = _pbuf(1, 4, priority_alpha=0.5, priority_eps=0.01)
    _add(buf, 0, 3)
    e, pos = torch.zeros(3, dtype=torch.int64), torch.arange(3)
    assert buf.get_priority(e, pos).tolist() == [1.0, 1.0, 1.0]
    buf.update_priority(e[:2], pos[:2], torch.tensor([-3.99, 0.0]))  # |p| is used
    expected = _tree_values(0.5, 0.01, [3.99, 0.0])
    assert torch.allclose(buf.get_priority(e[:2], pos[:2]), expected, rtol=1e-12)
    assert buf._tree.max_value().item() == pytest.approx(2.0)
    _add(buf, 0, 1)  # a new item gets the largest priority so far (already ^alpha)
    assert buf.get_priority(e[:1], torch.tensor([3])).item() == pytest.approx(2.0)
    assert buf._tree.total().item() == pytest.approx(2.0 + 0.1 + 1.0 + 2.0)


def test_update_priority_ignores_overwritten_cleared_and_future_positions():
    buf = _pbuf(1, 4, priority_alpha=1.0, priority_eps=1e-6)
    _add(buf, 0, 6)  # positions 2..5 stored; 0 and 1 were overwritten by 4 and 5
    e1 = torch.tensor([0])
    buf.update_priority(e1, torch.tensor([1]), torch.tensor([7.0]))  # slot 1 now holds pos 5
    buf.update_priority(e1, torch.tensor([6]), torch.tensor([7.0]))  # not written yet
    assert buf.get_priority(e1, torch.tensor([5])).item() == 1.0
    assert buf._tree.get(torch.arange(4)).tolist() == [1.0] * 4
    assert buf._tree.max_value().item() == 1.0  # ignored rows do not raise the max either
    # a stale and a live position of the same slot in one call: the live one wins
    # whatever the order (last-write-wins applies among live rows only)
    for positions, prios in (([1, 5], [9.0, 3.0]), ([5, 1], [3.0, 9.0])):
        buf.update_priority(e1, torch.tensor([5]), torch.tensor([1.0]))
        buf.update_priority(torch.zeros(2, dtype=torch.int64), torch.tensor(positions),
                            torch.tensor(prios))
        assert buf.get_priority(e1, torch.tensor([5])).item() == pytest.approx(3.0 + 1e-6)
    # duplicates of a live position: the last one wins
    buf.update_priority(torch.zeros(3, dtype=torch.int64), torch.tensor([2, 2, 2]),
                        torch.tensor([5.0, 6.0, 0.5]))
    assert buf.get_priority(e1, torch.tensor([2])).item() == pytest.approx(0.5 + 1e-6)
    buf.clear()
    buf.update_priority(e1, torch.tensor([4]), torch.tensor([7.0]))  # cleared: ignored
    assert buf._tree.total().item() == 0.0


def test_clear_zeroes_the_tree_and_keep_last_keeps_the_newest_priority():
    buf = _pbuf(2, 4, priority_alpha=1.0)
    _add(buf, 0, 5)
    _add(buf, 1, 2)
    buf.update_priority(torch.tensor([0, 1]), torch.tensor([4, 1]), torch.tensor([3.0, 5.0]))
    buf.clear(keep_last=True)
    kept = buf.get_priority(torch.tensor([0, 1]), torch.tensor([4, 1]))
    assert torch.allclose(kept, torch.tensor([3.0, 5.0], dtype=torch.float64))
    assert buf._tree.total().item() == pytest.approx(8.0 + 2e-6)
    buf.clear()
    assert buf._tree.total().item() == 0.0
    _add(buf, 1, 1)  # the max ever set survives clear
    assert buf._tree.total().item() == pytest.approx(5.0 + 1e-6)


# ------------------------------------------------------------------------ sampling
def test_no_invalid_sequence_and_frequencies_match_priorities_over_valid_starts():
    L, capacity = 3, 8
    buf = _pbuf(3, capacity, priority_alpha=0.7)
    _add(buf, 0, 11)  # wraps: positions 3..10 stored, valid starts 3..8
    _add(buf, 1, 5)   # positions 0..4, valid starts 0..2
    _add(buf, 2, 2)   # too short for L = 3: no valid start
    gen = torch.Generator().manual_seed(0)
    stored = [(0, p) for p in range(3, 11)] + [(1, p) for p in range(5)] + [(2, 0), (2, 1)]
    envs = torch.tensor([e for e, _ in stored])
    poss = torch.tensor([p for _, p in stored])
    prios = torch.rand(len(stored), generator=gen) * 5
    prios[poss >= buf.current_pos()[envs] - (L - 1)] = 100.0  # huge on the invalid starts
    buf.update_priority(envs, poss, prios)
    tree_before = buf._tree.state_dict()["tree"].clone()
    valid = {(0, p) for p in range(3, 9)} | {(1, p) for p in range(3)}
    counts = {k: 0 for k in valid}
    n_batches, B = 50, 2000
    for _ in range(n_batches):
        data, info = buf.get_batch(B, L, generator=gen)
        expected_pos = info.positions[:, None] + torch.arange(L)[None, :]
        assert torch.equal(data["pos"], expected_pos)
        assert torch.equal(data["env"], info.env_ids[:, None].expand(-1, L))
        for key in zip(info.env_ids.tolist(), info.positions.tolist()):
            counts[key] += 1  # KeyError on any invalid start
    assert torch.equal(buf._tree.state_dict()["tree"], tree_before)  # sampling left no trace
    keys = sorted(valid)
    w = torch.stack([_tree_values(0.7, 1e-6, prios[stored.index(k)]) for k in keys])
    expected = n_batches * B * w / w.sum()
    observed = torch.tensor([counts[k] for k in keys], dtype=torch.float64)
    chi2 = (((observed - expected) ** 2) / expected).sum().item()
    assert chi2 < 21.96  # 8 degrees of freedom: p = 0.005


def test_importance_weights_hand_computed():
    buf = _pbuf(1, 3, priority_alpha=1.0, priority_eps=1e-9)
    _add(buf, 0, 3)
    e = torch.zeros(3, dtype=torch.int64)
    buf.update_priority(e, torch.arange(3), torch.tensor([1.0, 1.0, 2.0]))
    # P = (1/4, 1/4, 1/2), N = 3: w = (3/4)^-beta, (3/2)^-beta; beta = 1 -> 4/3, 2/3
    data, info = buf.get_batch(4000, 1, generator=torch.Generator().manual_seed(1), beta=1.0)
    assert info.importance_weights.dtype == torch.float32
    w = dict(zip(info.positions.tolist(), info.importance_weights.tolist()))
    assert set(w) == {0, 1, 2}
    assert w[0] == pytest.approx(1.0) and w[1] == pytest.approx(1.0)
    assert w[2] == pytest.approx(0.5, abs=1e-6)
    _, info = buf.get_batch(4000, 1, generator=torch.Generator().manual_seed(1), beta=0.5)
    w = dict(zip(info.positions.tolist(), info.importance_weights.tolist()))
    assert w[2] == pytest.approx(0.5 ** 0.5, abs=1e-6)
    _, info = buf.get_batch(64, 1, beta=0.0)
    assert torch.equal(info.importance_weights, torch.ones(64))
    # N counts valid starts only: with L = 2 only positions 0, 1 can start (P = 1/2 each)
    _, info = buf.get_batch(64, 2, beta=1.0)
    assert set(info.positions.tolist()) <= {0, 1}
    assert torch.equal(info.importance_weights, torch.ones(64))


def test_equal_priorities_sample_like_uniform():
    buf = _pbuf(2, 5)
    _add(buf, 0, 7)
    _add(buf, 1, 3)
    _, info = buf.get_batch(30_000, 2, generator=torch.Generator().manual_seed(2), beta=0.4)
    assert torch.equal(info.importance_weights, torch.ones(30_000))
    keys = list(zip(info.env_ids.tolist(), info.positions.tolist()))
    valid = [(0, p) for p in range(2, 6)] + [(1, 0), (1, 1)]
    assert set(keys) == set(valid)
    for k in valid:
        assert keys.count(k) == pytest.approx(5000, rel=0.06)


def test_uniform_buffer_has_no_priorities():
    buf = ReplayBuffer(_spec(), 1, 4)
    _add(buf, 0, 3)
    assert not buf.prioritized and buf.nbytes == buf.storage_nbytes
    _, info = buf.get_batch(8, 1, beta=1.0)
    assert torch.equal(info.importance_weights, torch.ones(8))
    with pytest.raises(RuntimeError, match="prioritized=True"):
        buf.update_priority(torch.zeros(1, dtype=torch.int64), torch.zeros(1, dtype=torch.int64),
                            torch.ones(1))
    with pytest.raises(ValueError, match="priority_eps"):
        _pbuf(priority_eps=0.0)


# ------------------------------------------------------------------- checkpointing
def test_checkpoint_round_trip_of_a_filled_prioritized_buffer_is_exact():
    buf = _pbuf(2, 6, priority_alpha=0.6)
    _add(buf, 0, 9)
    _add(buf, 1, 4)
    gen = torch.Generator().manual_seed(4)
    for _ in range(5):
        _, info = buf.get_batch(8, 2, generator=gen)
        buf.update_priority(info.env_ids, info.positions, torch.rand(8, generator=gen) * 3)
    blob = io.BytesIO()
    torch.save(buf.state_dict(), blob)
    blob.seek(0)
    fresh = _pbuf(2, 6, priority_alpha=0.6)
    fresh.load_state_dict(torch.load(blob, weights_only=True))
    assert torch.equal(fresh._tree.state_dict()["tree"], buf._tree.state_dict()["tree"])
    assert torch.equal(fresh._tree.max_value(), buf._tree.max_value())
    for _ in range(3):
        a_data, a = buf.get_batch(64, 3, generator=torch.Generator().manual_seed(5), beta=0.7)
        b_data, b = fresh.get_batch(64, 3, generator=torch.Generator().manual_seed(5), beta=0.7)
        assert torch.equal(a.env_ids, b.env_ids) and torch.equal(a.positions, b.positions)
        assert torch.equal(a.importance_weights, b.importance_weights)
        assert torch.equal(a_data["x"], b_data["x"])
        for x in (buf, fresh):  # and they keep evolving identically
            x.update_priority(a.env_ids, a.positions, a.importance_weights * 2)
            _add(x, 1, 1)
    assert torch.equal(fresh._tree.state_dict()["tree"], buf._tree.state_dict()["tree"])


def test_priorities_across_uniform_and_prioritized_states():
    uniform = ReplayBuffer(_spec(), 2, 4)
    _add(uniform, 0, 6)
    _add(uniform, 1, 2)
    prio = _pbuf(2, 4)
    prio.load_state_dict(uniform.state_dict())  # no saved priorities: stored items get 1
    assert prio._tree.total().item() == 6.0
    assert prio.get_priority(torch.tensor([0, 0, 1]), torch.tensor([2, 5, 1])).tolist() == [1.0] * 3
    ReplayBuffer(_spec(), 2, 4).load_state_dict(prio.state_dict())  # priorities ignored
    other = ReplayBuffer({"pos": TensorSpec((), torch.int64)}, 2, 4, prioritized=True)
    with pytest.raises(UserError, match="unexpected field"):
        other.load_state_dict(prio.state_dict())
    assert other._tree.total().item() == 0.0


def test_enable_checkpoint_is_gin_configurable():
    assert ReplayBuffer(_spec(), 1, 2).enable_checkpoint is False
    gin.clear_config()
    try:
        gin.parse_config("ReplayBuffer.enable_checkpoint = True\nReplayBuffer.prioritized = True")
        buf = ReplayBuffer(_spec(), 1, 2)
        assert buf.enable_checkpoint is True and buf.prioritized
    finally:
        gin.clear_config()
    assert ReplayBuffer(_spec(), 1, 2).enable_checkpoint is False


# -------------------------------------------------------------------------- memory
def test_nbytes_includes_the_tree_and_creation_logs_the_footprint(caplog):
    with caplog.at_level(logging.INFO):
        buf = _pbuf(3, 5, name="MyBuffer")
    assert buf.storage_nbytes == (8 + 8 + 2 * 4) * 3 * 5
    assert buf.nbytes == buf.storage_nbytes + SumTree.nbytes_for(15)
    lines = [r.getMessage() for r in caplog.records if "MyBuffer" in r.getMessage()]
    assert len(lines) == 1
    assert "3 envs x 5 steps" in lines[0] and "priority tree" in lines[0]
    assert "360.0 B storage" in lines[0]
