"""``OffPolicyAlgorithm``: the base of transition learners (DQN, SAC, DDPG, TD3).

Data flow of one update (see docs/design/off_policy_transitions.md)::

    replay buffer --get_batch--> Experience [B, n+1] (+ BatchInfo)
        --preprocess_experience--> Experience [B, n+1]
        --make_transitions(n_step, gamma)--> Transition [B]
        --train_step(transition, state, rollout_info)--> AlgStep(info [B])
        --calc_loss(info)--> LossInfo(loss [B], priority [B])
        --update_with_gradient (weighted by importance weights, masked by valid)
        --after_update--> target networks

A subclass implements ``rollout_step``/``predict_step`` (acting), ``train_step``
(on a :class:`~alf.replay_buffers.n_step.Transition`, every field ``[B, ...]``)
and ``calc_loss`` (on ``[B]`` infos). Target networks registered with
:meth:`register_target` follow their online modules with
``TrainerConfig``-independent ``target_update_tau`` / ``target_update_period``.
"""
from typing import Any, Optional, Tuple

import torch
from torch import nn

from alf.algorithms.rl_algorithm import RLAlgorithm
from alf.config_ranges import Discount, PositiveInt, UpdateRate
from alf.data_structures import BatchInfo, Experience, LossInfo
from alf.errors import ConfigError
from alf.replay_buffers.n_step import Transition, make_transitions
from alf.utils.summary_stats import ScalarBatch, add_q_summaries, summaries_due
from alf.utils.target_update import TargetUpdater, make_target


class OffPolicyAlgorithm(RLAlgorithm):
    """Base class of algorithms that learn from sampled n-step transitions.

    Args:
        n_step: steps summed into the TD target (1 = one-step TD).
        gamma: discount factor.
        target_update_tau: soft update factor of target networks (1 = hard copy).
        target_update_period: update targets every this many gradient steps.
        (rest): see :class:`RLAlgorithm`.
    """

    on_policy = False
    whole_replay_buffer_training = False
    clear_replay_buffer = False
    replay_sample_blocks = True

    def __init__(self, observation_spec: Any, action_spec: Any, n_step: PositiveInt = 1,
                 gamma: Discount = 0.99, target_update_tau: UpdateRate = 0.005,
                 target_update_period: PositiveInt = 1, **kwargs):
        super().__init__(observation_spec, action_spec, **kwargs)
        if n_step < 1:
            raise ConfigError(f"{type(self).__name__}.n_step must be >= 1, got {n_step}")
        if not 0.0 < target_update_tau <= 1.0:
            raise ConfigError(f"{type(self).__name__}.target_update_tau must be in (0, 1], "
                              f"got {target_update_tau}")
        if target_update_period < 1:
            raise ConfigError(f"{type(self).__name__}.target_update_period must be >= 1")
        self._n_step = int(n_step)
        self._gamma = float(gamma)
        self._target_update_tau = float(target_update_tau)
        self._target_update_period = int(target_update_period)
        self._online_for_target = []
        self._targets = []
        self._target_updater: Optional[TargetUpdater] = None

    def check_training_config(self, config: Any) -> None:
        """Transition learners sample sequences of ``n_step + 1`` steps from a buffer that
        is never cleared nor trained on whole."""
        super().check_training_config(config)
        if (self.uses_regime("whole_replay_buffer_training", config)
                or self.uses_regime("clear_replay_buffer", config)):
            raise ConfigError(f"{type(self).__name__} learns from sampled transitions: "
                              "TrainerConfig.whole_replay_buffer_training and "
                              "clear_replay_buffer must be False (or unset)")
        if config.mini_batch_length not in (1, self._n_step + 1):
            raise ConfigError(
                f"{type(self).__name__} samples sequences of n_step+1 = {self._n_step + 1} "
                f"steps, but TrainerConfig.mini_batch_length = {config.mini_batch_length}: leave "
                f"it at 1 (or {self._n_step + 1}) and set {type(self).__name__}.n_step instead")

    @property
    def n_step(self) -> int:
        return self._n_step

    @property
    def gamma(self) -> float:
        return self._gamma

    # ------------------------------------------------------------ targets
    def register_target(self, module: nn.Module) -> nn.Module:
        """Make (and return) a frozen target copy of ``module`` that follows it with the
        configured tau/period after every gradient step. Call in the subclass ctor and
        assign the result to an attribute (so it is checkpointed). The target is recorded
        (by identity) as training-only: :meth:`rollout_state_dict` leaves it out."""
        target = make_target(module)
        self._online_for_target.append(module)
        self._targets.append(target)
        self.exclude_from_rollout(target)
        return target

    def _updater(self) -> Optional[TargetUpdater]:
        if self._target_updater is None and self._targets:
            self._target_updater = TargetUpdater(
                self._online_for_target, self._targets, self._target_update_tau,
                self._target_update_period)
        return self._target_updater

    def update_targets(self) -> bool:
        """Move the targets (called by :meth:`after_update`); True when they moved."""
        updater = self._updater()
        return updater(self._context.num_updates) if updater is not None else False

    def after_update(self, experience: Any, info: Any) -> None:
        self.update_targets()

    # ---------------------------------------------------------- summaries
    def summarize_train(self, experience: Any, info: Any, loss_info: LossInfo,
                        step: Optional[int] = None) -> None:
        """The loss terms, then (when summaries are due, so other updates pay nothing)
        :meth:`add_train_summaries` of the last update's info ``[B]``, read from the
        device in one transfer."""
        super().summarize_train(experience, info, loss_info, step)
        if summaries_due(self._context, step):
            batch = ScalarBatch()
            self.add_train_summaries(batch, info)
            batch.write(self._context, step)

    def add_train_summaries(self, batch: ScalarBatch, info: Any) -> None:
        """Diagnostics of one update's info ``[B]`` into ``batch``; the default writes
        ``Value/<name>/q_*`` and ``target_q_*`` (mean, std, min, max over the valid rows)
        when the info has ``q_value`` and ``target_q`` tensors (and ``valid``)."""
        q, target = getattr(info, "q_value", None), getattr(info, "target_q", None)
        if isinstance(q, torch.Tensor) and isinstance(target, torch.Tensor):
            add_q_summaries(batch, self._name, q, target, getattr(info, "valid", ()))

    # ------------------------------------------------------------ training
    def replay_sequence_length(self) -> int:
        return self._n_step + 1

    def make_transitions(self, experience: Experience) -> Transition:
        """``[B, n+1]`` experience -> n-step :class:`Transition` ``[B]``."""
        return make_transitions(experience, self._n_step, self._gamma)

    def train_on_batch(self, experience: Experience) -> Tuple[LossInfo, Any]:
        """One gradient step on sampled ``[B, n+1]`` sequences (see module docstring).

        ``calc_loss`` returns a per-row loss ``[B]``; rows are weighted by the
        importance weights and rows whose first step is ``LAST`` are masked out.
        """
        transition = self.make_transitions(experience)
        batch = transition.valid.shape[0]
        alg_step = self.train_step(transition, self.get_initial_train_state(batch),
                                   transition.rollout_info)
        loss_info = self.calc_loss(alg_step.info)
        uniform = _from_uniform_buffer(transition.batch_info)
        if isinstance(loss_info.priority, torch.Tensor) and not uniform:
            # no transition: never sample it again
            loss_info = loss_info._replace(priority=loss_info.priority * transition.valid)
        loss = loss_info.loss
        if isinstance(loss, torch.Tensor) and loss.ndim >= 1:
            if not uniform:  # a uniform buffer's importance weights are all 1
                loss = loss * transition.importance_weights
            loss_info = self.update_with_gradient(loss_info._replace(loss=loss),
                                                  valid_masks=transition.valid)
        else:
            loss_info = self.update_with_gradient(loss_info)
        self.after_update(transition, alg_step.info)
        return loss_info, alg_step.info


def _from_uniform_buffer(batch_info: Any) -> bool:
    """Whether a batch was sampled uniformly from a replay buffer (importance weights all
    1, priorities unused), as its ``BatchInfo`` says."""
    rb = batch_info.replay_buffer if isinstance(batch_info, BatchInfo) else None
    return rb is not None and getattr(rb, "prioritized", None) is False
