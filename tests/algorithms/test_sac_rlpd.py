"""RLPD ingredients of SAC (Ball et al. 2023): LayerNorm critics, a critic ensemble whose TD
target is the min over a random subset, the option of no entropy term in the target, and that
none of it changes SAC when left unset."""
import functools

import pytest
import torch
from torch import nn

from alf.algorithms.sac_algorithm import SacAlgorithm
from alf.data_structures import Experience, StepType, TimeStep
from alf.errors import ConfigError
from alf.networks import ActorDistributionNetwork, CriticNetwork, NormalProjectionNetwork, QNetwork
from alf.networks.ensemble_layers import EnsembleLayerNorm, EnsembleMLP
from alf.tensor_specs import BoundedTensorSpec, TensorSpec
from alf.utils.optimizers import SGD
from alf.utils.run_context import RunContext

OBS = TensorSpec((3,))
BOX = BoundedTensorSpec((2,), torch.float32, [-1.0, -2.0], [1.0, 2.0])
DISCRETE = BoundedTensorSpec((), torch.int64, 1, 3)  # as test_sac: Discrete(3, start=1)

squashed_actor = functools.partial(
    ActorDistributionNetwork, fc_layer_params=(8,),
    continuous_projection_net_ctor=functools.partial(NormalProjectionNetwork,
                                                     state_dependent_std=True,
                                                     scale_distribution=True))


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny nets: one intra-op thread is much faster than two on a busy 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _sac(num_critics=5, layer_norm=False, action_spec=BOX, **kwargs):
    torch.manual_seed(0)
    critic = functools.partial(CriticNetwork, fc_layer_params=(8, 8), use_layer_norm=layer_norm)
    return SacAlgorithm(OBS, action_spec, actor_network_ctor=squashed_actor,
                        critic_network_ctor=critic,
                        q_network_ctor=functools.partial(QNetwork, fc_layer_params=(8,)),
                        num_critics=num_critics, gamma=0.9, initial_alpha=0.5,
                        actor_optimizer=SGD(lr=0.0), critic_optimizer=SGD(lr=0.0),
                        alpha_optimizer=SGD(lr=0.0), context=RunContext(), **kwargs)


def _experience(action_spec=BOX, batch=5):
    """``[B, 2]`` sequences; row 1 ends in a termination (discount 0), row 3 in a
    truncation (LAST with discount 1: bootstraps)."""
    g = torch.Generator().manual_seed(1)
    step_type = torch.full((batch, 2), int(StepType.MID), dtype=torch.int32)
    step_type[1, 1] = StepType.LAST
    step_type[3, 1] = StepType.LAST
    discount = torch.ones(batch, 2)
    discount[1, 1] = 0.0
    if action_spec.is_discrete():
        action = torch.randint(1, 4, (batch, 2), generator=g)
    else:
        action = (torch.rand(batch, 2, 2, generator=g) * 2 - 1) * torch.tensor([1.0, 2.0])
    ts = TimeStep(step_type=step_type, reward=torch.randn(batch, 2, generator=g),
                  discount=discount, observation=torch.randn(batch, 2, 3, generator=g),
                  prev_action=torch.zeros_like(action),
                  env_id=torch.zeros(batch, 2, dtype=torch.int64), env_info={})
    return Experience(time_step=ts, action=action, rollout_info=(), state=())


def _set_constant_target_critics(alg, values):
    """Target critic k outputs ``values[k]`` for every input (zero output weights)."""
    last = alg._target_critic._joint_mlp.layers[-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.copy_(torch.tensor(values, dtype=torch.float32).view(-1, 1, 1))


# ------------------------------------------------------------------ LayerNorm critics
def test_layer_norm_critic_has_one_norm_per_hidden_layer_and_member():
    net = CriticNetwork((OBS, BOX), fc_layer_params=(16, 8), num_critics=4, use_layer_norm=True)
    norms = net._joint_mlp.norms
    assert [type(n) for n in norms] == [EnsembleLayerNorm, EnsembleLayerNorm]
    assert [tuple(n.weight.shape) for n in norms] == [(4, 1, 16), (4, 1, 8)]
    assert [tuple(n.bias.shape) for n in norms] == [(4, 1, 16), (4, 1, 8)]
    q, _ = net((torch.randn(7, 3), torch.rand(7, 2)))
    assert q.shape == (7, 4)
    # without the option: no norms, the same state_dict keys as before
    plain = CriticNetwork((OBS, BOX), fc_layer_params=(16, 8), num_critics=4)
    assert plain._joint_mlp.norms is None
    assert not any("norms" in k for k in plain.state_dict())
    assert {k for k in net.state_dict() if "norms" not in k} == set(plain.state_dict())


def test_layer_norm_critic_member_equals_linear_layernorm_relu_sequential():
    torch.manual_seed(3)
    net = CriticNetwork((OBS, BOX), fc_layer_params=(16, 8), num_critics=3, use_layer_norm=True)
    with torch.no_grad():  # non-trivial affine parameters
        for n in net._joint_mlp.norms:
            n.weight.normal_()
            n.bias.normal_()
    obs, act = torch.randn(5, 3), torch.rand(5, 2)
    q, _ = net((obs, act))
    layers, norms = net._joint_mlp.layers, net._joint_mlp.norms
    for k in range(3):
        seq = []
        for i, layer in enumerate(layers):
            lin = nn.Linear(layer.in_features, layer.out_features)
            lin.weight.data.copy_(layer.weight[k].t())
            lin.bias.data.copy_(layer.bias[k, 0])
            seq.append(lin)
            if i < len(norms):
                ln = nn.LayerNorm(layer.out_features)
                ln.weight.data.copy_(norms[i].weight[k, 0])
                ln.bias.data.copy_(norms[i].bias[k, 0])
                seq += [ln, nn.ReLU()]
        expected = nn.Sequential(*seq)(torch.cat([obs, act], -1)).squeeze(-1)
        torch.testing.assert_close(q[:, k], expected, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(net.forward_critic((obs, act), k), expected, rtol=1e-5,
                                   atol=1e-6)
    # the hidden features are normalised: a huge input does not blow the Q values up
    big, _ = net((obs * 1e4, act))
    assert big.abs().max() < 100


def test_layer_norm_params_get_gradients_and_are_optimised():
    alg = _sac(layer_norm=True)
    params = {id(p) for o in alg.optimizers() for g in o.param_groups for p in g["params"]}
    norms = alg._critic._joint_mlp.norms
    assert all(id(n.weight) in params and id(n.bias) in params for n in norms)
    t = alg.make_transitions(_experience())
    alg.calc_loss(alg.train_step(t).info).loss.mean().backward()
    assert all(n.weight.grad.abs().sum() > 0 for n in norms)


@pytest.mark.parametrize("layer_norm", [False, True])
@pytest.mark.parametrize("obs_layers", [None, (6,)])
def test_forward_members_equals_indexing_the_full_ensemble(layer_norm, obs_layers):
    torch.manual_seed(1)
    net = CriticNetwork((OBS, BOX), fc_layer_params=(8,), num_critics=5,
                        observation_fc_layer_params=obs_layers, use_layer_norm=layer_norm)
    obs, act = torch.randn(4, 3), torch.rand(4, 2)
    full, _ = net((obs, act))
    index = torch.tensor([3, 0, 4])
    torch.testing.assert_close(net.forward_members((obs, act), index), full[:, index])
    mlp = EnsembleMLP(5, (7,), 5, output_size=2, use_layer_norm=layer_norm)
    x = torch.randn(6, 5)
    torch.testing.assert_close(mlp.forward_members(x, index), mlp(x)[index])


# ------------------------------------------------------------------ subset target
def test_subset_target_uses_exactly_m_distinct_critics_fresh_every_update():
    alg = _sac(num_critics=5, target_critic_subset=2)
    seen = []
    original = alg._target_critic.forward_members

    def spy(inputs, index):
        seen.append(index.tolist())
        return original(inputs, index)

    alg._target_critic.forward_members = spy
    values = [5.0, 3.0, 8.0, 1.0, 7.0]
    _set_constant_target_critics(alg, values)
    obs, act = torch.randn(4, 3), torch.rand(4, 2)
    torch.manual_seed(123)
    mins = [alg._target_min_q(obs, act) for _ in range(400)]
    assert len(seen) == 400
    assert all(len(s) == 2 and len(set(s)) == 2 and all(0 <= i < 5 for i in s) for s in seen)
    assert len({tuple(sorted(s)) for s in seen}) == 10  # all C(5, 2) pairs occur
    for s, m in zip(seen, mins):  # the target is the min over exactly those critics
        assert torch.equal(m, torch.full((4,), min(values[i] for i in s)))
    # min of a random pair: the largest value (8) never, the smallest (1) in 4/10 of draws
    firsts = [float(m[0]) for m in mins]
    assert 8.0 not in firsts
    assert firsts.count(1.0) / 400 == pytest.approx(0.4, abs=0.08)
    assert firsts.count(7.0) / 400 == pytest.approx(0.1, abs=0.05)


def test_subset_target_enters_the_critic_loss():
    alg = _sac(num_critics=4, target_critic_subset=1, critic_entropy_backup=False)
    values = [2.0, -1.0, 4.0, 0.5]
    _set_constant_target_critics(alg, values)
    t = alg.make_transitions(_experience())
    torch.manual_seed(5)
    info = alg.train_step(t).info
    q = alg._critic((t.observation, t.action))[0].detach()
    # target = r + discount * Q'_j with j the one critic drawn: find j from the loss
    matches = []
    for v in values:
        target = t.reward + t.discount * v
        loss = 0.5 * (q - target[:, None]).square().sum(-1)
        matches.append(torch.allclose(info.critic_loss.detach(), loss, rtol=1e-6, atol=1e-6))
    assert sum(matches) == 1


def test_full_subset_gives_the_plain_min_target():
    plain, full = _sac(num_critics=3), _sac(num_critics=3, target_critic_subset=3)
    for p, f in zip(plain.parameters(), full.parameters()):
        assert torch.equal(p, f)
    with torch.no_grad():
        for a, b in zip(plain._target_critic.parameters(), full._target_critic.parameters()):
            a.add_(0.3 * torch.randn_like(a))
            b.copy_(a)
    t = plain.make_transitions(_experience())
    torch.manual_seed(2)
    loss_plain = plain.train_step(t).info.critic_loss
    torch.manual_seed(2)
    loss_full = full.train_step(t).info.critic_loss  # next action drawn before the subset
    torch.testing.assert_close(loss_full, loss_plain, rtol=0, atol=0)


def test_unset_draws_no_subset_and_keeps_the_sac_target(monkeypatch):
    alg = _sac(num_critics=3)

    def no_randperm(*args, **kwargs):
        raise AssertionError("randperm called with target_critic_subset unset")

    monkeypatch.setattr(torch, "randperm", no_randperm)
    t = alg.make_transitions(_experience())
    torch.manual_seed(7)
    info = alg.train_step(t).info
    # the SAC target, computed independently with the same noise
    alpha = 0.5
    torch.manual_seed(7)
    with torch.no_grad():
        dist, _ = alg._actor(t.next_observation)
        a = dist.rsample()
        target = t.reward + t.discount * (alg._target_critic((t.next_observation, a))[0]
                                          .min(-1).values - alpha * dist.log_prob(a))
    q = alg._critic((t.observation, t.action))[0].detach()
    torch.testing.assert_close(info.critic_loss.detach(),
                               0.5 * (q - target[:, None]).square().sum(-1),
                               rtol=1e-5, atol=1e-5)


def test_no_entropy_backup_and_mean_actor_reduction():
    alg = _sac(num_critics=3, critic_entropy_backup=False, actor_critic_reduction="mean")
    t = alg.make_transitions(_experience())
    torch.manual_seed(4)
    info = alg.train_step(t).info
    torch.manual_seed(4)
    with torch.no_grad():
        dist, _ = alg._actor(t.next_observation)
        a_next = dist.rsample()
        target = t.reward + t.discount * alg._target_critic(
            (t.next_observation, a_next))[0].min(-1).values
        dist, _ = alg._actor(t.observation)
        a_new = dist.rsample()
        objective = 0.5 * dist.log_prob(a_new) - alg._critic((t.observation, a_new))[0].mean(-1)
    q = alg._critic((t.observation, t.action))[0].detach()
    torch.testing.assert_close(info.critic_loss.detach(),
                               0.5 * (q - target[:, None]).square().sum(-1),
                               rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(info.actor_objective, objective, rtol=1e-5, atol=1e-5)


def test_discrete_subset_target(monkeypatch):
    torch.manual_seed(0)
    alg = SacAlgorithm(OBS, DISCRETE,
                       actor_network_ctor=functools.partial(ActorDistributionNetwork,
                                                            fc_layer_params=(8,)),
                       q_network_ctor=functools.partial(QNetwork, fc_layer_params=(8,)),
                       num_critics=4, target_critic_subset=2, critic_entropy_backup=False,
                       context=RunContext())
    seen = []
    real = torch.randperm

    def spy(n, **kwargs):
        out = real(n, **kwargs)
        seen.append(out[:2].tolist())
        return out

    t = alg.make_transitions(_experience(DISCRETE))
    monkeypatch.setattr(torch, "randperm", spy)
    info = alg.train_step(t).info
    monkeypatch.undo()
    assert len(seen) == 1 and len(set(seen[0])) == 2
    with torch.no_grad():
        probs = alg._actor(t.next_observation)[0].probs
        next_q = alg._target_critic(t.next_observation)[0][:, seen[0]].min(1).values
        target = t.reward + t.discount * (probs * next_q).sum(-1)
        q_all = alg._critic(t.observation)[0]
        q = q_all.gather(2, (t.action.long() - 1).view(-1, 1, 1).expand(-1, 4, 1)).squeeze(2)
    torch.testing.assert_close(info.critic_loss.detach(),
                               0.5 * (q - target[:, None]).square().sum(-1),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kwargs,match", [
    (dict(target_critic_subset=0), "target_critic_subset"),
    (dict(target_critic_subset=6), "target_critic_subset"),
    (dict(actor_critic_reduction="max"), "actor_critic_reduction"),
])
def test_bad_rlpd_settings_are_named(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        _sac(num_critics=5, **kwargs)


@pytest.mark.parametrize("layer_norm", [False, True])
def test_in_place_hidden_relu_gives_the_same_values_and_grads(layer_norm):
    """EnsembleMLP applies relu in place on its fresh pre-activations: nothing changes."""
    torch.manual_seed(0)
    fast = EnsembleMLP(5, (7, 6), 3, output_size=1, use_layer_norm=layer_norm)
    slow = EnsembleMLP(5, (7, 6), 3, output_size=1, use_layer_norm=layer_norm)
    slow.load_state_dict(fast.state_dict())
    assert fast._hidden_activation is torch.relu_
    slow._hidden_activation = torch.relu  # the out-of-place reference
    x = torch.randn(9, 5)
    yf, ys = fast(x), slow(x)
    assert torch.equal(yf, ys)
    yf.square().sum().backward()
    ys.square().sum().backward()
    for a, b in zip(fast.parameters(), slow.parameters()):
        assert torch.equal(a.grad, b.grad)
    index = torch.tensor([2, 0])
    torch.testing.assert_close(fast.forward_members(x, index), ys[index].detach())
    torch.testing.assert_close(fast.forward_member(x, 1), ys[1].detach())
