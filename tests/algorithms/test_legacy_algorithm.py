"""An algorithm written against the hooks documented before the Learner existed still
trains unchanged.

``LegacyReinforceAlgorithm`` below is ``ReinforceAlgorithm`` copied verbatim from
``alf/examples/reinforce_algorithm.py`` as it was at commit ea42a4b (only the class
name differs, so gin registers it beside the current example): its constructor takes
``env=None, config=None``, checks ``config.initial_collect_steps`` and
``config.unroll_length`` itself and passes ``env=env, config=config`` on to
``RLAlgorithm.__init__``. Through the Trainer it

(a) trains: its parameters change, and env steps and updates are counted;
(b) still gets the TrainerConfig, so its own constructor check fires with its own
    message when ``TrainerConfig.unroll_length=1``.
"""
import functools
from typing import Any, Callable, NamedTuple, Optional

import torch

import alf
from alf.algorithms.rl_algorithm import RLAlgorithm
from alf.data_structures import AlgStep, LossInfo, StepType, TimeStep
from alf.errors import ConfigError, IncompatibleSpecError
from alf.networks import ActorDistributionNetwork
from alf.tensor_specs import TensorSpec
from alf.utils import dist_utils, value_ops
from alf.utils.losses import masked_mean, normalize_for_mean
from alf.utils.optimizers import OptimizerFactory
from alf.utils.run_context import RunContext


class ReinforceInfo(NamedTuple):
    """What ``rollout_step`` records per step: ``[B]`` each, ``[T, B]`` once an unroll is stacked.

    ``reward``/``discount``/``step_type`` are those of the time step the action
    was chosen at, so the return of action ``t`` is built from ``reward[t+1:]``.
    ``log_prob`` keeps its autograd graph: the on-policy unroll runs with
    gradients enabled and ``calc_loss`` differentiates through it.
    """
    step_type: Any = ()
    reward: Any = ()
    discount: Any = ()
    log_prob: Any = ()


class ReinforceLossInfo(NamedTuple):
    """Scalars written to TensorBoard under ``Loss/<name>/...`` by ``summarize_train``."""
    pg_loss: Any = ()
    mean_return: Any = ()
    valid_fraction: Any = ()


@alf.configurable
class LegacyReinforceAlgorithm(RLAlgorithm):
    """Monte-Carlo policy gradient (REINFORCE) with a per-batch standardised return.

    On-policy: every training iteration unrolls ``TrainerConfig.unroll_length``
    steps of each env *with gradients*, calls :meth:`calc_loss` once on the
    ``[T, B]`` infos and takes one optimizer step (``RLAlgorithm.train_from_unroll``).

    Args:
        observation_spec, action_spec, reward_spec: the (transformed) env specs;
            rewards must be scalars.
        actor_network_ctor: called as ``ctor(input_spec=, action_spec=)``; returns a
            network mapping observations ``[B, ...]`` (and a state) to an action
            distribution (``ActorDistributionNetwork``, or the RNN variant).
        gamma: discount of the Monte-Carlo return.
        normalize_returns: standardise the returns over the valid steps of each
            batch (mean 0, std 1) before weighting the log-probabilities.
        mask_incomplete_episodes: train only on steps whose episode ends inside
            the unroll, so every return is a true Monte-Carlo return. If False,
            an episode cut by the end of the unroll is treated as if it ended
            there (its tail returns are too small). Make ``unroll_length``
            comfortably longer than typical episodes either way.
        env, config, context: given by the Trainer (see ``RLAlgorithm``).
        optimizer: an optimizer factory, e.g. ``@alf.optimizers.Adam()`` in gin.
        debug_summaries, name: see ``Algorithm``.
    """

    # The training regime is a property of the algorithm (DESIGN lesson 3): the
    # policy-gradient estimate is only valid for data from the current policy.
    on_policy = True

    def __init__(self, observation_spec: Any, action_spec: Any,
                 reward_spec: Any = TensorSpec(()),
                 actor_network_ctor: Callable = ActorDistributionNetwork,
                 gamma: float = 0.99, normalize_returns: bool = True,
                 mask_incomplete_episodes: bool = True,
                 env: Any = None, config: Any = None, context: Optional[RunContext] = None,
                 optimizer: Optional[OptimizerFactory] = None, debug_summaries: bool = False,
                 name: str = "ReinforceAlgorithm"):
        if tuple(getattr(reward_spec, "shape", ())) != ():
            raise IncompatibleSpecError(f"ReinforceAlgorithm needs scalar rewards, got reward "
                                        f"spec {reward_spec}")
        # Incompatible training settings fail here, naming the field (DESIGN lesson 3).
        if config is not None and config.initial_collect_steps > 0:
            # Random initial actions would be credited to the policy's log-probabilities.
            raise ConfigError("ReinforceAlgorithm is on-policy: TrainerConfig.initial_collect_steps "
                              f"must be 0, got {config.initial_collect_steps}")
        if config is not None and config.unroll_length < 2:
            raise ConfigError("ReinforceAlgorithm needs TrainerConfig.unroll_length >= 2 (a return "
                              f"needs the rewards after a step), got {config.unroll_length}")
        actor_network = actor_network_ctor(input_spec=observation_spec, action_spec=action_spec)
        # The state threaded through rollout/predict/train steps is just the actor's
        # (``()`` for an MLP, LSTM (h, c) pairs for ActorDistributionRNNNetwork). The
        # unroller builds the initial state from this spec and resets it at FIRST steps.
        super().__init__(observation_spec, action_spec, reward_spec, env=env, config=config,
                         context=context, optimizer=optimizer,
                         train_state_spec=actor_network.state_spec,
                         debug_summaries=debug_summaries, name=name)
        self._actor_network = actor_network
        self._gamma = gamma
        self._normalize_returns = normalize_returns
        self._mask_incomplete_episodes = mask_incomplete_episodes

    # --------------------------------------------------------------- acting
    def predict_step(self, time_step: TimeStep, state: Any) -> AlgStep:
        """Greedy action (the distribution's mode) for evaluation and ``alf.bin.play``."""
        dist, new_state = self._actor_network(time_step.observation, state=state)
        return AlgStep(output=dist_utils.get_mode(dist), state=new_state)

    def rollout_step(self, time_step: TimeStep, state: Any) -> AlgStep:
        """Sample an action ``[B]`` and record what :meth:`calc_loss` needs.

        Called by the unroller with gradients enabled (``on_policy``), so
        ``info.log_prob`` carries the graph back to the actor's parameters.
        """
        dist, new_state = self._actor_network(time_step.observation, state=state)
        # rsample() for continuous actions: detach so only log_prob carries gradient.
        action = dist_utils.sample_action(dist).detach()
        info = ReinforceInfo(step_type=time_step.step_type, reward=time_step.reward,
                             discount=time_step.discount,
                             log_prob=dist_utils.compute_log_probability(dist, action))
        return AlgStep(output=action, state=new_state, info=info)

    # ------------------------------------------------------------- training
    def calc_loss(self, info: ReinforceInfo) -> LossInfo:
        """Policy-gradient loss ``[T-1, B]`` from one unroll's infos ``[T, B]``.

        The last step of the unroll has no next reward in this unroll, so losses
        cover steps ``0 .. T-2``. Masked out (weight 0):

        - LAST steps: the action chosen there is ignored by the env and the
          next step belongs to a new episode;
        - with ``mask_incomplete_episodes``, steps whose episode has not ended
          by the end of the unroll (their return is incomplete).

        ``normalize_for_mean`` rescales the loss so that the plain mean taken by
        ``update_with_gradient`` equals the mean over valid steps.
        """
        reward, step_type = info.reward, info.step_type
        # Monte-Carlo returns: values of 0 everywhere make discounted_return
        # bootstrap nothing (G = 0 after LAST and at the end of the unroll).
        returns = value_ops.discounted_return(
            rewards=reward, values=torch.zeros_like(reward), step_types=step_type,
            discounts=info.discount, gamma=self._gamma)  # [T-1, B], no grad
        is_last = step_type == StepType.LAST  # [T, B]
        valid = ~is_last[:-1]
        if self._mask_incomplete_episodes:
            # ends_later[t]: some step >= t is LAST (reverse cumulative "any" over time).
            ends_later = is_last.flip(0).to(torch.int32).cumsum(0).flip(0) > 0
            valid = valid & ends_later[1:]
        if self._normalize_returns:
            mean = masked_mean(returns, valid)
            std = masked_mean((returns - mean) ** 2, valid).sqrt()
            advantages = (returns - mean) / (std + 1e-8)
        else:
            advantages = returns
        pg_loss = -advantages * info.log_prob[:-1]
        extra = ReinforceLossInfo(pg_loss=masked_mean(pg_loss.detach(), valid),
                                  mean_return=masked_mean(returns, valid),
                                  valid_fraction=valid.float().mean())
        return LossInfo(loss=normalize_for_mean(pg_loss, valid), extra=extra)


# ------------------------------------------------------------------------------ tests
import warnings  # noqa: E402

import pytest  # noqa: E402

from alf.environments.factory import create_environment  # noqa: E402
from alf.utils.optimizers import Adam  # noqa: E402
from tests.learner_helpers import learner_for  # noqa: E402

NUM_ENVS, UNROLL, ITERATIONS = 2, 16, 3

LEGACY_CART_POLE = f"""
create_environment.env_name = "CartPole-v1"
create_environment.num_parallel_environments = {NUM_ENVS}
ActorDistributionNetwork.fc_layer_params = (8,)
alf.optimizers.Adam.lr = 1e-2
LegacyReinforceAlgorithm.optimizer = @alf.optimizers.Adam()
TrainerConfig.algorithm_ctor = @LegacyReinforceAlgorithm
TrainerConfig.random_seed = 0
TrainerConfig.num_iterations = {ITERATIONS}
TrainerConfig.num_env_steps = 0
TrainerConfig.unroll_length = {UNROLL}
TrainerConfig.num_threads = 1
TrainerConfig.evaluate = False
TrainerConfig.summary_interval = 1
TrainerConfig.checkpoint_interval = 1000
TrainerConfig.progress_interval_seconds = 0.0
"""


def test_legacy_algorithm_trains_through_the_trainer(make_trainer, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # the Trainer passes no env
        trainer = make_trainer(tmp_path / "run", LEGACY_CART_POLE)
    try:
        alg = trainer.algorithm
        assert type(alg) is LegacyReinforceAlgorithm and alg.on_policy
        assert alg.config is not None and alg.config.unroll_length == UNROLL  # got its config
        before = [p.detach().clone() for p in alg.parameters()]
        assert before
        trainer.run()
        ctx = trainer.context
        assert ctx.iteration == ITERATIONS
        assert ctx.env_steps == ITERATIONS * UNROLL * NUM_ENVS
        assert ctx.num_updates == ITERATIONS  # one on-policy update per unroll
        after = list(alg.parameters())
        assert all(not torch.equal(a, b) for a, b in zip(after, before))
        assert all(torch.isfinite(p).all() for p in after)
        assert trainer.learner.replay_buffer is None  # on-policy: no buffer
    finally:
        trainer.close()


@pytest.mark.parametrize("param, message", [
    ("TrainerConfig.unroll_length=1",
     "ReinforceAlgorithm needs TrainerConfig.unroll_length >= 2 (a return needs the rewards "
     "after a step), got 1"),
    ("TrainerConfig.initial_collect_steps=10",
     "ReinforceAlgorithm is on-policy: TrainerConfig.initial_collect_steps must be 0, got 10"),
])
def test_legacy_constructor_config_check_still_fires(make_trainer, tmp_path, param, message):
    with pytest.raises(ConfigError) as info:
        make_trainer(tmp_path / "run", LEGACY_CART_POLE, [param])
    assert str(info.value).startswith(message), str(info.value)


def test_legacy_algorithm_given_an_env_warns_and_trains_standalone():
    env = create_environment("CartPole-v1", NUM_ENVS, backend="vector", seed=0)
    try:
        ctx = RunContext(num_iterations=2)
        with pytest.warns(DeprecationWarning, match="no longer takes an env"):
            alg = LegacyReinforceAlgorithm(
                env.observation_spec(), env.action_spec(), env=env, context=ctx,
                optimizer=Adam(lr=1e-2), mask_incomplete_episodes=False,  # no episode may end
                actor_network_ctor=functools.partial(ActorDistributionNetwork,
                                                     fc_layer_params=(8,)))
        learner = learner_for(alg, env, unroll_length=UNROLL)
        before = [p.detach().clone() for p in alg.parameters()]
        assert learner.train_iter() == UNROLL * NUM_ENVS
        assert ctx.env_steps == UNROLL * NUM_ENVS and ctx.num_updates == 1
        assert all(not torch.equal(a, b) for a, b in zip(alg.parameters(), before))
    finally:
        env.close()


@alf.configurable
class LegacyLoopReinforce(LegacyReinforceAlgorithm):
    """An algorithm written before the Learner that changed the loop itself."""

    def train_iter(self):
        raise AssertionError("never called: the Learner owns the loop")


def test_a_legacy_loop_override_is_one_config_error_naming_it(make_trainer, tmp_path):
    """Silently bypassing an algorithm's own train_iter would train something else."""
    conf = LEGACY_CART_POLE.replace("LegacyReinforceAlgorithm", "LegacyLoopReinforce")
    with pytest.raises(ConfigError, match="LegacyLoopReinforce overrides train_iter: the "
                                          "training loop moved from RLAlgorithm"):
        make_trainer(tmp_path / "run", conf)
    assert not (tmp_path / "run").exists()
