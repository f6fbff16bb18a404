"""make_transitions: hand-computed n-step returns, discounts and bootstrap states."""
import math

import pytest
import torch

from alf.data_structures import BatchInfo, Experience, StepType, TimeStep
from alf.replay_buffers.n_step import Transition, make_transitions

F, M, LAST = StepType.FIRST, StepType.MID, StepType.LAST
G = 0.9

# One row per case, L = 4 steps. reward[k] is received on arriving at step k.
ROWS = {
    #                 step types          rewards                discounts
    "mid":          ([M, M, M, M],       [9.0, 1.0, 2.0, 3.0],  [1, 1, 1, 1]),
    "terminate@2":  ([M, M, LAST, F],    [9.0, 1.0, 2.0, 5.0],  [1, 1, 0, 1]),
    "truncate@1":   ([M, LAST, F, M],    [9.0, 4.0, 0.0, 7.0],  [1, 1, 1, 1]),
    "last@0":       ([LAST, F, M, M],    [9.0, 0.0, 1.0, 1.0],  [0, 1, 1, 1]),
    "first@0":      ([F, M, M, LAST],    [0.0, 1.0, 1.0, 1.0],  [1, 1, 1, 0]),
    "truncate@3":   ([M, M, M, LAST],    [9.0, 1.0, 1.0, 1.0],  [1, 1, 1, 1]),
}
NAMES = list(ROWS)


def _experience(batch_info=()) -> Experience:
    st = torch.tensor([r[0] for r in ROWS.values()], dtype=torch.int32)
    B, L = st.shape
    obs = (10 * torch.arange(B)[:, None] + torch.arange(L)[None, :]).float()[..., None]  # [B,L,1]
    ts = TimeStep(step_type=st, reward=torch.tensor([r[1] for r in ROWS.values()]),
                  discount=torch.tensor([r[2] for r in ROWS.values()], dtype=torch.float32),
                  observation={"o": obs}, prev_action=torch.zeros(B, L, 2),
                  env_id=torch.arange(B)[:, None].expand(B, L), env_info={})
    action = torch.arange(B * L * 2, dtype=torch.float32).reshape(B, L, 2)
    return Experience(time_step=ts, action=action,
                      rollout_info={"logp": -torch.arange(B * L, dtype=torch.float32).reshape(B, L)},
                      state=(torch.ones(B, L, 3) * torch.arange(L)[None, :, None],),
                      batch_info=batch_info)


def _row(t: Transition, name: str):
    i = NAMES.index(name)
    return (t.reward[i].item(), t.discount[i].item(), t.next_observation["o"][i, 0].item() - 10 * i,
            t.valid[i].item())


def test_three_step_hand_computed():
    t = make_transitions(_experience(), n_step=3, gamma=G)
    # (reward, discount, index m of the bootstrap step, valid)
    assert _row(t, "mid") == pytest.approx((1 + G * 2 + G * G * 3, G ** 3, 3, 1))
    assert _row(t, "terminate@2") == pytest.approx((1 + G * 2, 0.0, 2, 1))  # 5.0 is next episode's
    assert _row(t, "truncate@1") == pytest.approx((4.0, G, 1, 1))  # bootstrap from final obs
    assert _row(t, "first@0") == pytest.approx((1 + G + G * G, 0.0, 3, 1))
    assert _row(t, "truncate@3") == pytest.approx((1 + G + G * G, G ** 3, 3, 1))
    r, d, _, valid = _row(t, "last@0")
    assert valid == 0.0 and math.isfinite(r) and math.isfinite(d)  # masked out by valid
    assert t.valid.dtype == torch.float32 and t.reward.shape == (6,) and t.discount.shape == (6,)


def test_one_step_and_undiscounted():
    exp = _experience()
    t = make_transitions(exp, n_step=1, gamma=G)
    assert t.reward.tolist() == pytest.approx([1.0, 1.0, 4.0, 0.0, 1.0, 1.0])
    assert t.discount.tolist() == pytest.approx([G, G, G, G, G, G])
    assert t.next_observation["o"][:, 0].tolist() == [10 * i + 1 for i in range(6)]
    # only the first n + 1 steps matter
    short = make_transitions(_slice(exp, 2), n_step=1, gamma=G)
    assert torch.equal(short.reward, t.reward) and torch.equal(short.discount, t.discount)
    t = make_transitions(exp, n_step=3, gamma=1.0)
    assert t.reward.tolist()[:3] == pytest.approx([6.0, 3.0, 4.0])
    assert t.discount.tolist()[:3] == pytest.approx([1.0, 0.0, 1.0])


def test_two_step():
    t = make_transitions(_experience(), n_step=2, gamma=G)
    assert _row(t, "mid") == pytest.approx((1 + G * 2, G ** 2, 2, 1))
    assert _row(t, "terminate@2") == pytest.approx((1 + G * 2, 0.0, 2, 1))
    assert _row(t, "truncate@1") == pytest.approx((4.0, G, 1, 1))


def _slice(exp: Experience, L: int) -> Experience:
    from alf import nest
    return nest.map_structure(lambda x: x[:, :L], exp)


def test_fields_at_step_zero_and_step_m_and_weights():
    exp = _experience()
    t = make_transitions(exp, n_step=3, gamma=G)
    B = 6
    assert torch.equal(t.observation["o"], exp.time_step.observation["o"][:, 0])
    assert torch.equal(t.action, exp.action[:, 0])
    assert torch.equal(t.rollout_info["logp"], exp.rollout_info["logp"][:, 0])
    assert torch.equal(t.state[0], torch.zeros(B, 3))
    assert torch.equal(t.time_step.step_type, exp.time_step.step_type[:, 0])
    m = torch.tensor([3, 2, 1, 3, 3, 3])
    assert torch.equal(t.next_time_step.step_type, exp.time_step.step_type[torch.arange(B), m])
    assert torch.equal(t.next_time_step.env_id, torch.arange(B))
    assert torch.equal(t.importance_weights, torch.ones(B)) and t.batch_info == ()
    info = BatchInfo(env_ids=torch.arange(B), positions=torch.arange(B),
                     importance_weights=torch.linspace(0.1, 1.0, B))
    t = make_transitions(_experience(info), n_step=3, gamma=G)
    assert torch.equal(t.importance_weights, info.importance_weights) and t.batch_info is info


def test_multi_dim_reward_and_too_short_sequences():
    exp = _experience()
    ts = exp.time_step
    exp = exp._replace(time_step=ts._replace(reward=torch.stack([ts.reward, 2 * ts.reward], -1)))
    t = make_transitions(exp, n_step=3, gamma=G)
    assert t.reward.shape == (6, 2)
    assert t.reward[:, 1].tolist() == pytest.approx((2 * t.reward[:, 0]).tolist())
    assert t.reward[1].tolist() == pytest.approx([1 + G * 2, 2 * (1 + G * 2)])
    with pytest.raises(ValueError, match="at least 4 steps, got 3"):
        make_transitions(_slice(_experience(), 3), n_step=3, gamma=G)
    with pytest.raises(ValueError, match="n_step must be >= 1"):
        make_transitions(_experience(), n_step=0, gamma=G)


def test_one_step_fast_path_is_exact_and_agrees_with_the_general_path():
    exp = _experience(BatchInfo(env_ids=torch.arange(6), positions=torch.arange(6),
                                importance_weights=torch.linspace(0.5, 1.0, 6)))
    t1 = make_transitions(exp, n_step=1, gamma=G)
    ts = exp.time_step
    # bit-exact: the reward at step 1 and float32(gamma) * discount at step 1
    assert torch.equal(t1.reward, ts.reward[:, 1])
    assert torch.equal(t1.discount, torch.tensor(G, dtype=torch.float32) * ts.discount[:, 1])
    assert torch.equal(t1.next_observation["o"], ts.observation["o"][:, 1])
    assert torch.equal(t1.next_time_step.step_type, ts.step_type[:, 1])
    assert torch.equal(t1.valid, torch.tensor([1.0, 1, 1, 0, 1, 1]))
    assert torch.equal(t1.importance_weights, exp.batch_info.importance_weights)
    assert torch.equal(t1.rollout_info["logp"], exp.rollout_info["logp"][:, 0])
    assert torch.equal(t1.state[0], exp.state[0][:, 0]) and t1.batch_info is exp.batch_info
    # rows whose episode ends at step 1 use m = 1 in the n-step path too: same transition
    t2 = make_transitions(exp, n_step=2, gamma=G)
    i = NAMES.index("truncate@1")
    assert t1.reward[i] == t2.reward[i] and t1.discount[i] == t2.discount[i]
    assert torch.equal(t1.next_observation["o"][i], t2.next_observation["o"][i])
    # float64 discounts stay float64
    exp64 = exp._replace(time_step=ts._replace(discount=ts.discount.double()))
    d64 = make_transitions(exp64, n_step=1, gamma=G).discount
    assert d64.dtype == torch.float64 and torch.equal(d64, G * ts.discount[:, 1].double())


@pytest.mark.parametrize("n_step", [1, 2, 3])
def test_a_seam_without_last_is_not_a_transition(n_step):
    """An async env worker restarted with fresh envs leaves ``MID`` followed by ``FIRST``
    in its replay rows (no ``LAST`` between them): no transition may cross it. Envs never
    produce such a seam, so every other row is unchanged (the hand-computed tests)."""
    st = torch.tensor([[M, F, M, M],     # seam right after step 0
                       [M, M, F, M],     # seam at step 2: inside a 2- or 3-step window
                       [M, M, M, M]], dtype=torch.int32)
    B, L = st.shape
    ts = TimeStep(step_type=st, reward=torch.ones(B, L), discount=torch.ones(B, L),
                  observation=torch.zeros(B, L, 1), prev_action=torch.zeros(B, L),
                  env_id=torch.arange(B)[:, None].expand(B, L), env_info={})
    exp = Experience(time_step=ts, action=torch.zeros(B, L), rollout_info=(), state=())
    valid = make_transitions(exp, n_step=n_step, gamma=G).valid.tolist()
    assert valid == [0.0, 0.0 if n_step >= 2 else 1.0, 1.0]
