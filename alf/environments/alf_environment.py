"""The batched-environment interface every alf component talks to.

An :class:`AlfEnvironment` runs ``batch_size`` environments in lock step and
speaks :class:`alf.data_structures.TimeStep` (batched torch tensors ``[B, ...]``
on the CPU). Episode boundaries follow gymnasium 1.x "next-step" autoreset:

- ``reset()``: every row is ``FIRST`` (reward 0, discount 1, ``prev_action`` zeros).
- ``step(action)``: per row, if the previous step was ``LAST`` the environment
  starts a new episode and the row is ``FIRST`` (reward 0, discount 1,
  ``prev_action`` zeros, the action is ignored); else ``LAST`` with discount 0 on
  termination, ``LAST`` with discount 1 on truncation (time limit; the
  observation is the real final observation, so bootstrapping from it is
  right); else ``MID`` with discount 1.

Specs are available right after construction (before any step) so replay
buffers and shared-memory transports can be allocated up front.
"""
import abc
import logging
from typing import Any, Optional

import numpy as np
import torch

from alf.data_structures import TimeStep
from alf.tensor_specs import BoundedTensorSpec, TensorSpec


class AlfEnvironment(abc.ABC):
    """Abstract batched environment producing :class:`TimeStep` s of shape ``[B, ...]``.

    Subclasses implement the abstract methods; ``time_step_spec`` and the
    context-manager protocol come for free. Usable as::

        with create_environment("CartPole-v1", 8) as env:
            ts = env.reset()
            ts = env.step(env.action_spec().sample((env.batch_size,)))
    """

    # ----------------------------------------------------------------- specs
    @property
    @abc.abstractmethod
    def batch_size(self) -> int:
        """Number of environments ``B`` stepped together."""

    @property
    @abc.abstractmethod
    def env_name(self) -> str:
        """The environment id, e.g. ``"CartPole-v1"``."""

    @abc.abstractmethod
    def observation_spec(self) -> Any:
        """Spec nest of one observation (no batch dim)."""

    @abc.abstractmethod
    def action_spec(self) -> Any:
        """Spec nest of one action (no batch dim)."""

    def reward_spec(self) -> TensorSpec:
        """Spec of one reward: ``TensorSpec((), float32)``."""
        return TensorSpec((), torch.float32)

    def env_info_spec(self) -> Any:
        """Spec nest of ``TimeStep.env_info`` (fixed across steps); ``{}`` by default."""
        return {}

    def time_step_spec(self) -> TimeStep:
        """:class:`TimeStep` of specs (no batch dim); ``prev_action`` is ``action_spec()``."""
        return TimeStep(
            step_type=BoundedTensorSpec((), torch.int32, 0, 2),
            reward=self.reward_spec(),
            discount=BoundedTensorSpec((), torch.float32, 0.0, 1.0),
            observation=self.observation_spec(),
            prev_action=self.action_spec(),
            env_id=TensorSpec((), torch.int64),
            env_info=self.env_info_spec(),
        )

    # --------------------------------------------------------------- control
    @abc.abstractmethod
    def reset(self) -> TimeStep:
        """Start a new episode in every environment; all rows are ``FIRST``."""

    @abc.abstractmethod
    def step(self, action: Any) -> TimeStep:
        """Advance every environment by one step.

        Args:
            action: nest of ``[B, ...]`` tensors matching ``action_spec()`` (any
                device; numpy arrays are accepted too).
        Returns:
            the next :class:`TimeStep`, tensors ``[B, ...]`` on the CPU.
        """

    def seed(self, seed: int) -> None:
        """Seed the *next* :meth:`reset` (env ``i`` gets ``seed + i``) and the action samplers.

        Used on resume so a continued run does not replay its first episodes. This
        default, for environments that cannot be re-seeded, keeps the current
        random stream and says so.
        """
        logging.warning("%s cannot be re-seeded; it keeps its current random stream",
                        type(self).__name__)

    def render(self) -> Optional[np.ndarray]:
        """RGB frame ``[H, W, 3]`` uint8 of environment 0, or None when not rendering."""
        return None

    @abc.abstractmethod
    def close(self) -> None:
        """Release every resource (child processes included). Idempotent."""

    def __enter__(self) -> "AlfEnvironment":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(env_name={self.env_name!r}, batch_size={self.batch_size})"
