"""DDPG / TD3 on a fixed tiny batch: critic loss by hand, the actor gradient, TD3's delayed
actor and target updates, target policy smoothing, action bounds, spec errors."""
import functools

import pytest
import torch

from alf.algorithms.ddpg_algorithm import DdpgAlgorithm
from alf.algorithms.td3_algorithm import Td3Algorithm
from alf.data_structures import Experience, StepType, TimeStep
from alf.errors import IncompatibleSpecError
from alf.networks import ActorNetwork, CriticNetwork
from alf.tensor_specs import BoundedTensorSpec, TensorSpec
from alf.utils.optimizers import SGD
from alf.utils.run_context import RunContext

M, L = StepType.MID, StepType.LAST
OBS = TensorSpec((3,))
LOW, HIGH = torch.tensor([-1.0, 0.0]), torch.tensor([1.0, 4.0])  # half-ranges 1 and 2
BOX = BoundedTensorSpec((2,), torch.float32, LOW.tolist(), HIGH.tolist())
GAMMA = 0.9
B = 6

actor = functools.partial(ActorNetwork, fc_layer_params=(8,))
critic = functools.partial(CriticNetwork, fc_layer_params=(8,))


def _alg(cls=DdpgAlgorithm, lr=0.05, **kwargs):
    torch.manual_seed(0)
    alg = cls(OBS, BOX, actor_network_ctor=actor, critic_network_ctor=critic, gamma=GAMMA,
              actor_optimizer=SGD(lr=lr), critic_optimizer=SGD(lr=lr), context=RunContext(),
              **kwargs)
    with torch.no_grad():  # targets differ from the online nets (as after some training)
        for p in list(alg._target_critic.parameters()) + list(alg._target_actor.parameters()):
            p.add_(0.3 * torch.randn_like(p))
    return alg


def _experience():
    g = torch.Generator().manual_seed(2)
    step_type = torch.full((B, 2), M, dtype=torch.int32)
    step_type[1, 1] = L
    discount = torch.ones(B, 2)
    discount[1, 1] = 0.0  # row 1 terminates
    action = LOW + torch.rand(B, 2, 2, generator=g) * (HIGH - LOW)
    ts = TimeStep(step_type=step_type, reward=torch.randn(B, 2, generator=g), discount=discount,
                  observation=torch.randn(B, 2, 3, generator=g),
                  prev_action=torch.zeros_like(action),
                  env_id=torch.zeros(B, 2, dtype=torch.int64), env_info={})
    return Experience(time_step=ts, action=action, rollout_info=(), state=())


def _time_step(obs):
    n = obs.shape[0]
    return TimeStep(step_type=torch.ones(n, dtype=torch.int32), reward=torch.zeros(n),
                    discount=torch.ones(n), observation=obs, prev_action=(),
                    env_id=torch.arange(n), env_info={})


def _snapshot(module):
    return [p.detach().clone() for p in module.parameters()]


def _equal(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b))


def test_ddpg_critic_loss_by_hand():
    alg = _alg()
    assert alg._critic.num_critics == 1
    t = alg.make_transitions(_experience())
    info = alg.train_step(t).info
    with torch.no_grad():
        for i in range(B):
            s, a, s2 = t.observation[i:i + 1], t.action[i:i + 1], t.next_observation[i:i + 1]
            a2 = alg._target_actor(s2)[0]
            q2 = alg._target_critic((s2, a2))[0].item()
            target = t.reward[i].item() + t.discount[i].item() * q2
            q = alg._critic((s, a))[0].item()
            assert info.critic_loss[i].item() == pytest.approx((q - target) ** 2, rel=1e-5,
                                                               abs=1e-6)
            assert info.td_error[i].item() == pytest.approx(abs(q - target), rel=1e-5, abs=1e-6)
    assert t.discount[1].item() == 0.0
    assert alg.calc_loss(info).priority.tolist() == pytest.approx(info.td_error.tolist())


def test_td3_critic_loss_uses_the_min_of_two_target_critics():
    alg = _alg(Td3Algorithm, target_policy_noise=0.0)  # no smoothing: deterministic target
    t = alg.make_transitions(_experience())
    info = alg.train_step(t).info
    with torch.no_grad():
        a2 = alg._target_actor(t.next_observation)[0]
        qt = alg._target_critic((t.next_observation, a2))[0]
        assert (qt[:, 0] - qt[:, 1]).abs().min() > 1e-4
        target = t.reward + t.discount * qt.min(-1).values
        q = alg._critic((t.observation, t.action))[0]
        expected = ((q - target[:, None]) ** 2).sum(-1)
    torch.testing.assert_close(info.critic_loss, expected, rtol=1e-5, atol=1e-6)


def test_ddpg_actor_gradient_is_that_of_minus_q():
    alg = _alg()
    t = alg.make_transitions(_experience())
    actor_params, critic_params = list(alg._actor.parameters()), list(alg._critic.parameters())
    info = alg.train_step(t).info
    loss = alg.calc_loss(info).loss.mean()
    got_actor = torch.autograd.grad(loss, actor_params, retain_graph=True)
    got_critic = torch.autograd.grad(loss, critic_params, retain_graph=True)
    objective = -alg._critic((t.observation, alg._actor(t.observation)[0]))[0][:, 0].mean()
    want_actor = torch.autograd.grad(objective, actor_params)
    for g, w in zip(got_actor, want_actor):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-6)
    want_critic = torch.autograd.grad(info.critic_loss.mean(), critic_params)
    for g, w in zip(got_critic, want_critic):  # nothing from the actor term
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-7)


def test_td3_delays_actor_and_target_updates():
    tau = 0.1
    alg = _alg(Td3Algorithm, target_update_tau=tau)
    assert alg._actor_update_period == 2
    exp = _experience()
    for update in range(1, 7):
        actor0, critic0 = _snapshot(alg._actor), _snapshot(alg._critic)
        t_actor0, t_critic0 = _snapshot(alg._target_actor), _snapshot(alg._target_critic)
        alg.train_on_batch(exp)
        actor1, critic1 = _snapshot(alg._actor), _snapshot(alg._critic)
        t_actor1, t_critic1 = _snapshot(alg._target_actor), _snapshot(alg._target_critic)
        assert not _equal(critic0, critic1), update  # the critics learn every update
        if update % 2 == 0:
            assert not _equal(actor0, actor1), update
            # both targets move by exactly one soft update towards the new online nets
            for t0, p, t1 in zip(t_actor0 + t_critic0, actor1 + critic1, t_actor1 + t_critic1):
                torch.testing.assert_close(t1, (1 - tau) * t0 + tau * p, rtol=0, atol=1e-6)
        else:
            assert _equal(actor0, actor1), update
            assert _equal(t_actor0, t_actor1) and _equal(t_critic0, t_critic1), update
    assert alg.context.num_updates == 6


def test_ddpg_updates_actor_and_targets_every_step():
    alg = _alg(DdpgAlgorithm)
    exp = _experience()
    for update in range(1, 3):
        actor0, t_critic0 = _snapshot(alg._actor), _snapshot(alg._target_critic)
        alg.train_on_batch(exp)
        assert not _equal(actor0, _snapshot(alg._actor))
        assert not _equal(t_critic0, _snapshot(alg._target_critic))


def _captured_target_actions(alg, t):
    """The actions the target critics are evaluated at, and the target actor's actions."""
    seen = []
    handle = alg._target_critic.register_forward_pre_hook(
        lambda mod, args: seen.append(args[0][1].detach().clone()))
    try:
        alg.train_step(t)
    finally:
        handle.remove()
    with torch.no_grad():
        mu = alg._target_actor(t.next_observation)[0]
    return seen[0], mu


def test_td3_target_smoothing_noise_is_clipped():
    # noise std 5 half-ranges, clipped at 0.25 half-ranges: |a' - mu'(s')| <= (0.25, 0.5)
    alg = _alg(Td3Algorithm, target_policy_noise=5.0, target_noise_clip=0.25)
    # a big batch of next observations at which mu' sits well inside the bounds
    n = 4000
    obs = torch.zeros(n, 2, 3)
    exp = Experience(
        time_step=TimeStep(step_type=torch.full((n, 2), M, dtype=torch.int32),
                           reward=torch.zeros(n, 2), discount=torch.ones(n, 2), observation=obs,
                           prev_action=torch.zeros(n, 2, 2),
                           env_id=torch.zeros(n, 2, dtype=torch.int64),
                           env_info={}),
        action=torch.zeros(n, 2, 2), rollout_info=(), state=())
    with torch.no_grad():
        for p in alg._target_actor.parameters():
            p.zero_()  # mu'(s') = centre of the box = (0, 2)
    t = alg.make_transitions(exp)
    torch.manual_seed(0)
    a2, mu = _captured_target_actions(alg, t)
    assert torch.allclose(mu, torch.tensor([0.0, 2.0]).expand(n, 2))
    noise = a2 - mu
    limit = torch.tensor([0.25, 0.5])
    assert torch.all(noise.abs() <= limit + 1e-6)
    # with std 5 almost every draw is clipped: both bounds are hit
    assert torch.allclose(noise.abs().max(0).values, limit)
    assert (noise.abs() >= limit - 1e-6).float().mean() > 0.9
    assert torch.all(a2 >= LOW) and torch.all(a2 <= HIGH)


def test_td3_smoothed_target_actions_stay_in_bounds_and_ddpg_has_no_smoothing():
    alg = _alg(Td3Algorithm, target_policy_noise=0.5, target_noise_clip=0.5)
    t = alg.make_transitions(_experience())
    a2, mu = _captured_target_actions(alg, t)
    assert not torch.equal(a2, mu)
    assert torch.all(a2 >= LOW) and torch.all(a2 <= HIGH)
    assert torch.all((a2 - mu).abs() <= torch.tensor([0.5, 1.0]) + 1e-6)
    ddpg = _alg(DdpgAlgorithm)
    a2, mu = _captured_target_actions(ddpg, ddpg.make_transitions(_experience()))
    assert torch.equal(a2, mu)


@pytest.mark.parametrize("cls", [DdpgAlgorithm, Td3Algorithm])
def test_rollout_actions_within_bounds(cls):
    alg = _alg(cls, exploration_noise=3.0)
    obs = torch.randn(3000, 3) * 3
    explored = alg.rollout_step(_time_step(obs)).output
    greedy = alg.predict_step(_time_step(obs)).output
    for out in (explored, greedy):
        assert out.shape == (3000, 2)
        assert torch.all(out >= LOW) and torch.all(out <= HIGH)
    assert not torch.equal(explored, greedy)
    # large noise saturates at both bounds of both dimensions
    assert torch.equal(explored.min(0).values, LOW) and torch.equal(explored.max(0).values, HIGH)
    # the exploration noise is a fraction of each dimension's half-range (1 and 2)
    small = _alg(cls, exploration_noise=0.1)
    with torch.no_grad():
        for p in small._actor.parameters():
            p.zero_()  # mu(s) = centre of the box, 5+ sigmas from both bounds
    torch.manual_seed(0)
    obs = torch.zeros(20000, 3)
    diff = small.rollout_step(_time_step(obs)).output - small.predict_step(_time_step(obs)).output
    assert diff.mean(0).tolist() == pytest.approx([0.0, 0.0], abs=0.01)
    assert diff.std(0).tolist() == pytest.approx([0.1, 0.2], rel=0.03)


@pytest.mark.parametrize("cls", [DdpgAlgorithm, Td3Algorithm])
def test_discrete_and_unbounded_action_specs_are_rejected(cls):
    with pytest.raises(IncompatibleSpecError, match="DqnAlgorithm"):
        cls(OBS, BoundedTensorSpec((), torch.int64, 0, 2), actor_network_ctor=actor,
            critic_network_ctor=critic, context=RunContext())
    with pytest.raises(IncompatibleSpecError, match="finite"):
        cls(OBS, TensorSpec((2,)), actor_network_ctor=actor, critic_network_ctor=critic,
            context=RunContext())


def test_td3_defaults():
    alg = Td3Algorithm(OBS, BOX, actor_network_ctor=actor, critic_network_ctor=critic,
                       context=RunContext())
    assert alg._critic.num_critics == 2
    assert (alg._target_policy_noise, alg._target_noise_clip, alg._actor_update_period) == (
        0.2, 0.5, 2)
    assert alg._target_update_tau == 0.005
