"""``Algorithm.rollout_state_dict`` / ``load_rollout_state_dict``: what an actor process gets.

For SAC, DQN, DDPG, TD3 and PPO (feed-forward and LSTM): no optimizer state, no target
networks, state_dict order; loading one copy's rollout state into a differently seeded copy
makes them act identically; loading is in place and strict; data-transformer statistics
travel with the weights."""
import functools

import pytest
import torch
from torch import nn

from alf import nest as alf_nest
from alf.algorithms.algorithm import Algorithm
from alf.algorithms.data_transformers import (ObservationNormalizer, RewardNormalizer,
                                              SequentialDataTransformer)
from alf.algorithms.ddpg_algorithm import DdpgAlgorithm
from alf.algorithms.dqn_algorithm import DqnAlgorithm
from alf.algorithms.ppo_algorithm import PPOAlgorithm
from alf.algorithms.sac_algorithm import SacAlgorithm
from alf.algorithms.td3_algorithm import Td3Algorithm
from alf.data_structures import StepType, TimeStep
from alf.networks import (ActorDistributionNetwork, ActorDistributionRNNNetwork, ActorNetwork,
                          CriticNetwork, NormalProjectionNetwork, QNetwork, ValueNetwork,
                          ValueRNNNetwork)
from alf.tensor_specs import BoundedTensorSpec, TensorSpec
from alf.utils.optimizers import Adam
from alf.utils.run_context import RunContext

OBS = TensorSpec((3,))
BOX = BoundedTensorSpec((2,), torch.float32, [-1.0, -2.0], [1.0, 2.0])
DISCRETE = BoundedTensorSpec((), torch.int64, 0, 2)
B = 16


def _sac():
    actor = functools.partial(ActorDistributionNetwork, fc_layer_params=(8,),
                              continuous_projection_net_ctor=functools.partial(
                                  NormalProjectionNetwork, state_dependent_std=True,
                                  scale_distribution=True))
    return SacAlgorithm(OBS, BOX, actor_network_ctor=actor,
                        critic_network_ctor=functools.partial(CriticNetwork, fc_layer_params=(8,)),
                        context=RunContext())


def _dqn():
    return DqnAlgorithm(OBS, DISCRETE, q_network_ctor=functools.partial(QNetwork,
                                                                        fc_layer_params=(8,)),
                        epsilon_greedy=0.2, context=RunContext(num_env_steps=1000))


def _ddpg(cls=DdpgAlgorithm):
    return cls(OBS, BOX, actor_network_ctor=functools.partial(ActorNetwork, fc_layer_params=(8,)),
               critic_network_ctor=functools.partial(CriticNetwork, fc_layer_params=(8,)),
               context=RunContext())


def _ppo(rnn=False):
    if rnn:
        actor = functools.partial(ActorDistributionRNNNetwork, input_fc_layer_params=(8,),
                                  lstm_hidden_size=8)
        value = functools.partial(ValueRNNNetwork, input_fc_layer_params=(8,), lstm_hidden_size=8)
    else:
        actor = functools.partial(ActorDistributionNetwork, fc_layer_params=(8,))
        value = functools.partial(ValueNetwork, fc_layer_params=(8,))
    return PPOAlgorithm(OBS, BOX, actor_network_ctor=actor, value_network_ctor=value,
                        context=RunContext(num_iterations=10), optimizer=Adam(lr=1e-3))


# name -> (builder, attribute names of its target networks)
ALGORITHMS = {
    "sac": (_sac, ["_target_critic"]),
    "dqn": (_dqn, ["_target_q_network"]),
    "ddpg": (_ddpg, ["_target_actor", "_target_critic"]),
    "td3": (functools.partial(_ddpg, Td3Algorithm), ["_target_actor", "_target_critic"]),
    "ppo": (_ppo, []),
    "ppo_lstm": (functools.partial(_ppo, rnn=True), []),
}


def _build(name, seed):
    torch.manual_seed(seed)
    return ALGORITHMS[name][0]()


def _time_step(seed=7):
    g = torch.Generator().manual_seed(seed)
    return TimeStep(step_type=torch.full((B,), int(StepType.MID), dtype=torch.int32),
                    reward=torch.zeros(B), discount=torch.ones(B),
                    observation=torch.randn(B, 3, generator=g), env_id=torch.arange(B))


def _act(alg, seed=3):
    """Every leaf of rollout_step's and predict_step's output, state and info (same RNG seed)."""
    ts = _time_step()
    state = alf_nest.map_structure(lambda x: x + 0.5, alg.get_initial_rollout_state(B))
    with torch.no_grad():
        torch.manual_seed(seed)
        rollout = alg.rollout_step(ts, state)
        torch.manual_seed(seed)
        predict = alg.predict_step(ts, state)
    return alf_nest.flatten((rollout.output, rollout.state, rollout.info,
                             predict.output, predict.state))


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_rollout_state_is_state_dict_without_targets_and_optimizer_state(name):
    alg = _build(name, 0)
    targets = ALGORITHMS[name][1]
    full = alg.state_dict()
    assert any(k.endswith("_extra_state") for k in full)  # optimizer states are there
    assert all(any(k.startswith(t + ".") for k in full) for t in targets)
    expected = [k for k, v in full.items()
                if isinstance(v, torch.Tensor) and not k.endswith("_extra_state")
                and not any(k.startswith(t + ".") for t in targets)]
    rollout = alg.rollout_state_dict()
    assert list(rollout) == expected  # state_dict order, nothing else
    for k, t in rollout.items():
        assert isinstance(t, torch.Tensor) and not t.requires_grad and t.is_contiguous(), k
        assert torch.equal(t, full[k])
    assert list(alg.rollout_state_dict()) == list(rollout)  # deterministic


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_loaded_copy_acts_identically_and_keeps_its_own_targets(name):
    source, copy = _build(name, 0), _build(name, 1)
    before = _act(copy)
    targets = {k: v.clone() for k, v in copy.state_dict().items()
               if any(k.startswith(t + ".") for t in ALGORITHMS[name][1])}
    ptrs = {k: t.data_ptr() for k, t in copy.rollout_state_dict().items()}
    copy.load_rollout_state_dict(source.rollout_state_dict())
    after, expected = _act(copy), _act(source)
    assert len(after) == len(expected) > 0
    for got, want in zip(after, expected):
        assert torch.equal(got, want)
    assert any(not torch.equal(x, y) for x, y in zip(before, expected))  # it acted differently
    for k, t in copy.rollout_state_dict().items():  # in place: the same storage
        assert t.data_ptr() == ptrs[k], k
    for k, v in copy.state_dict().items():
        if k in targets:  # targets are the learner's business: untouched
            assert torch.equal(v, targets[k]), k
    for p in copy.parameters():
        assert p.grad is None


def test_sac_rollout_state_is_smaller_by_exactly_the_target_critic():
    alg = _build("sac", 0)
    numel = lambda d: sum(v.numel() for v in d.values() if isinstance(v, torch.Tensor))  # noqa
    rollout, full = numel(alg.rollout_state_dict()), numel(alg.state_dict())
    target = sum(p.numel() for p in alg._target_critic.parameters())
    assert target > 0 and rollout == full - target


def test_loading_into_shared_memory_keeps_it_shared():
    source, actor = _build("ppo", 0), _build("ppo", 1)
    for t in actor.rollout_state_dict().values():
        t.share_memory_()  # as an actor process whose weights live in a shared segment
    actor.load_rollout_state_dict(source.rollout_state_dict())
    for k, t in actor.rollout_state_dict().items():
        assert t.is_shared(), k
        assert torch.equal(t, source.rollout_state_dict()[k])


def test_load_is_strict_and_copies_nothing_on_error():
    source, copy = _build("sac", 0), _build("sac", 1)
    good = source.rollout_state_dict()
    unchanged = {k: v.clone() for k, v in copy.rollout_state_dict().items()}
    first, last = next(iter(good)), list(good)[-1]
    missing = {k: v for k, v in good.items() if k != first}
    with pytest.raises(ValueError, match=rf"missing keys {first}"):
        copy.load_rollout_state_dict(missing)
    with pytest.raises(ValueError, match=r"unexpected keys _target_critic\.x"):
        copy.load_rollout_state_dict(dict(good, **{"_target_critic.x": torch.zeros(1)}))
    bad_shape = dict(good, **{last: torch.zeros(good[last].shape + (2,))})
    with pytest.raises(ValueError, match=rf"mismatched tensors {last}"):
        copy.load_rollout_state_dict(bad_shape)
    bad_dtype = dict(good, **{last: good[last].double()})
    with pytest.raises(ValueError, match="float64"):
        copy.load_rollout_state_dict(bad_dtype)
    with pytest.raises(ValueError, match=r"\(a float\)"):
        copy.load_rollout_state_dict(dict(good, **{last: 1.0}))
    for k, v in copy.rollout_state_dict().items():
        assert torch.equal(v, unchanged[k]), k


def test_data_transformer_statistics_travel_with_the_weights():
    def build(seed):
        alg = _build("sac", seed)
        alg.set_data_transformer(SequentialDataTransformer(
            [ObservationNormalizer, RewardNormalizer], observation_spec=OBS))
        return alg
    learner, actor = build(0), build(1)
    ts = _time_step()
    learner.data_transformer.transform_timestep(ts, learner.data_transformer.get_initial_state(B))
    keys = [k for k in learner.rollout_state_dict() if k.startswith("_data_transformer.")]
    assert keys == ["_data_transformer.members.0.normalizer.normalizers._.mean",
                    "_data_transformer.members.0.normalizer.normalizers._.var",
                    "_data_transformer.members.0.normalizer.normalizers._.count",
                    "_data_transformer.members.1.return_stats.mean",
                    "_data_transformer.members.1.return_stats.var",
                    "_data_transformer.members.1.return_stats.count"]
    actor.data_transformer.freeze_statistics()
    actor.load_rollout_state_dict(learner.rollout_state_dict())
    stats = actor.data_transformer.members[0].normalizer.normalizers["_"]
    assert stats.count.item() == B
    torch.testing.assert_close(stats.mean, ts.observation.double().mean(0))
    # frozen: the actor's transform leaves the shipped statistics alone and records pending ones
    actor.data_transformer.transform_timestep(ts, actor.data_transformer.get_initial_state(B))
    assert stats.count.item() == B
    learner.data_transformer.merge_statistics(actor.data_transformer.pop_statistics())
    assert learner.data_transformer.members[0].normalizer.normalizers["_"].count.item() == 2 * B


class _Toy(Algorithm):
    """A module reachable under two names, excluded once: both paths are left out."""

    def __init__(self):
        super().__init__()
        self.net = nn.Linear(2, 2)
        self.train_only = nn.Linear(2, 3)
        self.alias = self.train_only
        self.exclude_from_rollout(self.train_only)
        self.exclude_from_rollout(self.train_only)


def test_exclude_from_rollout_by_identity():
    toy = _Toy()
    assert list(toy.rollout_state_dict()) == ["net.weight", "net.bias"]
    assert len(toy._rollout_excluded) == 1
    with pytest.raises(TypeError, match="nn.Module"):
        toy.exclude_from_rollout(torch.zeros(1))
