"""Adapter from any gymnasium 1.x ``VectorEnv`` (NEXT_STEP autoreset) to :class:`AlfEnvironment`.

The step-type bookkeeping is vectorised numpy over ``[B]`` arrays; there is no
Python loop over environments. Measured cost on top of the raw
``vector_env.step`` for 8 CartPole envs (2-core CPU, raw step ~40 us):
~9-13 us (action to numpy, a few tiny numpy ops, five ``torch.from_numpy``);
measured by replaying recorded raw outputs through ``step``.

Every returned tensor is freshly allocated except ``env_id``, a constant
``env_id_offset + arange(B)`` shared by all time steps (treat it as read-only).

``step_async`` / ``step_wait`` use the vector env's own split when it has one:
gymnasium ``AsyncVectorEnv`` (``step_async``/``step_wait``, with the step
timeout) and engines with ``send(actions)`` / ``recv()`` (ale-py's
``AtariVectorEnv``, envpool, alf's ``ThreadVectorEnv``); the step then runs in
the background between the two calls. Other vector envs step inside ``step_async``.

Env-specific discount rules that need the gymnasium ``info`` dict (e.g. the
Atari life-loss discount of :class:`alf.environments.atari.LifeLossDiscount`)
plug in as an :class:`InfoHook`, so every backend shares one implementation.
"""
import functools
import multiprocessing
from typing import Any, Mapping, Optional, Protocol

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from alf.data_structures import StepType, TimeStep
from alf.environments import spec_utils
from alf.environments.alf_environment import AlfEnvironment
from alf.environments.value_check import FiniteValueCheck
from alf.environments.vector_reward import batched_reward_vector, reward_dim_of
from alf.errors import UserError
from alf.tensor_specs import TensorSpec, zeros_from_spec

#: the ``info`` key by which an env or wrapper reports the action it executed instead of
#: the agent's (read when :meth:`GymVectorEnvironment.report_executed_action` is on)
EXECUTED_ACTION_KEY = "executed_action"

# TimeStep(*fields) without the keyword-argument overhead of NamedTuple.__new__
_new_time_step = functools.partial(tuple.__new__, TimeStep)


class InfoHook(Protocol):
    """Adjusts ``discount`` from the vector env's ``info`` dict (optional, per env).

    :class:`GymVectorEnvironment` calls ``reset(info)`` after every full
    ``reset()`` and ``hook(info, discount, reset_rows)`` after every ``step``,
    before the TimeStep is built. ``discount`` is the fresh ``[B]`` float32
    array about to be returned (0 on termination, else 1); the hook may set
    entries to 0 in place (vectorised numpy, no per-env Python loop).
    ``reset_rows`` is the ``[B]`` bool mask of rows that were just autoreset
    (they are ``FIRST``; their ``info`` describes the new episode), or None
    when no row was. A hook must not touch those rows' discount.
    """

    def reset(self, info: Mapping[str, Any]) -> None:
        """Start tracking from the ``info`` of a full ``reset()``."""

    def __call__(self, info: Mapping[str, Any], discount: np.ndarray,
                 reset_rows: Optional[np.ndarray]) -> None:
        """Update ``discount`` (``[B]`` float32) in place from one step's ``info``."""


class GymVectorEnvironment(AlfEnvironment):
    """A gymnasium vector env seen as an :class:`AlfEnvironment`.

    Args:
        vector_env: a gymnasium ``VectorEnv`` whose ``metadata["autoreset_mode"]``
            is ``AutoresetMode.NEXT_STEP`` (checked; anything else raises).
        env_name: the environment id (for messages and ``env_name``).
        seed: environment ``i`` is seeded with ``seed + env_id_offset + i`` on
            the first ``reset()`` (gymnasium's ``reset(seed=seed + env_id_offset)``;
            a native vector env with one RNG for the batch, e.g. CartPole's,
            seeds it with ``seed + env_id_offset``); later resets continue the
            RNG streams instead of replaying the same episodes.
        copy_observations: copy observation arrays that need no dtype
            conversion (for vector envs that return views of reused buffers).
        step_timeout: seconds to wait for an ``AsyncVectorEnv`` step before
            raising ``multiprocessing.TimeoutError`` (None: wait forever).
        close_timeout: seconds to wait for child processes on ``close()``
            before they are terminated.
        enforce_autoreset: re-impose reward 0 / not-done on the rows being
            autoreset. Gymnasium's own vector envs already guarantee it, so the
            built-in backends pass False for them (saves ~2 us per step).
        info_hook: optional :class:`InfoHook` that may zero ``discount`` from
            the step ``info`` (e.g. on an Atari life loss); None: ``info`` is
            ignored.
        env_id_offset: ``TimeStep.env_id`` of row ``i`` is ``env_id_offset + i``
            (for one env group of several; see ``create_environment``).
    """

    def __init__(self, vector_env: gym.vector.VectorEnv, env_name: str, seed: int = 0,
                 copy_observations: bool = False, step_timeout: Optional[float] = None,
                 close_timeout: float = 10.0, enforce_autoreset: bool = True,
                 info_hook: Optional[InfoHook] = None, env_id_offset: int = 0):
        mode = vector_env.metadata.get("autoreset_mode")
        if mode is not None and not isinstance(mode, AutoresetMode):
            mode = AutoresetMode(mode)
        if mode != AutoresetMode.NEXT_STEP:
            vector_env.close()
            raise UserError(
                f"Environment '{env_name}': vector env {type(vector_env).__name__} uses autoreset "
                f"mode {mode}; alf needs AutoresetMode.NEXT_STEP.")
        self._env = vector_env
        self._env_name = env_name
        self._seed = int(seed)
        self._batch_size = int(vector_env.num_envs)
        self._step_timeout = step_timeout
        self._close_timeout = close_timeout
        self._is_async = isinstance(vector_env, gym.vector.AsyncVectorEnv)
        self._closed = False

        obs_space = vector_env.single_observation_space
        act_space = vector_env.single_action_space
        self._observation_spec = spec_utils.observation_spec_from_space(obs_space)
        self._action_spec = spec_utils.action_spec_from_space(act_space)
        self._convert_obs = spec_utils.make_observation_converter(obs_space, copy_observations)
        self._act_space = act_space
        self._convert_action = spec_utils.ActionConverter(act_space, self._action_spec).convert
        self._reports_executed_action = False
        self._reward_dim = reward_dim_of(vector_env)  # 0: scalar reward; d: [B, d] rewards
        self._reward_shape = (self._batch_size, self._reward_dim) if self._reward_dim else \
            (self._batch_size,)
        self._enforce_autoreset = enforce_autoreset
        self._info_hook = info_hook
        if self._is_async and step_timeout is not None:
            self._step_env = self._step_with_timeout
        else:
            self._step_env = vector_env.step
        self._send, self._recv = self._split_step_fns(vector_env)
        self._pending_prev_action: Any = None
        self._eager_result: Any = None  # step_async's result for envs without a split

        if int(env_id_offset) < 0:
            raise ValueError(f"env_id_offset must be >= 0, got {env_id_offset}")
        self._env_id_offset = int(env_id_offset)
        # seed the action-space samplers too (sub-env samplers are seeded by the
        # backends where they create the sub-envs)
        vector_env.action_space.seed(self._seed + self._env_id_offset)
        vector_env.single_action_space.seed(self._seed + self._env_id_offset)

        self._env_id = torch.arange(self._env_id_offset, self._env_id_offset + self._batch_size,
                                    dtype=torch.int64)
        self._prev_done = np.zeros(self._batch_size, dtype=np.bool_)
        self._any_reset = False
        self._needs_reset = True
        self._seeded = False
        self._values: Optional[FiniteValueCheck] = None  # check_finite_values()

    # ----------------------------------------------------------------- specs
    @property
    def batch_size(self) -> int:
        return self._batch_size

    @property
    def env_name(self) -> str:
        return self._env_name

    @property
    def env_id_offset(self) -> int:
        return self._env_id_offset

    @property
    def has_background_step(self) -> bool:
        """Whether the env steps in the background between ``step_async`` and ``step_wait``."""
        return self._recv is not None

    @property
    def gym_env(self) -> gym.vector.VectorEnv:
        """The wrapped gymnasium vector env (for inspection; don't step it directly)."""
        return self._env

    def observation_spec(self) -> Any:
        return self._observation_spec

    def action_spec(self) -> Any:
        return self._action_spec

    def reward_spec(self) -> TensorSpec:
        """``TensorSpec(())``, or ``TensorSpec([d])`` for an env's own vector reward
        (alf/environments/vector_reward.py)."""
        return TensorSpec((self._reward_dim,) if self._reward_dim else (), torch.float32)

    # --------------------------------------------------------------- control
    def seed(self, seed: int) -> None:
        self._check_no_pending_step("seed")
        self._seed = int(seed)
        self._seeded = False
        self._env.action_space.seed(self._seed + self._env_id_offset)
        self._env.single_action_space.seed(self._seed + self._env_id_offset)

    def reset(self) -> TimeStep:
        self._check_open()
        self._check_no_pending_step("reset")
        if self._seeded:
            obs, info = self._env.reset()
        else:
            obs, info = self._env.reset(seed=self._seed + self._env_id_offset)
            self._seeded = True
        if self._info_hook is not None:
            self._info_hook.reset(info)
        if self._values is not None:
            self._values.reset(obs)
        self._needs_reset = False
        b = self._batch_size
        self._prev_done = np.zeros(b, dtype=np.bool_)
        self._any_reset = False
        return TimeStep(
            step_type=torch.full((b,), StepType.FIRST, dtype=torch.int32),
            reward=torch.zeros(self._reward_shape, dtype=torch.float32),
            discount=torch.ones(b, dtype=torch.float32),
            observation=self._convert_obs(obs),
            prev_action=zeros_from_spec(self._action_spec, b),
            env_id=self._env_id,
            env_info={},
        )

    def step(self, action: Any) -> TimeStep:
        """See :meth:`AlfEnvironment.step`; ``action`` is a nest of ``[B, ...]``."""
        if self._needs_reset or self._async_pending:
            self._check_open()
            self._check_no_pending_step("step")
            raise RuntimeError(f"{self!r}: call reset() before step().")
        env_action, prev_action = self._convert_action(
            action, self._prev_done if self._any_reset else None)
        return self._time_step(self._step_env(env_action), prev_action)

    def step_async(self, action: Any) -> None:
        """Start a step (see :meth:`AlfEnvironment.step_async`).

        With a background-capable engine (:attr:`has_background_step`) this
        only hands the actions over (they are copied: the caller may reuse its
        buffer); otherwise the whole step runs here.
        """
        if self._needs_reset or self._async_pending:
            self._check_open()
            self._check_no_pending_step("step_async")
            raise RuntimeError(f"{self!r}: call reset() before step_async().")
        env_action, prev_action = self._convert_action(
            action, self._prev_done if self._any_reset else None)
        if self._send is None:
            self._eager_result = self._step_env(env_action)
        else:
            self._send(env_action)
        self._pending_prev_action = prev_action
        self._async_pending = True

    def step_wait(self) -> TimeStep:
        """Finish the step started by :meth:`step_async`; the TimeStep ``step`` would return."""
        self._check_open()
        self._end_pending_step()
        prev_action, self._pending_prev_action = self._pending_prev_action, None
        if self._recv is None:
            raw, self._eager_result = self._eager_result, None
        else:
            raw = self._recv()
        return self._time_step(raw, prev_action)

    def _time_step(self, raw: tuple, prev_action: Any) -> TimeStep:
        """The TimeStep of one raw vector-env step result ``(obs, reward, terminated, truncated, info)``."""
        obs, reward, terminated, truncated, info = raw
        prev_done = self._prev_done
        any_reset = self._any_reset
        terminated = np.asarray(terminated, dtype=np.bool_)
        done = terminated | truncated
        if self._reward_dim:
            reward = batched_reward_vector(info, self._batch_size, self._reward_dim)
        else:
            reward = np.asarray(reward).astype(np.float32)  # always a fresh float32 array
        if self._values is not None:
            self._values.step(obs, reward)
        if any_reset and self._enforce_autoreset:
            # NEXT_STEP autoreset reports reward 0 / not done on reset rows;
            # re-impose it for vector envs not known to honour it.
            done[prev_done] = False
            terminated = terminated & ~prev_done
            reward[prev_done] = 0.0
        # FIRST = 0, MID = 1, LAST = 2, so step_type = MID + done - prev_done
        # (done and prev_done are disjoint under NEXT_STEP autoreset).
        step_type = done.astype(np.int32)
        step_type += 1
        if any_reset:
            step_type -= prev_done
        discount = (~terminated).astype(np.float32)
        if self._info_hook is not None:
            self._info_hook(info, discount, prev_done if any_reset else None)
        self._prev_done = done
        self._any_reset = np.count_nonzero(done) > 0

        if self._reports_executed_action and EXECUTED_ACTION_KEY in info:
            prev_action = self._executed_from_info(info, prev_action,
                                                   prev_done if any_reset else None)
        from_numpy = torch.from_numpy
        return _new_time_step((from_numpy(step_type), from_numpy(reward), from_numpy(discount),
                               self._convert_obs(obs), prev_action, self._env_id, {}))

    def check_finite_values(self) -> None:
        """From now on every observation and reward is checked for NaN/inf (vectorised,
        :class:`~alf.environments.value_check.FiniteValueCheck`); one raises
        :class:`~alf.errors.NonFiniteEnvValueError` naming the env's index and step."""
        self._values = FiniteValueCheck(self._env_name, self._env.single_observation_space,
                                        self._batch_size, self._env_id_offset)

    def _step_with_timeout(self, env_action):
        self._env.step_async(env_action)
        return self._env.step_wait(timeout=self._step_timeout)

    def report_executed_action(self) -> None:
        """From now on ``TimeStep.prev_action`` is the action the env executed: the one it
        received (clipped to a Box's bounds), replaced, row by row, by what the env
        reports as ``info["executed_action"]`` (an env or wrapper that overrides the
        agent: a safety layer, a scripted or human controller). See
        ``TrainerConfig.overwrite_policy_output``."""
        self._convert_action = spec_utils.ActionConverter(self._act_space, self._action_spec,
                                                          executed=True).convert
        self._reports_executed_action = True

    def _executed_from_info(self, info: dict, prev_action: Any,
                            reset_rows: Optional[np.ndarray]) -> Any:
        """``prev_action [B, ...]`` with the rows the env reported in
        ``info["executed_action"]`` (gymnasium's vector info: values ``[B, ...]`` and the
        mask ``info["_executed_action"]``) replaced; rows starting an episode stay 0."""
        if not isinstance(prev_action, torch.Tensor):
            raise UserError(f"Environment '{self._env_name}': info['{EXECUTED_ACTION_KEY}'] is "
                            "supported for single-tensor action spaces only, not "
                            f"{self._act_space}")
        values = info[EXECUTED_ACTION_KEY]
        mask = np.asarray(info.get("_" + EXECUTED_ACTION_KEY, np.ones(self._batch_size, bool)),
                          dtype=bool)
        if reset_rows is not None:
            mask = mask & ~np.asarray(reset_rows, dtype=bool)
        if not mask.any():
            return prev_action
        rows = np.flatnonzero(mask)
        try:
            reported = np.stack([np.asarray(values[i]) for i in rows])
            reported = reported.reshape((len(rows),) + tuple(prev_action.shape[1:]))
        except (TypeError, ValueError):
            raise UserError(f"Environment '{self._env_name}': info['{EXECUTED_ACTION_KEY}'] must "
                            f"be an action of shape {tuple(prev_action.shape[1:])}, got "
                            f"{values!r}") from None
        prev_action[torch.from_numpy(rows)] = torch.from_numpy(reported).to(prev_action.dtype)
        return prev_action

    def _split_step_fns(self, vector_env: gym.vector.VectorEnv):
        """``(send(env_action), recv() -> raw step)`` of the engine's own split, or ``(None, None)``."""
        if self._is_async:
            return vector_env.step_async, functools.partial(vector_env.step_wait,
                                                            timeout=self._step_timeout)
        send, recv = getattr(vector_env, "send", None), getattr(vector_env, "recv", None)
        if callable(send) and callable(recv):
            return send, recv
        return None, None

    def render(self) -> Optional[np.ndarray]:
        """RGB frame ``[H, W, 3]`` of environment 0 when created with ``render_mode="rgb_array"``.

        Refused while a background step is pending (it would race with env 0's step).
        """
        self._check_open()
        if self.has_background_step:
            self._check_no_pending_step("render")
        if getattr(self._env, "render_mode", None) != "rgb_array":
            return None
        if isinstance(self._env, gym.vector.SyncVectorEnv):
            return self._env.envs[0].render()
        frames = self._env.render()
        if frames is None:
            return None
        if isinstance(frames, (list, tuple)):
            return frames[0] if frames else None
        frames = np.asarray(frames)
        return frames[0] if frames.ndim == 4 else frames

    def close(self) -> None:
        """Close the vector env and make sure no child process outlives it."""
        if self._closed:
            return
        self._closed = True
        self._async_pending = False  # a pending step is abandoned (the engine is closed below)
        env = self._env
        try:
            if self._is_async:
                env.close(timeout=self._close_timeout)
            else:
                env.close()
        finally:
            for p in getattr(env, "processes", ()) or ():
                _reap(p, self._close_timeout)
            multiprocessing.active_children()  # joins finished children

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{self!r} is closed.")

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown, nothing to report to
            pass


def _reap(process, timeout: float) -> None:
    """Join ``process``; terminate, then kill it if it does not exit in time."""
    process.join(timeout)
    if process.is_alive():
        process.terminate()
        process.join(1.0)
    if process.is_alive():
        process.kill()
        process.join(1.0)
