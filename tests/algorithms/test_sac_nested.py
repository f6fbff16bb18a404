"""SAC on a Dict/Tuple nest of Box actions (issue 41, item 1): one squashed Gaussian per
leaf, a joint log-probability that is the sum of the leaves', target entropy minus the
total action dimensions, critics that read the leaves concatenated in ``alf.nest.flatten``
order; the losses and the actor gradient recomputed independently, learning
NestedBoxTarget-v0 (sac_nested_box.gin), and the nests SAC still refuses."""
import functools
import math

import pytest
import torch
from gymnasium import spaces

from alf import nest as alf_nest
from alf.algorithms.ddpg_algorithm import DdpgAlgorithm
from alf.algorithms.sac_algorithm import SacAlgorithm
from alf.data_structures import Experience, StepType, TimeStep
from alf.environments.spec_utils import action_spec_from_space
from alf.errors import IncompatibleSpecError
from alf.examples.action_nest_envs import NestedBoxTarget
from alf.networks import ActorDistributionNetwork, CriticNetwork, NormalProjectionNetwork
from alf.tensor_specs import TensorSpec
from alf.utils import dist_utils
from alf.utils.distributions import JointDistribution
from alf.utils.optimizers import SGD
from alf.utils.run_context import RunContext

OBS = TensorSpec((3,))
# gymnasium sorts a Dict's keys: flatten order is a, b
NEST = action_spec_from_space(spaces.Dict({"b": spaces.Box(0.0, 2.0, (1,)),
                                           "a": spaces.Box(-1.0, 1.0, (2,))}))
TUPLE = action_spec_from_space(spaces.Tuple((spaces.Box(0.0, 2.0, (1,)),
                                             spaces.Box(-1.0, 1.0, (2,)))))
HYBRID = action_spec_from_space(spaces.Dict({"sign": spaces.Discrete(2),
                                             "size": spaces.Box(0.0, 1.0, (1,))}))
GAMMA = 0.9
B = 5

squashed_actor = functools.partial(
    ActorDistributionNetwork, fc_layer_params=(8,),
    continuous_projection_net_ctor=functools.partial(NormalProjectionNetwork,
                                                     state_dependent_std=True,
                                                     scale_distribution=True))
critic = functools.partial(CriticNetwork, fc_layer_params=(8,))


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _sac(action_spec=NEST, lr=0.0, **kwargs):
    torch.manual_seed(0)
    alg = SacAlgorithm(OBS, action_spec, actor_network_ctor=squashed_actor,
                       critic_network_ctor=critic, gamma=GAMMA, initial_alpha=0.5,
                       actor_optimizer=SGD(lr=lr), critic_optimizer=SGD(lr=lr),
                       alpha_optimizer=SGD(lr=0.0), context=RunContext(), **kwargs)
    with torch.no_grad():  # targets differ from the critics (as after some training)
        for p in alg._target_critic.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return alg


def _random_action(spec, shape, g):
    lo, hi = torch.as_tensor(spec.minimum), torch.as_tensor(spec.maximum)
    return lo + (hi - lo) * torch.rand(*shape, *spec.shape, generator=g)


def _experience(action_spec=NEST):
    """``[B, 2]`` sequences; row 1 ends in a termination (discount 0)."""
    g = torch.Generator().manual_seed(1)
    step_type = torch.full((B, 2), StepType.MID, dtype=torch.int32)
    step_type[1, 1] = StepType.LAST
    discount = torch.ones(B, 2)
    discount[1, 1] = 0.0
    action = alf_nest.map_structure(lambda s: _random_action(s, (B, 2), g), action_spec)
    ts = TimeStep(step_type=step_type, reward=torch.randn(B, 2, generator=g),
                  discount=discount, observation=torch.randn(B, 2, 3, generator=g),
                  prev_action=alf_nest.map_structure(torch.zeros_like, action),
                  env_id=torch.zeros(B, 2, dtype=torch.int64), env_info={})
    return Experience(time_step=ts, action=action, rollout_info=(), state=())


def _time_step(obs):
    n = obs.shape[0]
    return TimeStep(step_type=torch.ones(n, dtype=torch.int32), reward=torch.zeros(n),
                    discount=torch.ones(n), observation=obs, prev_action=(),
                    env_id=torch.arange(n), env_info={})


# ---------------------------------------------------------------- the nested actor

@pytest.mark.parametrize("spec", [NEST, TUPLE], ids=["dict", "tuple"])
def test_nested_sample_and_log_prob_are_the_leaves_and_their_sum(spec):
    torch.manual_seed(0)
    actor = squashed_actor(input_spec=OBS, action_spec=spec)
    dist, _ = actor(torch.randn(B, 3))
    assert isinstance(dist, JointDistribution) and len(dist.leaves) == 2
    torch.manual_seed(3)
    action, log_pi = dist_utils.rsample_and_log_prob(dist)
    assert alf_nest.map_structure(lambda a: tuple(a.shape), action) == \
        alf_nest.map_structure(lambda s: (B,) + tuple(s.shape), spec)
    assert log_pi.shape == (B,)
    # the same noise, leaf by leaf in flatten order, through torch's own rsample/log_prob
    torch.manual_seed(3)
    ref = [d.rsample() for d in dist.leaves]
    for a, r in zip(alf_nest.flatten(action), ref):
        torch.testing.assert_close(a, r)
    leaf_log_probs = [d.log_prob(r) for d, r in zip(dist.leaves, ref)]
    assert all(lp.shape == (B,) for lp in leaf_log_probs)
    torch.testing.assert_close(log_pi, leaf_log_probs[0] + leaf_log_probs[1],
                               rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(log_pi, dist.log_prob(action), rtol=1e-4, atol=1e-4)


def test_nested_log_prob_is_finite_where_tanh_saturates():
    # through JointDistribution.log_prob (a saturated tanh inverted) the joint log-density
    # was off by up to 2x here (38.6 against 19.7 + 18.9 of the pre-tanh samples)
    torch.manual_seed(0)
    actor = squashed_actor(input_spec=OBS, action_spec=NEST)
    with torch.no_grad():  # means far beyond tanh's float32 range
        for p in actor._projection.parameters():
            p.mul_(1000.0)
    with torch.no_grad():
        dist, _ = actor(torch.randn(200, 3))
    action, log_pi = dist_utils.rsample_and_log_prob(dist)
    assert float(action["a"].abs().max()) == 1.0  # saturated in float32
    assert torch.isfinite(log_pi).all()
    torch.manual_seed(1)
    leaves = [dist_utils.rsample_and_log_prob(d) for d in dist.leaves]
    torch.manual_seed(1)
    _, joint = dist_utils.rsample_and_log_prob(dist)
    assert torch.equal(joint, leaves[0][1] + leaves[1][1])


@torch.no_grad()
def test_nested_actions_within_each_leafs_bounds():
    alg = _sac()
    obs = torch.randn(2000, 3) * 5
    for out in (alg.rollout_step(_time_step(obs)).output,
                alg.predict_step(_time_step(obs)).output):
        assert out["a"].shape == (2000, 2) and out["b"].shape == (2000, 1)
        assert -1.0 <= float(out["a"].min()) and float(out["a"].max()) <= 1.0
        assert 0.0 <= float(out["b"].min()) and float(out["b"].max()) <= 2.0
        assert float(out["b"].max()) > 1.0  # b uses its own, wider range
    # greedy: each leaf's tanh(mean) mapped onto its bounds
    dist, _ = alg._actor(obs[:4])
    greedy = alg.predict_step(_time_step(obs[:4])).output
    for leaf, key, (lo, hi) in zip(dist.leaves, ["a", "b"], [(-1.0, 1.0), (0.0, 2.0)]):
        mean = leaf.base_dist.base_dist.loc
        torch.testing.assert_close(greedy[key], lo + (hi - lo) * (torch.tanh(mean) + 1) / 2)


def test_default_target_entropy_is_minus_the_total_action_dims():
    assert _sac()._target_entropy == -3.0
    assert _sac(TUPLE)._target_entropy == -3.0
    assert _sac(target_entropy=-1.5)._target_entropy == -1.5


# ---------------------------------------------------------------- the critics

@pytest.mark.parametrize("spec", [NEST, TUPLE], ids=["dict", "tuple"])
def test_critic_reads_the_leaves_concatenated_in_flatten_order(spec):
    torch.manual_seed(0)
    nested = CriticNetwork((OBS, spec), fc_layer_params=(8,), observation_fc_layer_params=(4,))
    flat = CriticNetwork((OBS, TensorSpec((3,))), fc_layer_params=(8,),
                         observation_fc_layer_params=(4,))
    flat.load_state_dict(nested.state_dict())
    g = torch.Generator().manual_seed(2)
    obs = torch.randn(7, B, 3, generator=g)  # outer dims [T, B] are kept
    action = alf_nest.map_structure(lambda s: _random_action(s, (7, B), g), spec)
    joined = torch.cat(alf_nest.flatten(action), -1)
    q = nested((obs, action))[0]
    assert q.shape == (7, B, 2)
    torch.testing.assert_close(q, flat((obs, joined))[0], rtol=0, atol=0)
    torch.testing.assert_close(nested.forward_critic((obs, action), 1),
                               flat.forward_critic((obs, joined), 1), rtol=0, atol=0)
    index = torch.tensor([1])
    torch.testing.assert_close(nested.forward_members((obs, action), index),
                               flat.forward_members((obs, joined), index), rtol=0, atol=0)


def test_critic_refuses_a_nest_with_a_discrete_leaf():
    with pytest.raises(IncompatibleSpecError, match="CriticNetwork needs a float action"):
        CriticNetwork((OBS, HYBRID))


# ---------------------------------------------------------------- the losses

def _independent(alg, t, seed):
    """Same noise as the algorithm (same seed, the actor on s' first, then on s, each leaf
    in flatten order), the rest with torch's rsample/log_prob of each leaf and the critic
    on the concatenated leaves."""
    alpha = alg._log_alpha.exp().item()
    join = lambda a: torch.cat(alf_nest.flatten(a), -1)  # noqa: E731

    def sample(dist):
        leaves = [d.rsample() for d in dist.leaves]
        return leaves, sum(d.log_prob(a) for d, a in zip(dist.leaves, leaves))

    torch.manual_seed(seed)
    with torch.no_grad():
        next_dist, _ = alg._actor(t.next_observation)
        next_a, next_log_pi = sample(next_dist)
        q_next = alg._target_critic((t.next_observation, torch.cat(next_a, -1)))[0]
        target = t.reward + t.discount * (q_next.min(-1).values - alpha * next_log_pi)
    dist, _ = alg._actor(t.observation)
    a_new, logp_new = sample(dist)
    q = alg._critic((t.observation, join(t.action)))[0]
    critic_loss = 0.5 * ((q - target[:, None]) ** 2).sum(-1)
    q_new = alg._critic((t.observation, torch.cat(a_new, -1)))[0]
    objective = alpha * logp_new - q_new.min(-1).values
    return dict(critic_loss=critic_loss, objective=objective, logp_new=logp_new,
                td=(q - target[:, None]).abs().mean(-1))


def test_nested_losses_recomputed_independently():
    alg = _sac()
    t = alg.make_transitions(_experience())
    torch.manual_seed(7)
    info = alg.train_step(t).info
    ref = _independent(alg, t, seed=7)
    for name, key in [("critic_loss", "critic_loss"), ("td_error", "td"),
                      ("actor_objective", "objective")]:
        torch.testing.assert_close(getattr(info, name), ref[key].detach(), rtol=1e-4,
                                   atol=1e-4)
    torch.testing.assert_close(info.entropy, -ref["logp_new"].detach(), rtol=1e-4, atol=1e-4)
    alpha_loss = -math.log(0.5) * (ref["logp_new"].detach() - 3.0)  # target entropy -3
    torch.testing.assert_close(info.alpha_loss.detach(), alpha_loss, rtol=1e-4, atol=1e-4)


def test_nested_actor_gradient_equals_true_objective_gradient():
    alg = _sac()
    t = alg.make_transitions(_experience())
    actor_params, critic_params = list(alg._actor.parameters()), list(alg._critic.parameters())
    for p in alg.parameters():
        p.grad = None
    torch.manual_seed(11)
    alg.calc_loss(alg.train_step(t).info).loss.mean().backward()
    actor_g = [p.grad.clone() for p in actor_params]
    critic_g = [p.grad.clone() for p in critic_params]
    ref = _independent(alg, t, seed=11)
    true_actor_g = torch.autograd.grad(ref["objective"].mean(), actor_params, retain_graph=True)
    # both leaves' heads get a gradient, each its own
    assert all(g.abs().max() > 1e-5 for g in true_actor_g)
    for x, y in zip(actor_g, true_actor_g):
        torch.testing.assert_close(x, y, rtol=1e-3, atol=1e-6)
    critic_only_g = torch.autograd.grad(ref["critic_loss"].mean(), critic_params)
    for x, y in zip(critic_g, critic_only_g):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-6)


def test_a_nested_train_step_updates_every_part():
    alg = _sac(lr=0.05)
    before = {k: v.detach().clone() for k, v in alg.named_parameters()}
    torch.manual_seed(5)
    alg.train_on_batch(_experience())
    changed = {k for k, v in alg.named_parameters() if not torch.equal(v, before[k])}
    assert any(k.startswith("_actor._projection") and "._heads.0." in k for k in changed), changed
    assert any(k.startswith("_actor._projection") and "._heads.1." in k for k in changed), changed
    assert any(k.startswith("_critic.") for k in changed), changed


# ---------------------------------------------------------------- refusals

@pytest.mark.parametrize("space, name", [
    (spaces.Dict({"sign": spaces.Discrete(2), "size": spaces.Box(0.0, 1.0, (1,))}),
     "Dict(sign=Discrete(2), size=Box(1,))"),
    (spaces.Tuple((spaces.Discrete(3), spaces.Discrete(2))), "Tuple(Discrete(3), Discrete(2))"),
    (spaces.Dict({"a": spaces.Box(-1.0, 1.0, (2, 2))}), "Dict(a=Box(2, 2))"),
    (spaces.MultiDiscrete([3, 3]), "MultiDiscrete([3, 3])")])
def test_sac_refuses_nests_that_are_not_all_1d_box(space, name):
    with pytest.raises(IncompatibleSpecError) as e:
        SacAlgorithm(OBS, action_spec_from_space(space), context=RunContext())
    msg = str(e.value).splitlines()[0]
    assert msg.startswith("SacAlgorithm takes one Box, one Discrete or a Dict/Tuple nest of "
                          "1-d Box actions"), msg
    assert f"not the action space {name};" in msg
    assert "train with PPOAlgorithm, ActorCriticAlgorithm, APPOAlgorithm" in msg


def test_a_nested_actor_without_squashing_is_rejected():
    plain = functools.partial(ActorDistributionNetwork, fc_layer_params=(8,))
    with pytest.raises(IncompatibleSpecError, match="scale_distribution"):
        SacAlgorithm(OBS, NEST, actor_network_ctor=plain, critic_network_ctor=critic,
                     context=RunContext())


def test_ddpg_refusal_of_a_box_nest_points_to_sac():
    with pytest.raises(IncompatibleSpecError) as e:
        DdpgAlgorithm(OBS, NEST, context=RunContext())
    msg = str(e.value).splitlines()[0]
    assert msg.startswith("DdpgAlgorithm takes one bounded Box action")
    assert msg.endswith("; a Dict/Tuple nest of Box actions also trains with SacAlgorithm")
    with pytest.raises(IncompatibleSpecError) as e:  # not where SAC refuses too
        DdpgAlgorithm(OBS, HYBRID, context=RunContext())
    assert "SacAlgorithm" not in str(e.value).splitlines()[0]


# ---------------------------------------------------------------- learning

def test_sac_learns_the_nested_box_target(tmp_path, make_trainer):
    """sac_nested_box.gin (600 env steps, 300 one-step episodes, one update per env step):
    a uniformly random policy scores -1.17, the optimal one 0; the greedy action lands
    within 0.1 of the target on every dimension, and the training return (sampled
    actions) rises from the random policy's."""
    trainer = make_trainer(tmp_path / "nested", "include 'sac_nested_box.gin'\n")
    trainer.run()
    with torch.no_grad():
        greedy = trainer.algorithm.predict_step(_time_step(torch.ones(1, 1))).output
    errors = {k: (greedy[k][0] - torch.tensor(t)).abs().max().item()
              for k, t in NestedBoxTarget.TARGET.items()}
    assert max(errors.values()) < 0.1, (greedy, errors)
    with open(tmp_path / "nested" / "progress.csv") as f:
        lines = f.read().splitlines()
    col = lines[0].split(",").index("average_return")
    returns = [float(l.split(",")[col]) for l in lines[2:]]  # row 1: no episode ended yet
    assert returns[0] < -0.9 and returns[-1] > -0.8, returns
