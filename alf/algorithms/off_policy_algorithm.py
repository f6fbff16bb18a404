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
from alf.replay_buffers.sample_block import SampleBlock, block_batches
from alf.tensor_specs import nbytes as spec_nbytes
from alf.utils.target_update import TargetUpdater, make_target

#: Most bytes of stored data one :meth:`OffPolicyAlgorithm.sample_replay` block may hold.
BLOCK_BYTES = 32 << 20


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
        self.__dict__["_target_updater"] = None
        self.__dict__["_blocks"] = {}  # (id(buffer), B, L) -> SampleBlock; see sample_replay
        cfg = self._config
        if cfg is not None and (self._regime("whole_replay_buffer_training")
                                or self._regime("clear_replay_buffer")):
            raise ConfigError(f"{type(self).__name__} learns from sampled transitions: "
                              "TrainerConfig.whole_replay_buffer_training and "
                              "clear_replay_buffer must be False (or unset)")
        if cfg is not None and cfg.mini_batch_length not in (1, self._n_step + 1):
            raise ConfigError(
                f"{type(self).__name__} samples sequences of n_step+1 = {self._n_step + 1} "
                f"steps, but TrainerConfig.mini_batch_length = {cfg.mini_batch_length}: leave "
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
            self.__dict__["_target_updater"] = TargetUpdater(
                self._online_for_target, self._targets, self._target_update_tau,
                self._target_update_period)
        return self._target_updater

    def update_targets(self) -> bool:
        """Move the targets (called by :meth:`after_update`); True when they moved."""
        updater = self._updater()
        return updater(self._context.num_updates) if updater is not None else False

    def after_update(self, experience: Any, info: Any) -> None:
        self.update_targets()

    # ------------------------------------------------------------ training
    def replay_sequence_length(self) -> int:
        return self._n_step + 1

    def sample_replay(self, batch_size: int, length: int,
                      buffer: Optional[Any] = None) -> Experience:
        """``[B, L]`` sequences from ``buffer`` (default: the online replay buffer); from a
        uniform buffer, drawn a block at a time.

        ``train_from_replay_buffer`` asks for ``num_updates_per_train_iter`` batches in a
        row while the buffers do not change, so from a uniform buffer one
        :class:`~alf.replay_buffers.sample_block.SampleBlock` of ``K * B`` sequences
        (``K`` = the updates per iteration, capped at :data:`BLOCK_BYTES` of data) serves
        the next ``K`` calls for that buffer with the same sampling distribution. Blocks
        (one per buffer and request shape) are dropped when :meth:`observe_for_replay`
        adds data and after every training iteration; code that writes into a buffer
        directly and then samples from the algorithm should call
        :meth:`drop_sample_block`. Prioritized buffers sample on every call (priorities
        move after every update).
        """
        rb = self._replay_buffer if buffer is None else buffer
        k = self._block_batches(batch_size, length)
        if rb.prioritized or k <= 1:
            return super().sample_replay(batch_size, length, rb)
        blocks = self._blocks
        key = (id(rb), batch_size, length)
        block = blocks.get(key)
        batch = block.next_batch() if block is not None else None  # None once used up
        if batch is None:
            block = SampleBlock(super().sample_replay(k * batch_size, length, rb), batch_size)
            blocks[key] = block
            batch = block.next_batch()
        return batch

    def _block_batches(self, batch_size: int, length: int) -> int:
        """``K`` for :meth:`sample_replay` (cached per request shape)."""
        key = (batch_size, length)
        cached = self.__dict__.get("_block_batches_cache")
        if cached is None or cached[0] != key:
            cfg = self._config
            num_updates = cfg.num_updates_per_train_iter if cfg is not None else 1
            # the bytes of a restored step (stacked frames included), not of a stored one
            k = block_batches(num_updates, batch_size, length,
                              spec_nbytes(self._full_experience_spec), BLOCK_BYTES)
            cached = (key, k)
            self.__dict__["_block_batches_cache"] = cached
        return cached[1]

    def drop_sample_block(self) -> None:
        """Forget the sampled blocks (the next :meth:`sample_replay` samples afresh)."""
        self._blocks.clear()

    def observe_for_replay(self, experience: Experience) -> None:
        self.drop_sample_block()  # the buffer changes: sequences sampled before are stale
        super().observe_for_replay(experience)

    def after_train_iter(self, experience: Any, info: Any) -> None:
        self.drop_sample_block()

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
