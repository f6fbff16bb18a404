"""DQN on a handcrafted batch: losses, gradients, priorities, epsilon, action offsets,
target-network period, spec errors."""
import gymnasium as gym
import pytest
import torch
from torch import nn

from alf.algorithms.dqn_algorithm import DqnAlgorithm
from alf.data_structures import BatchInfo, Experience, StepType, TimeStep
from alf.environments.spec_utils import action_spec_from_space
from alf.errors import ConfigError, IncompatibleSpecError
from alf.tensor_specs import BoundedTensorSpec, TensorSpec
from alf.utils.optimizers import SGD
from alf.utils.run_context import RunContext
from alf.utils.schedules import LinearSchedule

F, M, L = StepType.FIRST, StepType.MID, StepType.LAST
OBS = TensorSpec((2,))
GAMMA = 0.9

# Online and target Q(s) = W s + b (3 actions), chosen so that the online argmax at s'
# differs from the target argmax (double Q != max).
W_ONLINE = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
B_ONLINE = [0.0, 0.5, -0.5]
W_TARGET = [[2.0, 0.0], [0.0, -1.0], [0.5, 0.5]]
B_TARGET = [0.0, 0.0, 1.0]


class LinearQ(nn.Module):
    """A deterministic stand-in for QNetwork: ``obs [B, 2] -> (q [B, 3], ())``."""

    def __init__(self, input_spec, action_spec):
        super().__init__()
        self.lin = nn.Linear(2, action_spec.num_actions)

    def forward(self, obs, state=()):
        return self.lin(obs), state


def _set(lin, w, b):
    with torch.no_grad():
        lin.weight.copy_(torch.tensor(w))
        lin.bias.copy_(torch.tensor(b))


def _dqn(start=0, double_q=True, loss="huber", lr=0.1, period=1000, **kwargs):
    spec = BoundedTensorSpec((), torch.int64, start, start + 2)
    alg = DqnAlgorithm(OBS, spec, q_network_ctor=LinearQ, double_q=double_q, loss=loss,
                       gamma=GAMMA, optimizer=SGD(lr=lr), target_update_period=period,
                       context=RunContext(num_env_steps=1000), **kwargs)
    _set(alg._q_network.lin, W_ONLINE, B_ONLINE)
    _set(alg._target_q_network.lin, W_TARGET, B_TARGET)
    return alg


# Three [B=3, L=2] sequences:
#   row 0: s=[1,2], a=2, MID -> MID, r=1, not terminal, s'=[0.5,2]
#   row 1: s=[-1,.5], a=0, MID -> LAST terminated (discount 0), r=2, s'=[3,3]
#   row 2: s=[0,1], a=1, LAST -> FIRST: the action was never executed (invalid row)
def _experience(start=0, weights=(0.5, 1.0, 1.0)):
    obs = torch.tensor([[[1.0, 2.0], [0.5, 2.0]],
                        [[-1.0, 0.5], [3.0, 3.0]],
                        [[0.0, 1.0], [1.0, 0.0]]])
    ts = TimeStep(step_type=torch.tensor([[M, M], [M, L], [L, F]], dtype=torch.int32),
                  reward=torch.tensor([[0.0, 1.0], [0.0, 2.0], [0.0, 5.0]]),
                  discount=torch.tensor([[1.0, 1.0], [1.0, 0.0], [1.0, 1.0]]),
                  observation=obs, prev_action=torch.zeros(3, 2, dtype=torch.int64) + start,
                  env_id=torch.zeros(3, 2, dtype=torch.int64), env_info={})
    action = torch.tensor([[2, 0], [0, 0], [1, 0]]) + start
    return Experience(time_step=ts, action=action, rollout_info=(), state=(),
                      batch_info=BatchInfo(env_ids=torch.zeros(3, dtype=torch.int64),
                                           positions=torch.arange(3),
                                           importance_weights=torch.tensor(weights)))


def _q(w, b, s):
    return [sum(wi * si for wi, si in zip(row, s)) + bi for row, bi in zip(w, b)]


def _huber(x):
    return 0.5 * x * x if abs(x) < 1 else abs(x) - 0.5


def _expected_td(double_q):
    rows = [([1.0, 2.0], 2, 1.0, 0.9, [0.5, 2.0]),
            ([-1.0, 0.5], 0, 2.0, 0.0, [3.0, 3.0]),
            ([0.0, 1.0], 1, 5.0, 0.9, [1.0, 0.0])]
    out = []
    for s, a, r, d, s2 in rows:
        q = _q(W_ONLINE, B_ONLINE, s)[a]
        qt = _q(W_TARGET, B_TARGET, s2)
        if double_q:
            qo = _q(W_ONLINE, B_ONLINE, s2)
            a2 = max(range(3), key=lambda i: qo[i])
            nq = qt[a2]
        else:
            nq = max(qt)
        out.append(q - (r + d * nq))
    return out


def test_hand_numbers_are_what_the_test_claims():
    # the batch distinguishes double Q from max: row 0 differs, rows 1 (terminal) and 2 agree
    assert _expected_td(True) == pytest.approx([3.3, -3.0, -5.3])
    assert _expected_td(False) == pytest.approx([-0.525, -3.0, -5.3])


@pytest.mark.parametrize("double_q", [True, False])
@pytest.mark.parametrize("start", [0, -1, 5])
def test_loss_and_priority_by_hand(double_q, start):
    alg = _dqn(start=start, double_q=double_q)
    transition = alg.make_transitions(_experience(start))
    assert transition.valid.tolist() == [1.0, 1.0, 0.0]
    info = alg.train_step(transition).info
    loss_info = alg.calc_loss(info)
    td = _expected_td(double_q)
    assert info.td_error.tolist() == pytest.approx(td, abs=1e-6)
    assert loss_info.loss.tolist() == pytest.approx([_huber(x) for x in td], abs=1e-6)
    assert loss_info.priority.tolist() == pytest.approx([abs(x) for x in td], abs=1e-6)
    assert not loss_info.priority.requires_grad


def test_mse_loss_and_bad_loss_name():
    alg = _dqn(loss="mse")
    loss = alg.calc_loss(alg.train_step(alg.make_transitions(_experience())).info).loss
    assert loss.tolist() == pytest.approx([x * x for x in _expected_td(True)], abs=1e-5)
    with pytest.raises(ConfigError, match="loss"):
        _dqn(loss="l1")


def test_gradient_step_by_hand_with_weights_and_invalid_rows():
    alg = _dqn(lr=0.1)
    loss_info, _ = alg.train_on_batch(_experience(weights=(0.5, 1.0, 1.0)))
    # mean over the 2 valid rows of importance-weighted Huber: (0.5 * 2.8 + 1.0 * 2.5) / 2
    assert loss_info.loss.item() == pytest.approx(1.95, abs=1e-6)
    # dL/dq = w * clip(td, -1, 1) / n_valid: row 0 -> +0.25 on action 2, row 1 -> -0.5 on
    # action 0; the invalid row and the (no-grad) target contribute nothing.
    grad_w = [[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]
    grad_b = [0.0, 0.0, 0.0]
    for coef, s, a in ((0.25, [1.0, 2.0], 2), (-0.5, [-1.0, 0.5], 0)):
        grad_w[a] = [g + coef * x for g, x in zip(grad_w[a], s)]
        grad_b[a] += coef
    lin = alg._q_network.lin
    expected_w = [[w - 0.1 * g for w, g in zip(wr, gr)] for wr, gr in zip(W_ONLINE, grad_w)]
    expected_b = [b - 0.1 * g for b, g in zip(B_ONLINE, grad_b)]
    assert lin.weight.tolist() == [pytest.approx(r, abs=1e-6) for r in expected_w]
    assert lin.bias.tolist() == pytest.approx(expected_b, abs=1e-6)
    # the target network did not move (period 1000)
    assert alg._target_q_network.lin.weight.tolist() == W_TARGET
    assert alg.context.num_updates == 1


def test_target_hard_copied_only_every_period_updates():
    period = 3
    alg = _dqn(period=period, lr=0.05)
    assert alg._target_update_tau == 1.0
    exp = _experience()
    copy_at = None
    for update in range(1, 8):
        before = alg._target_q_network.lin.weight.detach().clone()
        alg.train_on_batch(exp)
        online = alg._q_network.lin.weight.detach()
        target = alg._target_q_network.lin.weight.detach()
        if update % period == 0:
            assert torch.equal(target, online), update
            copy_at = online.clone()
        else:
            assert torch.equal(target, before), update
            assert not torch.equal(target, online), update
            if copy_at is not None:
                assert torch.equal(target, copy_at)
    assert alg.context.num_updates == 7


def test_default_target_settings():
    alg = DqnAlgorithm(OBS, BoundedTensorSpec((), torch.int64, 0, 2), q_network_ctor=LinearQ,
                       context=RunContext())
    assert (alg._target_update_tau, alg._target_update_period) == (1.0, 1000)


def test_epsilon_schedule_values():
    alg = _dqn()  # default: SB3's 1.0 -> 0.05 over the first 10% of training
    ctx = alg.context
    for steps, eps in ((0, 1.0), (50, 0.525), (500, 0.05), (1000, 0.05)):
        ctx.env_steps = steps
        assert alg.epsilon() == pytest.approx(eps)
    alg2 = _dqn(epsilon_greedy=LinearSchedule(0.5, 0.1, end_progress=0.5))
    alg2.context.env_steps = 250
    assert alg2.epsilon() == pytest.approx(0.3)
    assert _dqn(epsilon_greedy=0.2).epsilon() == 0.2


def _time_step(obs):
    B = obs.shape[0]
    return TimeStep(step_type=torch.ones(B, dtype=torch.int32), reward=torch.zeros(B),
                    discount=torch.ones(B), observation=obs,
                    prev_action=torch.zeros(B, dtype=torch.int64),
                    env_id=torch.arange(B), env_info={})


@pytest.mark.parametrize("start", [0, 3, -1])
def test_actions_carry_the_discrete_start_offset(start):
    # gymnasium Discrete(3, start=start) -> BoundedTensorSpec [start, start + 2]
    spec = action_spec_from_space(gym.spaces.Discrete(3, start=start))
    assert (int(spec.minimum), int(spec.maximum)) == (start, start + 2)
    alg = DqnAlgorithm(OBS, spec, q_network_ctor=LinearQ, epsilon_greedy=0.0,
                       context=RunContext())
    _set(alg._q_network.lin, W_ONLINE, B_ONLINE)
    obs = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, -3.0]])
    # Q rows: [1, .5, .5], [0, 1.5, .5], [1, 1.5, 1.5]->1 (first max), [-1, -2.5, -4.5]
    greedy = torch.tensor([0, 1, 1, 0]) + start
    assert torch.equal(alg.predict_step(_time_step(obs)).output, greedy)
    assert torch.equal(alg.rollout_step(_time_step(obs)).output, greedy)

    torch.manual_seed(0)
    explore = DqnAlgorithm(OBS, spec, q_network_ctor=LinearQ, epsilon_greedy=1.0,
                           context=RunContext())
    acts = explore.rollout_step(_time_step(torch.zeros(3000, 2))).output
    assert set(acts.tolist()) == {start, start + 1, start + 2}
    counts = torch.bincount(acts - start, minlength=3).float() / 3000
    assert torch.all((counts - 1 / 3).abs() < 0.05)


def test_epsilon_fraction_of_random_actions():
    torch.manual_seed(1)
    alg = _dqn(epsilon_greedy=0.3)
    obs = torch.tensor([[1.0, 0.0]]).expand(6000, 2)  # greedy action 0
    acts = alg.rollout_step(_time_step(obs)).output
    # a random action is non-greedy with probability 2/3
    assert (acts != 0).float().mean().item() == pytest.approx(0.3 * 2 / 3, abs=0.02)


def test_box_action_spec_is_rejected_with_a_helpful_message():
    box = BoundedTensorSpec((2,), torch.float32, -1.0, 1.0)
    with pytest.raises(IncompatibleSpecError) as e:
        DqnAlgorithm(OBS, box, q_network_ctor=LinearQ, context=RunContext())
    msg = str(e.value)
    assert "discrete" in msg and "continuous" in msg and "SacAlgorithm" in msg
    with pytest.raises(IncompatibleSpecError):  # MultiDiscrete: not scalar
        DqnAlgorithm(OBS, BoundedTensorSpec((2,), torch.int64, 0, 2), q_network_ctor=LinearQ,
                     context=RunContext())


def test_n_step_targets():
    # n = 2 on a [1, 3] sequence: target = r1 + g r2 + g^2 Q'(s2, argmax Q(s2))
    alg = _dqn(n_step=2)
    ts = TimeStep(step_type=torch.tensor([[M, M, M]], dtype=torch.int32),
                  reward=torch.tensor([[0.0, 1.0, 2.0]]), discount=torch.ones(1, 3),
                  observation=torch.tensor([[[1.0, 2.0], [9.0, 9.0], [0.5, 2.0]]]),
                  prev_action=torch.zeros(1, 3, dtype=torch.int64),
                  env_id=torch.zeros(1, 3, dtype=torch.int64), env_info={})
    exp = Experience(time_step=ts, action=torch.tensor([[2, 0, 0]]), rollout_info=(), state=())
    info = alg.train_step(alg.make_transitions(exp)).info
    # Q'(s2=[.5,2], argmax_online=1) = -2
    assert info.target.item() == pytest.approx(1.0 + GAMMA * 2.0 + GAMMA ** 2 * -2.0)
    assert info.q_value.item() == pytest.approx(2.5)
    assert alg.replay_sequence_length() == 3


def test_invalid_rows_get_zero_priority():
    # a row whose first step is LAST is no transition: prioritized replay should stop
    # sampling it instead of giving it the (meaningless) |td| of 5.3
    alg = _dqn()
    loss_info, _ = alg.train_on_batch(_experience())
    assert loss_info.priority.tolist() == pytest.approx([3.3, 3.0, 0.0], abs=1e-5)


class CountingQ(LinearQ):
    calls = 0

    def forward(self, obs, state=()):
        CountingQ.calls += 1
        return super().forward(obs, state)


@pytest.mark.parametrize("eps", [1.0, 0.3])
def test_rollout_draws_exploration_first_and_skips_q_when_all_rows_explore(eps):
    spec = BoundedTensorSpec((), torch.int64, 0, 2)
    alg = DqnAlgorithm(OBS, spec, q_network_ctor=CountingQ, epsilon_greedy=eps,
                       context=RunContext())
    _set(alg._q_network.lin, W_ONLINE, B_ONLINE)
    obs = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, -3.0]])
    greedy = torch.tensor([0, 1, 1, 0])
    for seed in range(20):
        torch.manual_seed(seed)
        explore = torch.rand(4) < eps
        want = torch.where(explore, torch.randint(0, 3, (4,)), greedy)
        CountingQ.calls = 0
        torch.manual_seed(seed)
        got = alg.rollout_step(_time_step(obs)).output
        assert torch.equal(got, want)  # same random draws, in the same order
        assert CountingQ.calls == (0 if bool(explore.all()) else 1)
