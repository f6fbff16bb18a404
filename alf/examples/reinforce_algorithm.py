"""REINFORCE (Williams 1992): the smallest complete on-policy algorithm, as a worked example.

This file is the code walked through in ``docs/writing_an_algorithm.md``. It
shows everything a new algorithm needs and nothing more:

- subclass :class:`~alf.algorithms.rl_algorithm.RLAlgorithm` and decorate it
  with ``@alf.configurable`` so gin files can name it (``@ReinforceAlgorithm``);
- declare the training regime (``on_policy = True``) and the state specs;
- refuse training settings it cannot work with in ``check_training_config``;
- ``rollout_step`` acts and records what the loss needs in ``AlgStep.info``;
- ``calc_loss`` turns the time-major ``[T, B]`` infos of one unroll into a
  per-sample loss; the base class does backward, clipping and the optimizer step;
- ``predict_step`` is the greedy policy used by evaluation and ``alf.bin.play``.

The estimator: for every step ``t`` of an unroll,
``G[t] = r[t+1] + gamma * d[t+1] * G[t+1]`` is the discounted Monte-Carlo
return that followed the action ``a[t]`` (no critic: the bootstrap value is 0),
and the loss is ``-G[t] * log pi(a[t] | o[t])``, whose gradient is Williams'
likelihood-ratio estimate of the policy gradient. By default the returns
are standardised over each batch (subtracting the batch mean is Williams'
reinforcement baseline; dividing by the std keeps the step size steady while
CartPole returns grow from ~10 to ~100), as most REINFORCE implementations do.

Use it from gin (see ``alf/examples/reinforce_cart_pole.gin``)::

    import alf.examples.reinforce_algorithm
    TrainerConfig.algorithm_ctor = @ReinforceAlgorithm
    ReinforceAlgorithm.optimizer = @alf.optimizers.Adam()
"""
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
class ReinforceAlgorithm(RLAlgorithm):
    """Monte-Carlo policy gradient (REINFORCE) with a per-batch standardised return.

    On-policy: every training iteration (``Learner.train_iter``) unrolls
    ``TrainerConfig.unroll_length`` steps of each env *with gradients*, calls
    :meth:`calc_loss` once on the ``[T, B]`` infos and takes one optimizer step
    (``RLAlgorithm.train_from_unroll``).

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
        context: given by the Trainer (counters, summaries; see ``RLAlgorithm``).
        optimizer: an optimizer factory, e.g. ``@alf.optimizers.Adam()`` in gin.
        debug_summaries, name: see ``Algorithm``.
    """

    # The training regime is declared by the algorithm, not chosen in the config: the
    # policy-gradient estimate is only valid for data from the current policy.
    on_policy = True

    def __init__(self, observation_spec: Any, action_spec: Any,
                 reward_spec: Any = TensorSpec(()),
                 actor_network_ctor: Callable = ActorDistributionNetwork,
                 gamma: float = 0.99, normalize_returns: bool = True,
                 mask_incomplete_episodes: bool = True, context: Optional[RunContext] = None,
                 optimizer: Optional[OptimizerFactory] = None, debug_summaries: bool = False,
                 name: str = "ReinforceAlgorithm"):
        if tuple(getattr(reward_spec, "shape", ())) != ():
            raise IncompatibleSpecError(f"ReinforceAlgorithm needs scalar rewards, got reward "
                                        f"spec {reward_spec}")
        actor_network = actor_network_ctor(input_spec=observation_spec, action_spec=action_spec)
        # The state threaded through rollout/predict/train steps is just the actor's
        # (``()`` for an MLP, LSTM (h, c) pairs for ActorDistributionRNNNetwork). The
        # unroller builds the initial state from this spec and resets it at FIRST steps.
        super().__init__(observation_spec, action_spec, reward_spec, context=context,
                         optimizer=optimizer, train_state_spec=actor_network.state_spec,
                         debug_summaries=debug_summaries, name=name)
        self._actor_network = actor_network
        self._gamma = gamma
        self._normalize_returns = normalize_returns
        self._mask_incomplete_episodes = mask_incomplete_episodes

    def check_training_config(self, config: Any) -> None:
        """Refuse training settings that cannot work, naming the field (the Learner calls
        this before the first step, so a bad config fails before anything is written)."""
        # RLAlgorithm's check refuses initial_collect_steps > 0 for an on-policy algorithm:
        # random initial actions would be credited to the policy's log-probabilities.
        super().check_training_config(config)
        if config.unroll_length < 2:
            raise ConfigError("ReinforceAlgorithm needs TrainerConfig.unroll_length >= 2 (a return "
                              f"needs the rewards after a step), got {config.unroll_length}")

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
