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

A step can be split in two, ``step_async(action)`` then ``step_wait()``, so
the caller can do other work while the environments step (a double-buffered
actor steps env group A while it runs the policy for group B). Every
environment supports the split; backends whose engine can step in the
background (gymnasium ``AsyncVectorEnv``, ale-py's ``AtariVectorEnv``,
envpool) really overlap, the others step in ``step_async`` or ``step_wait``.

An environment built for one *env group* of several carries an
``env_id_offset``: its ``TimeStep.env_id`` rows are ``env_id_offset + i`` and
sub-env ``i`` is seeded with ``seed + env_id_offset + i``, so groups never
share replay rows or seeds (see ``create_environment``).
"""
import abc
import logging
from typing import Any, Optional

import numpy as np
import torch

from alf import nest
from alf.data_structures import TimeStep
from alf.errors import UserError
from alf.tensor_specs import BoundedTensorSpec, TensorSpec


def _copy_leaf(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, np.ndarray):
        return x.copy()
    return x


class AlfEnvironment(abc.ABC):
    """Abstract batched environment producing :class:`TimeStep` s of shape ``[B, ...]``.

    Subclasses implement the abstract methods; ``time_step_spec`` and the
    context-manager protocol come for free. Usable as::

        with create_environment("CartPole-v1", 8) as env:
            ts = env.reset()
            ts = env.step(env.action_spec().sample((env.batch_size,)))

    Subclasses call :meth:`_check_no_pending_step` at the start of ``step``
    and ``reset``, so that either one during a pending ``step_async`` is a
    clear error rather than a silently lost step.
    """

    _async_pending: bool = False  # a step_async() awaits its step_wait()
    _async_action: Any = None  # the base split's stored action (a copy)

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

    @property
    def env_id_offset(self) -> int:
        """``TimeStep.env_id`` of row ``i`` is ``env_id_offset + i`` (0 unless built for an env group)."""
        return 0

    def env_info_spec(self) -> Any:
        """Spec nest of ``TimeStep.env_info`` (fixed across steps); ``{}`` by default."""
        return {}

    def report_executed_action(self) -> None:
        """Make ``TimeStep.prev_action`` the action the env executed (not the agent's
        request), for ``TrainerConfig.overwrite_policy_output``. Environments that cannot
        tell raise :class:`~alf.errors.UserError`."""
        raise UserError(f"{type(self).__name__} cannot report the action it executed "
                        "(TrainerConfig.overwrite_policy_output needs an env built by "
                        "create_environment)")

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

    def step_async(self, action: Any) -> None:
        """Start :meth:`step` with ``action``; :meth:`step_wait` returns its TimeStep.

        The caller may do other work in between (and may reuse its ``action``
        buffer: it is read or copied here). Exactly equivalent to
        ``step(action)``. This default stores a copy of ``action`` and steps in
        :meth:`step_wait`; engines that can step in the background override both.

        Args:
            action: as for :meth:`step`, a nest of ``[B, ...]`` tensors.
        Raises:
            RuntimeError: a previous ``step_async`` has not been waited for.
        """
        self._check_no_pending_step("step_async")
        self._async_action = nest.map_structure(_copy_leaf, action)
        self._async_pending = True

    def step_wait(self) -> TimeStep:
        """Finish the step started by :meth:`step_async`; the TimeStep ``step`` would return.

        Raises:
            RuntimeError: no :meth:`step_async` is pending.
        """
        action = self._end_pending_step()
        self._async_action = None
        return self.step(action)

    def _check_no_pending_step(self, method: str) -> None:
        """Raise the RuntimeError for calling ``method`` while a ``step_async`` is pending."""
        if self._async_pending:
            raise RuntimeError(f"{self!r}: {method}() called while a step_async() is pending; "
                               "call step_wait() first.")

    def _end_pending_step(self) -> Any:
        """Clear the pending flag (raising if there is none); returns the stored action."""
        if not self._async_pending:
            raise RuntimeError(f"{self!r}: step_wait() called without a pending step_async().")
        self._async_pending = False
        return self._async_action

    def seed(self, seed: int) -> None:
        """Seed the *next* :meth:`reset` (env ``i`` gets ``seed + env_id_offset + i``) and the action samplers.

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
