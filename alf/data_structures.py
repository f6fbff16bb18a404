"""Core data types that flow between environments, algorithms and replay buffers.

All fields are batched tensors: ``[B, ...]`` for one step, ``[T, B, ...]``
(time-major) for an unroll and ``[B, L, ...]`` for replay mini-batches.
"""
from typing import Any, NamedTuple

import torch

Nest = Any


class StepType:
    """Where a step sits in its episode (``int32`` tensors).

    The step after a ``LAST`` is the ``FIRST`` of a new episode. The action
    chosen at a ``LAST`` step is ignored by the environment.
    """
    FIRST = 0
    MID = 1
    LAST = 2


class TimeStep(NamedTuple):
    """One batched environment step.

    - ``step_type``: ``[B]`` int32, see :class:`StepType`.
    - ``reward``: ``[B]`` (or ``[B, k]`` for multi-dim rewards) float32, reward
      received on *arriving* at this step (0 at ``FIRST``).
    - ``discount``: ``[B]`` float32; 0 on termination, 1 on truncation and mid-episode.
    - ``observation``: nest of ``[B, ...]``.
    - ``prev_action``: nest of ``[B, ...]``, the action that led here (zeros at ``FIRST``).
    - ``env_id``: ``[B]`` int64, which environment each row came from.
    - ``env_info``: dict of ``[B, ...]`` tensors (may be empty).
    """
    step_type: Any = ()
    reward: Any = ()
    discount: Any = ()
    observation: Any = ()
    prev_action: Any = ()
    env_id: Any = ()
    env_info: Any = {}

    def is_first(self) -> torch.Tensor:
        return self.step_type == StepType.FIRST

    def is_mid(self) -> torch.Tensor:
        return self.step_type == StepType.MID

    def is_last(self) -> torch.Tensor:
        return self.step_type == StepType.LAST


class AlgStep(NamedTuple):
    """What an algorithm step returns: ``output`` (e.g. action), new ``state``, ``info`` for training."""
    output: Any = ()
    state: Any = ()
    info: Any = ()


class BatchInfo(NamedTuple):
    """Where a replay sample came from.

    - ``env_ids``: ``[B]`` int64, ``positions``: ``[B]`` int64 (absolute position of
      the first step of each sequence), ``importance_weights``: ``[B]`` float32
      (all ones without prioritized replay), ``replay_buffer``: the buffer itself
      (for n-step / future lookups); ``()`` when not sampled from a buffer.
    """
    env_ids: Any = ()
    positions: Any = ()
    importance_weights: Any = ()
    replay_buffer: Any = ()


class Experience(NamedTuple):
    """What is stored for training: the time step, the action taken, rollout info and state.

    ``rollout_info`` is whatever ``rollout_step`` put in ``AlgStep.info``;
    ``state`` is the policy state *before* this step (used to restart RNNs on
    replayed sequences); ``batch_info`` is filled when sampled from a buffer.
    """
    time_step: Any = ()
    action: Any = ()
    rollout_info: Any = ()
    state: Any = ()
    batch_info: Any = ()

    @property
    def step_type(self):
        return self.time_step.step_type

    @property
    def reward(self):
        return self.time_step.reward

    @property
    def discount(self):
        return self.time_step.discount

    @property
    def observation(self):
        return self.time_step.observation


class LossInfo(NamedTuple):
    """Result of ``calc_loss``.

    - ``loss``: per-sample loss, ``[T, B]`` (or ``[B]``); averaged by ``update_with_gradient``.
    - ``scalar_loss``: an extra scalar added after averaging (e.g. regularisers).
    - ``extra``: nest of per-sample or scalar tensors for summaries.
    - ``priority``: ``[B]`` new priorities for prioritized replay (or ``()``).
    """
    loss: Any = ()
    scalar_loss: Any = ()
    extra: Any = ()
    priority: Any = ()

