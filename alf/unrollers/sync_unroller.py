"""Synchronous unroll: step the env and the policy in lockstep in this process.

Per step: metrics on the raw TimeStep -> :class:`~alf.utils.act_step.ActStep`
(data transformer, reset policy state at FIRST, ``rollout_step``, optional action
override) -> store :class:`Experience` -> ``env.step``.
The loop body is kept free of nest-heavy work: the hot path for 8 CartPole
envs is ~100 us, dominated by the policy forward.
"""
from typing import Any, Callable, List, Optional

import torch

from alf import nest as alf_nest
from alf.data_structures import AlgStep, Experience, TimeStep
from alf.metrics import EpisodeMetrics
from alf.tensor_specs import zeros_from_spec
from alf.utils.act_step import ActStep, executed_action
from alf.unrollers.unroll_result import UnrollResult
from alf.utils.tensor_utils import detach
from alf.utils import precision


class SyncUnroller:
    """Holds the env, the carried time step / states, and runs unrolls.

    Args:
        env: a batched :class:`alf.environments.AlfEnvironment`.
        data_transformer: applied to every raw TimeStep before the algorithm sees it.
        metrics: episode metrics fed with raw time steps.
        initial_policy_state: ``fn(batch_size)`` giving the initial rollout state.
        device: where the policy runs (env tensors are moved there).
        overwrite_policy_output: store the action the env executed (``env`` built with
            ``report_executed_action``) instead of the policy's
            (``TrainerConfig.overwrite_policy_output``).
        act_dtype: the autocast dtype the policy's networks act in (None: fp32; the run
            context's ``act_dtype``, :mod:`alf.utils.precision`).
    """

    def __init__(self, env, data_transformer, metrics: EpisodeMetrics,
                 initial_policy_state: Callable[[int], Any], device: Any = "cpu",
                 overwrite_policy_output: bool = False, act_dtype: Any = None):
        self._env = env
        self._act_dtype = act_dtype
        self._overwrite_policy_output = bool(overwrite_policy_output)
        self._transformer = data_transformer
        self._metrics = metrics
        self._initial_policy_state = initial_policy_state
        self._time_step: Optional[TimeStep] = None
        self._policy_state: Any = None
        self._transformer_state: Any = None
        self._init_state_cache: Any = None
        device = torch.device(device)
        # Env tensors are CPU; move them once per step when the policy lives elsewhere.
        self._to_device = None if device.type == "cpu" else (
            lambda nest: alf_nest.map_structure(lambda x: x.to(device, non_blocking=True), nest))

    @classmethod
    def for_algorithm(cls, env, algorithm, metric_buffer_size: int = 20,
                      overwrite_policy_output: bool = False) -> "SyncUnroller":
        """An unroller stepping ``env`` with ``algorithm``'s transformer, initial rollout
        state and device (episode metrics over the last ``metric_buffer_size`` episodes)."""
        return cls(env, algorithm.data_transformer,
                   EpisodeMetrics(env.batch_size, metric_buffer_size),
                   algorithm.get_initial_rollout_state, device=algorithm.device,
                   overwrite_policy_output=overwrite_policy_output,
                   act_dtype=precision.unroll_dtype_of(algorithm))

    @property
    def env(self):
        return self._env

    @property
    def env_id_base(self) -> int:
        """``TimeStep.env_id`` of the first env (a data-parallel rank's envs come after the
        lower ranks')."""
        return int(self._env.env_id_offset)

    @property
    def metrics(self) -> EpisodeMetrics:
        return self._metrics

    @property
    def batch_size(self) -> int:
        return self._env.batch_size

    def time_step_spec(self) -> TimeStep:
        return self._env.time_step_spec()

    @property
    def env_name(self) -> str:
        return self._env.env_name

    def observation_spec(self) -> Any:
        return self._env.observation_spec()

    def action_spec(self) -> Any:
        return self._env.action_spec()

    def after_train_iter(self, algorithm: Any) -> None:
        """Nothing to do: the policy acting here is the learner's own."""

    def collect(self, policy_step: Callable[[TimeStep, Any], AlgStep], unroll_length: int,
                action_override: Optional[Callable[[AlgStep], Any]] = None) -> UnrollResult:
        """:meth:`unroll` as an :class:`UnrollResult` (``[T, B]``, every step new)."""
        experience = self.unroll(policy_step, unroll_length, action_override)
        return UnrollResult(experience, unroll_length * self._env.batch_size)

    def seed(self, seed: int) -> None:
        self._env.seed(seed)

    def close(self) -> None:
        self._env.close()

    def _ensure_started(self) -> None:
        if self._time_step is None:
            batch = self._env.batch_size
            self._time_step = self._env.reset()
            if self._to_device is not None:
                self._time_step = self._to_device(self._time_step)
            self._init_state_cache = self._initial_policy_state(batch)
            self._policy_state = self._init_state_cache
            device = alf_nest.flatten(self._time_step)[0].device
            self._transformer_state = zeros_from_spec(self._transformer.state_spec, batch,
                                                      device=device)

    def unroll(self, policy_step: Callable[[TimeStep, Any], AlgStep], unroll_length: int,
               action_override: Optional[Callable[[AlgStep], Any]] = None) -> Experience:
        """Run ``unroll_length`` steps and return time-major ``Experience [T, B]``.

        Args:
            policy_step: ``rollout_step`` (called with grad if the caller enables it).
            action_override: optional ``fn(alg_step) -> action`` (random initial collection).
        Returns:
            The stacked experience: the transformed time steps the algorithm saw,
            its actions, rollout infos and the policy state *before* each step.
            Metrics are updated once per unroll from the raw time steps.
        """
        self._ensure_started()
        act = ActStep(self._transformer, policy_step, self._init_state_cache, self._act_dtype)
        raw_step_types, raw_rewards = [], []
        # the weights are fixed during an unroll: bf16 acting casts them once, not per step
        # (not with autograd on: an on-policy rollout's graph is trained through)
        keep = None if torch.is_grad_enabled() else self._act_dtype
        with precision.keep_weight_casts(keep):
            exps, ts, pstate, tstate = self._steps(act, unroll_length, action_override,
                                                   raw_step_types, raw_rewards)
        # States carried into the next unroll must not hold this unroll's graph.
        self._time_step, self._policy_state, self._transformer_state = ts, detach(pstate), detach(tstate)
        self._metrics.update_sequence(torch.stack(raw_step_types).cpu(),
                                      torch.stack(raw_rewards).cpu())
        return alf_nest.stack(exps)

    def _steps(self, act: ActStep, unroll_length: int, action_override: Any,
               raw_step_types: List[torch.Tensor], raw_rewards: List[torch.Tensor]) -> Any:
        """The unroll's steps from the carried time step and states: ``(experiences,
        time step, policy state, transformer state)`` after them; the raw step types
        and rewards are appended to the lists given."""
        env = self._env
        ts, pstate, tstate = self._time_step, self._policy_state, self._transformer_state
        exps: List[Experience] = []
        for _ in range(unroll_length):
            raw_step_types.append(ts.step_type)
            raw_rewards.append(ts.reward)
            acted = act(ts, pstate, tstate, action_override)
            tstate = acted.transformer_state
            exps.append(acted.experience())
            action = acted.action
            ts = env.step(action.detach() if isinstance(action, torch.Tensor)
                          else alf_nest.map_structure(torch.Tensor.detach, action))
            if self._to_device is not None:
                ts = self._to_device(ts)
            if self._overwrite_policy_output:
                exps[-1] = exps[-1]._replace(action=executed_action(exps[-1].action, ts))
            pstate = acted.alg_step.state
        return exps, ts, pstate, tstate

    def reset(self) -> None:
        """Forget the carried time step: the next unroll starts with ``env.reset()``."""
        self._time_step = None
