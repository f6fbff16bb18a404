"""Evaluation-only builds (``is_eval=True``, ``build_algorithm(role="player")``): no
optimizer, critic, value or target parameters; a full build's state (a training
checkpoint) loads into them by the explicit rule of ``alf.experiment.training_only_keys``;
their greedy actions equal the full build's (docs/design/eval_builds.md)."""
import functools
from types import SimpleNamespace

import pytest
import torch

from alf.algorithms.bc_algorithm import BcAlgorithm
from alf.algorithms.ddpg_algorithm import DdpgAlgorithm
from alf.algorithms.dqn_algorithm import DqnAlgorithm
from alf.algorithms.iql_algorithm import IqlAlgorithm
from alf.algorithms.ppo_algorithm import PPOAlgorithm
from alf.algorithms.appo_algorithm import APPOAlgorithm
from alf.algorithms.rl_algorithm import RLAlgorithm
from alf.algorithms.sac_algorithm import SacAlgorithm
from alf.algorithms.td3_algorithm import Td3Algorithm
from alf.data_structures import AlgStep, StepType, TimeStep
from alf.environments.env_specs import EnvSpecs
from alf.errors import IncompatibleSpecError
from alf.experiment import build_algorithm, checkpoint_state_for, is_eval_build
from alf.networks import (ActorDistributionNetwork, ActorNetwork, CriticNetwork,
                          NormalProjectionNetwork, QNetwork, ValueNetwork)
from alf.tensor_specs import BoundedTensorSpec, TensorSpec
from alf.trainers.experiment_signature import load_algorithm_state
from alf.utils.optimizers import Adam

OBS = TensorSpec((3,))
BOX = BoundedTensorSpec((2,), torch.float32, -1.0, 1.0)
DISCRETE = BoundedTensorSpec((), torch.int64, 0, 2)

squashed = functools.partial(
    ActorDistributionNetwork, fc_layer_params=(8,),
    continuous_projection_net_ctor=functools.partial(NormalProjectionNetwork,
                                                     state_dependent_std=True,
                                                     scale_distribution=True))
small = dict(fc_layer_params=(8,))
CASES = {
    "ppo": (PPOAlgorithm, DISCRETE, dict(
        actor_network_ctor=functools.partial(ActorDistributionNetwork, **small),
        value_network_ctor=functools.partial(ValueNetwork, **small), optimizer=Adam(lr=1e-3))),
    "appo": (APPOAlgorithm, BOX, dict(
        actor_network_ctor=functools.partial(ActorDistributionNetwork, **small),
        value_network_ctor=functools.partial(ValueNetwork, **small), optimizer=Adam(lr=1e-3))),
    "sac": (SacAlgorithm, BOX, dict(actor_network_ctor=squashed,
                                    critic_network_ctor=functools.partial(CriticNetwork, **small))),
    "dqn": (DqnAlgorithm, DISCRETE, dict(q_network_ctor=functools.partial(QNetwork, **small))),
    "ddpg": (DdpgAlgorithm, BOX, dict(actor_network_ctor=functools.partial(ActorNetwork, **small),
                                      critic_network_ctor=functools.partial(CriticNetwork,
                                                                            **small))),
    "td3": (Td3Algorithm, BOX, dict(actor_network_ctor=functools.partial(ActorNetwork, **small),
                                    critic_network_ctor=functools.partial(CriticNetwork, **small))),
    "bc": (BcAlgorithm, BOX, dict(actor_network_ctor=squashed)),
    "iql": (IqlAlgorithm, BOX, dict(actor_network_ctor=squashed,
                                    critic_network_ctor=functools.partial(CriticNetwork, **small))),
}
# what each eval build must not have (state_dict key prefixes of the full build)
OMITTED = {"ppo": ("_value_network.",), "appo": ("_value_network.",),
           "sac": ("_critic.", "_target_critic."), "dqn": ("_target_q_network.",),
           "ddpg": ("_critic.", "_target_actor.", "_target_critic."),
           "td3": ("_critic.", "_target_actor.", "_target_critic."), "bc": (),
           "iql": ("_critic.", "_value.", "_target_critic.")}


def _time_step(n: int = 6) -> TimeStep:
    g = torch.Generator().manual_seed(1)
    return TimeStep(step_type=torch.full((n,), StepType.MID, dtype=torch.int32),
                    reward=torch.zeros(n), discount=torch.ones(n),
                    observation=torch.randn(n, 3, generator=g), prev_action=(),
                    env_id=torch.arange(n), env_info={})


def _full_and_eval(key: str):
    ctor, action_spec, kwargs = CASES[key]
    torch.manual_seed(0)
    full = ctor(OBS, action_spec, **kwargs)
    full.ensure_optimizers()
    with torch.no_grad():  # move every parameter off its init, so a load is visible
        for p in full.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    torch.manual_seed(123)  # another init: the eval build's weights come from the state
    ev = ctor(OBS, action_spec, is_eval=True, **kwargs)
    return full, ev


@pytest.mark.parametrize("key", sorted(CASES))
def test_eval_build_has_no_optimizer_nor_training_networks(key):
    full, ev = _full_and_eval(key)
    assert is_eval_build(ev) and not is_eval_build(full)
    assert full.optimizers() and ev.optimizers() == []
    eval_keys = set(ev.state_dict())
    for k in eval_keys:
        assert not k.startswith(OMITTED[key]), k
    assert eval_keys <= set(full.state_dict())
    assert sum(p.numel() for p in ev.parameters()) <= sum(p.numel() for p in full.parameters())


@pytest.mark.parametrize("key", sorted(CASES))
def test_eval_build_loads_a_training_state_and_acts_greedily_the_same(key):
    full, ev = _full_and_eval(key)
    ts = _time_step()
    state = full.state_dict()
    load_algorithm_state(ev, checkpoint_state_for(ev, state), "run")
    full.eval(), ev.eval()
    with torch.no_grad():
        a_full = full.predict_step(ts, full.get_initial_predict_state(6)).output
        a_eval = ev.predict_step(ts, ev.get_initial_predict_state(6)).output
    assert torch.equal(a_full, a_eval)


def test_a_key_the_eval_build_needs_but_the_checkpoint_lacks_is_an_error_naming_it():
    full, ev = _full_and_eval("sac")
    state = dict(full.state_dict())
    missing = next(k for k in state if k.startswith("_actor."))
    del state[missing]
    with pytest.raises(IncompatibleSpecError, match=missing.replace(".", r"\.")):
        load_algorithm_state(ev, checkpoint_state_for(ev, state), "run")


def test_an_unexpected_key_outside_the_rule_is_still_an_error():
    full, ev = _full_and_eval("dqn")
    state = dict(full.state_dict())
    state["_stray.weight"] = torch.zeros(1)
    with pytest.raises(IncompatibleSpecError, match="_stray"):
        load_algorithm_state(ev, checkpoint_state_for(ev, state), "run")


def test_actor_critic_eval_build_refuses_rollout_step_with_one_line():
    _, ev = _full_and_eval("ppo")
    with pytest.raises(RuntimeError, match="is_eval=True"):
        ev.rollout_step(_time_step(), ev.get_initial_rollout_state(6))


def _config(ctor):
    return SimpleNamespace(algorithm_ctor=ctor, data_transformer_ctor=None, num_iterations=0,
                           num_env_steps=0, summary_interval=100, summarize_first_interval=True,
                           device="cpu")


SPECS = EnvSpecs(observation_spec=OBS, action_spec=DISCRETE, reward_spec=TensorSpec(()),
                 time_step_spec=None)


def test_player_role_builds_eval_and_learner_role_builds_full():
    ctor = functools.partial(DqnAlgorithm, q_network_ctor=functools.partial(QNetwork, **small))
    player = build_algorithm(_config(ctor), SPECS, role="player")
    learner = build_algorithm(_config(ctor), SPECS, role="learner")
    assert is_eval_build(player) and not player.training
    assert not is_eval_build(learner)
    assert not any(k.startswith("_target_q_network.") for k in player.state_dict())


class _Custom(RLAlgorithm):
    """A user algorithm whose ctor has no is_eval: built in full as a player."""

    def __init__(self, observation_spec, action_spec, reward_spec=TensorSpec(()), context=None):
        super().__init__(observation_spec, action_spec, reward_spec, context=context)
        self._lin = torch.nn.Linear(3, 3)

    def predict_step(self, time_step, state=()):
        return AlgStep(output=self._lin(time_step.observation).argmax(-1), state=state)


def test_a_custom_algorithm_without_is_eval_still_builds_as_player():
    player = build_algorithm(_config(_Custom), SPECS, role="player")
    assert not is_eval_build(player)
    assert checkpoint_state_for(player, player.state_dict()).keys() == player.state_dict().keys()
