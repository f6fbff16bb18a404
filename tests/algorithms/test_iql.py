"""IqlAlgorithm: the expectile loss by hand, V -> mean at tau 0.5 (an upper expectile above),
the losses recomputed independently, clipped AWR weights, the cosine actor lr, and on a
one-step bandit dataset (half good actions, half random) IQL picks the good action where BC
averages."""
import functools
import math

import pytest
import torch
from torch import nn

from alf.algorithms.bc_algorithm import BcAlgorithm
from alf.algorithms.iql_algorithm import CosineDecaySchedule, IqlAlgorithm, expectile_loss
from alf.data_structures import Experience, StepType, TimeStep
from alf.errors import ConfigError
from alf.networks import (ActorDistributionNetwork, CriticNetwork, NormalProjectionNetwork,
                          ValueNetwork)
from alf.tensor_specs import BoundedTensorSpec, TensorSpec
from alf.utils.optimizers import SGD, Adam
from alf.utils.run_context import RunContext

OBS = TensorSpec((3,))
BOX1 = BoundedTensorSpec((1,), torch.float32, -1.0, 1.0)
BOX2 = BoundedTensorSpec((2,), torch.float32, [-1.0, -2.0], [1.0, 2.0])
H = 32

actor = functools.partial(
    ActorDistributionNetwork, fc_layer_params=(H, H), activation=torch.relu,
    use_orthogonal_init=False,
    continuous_projection_net_ctor=functools.partial(
        NormalProjectionNetwork, squash_mean=True, min_std=math.exp(-5), max_std=math.exp(2)))
critic = functools.partial(CriticNetwork, fc_layer_params=(H, H))
value = functools.partial(ValueNetwork, fc_layer_params=(H, H), activation=torch.relu,
                          use_orthogonal_init=False)


@pytest.fixture(autouse=True)
def one_thread():
    """Small nets: one intra-op thread is much faster than two on a busy 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _iql(action_spec=BOX2, lr=3e-3, context=None, **kwargs):
    torch.manual_seed(0)
    kwargs.setdefault("actor_optimizer", Adam(lr=lr))
    kwargs.setdefault("critic_optimizer", Adam(lr=lr))
    return IqlAlgorithm(OBS, action_spec, actor_network_ctor=actor, critic_network_ctor=critic,
                        value_network_ctor=value, context=context or RunContext(), **kwargs)


def _experience(obs, action, reward, next_obs=None, last=True, discount=None):
    """``[B, 2]``: step 0 = (s, a); step 1 = s' with the reward (LAST, discount 0 unless
    ``last=False`` / ``discount`` given)."""
    b = obs.shape[0]
    step_type = torch.full((b, 2), int(StepType.MID), dtype=torch.int32)
    if last:
        step_type[:, 1] = StepType.LAST
    disc = torch.ones(b, 2)
    if discount is not None:
        disc[:, 1] = discount
    elif last:
        disc[:, 1] = 0.0
    next_obs = torch.randn_like(obs) if next_obs is None else next_obs
    rew = torch.stack([torch.zeros(b), reward], 1)
    ts = TimeStep(step_type=step_type, reward=rew, discount=disc,
                  observation=torch.stack([obs, next_obs], 1),
                  prev_action=torch.zeros(b, 2, action.shape[-1]),
                  env_id=torch.zeros(b, 2, dtype=torch.int64), env_info={})
    return Experience(time_step=ts, action=torch.stack([action, torch.zeros_like(action)], 1),
                      rollout_info=(), state=())


def _time_step(obs):
    n = obs.shape[0]
    return TimeStep(step_type=torch.ones(n, dtype=torch.int32), reward=torch.zeros(n),
                    discount=torch.ones(n), observation=obs, prev_action=(),
                    env_id=torch.arange(n), env_info={})


class _FixedQ(nn.Module):
    """A stand-in target critic: ``Q(s, a) = q_fn(a)`` for both members."""

    def __init__(self, q_fn):
        super().__init__()
        self._q_fn = q_fn

    def forward(self, inputs, state=()):
        q = self._q_fn(inputs[1])
        return torch.stack([q, q + 1.0], -1), state  # the min is q_fn(a)


# ------------------------------------------------------------------ expectile loss
def test_expectile_loss_by_hand():
    diff = torch.tensor([-2.0, -0.5, 0.0, 1.0, 3.0])
    expected = torch.tensor([0.3 * 4.0, 0.3 * 0.25, 0.0, 0.7 * 1.0, 0.7 * 9.0])
    torch.testing.assert_close(expectile_loss(diff, 0.7), expected)
    torch.testing.assert_close(expectile_loss(diff, 0.5), 0.5 * diff ** 2)


def _expectile(y: torch.Tensor, tau: float) -> float:
    """The tau-expectile of samples ``y`` by bisection on the first-order condition."""
    lo, hi = float(y.min()), float(y.max())
    for _ in range(60):
        v = (lo + hi) / 2
        grad = (torch.where(y < v, 1 - tau, tau) * (y - v)).sum()
        lo, hi = (v, hi) if grad > 0 else (lo, v)
    return (lo + hi) / 2


@pytest.mark.parametrize("tau", [0.5, 0.9])
def test_value_regresses_to_the_expectile_of_the_target_q(tau):
    """One state, dataset actions spread over [-1, 1], Q'(s, a) = 3a: V(s) -> the
    tau-expectile of {3a} (the mean at tau = 0.5, well above it at 0.9)."""
    alg = _iql(BOX1, lr=1e-2, expectile=tau)
    alg._target_critic = _FixedQ(lambda a: 3.0 * a[:, 0])
    g = torch.Generator().manual_seed(0)
    actions = torch.rand(512, 1, generator=g) ** 2 * 2 - 1  # skewed: mean -1/3
    obs = torch.zeros(512, 3)
    exp = _experience(obs, actions, torch.zeros(512))
    for _ in range(300):
        alg.train_on_batch(exp)
    v = float(alg._value(torch.zeros(1, 3))[0].detach())
    q = 3.0 * actions[:, 0]
    assert v == pytest.approx(_expectile(q, tau), abs=0.05)
    if tau == 0.5:
        assert v == pytest.approx(float(q.mean()), abs=0.05)
    else:
        assert v > float(q.mean()) + 0.5


# ------------------------------------------------------------------ the losses
def test_losses_recomputed_independently():
    alg = _iql(BOX2, expectile=0.8, temperature=2.0, gamma=0.9)
    with torch.no_grad():  # targets differ from the critics (as after some training)
        for p in alg._target_critic.parameters():
            p.add_(0.3 * torch.randn_like(p))
    g = torch.Generator().manual_seed(3)
    obs, next_obs = torch.randn(6, 3, generator=g), torch.randn(6, 3, generator=g)
    action = (torch.rand(6, 2, generator=g) * 2 - 1) * torch.tensor([1.0, 2.0])
    reward = torch.randn(6, generator=g)
    exp = _experience(obs, action, reward, next_obs, last=False)
    exp.time_step.step_type[1, 1] = StepType.LAST  # row 1 terminates
    exp.time_step.discount[1, 1] = 0.0
    t = alg.make_transitions(exp)
    info = alg.train_step(t).info
    with torch.no_grad():
        tq = alg._target_critic((obs, action))[0].min(-1).values
        v = alg._value(obs)[0]
        target = reward + 0.9 * torch.tensor([1.0, 0, 1, 1, 1, 1]) * alg._value(next_obs)[0]
        q = alg._critic((obs, action))[0]
        dist, _ = alg._actor(obs)
        logp = dist.log_prob(action)
    u = tq - v
    torch.testing.assert_close(info.value_loss.detach(),
                               torch.where(u < 0, 0.2, 0.8) * u ** 2)
    torch.testing.assert_close(info.critic_loss.detach(),
                               ((q - target[:, None]) ** 2).sum(-1))
    weight = torch.exp(2.0 * u).clamp(max=100.0)
    torch.testing.assert_close(info.weight, weight)
    torch.testing.assert_close(info.actor_loss.detach(), -weight * logp, rtol=1e-5, atol=1e-5)
    loss_info = alg.calc_loss(info)
    torch.testing.assert_close(loss_info.priority, (q - target[:, None]).abs().mean(-1))


def test_each_loss_reaches_only_its_own_network():
    alg = _iql(BOX2)
    exp = _experience(torch.randn(5, 3), torch.rand(5, 2) - 0.5, torch.randn(5), last=False)
    info = alg.train_step(alg.make_transitions(exp)).info
    for loss, own in ((info.critic_loss, alg._critic), (info.value_loss, alg._value),
                      (info.actor_loss, alg._actor)):
        nets = [alg._critic, alg._value, alg._actor]
        params = [p for n in nets for p in n.parameters()]
        grads = torch.autograd.grad(loss.sum(), params, retain_graph=True, allow_unused=True)
        owned = {id(p) for p in own.parameters()}
        for p, gr in zip(params, grads):
            if id(p) in owned:
                continue
            assert gr is None or gr.abs().max() == 0


def test_advantage_weights_are_clipped():
    alg = _iql(BOX1, temperature=10.0, max_weight=100.0)
    alg._target_critic = _FixedQ(lambda a: 2.0 * a[:, 0])
    with torch.no_grad():  # V(s) = 0 everywhere
        for p in alg._value.parameters():
            p.zero_()
    action = torch.tensor([[-0.5], [0.0], [0.1], [0.2], [0.5], [1.0]])
    exp = _experience(torch.randn(6, 3), action, torch.zeros(6))
    info = alg.train_step(alg.make_transitions(exp)).info
    adv = 2.0 * action[:, 0]
    torch.testing.assert_close(info.advantage, adv)
    expected = torch.exp(10.0 * adv).clamp(max=100.0)
    torch.testing.assert_close(info.weight, expected)
    assert info.weight.max() == 100.0 and (info.weight == 100.0).sum() == 2  # a = 0.5, 1.0
    assert info.weight[0] == pytest.approx(math.exp(-10.0))


# ------------------------------------------------------------------ the bandit
def _bandit(n=512, seed=0):
    """One-step episodes, 1-d action: half the data takes the good action 0.5 (reward 1),
    half acts uniformly at random (reward 1 - 4 (a - 0.5)^2 <= 1)."""
    g = torch.Generator().manual_seed(seed)
    good = torch.full((n // 2, 1), 0.5)
    rand = torch.rand(n - n // 2, 1, generator=g) * 2 - 1
    action = torch.cat([good, rand])
    reward = 1.0 - 4.0 * (action[:, 0] - 0.5) ** 2
    obs = torch.randn(n, 3, generator=g) * 0.1
    return obs, action, reward


def test_iql_picks_the_good_action_where_bc_averages():
    obs, action, reward = _bandit()
    exp = _experience(obs, action, reward)
    iql = _iql(BOX1, expectile=0.9, temperature=10.0)
    bc = BcAlgorithm(OBS, BOX1, actor_network_ctor=actor, optimizer=Adam(lr=3e-3),
                     context=RunContext())
    for _ in range(400):
        iql.train_on_batch(exp)
        bc.train_on_batch(exp)
    test_obs = torch.randn(100, 3) * 0.1
    with torch.no_grad():
        a_iql = iql.predict_step(_time_step(test_obs)).output[:, 0]
        a_bc = bc.predict_step(_time_step(test_obs)).output[:, 0]
    mean_action = float(action.mean())  # 0.25 + mean of the random half / 2
    assert float(a_bc.mean()) == pytest.approx(mean_action, abs=0.07)
    assert float(a_iql.mean()) == pytest.approx(0.5, abs=0.07)
    # the critic learnt the rewards (discount 0: Q(s, a) = r(a))
    q = iql._critic((test_obs[:3], torch.tensor([[0.5], [-0.5], [0.0]])))[0].mean(-1)
    torch.testing.assert_close(q.detach(), torch.tensor([1.0, -3.0, 0.0]), atol=0.35, rtol=0)


# ------------------------------------------------------------------ acting, config
def test_acting_stays_in_bounds_and_stores_nothing():
    alg = _iql(BOX2)
    obs = torch.randn(500, 3) * 5
    step = alg.rollout_step(_time_step(obs))
    assert step.info == () and step.state == ()
    for out in (step.output, alg.predict_step(_time_step(obs)).output):
        assert out.shape == (500, 2)
        assert torch.all(out >= torch.tensor([-1.0, -2.0]))
        assert torch.all(out <= torch.tensor([1.0, 2.0]))
    dist, _ = alg._actor(obs[:4])
    torch.testing.assert_close(alg.predict_step(_time_step(obs[:4])).output, dist.base_dist.loc)


def test_cosine_decay_of_the_actor_lr():
    s = CosineDecaySchedule(3e-4)
    assert s(0.0) == pytest.approx(3e-4)
    assert s(0.5) == pytest.approx(1.5e-4)
    assert s(1.0) == pytest.approx(0.0, abs=1e-12)
    ctx = RunContext(num_iterations=100)
    torch.manual_seed(0)
    alg = IqlAlgorithm(OBS, BOX2, actor_network_ctor=actor, critic_network_ctor=critic,
                       value_network_ctor=value, context=ctx)  # the default optimizers
    ctx.iteration = 25
    exp = _experience(torch.randn(4, 3), torch.rand(4, 2) - 0.5, torch.randn(4))
    alg.train_on_batch(exp)
    actor_opt, critic_opt = alg.optimizers()
    assert actor_opt.param_groups[0]["lr"] == pytest.approx(3e-4 * 0.5 * (1 + math.cos(math.pi / 4)))
    assert critic_opt.param_groups[0]["lr"] == pytest.approx(3e-4)
    critic_params = {id(p) for g in critic_opt.param_groups for p in g["params"]}
    assert {id(p) for p in alg._value.parameters()} <= critic_params
    assert {id(p) for p in alg._critic.parameters()} <= critic_params


def test_target_critic_follows_with_tau():
    alg = _iql(BOX2, critic_optimizer=SGD(lr=0.1))
    before = [p.clone() for p in alg._target_critic.parameters()]
    alg.train_on_batch(_experience(torch.randn(4, 3), torch.rand(4, 2) - 0.5, torch.randn(4)))
    for b, t, o in zip(before, alg._target_critic.parameters(), alg._critic.parameters()):
        torch.testing.assert_close(t, 0.995 * b + 0.005 * o)


def test_discrete_actions_are_refused_with_a_pointer():
    with pytest.raises(ConfigError, match="BcAlgorithm or DqnAlgorithm"):
        IqlAlgorithm(OBS, BoundedTensorSpec((), torch.int64, 0, 3), context=RunContext())
    with pytest.raises(ConfigError, match="expectile"):
        _iql(BOX2, expectile=1.0)


def test_gin_finds_iql_by_name():
    import gin
    import alf  # noqa: F401 - registers the configurables
    import alf.algorithms  # noqa: F401
    for name in ("IqlAlgorithm", "CosineDecaySchedule"):
        assert gin.config._REGISTRY.get_match(name) is not None  # pylint: disable=protected-access


# ------------------------------------------------------------------ summaries
class _Writer:
    def __init__(self):
        self.points = {}

    def add_scalar(self, tag, value, step):
        self.points[tag] = float(value)


def test_iql_summarises_q_and_the_critics_td_targets():
    """``Value/<name>/target_q_*`` are the critics' targets ``r + discount V(s')``: with
    every sequence ending (discount 0) they are the rewards; q_* the critics' mean Q."""
    ctx = RunContext(summary_writer=_Writer(), summary_interval=1)
    ctx.begin_iteration()
    alg = _iql(context=ctx)
    reward = torch.tensor([1.0, 2.0, 3.0, 6.0])
    exp = _experience(torch.randn(4, 3), torch.zeros(4, 2), reward)
    loss_info, info = alg.train_on_batch(exp)
    torch.testing.assert_close(info.target_q, reward)
    alg.summarize_train(exp, info, loss_info)
    got = ctx.summary_writer.points
    assert (got["Value/IqlAlgorithm/target_q_mean"], got["Value/IqlAlgorithm/target_q_min"],
            got["Value/IqlAlgorithm/target_q_max"]) == (3.0, 1.0, 6.0)
    assert got["Value/IqlAlgorithm/target_q_std"] == pytest.approx(math.sqrt(3.5))
    assert got["Value/IqlAlgorithm/q_mean"] == pytest.approx(info.q_value.mean().item())
