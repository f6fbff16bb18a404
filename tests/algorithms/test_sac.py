"""SAC on a fixed tiny batch: the losses recomputed independently, the actor gradient of the
surrogate vs the true objective, no actor gradient into the critics, alpha, discrete SAC."""
import functools
import math

import pytest
import torch

from alf.algorithms.sac_algorithm import SacAlgorithm
from alf.data_structures import Experience, StepType, TimeStep
from alf.errors import IncompatibleSpecError
from alf.networks import (ActorDistributionNetwork, CriticNetwork, NormalProjectionNetwork,
                          QNetwork)
from alf.tensor_specs import BoundedTensorSpec, TensorSpec
from alf.utils.optimizers import SGD
from alf.utils.run_context import RunContext

M, L = StepType.MID, StepType.LAST
OBS = TensorSpec((3,))
BOX = BoundedTensorSpec((2,), torch.float32, [-1.0, -2.0], [1.0, 2.0])
DISCRETE = BoundedTensorSpec((), torch.int64, 1, 3)  # Discrete(3, start=1)
GAMMA = 0.9
B = 5

squashed_actor = functools.partial(
    ActorDistributionNetwork, fc_layer_params=(8,),
    continuous_projection_net_ctor=functools.partial(NormalProjectionNetwork,
                                                     state_dependent_std=True,
                                                     scale_distribution=True))
critic = functools.partial(CriticNetwork, fc_layer_params=(8,))
discrete_actor = functools.partial(ActorDistributionNetwork, fc_layer_params=(8,))
q_net = functools.partial(QNetwork, fc_layer_params=(8,))


def _sac(action_spec=BOX, lr=0.0, alpha_lr=0.0, **kwargs):
    torch.manual_seed(0)
    kwargs.setdefault("initial_alpha", 0.5)
    alg = SacAlgorithm(OBS, action_spec, actor_network_ctor=squashed_actor,
                       critic_network_ctor=critic, q_network_ctor=q_net, gamma=GAMMA,
                       actor_optimizer=SGD(lr=lr), critic_optimizer=SGD(lr=lr),
                       alpha_optimizer=SGD(lr=alpha_lr), context=RunContext(), **kwargs)
    with torch.no_grad():  # targets differ from the critics (as after some training)
        for p in alg._target_critic.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return alg


def _experience(action_spec=BOX):
    """``[B, 2]`` sequences; row 1 ends in a termination (discount 0), row 3 in a
    truncation (LAST with discount 1: bootstraps)."""
    g = torch.Generator().manual_seed(1)
    step_type = torch.full((B, 2), M, dtype=torch.int32)
    step_type[1, 1] = L
    step_type[3, 1] = L
    discount = torch.ones(B, 2)
    discount[1, 1] = 0.0
    if action_spec.is_discrete():
        action = torch.randint(1, 4, (B, 2), generator=g)
    else:
        action = (torch.rand(B, 2, 2, generator=g) * 2 - 1) * torch.tensor([1.0, 2.0])
    ts = TimeStep(step_type=step_type, reward=torch.randn(B, 2, generator=g),
                  discount=discount, observation=torch.randn(B, 2, 3, generator=g),
                  prev_action=torch.zeros_like(action), env_id=torch.zeros(B, 2, dtype=torch.int64),
                  env_info={})
    return Experience(time_step=ts, action=action, rollout_info=(), state=())


def _zero_grads(alg):
    for p in alg.parameters():
        p.grad = None


def _grads(params):
    return [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in params]


def _assert_all_close(xs, ys, **kw):
    assert len(xs) == len(ys)
    for x, y in zip(xs, ys):
        torch.testing.assert_close(x, y, **kw)


# ------------------------------------------------------------------ continuous
def _independent_continuous(alg, t, seed):
    """Same sampled noise as the algorithm (same seed, same order: the actor on s' first,
    then on s), the rest computed with torch's own TransformedDistribution rsample / log_prob."""
    alpha = alg._log_alpha.exp().item()
    torch.manual_seed(seed)
    with torch.no_grad():
        next_dist, _ = alg._actor(t.next_observation)
        next_actions = next_dist.rsample()
        next_log_pi = next_dist.log_prob(next_actions)
        q_next = alg._target_critic((t.next_observation, next_actions))[0]  # [B, 2]
        target = t.reward + t.discount * (torch.minimum(q_next[:, 0], q_next[:, 1])
                                          - alpha * next_log_pi)
    dist, _ = alg._actor(t.observation)
    a_new = dist.rsample()
    logp_new = dist.log_prob(a_new)
    q = alg._critic((t.observation, t.action))[0]
    critic_loss = 0.5 * ((q[:, 0] - target) ** 2 + (q[:, 1] - target) ** 2)
    q_new = alg._critic((t.observation, a_new))[0]
    objective = alpha * logp_new - torch.minimum(q_new[:, 0], q_new[:, 1])
    td = 0.5 * ((q[:, 0] - target).abs() + (q[:, 1] - target).abs())
    return dict(critic_loss=critic_loss, objective=objective, logp_new=logp_new, td=td,
                target=target)


def test_transition_fields():
    alg = _sac()
    t = alg.make_transitions(_experience())
    exp = _experience()
    assert t.discount.tolist() == pytest.approx([GAMMA, 0.0, GAMMA, GAMMA, GAMMA])
    assert torch.equal(t.reward, exp.time_step.reward[:, 1])
    assert torch.equal(t.next_observation, exp.time_step.observation[:, 1])


def test_continuous_critic_loss_recomputed_independently():
    alg = _sac(target_entropy=-1.5)
    t = alg.make_transitions(_experience())
    torch.manual_seed(7)
    info = alg.train_step(t).info
    ref = _independent_continuous(alg, t, seed=7)
    torch.testing.assert_close(info.critic_loss, ref["critic_loss"], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(info.td_error, ref["td"], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(info.actor_objective, ref["objective"].detach(), rtol=1e-5,
                               atol=1e-5)
    torch.testing.assert_close(info.entropy, -ref["logp_new"].detach(), rtol=1e-5, atol=1e-5)
    alpha_loss = -math.log(0.5) * (ref["logp_new"].detach() - 1.5)
    torch.testing.assert_close(info.alpha_loss.detach(), alpha_loss, rtol=1e-5, atol=1e-5)
    loss_info = alg.calc_loss(info)
    torch.testing.assert_close(loss_info.priority, ref["td"], rtol=1e-5, atol=1e-5)
    # the min over the two target critics matters in this batch (the test would catch a mean)
    with torch.no_grad():
        torch.manual_seed(7)
        dist, _ = alg._actor(t.next_observation)
        qn = alg._target_critic((t.next_observation, dist.rsample()))[0]
    assert (qn[:, 0] - qn[:, 1]).abs().min() > 1e-3


def test_continuous_actor_gradient_equals_true_objective_gradient():
    alg = _sac()
    t = alg.make_transitions(_experience())
    actor_params = list(alg._actor.parameters())
    critic_params = list(alg._critic.parameters())

    _zero_grads(alg)
    torch.manual_seed(11)
    loss = alg.calc_loss(alg.train_step(t).info).loss
    assert loss.shape == (B,)
    loss.mean().backward()
    actor_g, critic_g = _grads(actor_params), _grads(critic_params)
    alpha_g = alg._log_alpha.grad.clone()

    ref = _independent_continuous(alg, t, seed=11)
    true_actor_g = torch.autograd.grad(ref["objective"].mean(), actor_params, retain_graph=True)
    assert any(g.abs().max() > 1e-4 for g in true_actor_g)
    _assert_all_close(actor_g, list(true_actor_g), rtol=1e-4, atol=1e-6)

    # the critics get exactly the critic-loss gradient: nothing from the actor term ...
    critic_only_g = torch.autograd.grad(ref["critic_loss"].mean(), critic_params)
    _assert_all_close(critic_g, list(critic_only_g), rtol=1e-4, atol=1e-6)
    # ... although the true objective would have sent them some
    through_q = torch.autograd.grad(ref["objective"].mean(), critic_params, allow_unused=True)
    assert any(g is not None and g.abs().max() > 1e-4 for g in through_q)

    # alpha: d/dlog_alpha mean(-log_alpha (log pi + H)) = -mean(log pi) - H
    target_entropy = -2.0  # the default: -dim(A)
    assert alg._target_entropy == target_entropy
    expected = -(ref["logp_new"].detach().mean() + target_entropy)
    torch.testing.assert_close(alpha_g, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target_entropy,direction", [(-10.0, -1), (10.0, +1)])
def test_alpha_moves_towards_the_target_entropy(target_entropy, direction):
    alg = _sac(target_entropy=target_entropy, alpha_lr=0.1, lr=0.0)
    before = alg.alpha.item()
    t_exp = _experience()
    torch.manual_seed(9)
    alg.train_on_batch(t_exp)
    after = alg.alpha.item()
    # entropy (~ -log pi of a 2-d squashed Gaussian, a few nats) > -10: alpha decreases;
    # < +10: alpha increases
    assert (after - before) * direction > 1e-3
    # exactly one SGD step on log_alpha with gradient mean(entropy) - target_entropy
    # (same noise: same seed, and lr 0 kept the actor as it was)
    torch.manual_seed(9)
    ent = alg.calc_loss(alg.train_step(alg.make_transitions(t_exp)).info).extra["entropy"]
    assert math.log(after) == pytest.approx(
        math.log(before) - 0.1 * (ent.mean().item() - target_entropy), abs=1e-5)


def test_fixed_alpha_is_not_learned():
    alg = _sac(fixed_alpha=0.2, alpha_lr=1.0, lr=0.01)
    assert alg.alpha.item() == pytest.approx(0.2)
    assert not alg._log_alpha.requires_grad
    assert len(alg.optimizers()) == 2
    assert all(p is not alg._log_alpha for o in alg.optimizers() for g in o.param_groups
               for p in g["params"])
    t = alg.make_transitions(_experience())
    torch.manual_seed(3)
    info = alg.train_step(t).info
    ref = _independent_continuous(alg, t, seed=3)  # uses alpha = 0.2
    torch.testing.assert_close(info.critic_loss, ref["critic_loss"], rtol=1e-5, atol=1e-5)
    loss = alg.calc_loss(info).loss
    torch.testing.assert_close(loss, info.critic_loss + info.actor_loss)
    for _ in range(3):
        alg.train_on_batch(_experience())
    assert alg.alpha.item() == pytest.approx(0.2)


def test_unsquashed_actor_is_rejected():
    plain = functools.partial(ActorDistributionNetwork, fc_layer_params=(8,))
    with pytest.raises(IncompatibleSpecError, match="scale_distribution"):
        SacAlgorithm(OBS, BOX, actor_network_ctor=plain, critic_network_ctor=critic,
                     context=RunContext())


def test_bad_action_specs_are_rejected():
    with pytest.raises(IncompatibleSpecError, match=r"SacAlgorithm takes one Box, one "
                       r"Discrete or a Dict/Tuple nest of 1-d Box actions .*not the action "
                       r"space MultiDiscrete\(\[3, 3\]\)"):
        SacAlgorithm(OBS, BoundedTensorSpec((2,), torch.int64, 0, 2),
                     actor_network_ctor=discrete_actor, q_network_ctor=q_net,
                     context=RunContext())


def _time_step(obs):
    n = obs.shape[0]
    return TimeStep(step_type=torch.ones(n, dtype=torch.int32), reward=torch.zeros(n),
                    discount=torch.ones(n), observation=obs, prev_action=(),
                    env_id=torch.arange(n), env_info={})


def test_continuous_actions_within_bounds():
    alg = _sac()
    obs = torch.randn(2000, 3) * 5
    for out in (alg.rollout_step(_time_step(obs)).output, alg.predict_step(_time_step(obs)).output):
        assert out.shape == (2000, 2)
        assert torch.all(out >= torch.tensor([-1.0, -2.0]))
        assert torch.all(out <= torch.tensor([1.0, 2.0]))
    # the second dimension uses its wider range
    assert alg.rollout_step(_time_step(obs)).output[:, 1].abs().max() > 1.0


# -------------------------------------------------------------------- discrete
def test_discrete_losses_equal_the_exact_expectation_formulas():
    alg = SacAlgorithm(OBS, DISCRETE, actor_network_ctor=discrete_actor, q_network_ctor=q_net,
                       gamma=GAMMA, initial_alpha=0.7, context=RunContext())
    with torch.no_grad():
        for p in alg._target_critic.parameters():
            p.add_(0.3 * torch.randn_like(p))
    assert alg._target_entropy == pytest.approx(0.98 * math.log(3))
    exp = _experience(DISCRETE)
    t = alg.make_transitions(exp)
    info = alg.train_step(t).info
    loss_info = alg.calc_loss(info)

    alpha, h_target = 0.7, 0.98 * math.log(3)
    with torch.no_grad():
        logits = alg._actor(torch.cat([t.observation, t.next_observation]))[0].logits
        q_all = alg._critic(t.observation)[0]               # [B, 2, 3]
        q_next = alg._target_critic(t.next_observation)[0]  # [B, 2, 3]
    for i in range(B):
        def probs(row):
            z = [math.exp(v) for v in logits[row].tolist()]
            return [v / sum(z) for v in z]
        p, p2 = probs(i), probs(B + i)
        v_next = sum(p2[a] * (min(q_next[i, 0, a].item(), q_next[i, 1, a].item())
                              - alpha * math.log(p2[a])) for a in range(3))
        target = t.reward[i].item() + t.discount[i].item() * v_next
        a_idx = int(t.action[i]) - 1  # spec minimum is 1
        q_sa = [q_all[i, k, a_idx].item() for k in range(2)]
        critic_loss = 0.5 * sum((q - target) ** 2 for q in q_sa)
        actor_loss = sum(p[a] * (alpha * math.log(p[a])
                                 - min(q_all[i, 0, a].item(), q_all[i, 1, a].item()))
                         for a in range(3))
        entropy = -sum(pa * math.log(pa) for pa in p)
        alpha_loss = math.log(alpha) * (entropy - h_target)
        assert info.critic_loss[i].item() == pytest.approx(critic_loss, rel=1e-4, abs=1e-5)
        assert info.actor_loss[i].item() == pytest.approx(actor_loss, rel=1e-4, abs=1e-5)
        assert info.entropy[i].item() == pytest.approx(entropy, rel=1e-5)
        assert info.alpha_loss[i].item() == pytest.approx(alpha_loss, rel=1e-4, abs=1e-6)
        assert loss_info.priority[i].item() == pytest.approx(
            sum(abs(q - target) for q in q_sa) / 2, rel=1e-4, abs=1e-5)
        assert loss_info.loss[i].item() == pytest.approx(critic_loss + actor_loss + alpha_loss,
                                                         rel=1e-4, abs=1e-5)


def test_discrete_critics_get_no_gradient_from_the_actor_term():
    alg = SacAlgorithm(OBS, DISCRETE, actor_network_ctor=discrete_actor, q_network_ctor=q_net,
                       context=RunContext())
    t = alg.make_transitions(_experience(DISCRETE))
    info = alg.train_step(t).info
    critic_params = list(alg._critic.parameters())
    total = torch.autograd.grad(alg.calc_loss(info).loss.mean(), critic_params,
                                retain_graph=True)
    only = torch.autograd.grad(info.critic_loss.mean(), critic_params)
    _assert_all_close(list(total), list(only), rtol=1e-5, atol=1e-7)


def test_discrete_actions_carry_the_offset():
    alg = SacAlgorithm(OBS, DISCRETE, actor_network_ctor=discrete_actor, q_network_ctor=q_net,
                       context=RunContext())
    torch.manual_seed(0)
    acts = alg.rollout_step(_time_step(torch.zeros(3000, 3))).output
    assert set(acts.tolist()) == {1, 2, 3}
    greedy = alg.predict_step(_time_step(torch.randn(50, 3))).output
    assert greedy.min() >= 1 and greedy.max() <= 3
