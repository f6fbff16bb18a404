"""One act step of a policy on ``B`` envs, shared by everything that acts in an env.

:class:`ActStep` is the per-step logic of the sync unroller, the async actor
(:mod:`alf.unrollers.actor_worker`), evaluation (:mod:`alf.trainers.evaluator`)
and dataset collection (:mod:`alf.dataset_tools.collect`):

1. the data transformer turns the raw env ``TimeStep [B]`` into the one the
   algorithm sees, threading the transformer's own state;
2. the policy state's rows of envs at a ``FIRST`` step are reset to the
   initial state (a stateless policy, whose state is an empty nest, skips this);
3. the policy acts (``rollout_step`` or ``predict_step``);
4. optionally, an action override replaces the action (random initial
   collection: :func:`random_actions`; epsilon-greedy evaluation; the
   collector's noise and epsilon).

The callers keep what differs: where the states live between steps (local
variables, one per env group, reset with the envs), the env stepping, the
metrics and what is stored.

It sits in :mod:`alf.utils`, below every layer that acts (docs/design/layers.md):
the unrollers, the trainers and the dataset tools use :class:`ActStep`, and the
Learner's random initial collection uses :func:`random_actions`. It needs only the core data
types and duck-typed transformers and policies.

Shapes: every tensor leaf is batch-major, ``[B, ...]``.
"""
from typing import Any, Callable, NamedTuple, Optional

import torch

from alf import nest as alf_nest
from alf.data_structures import AlgStep, Experience, TimeStep
from alf.tensor_specs import TensorSpec
from alf.utils import precision
from alf.utils.tensor_utils import reset_state_if_necessary

#: ``fn(time_step [B], policy_state [B, ...]) -> AlgStep``: ``rollout_step`` or ``predict_step``.
PolicyStep = Callable[[TimeStep, Any], AlgStep]
#: ``fn(alg_step) -> action [B, ...]``: the action to take instead of ``alg_step.output``.
ActionOverride = Callable[[AlgStep], Any]


class Acted(NamedTuple):
    """What one :class:`ActStep` call produced.

    Attributes:
        time_step: the transformed ``TimeStep [B]`` the policy saw.
        state: the policy state ``[B, ...]`` the policy acted from (after the reset at
            ``FIRST`` steps); ``()`` for a stateless policy.
        alg_step: the policy's ``AlgStep``; its ``output`` is the action taken (the
            override's, if one was given), ``state`` the state for the next step and
            ``info`` the rollout info.
        transformer_state: the data transformer's state for the next step.
    """
    time_step: TimeStep
    state: Any
    alg_step: AlgStep
    transformer_state: Any

    @property
    def action(self) -> Any:
        """The action taken, ``[B, ...]``."""
        return self.alg_step.output

    def experience(self) -> Experience:
        """The step as stored for training: the transformed time step, the action taken,
        the rollout info and the policy state before the step."""
        return Experience(time_step=self.time_step, action=self.alg_step.output,
                          rollout_info=self.alg_step.info, state=self.state)


class ActStep:
    """Transform -> reset the policy state at ``FIRST`` -> act -> optional override.

    Holds what is fixed while acting; the states are passed in and returned, so one
    instance serves several env groups.

    Args:
        transformer: the data transformer (``transform_timestep(time_step, state) ->
            (time_step, state)``); its train/eval mode is the caller's business.
        policy_step: ``fn(time_step [B], state [B, ...]) -> AlgStep`` (``rollout_step``
            or ``predict_step``).
        initial_state: the policy's initial state ``[B, ...]``; rows of envs at a
            ``FIRST`` step are replaced by its rows. An empty nest: a stateless policy.
        act_dtype: the autocast dtype the policy's networks compute in (mixed precision,
            :mod:`alf.utils.precision`; the run context's ``act_dtype``); None: fp32.
    """

    def __init__(self, transformer: Any, policy_step: PolicyStep, initial_state: Any,
                 act_dtype: Optional[torch.dtype] = None):
        self._transformer = transformer
        self._policy_step = policy_step
        self._initial_state = initial_state
        self._act_dtype = act_dtype
        self._stateful = not alf_nest.is_empty(initial_state)

    @property
    def act_dtype(self) -> Optional[torch.dtype]:
        """The dtype the policy's networks compute in (None: fp32)."""
        return self._act_dtype

    @property
    def stateful(self) -> bool:
        """Whether the policy carries a state (its initial state is not an empty nest)."""
        return self._stateful

    def __call__(self, time_step: TimeStep, policy_state: Any, transformer_state: Any,
                 action_override: Optional[ActionOverride] = None) -> Acted:
        """Act on the raw ``time_step [B]``.

        Args:
            time_step: the env's raw ``TimeStep [B]``.
            policy_state: the policy state ``[B, ...]`` after the previous step (the
                initial state at the start).
            transformer_state: the transformer's state after the previous step.
            action_override: ``fn(alg_step) -> action``, called after the policy acted;
                its action replaces ``alg_step.output``.
        """
        tts, transformer_state = self._transformer.transform_timestep(time_step,
                                                                      transformer_state)
        if self._stateful:
            policy_state = reset_state_if_necessary(policy_state, self._initial_state,
                                                    tts.is_first())
        with precision.autocast_networks(self._act_dtype):
            alg_step = self._policy_step(tts, policy_state)
        if action_override is not None:
            alg_step = alg_step._replace(output=action_override(alg_step))
        return Acted(tts, policy_state if self._stateful else (), alg_step, transformer_state)


def executed_action(stored_action: Any, next_time_step: TimeStep) -> Any:
    """The action to store for a step once the env has run it
    (``TrainerConfig.overwrite_policy_output``): ``next_time_step.prev_action [B, ...]``,
    which an env built with ``report_executed_action`` fills with what it executed,
    except in rows where ``next_time_step`` is ``FIRST`` (the env reset and ignored
    the action: ``stored_action`` stays). Same nest, dtypes and device as
    ``stored_action``."""
    reset = next_time_step.is_first()

    def pick(stored, executed):
        keep = reset.to(stored.device).reshape((-1,) + (1,) * (stored.dim() - 1))
        return torch.where(keep, stored, executed.to(stored.device, stored.dtype))

    return alf_nest.map_structure(pick, stored_action, next_time_step.prev_action)


def random_actions(action_spec: Any, device: Any = None) -> ActionOverride:
    """The action override of random initial collection (``TrainerConfig.initial_collect_steps``):
    the policy still acts (its state and rollout info are kept), but the action taken is a
    uniform sample of ``action_spec`` (``action_spec.sample``, from torch's global random
    stream), one row per env: ``[B, ...]`` with ``B`` read from the policy's action.

    Args:
        action_spec: the env's action spec: a single ``BoundedTensorSpec`` or a nest of
            them (a MultiDiscrete/Dict/Tuple action space: one sample per leaf, in
            :func:`alf.nest.flatten` order).
        device: where the sampled action is moved (the policy's device); None: left on
            the CPU, where ``sample`` makes it.
    """
    def override(alg_step: AlgStep) -> Any:
        batch = alf_nest.flatten(alg_step.output)[0].shape[0]
        if not isinstance(action_spec, TensorSpec):
            return alf_nest.map_structure(
                lambda s: s.sample((batch,)) if device is None else s.sample((batch,)).to(device),
                action_spec)
        action = action_spec.sample((batch,))
        return action if device is None else action.to(device)

    return override
