"""Data transformers: per-step preprocessing between the environment and the algorithm.

Every batched :class:`TimeStep` produced during rollout and evaluation goes
through ``transform_timestep(time_step, state)`` before the algorithm sees it.
Transformers are ``nn.Module`` s, so running statistics (observation / reward
normalisers) are saved in checkpoints through ``state_dict`` and follow
``.to(device)``; they are picklable. Statistics only update while the module
is in training mode; the trainer calls ``.eval()`` for evaluation.

Learner-owned statistics (async collection): an actor's copy runs with
``freeze_statistics(True)``; it normalises with the statistics the learner
shipped (they are buffers, so part of ``Algorithm.rollout_state_dict``) and
accumulates the moments of what it saw separately. ``pop_statistics()`` on the
actor returns those moments (a small picklable dict of tensors) and resets
them; ``merge_statistics(moments)`` on the learner folds them in exactly::

    actor:   transformer.freeze_statistics(True)        # once, after building
             ... unroll (training mode) ...
             moments = transformer.pop_statistics()      # ship with the trajectory
    learner: transformer.merge_statistics(moments)       # before the next weights go out

Transformers without statistics return ``{}`` and accept only ``{}``.

The trainer builds them with ``TrainerConfig.data_transformer_ctor`` via
:func:`create_data_transformer`, calling each constructor as
``ctor(observation_spec=...)``; everything else is bound in gin, e.g.::

    TrainerConfig.data_transformer_ctor = [@ObservationNormalizer, @RewardNormalizer]
    RewardNormalizer.gamma = 0.99
"""
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn

import alf
from alf.config_ranges import Discount, NonNegative, Positive
from alf.data_structures import Experience, StepType, TimeStep
from alf.errors import ConfigError
from alf.tensor_specs import TensorSpec, zeros_from_spec
from alf.utils.normalizers import NestNormalizer, RunningMeanVar

Nest = Any
TransformerCtor = Callable[..., "DataTransformer"]
#: What :meth:`DataTransformer.pop_statistics` returns: a (possibly nested) dict of tensors.
Statistics = Dict[str, Any]


class DataTransformer(nn.Module):
    """Base class: maps a batched ``TimeStep`` (and a transformer state) to a new one.

    Args:
        observation_spec: nest of :class:`TensorSpec` of the incoming observation.
        state_spec: nest of :class:`TensorSpec` of the per-environment state
            (``()`` for stateless transformers).
    Subclasses that change the observation set ``self._transformed_observation_spec``.

    Class attributes:
        changes_observation: False for transformers that only touch rewards (or
            nothing); only those may follow a frame stacker.
        stacks_frames: True for :class:`~alf.algorithms.frame_stacker.FrameStacker`.
    """

    changes_observation: bool = True
    stacks_frames: bool = False

    def __init__(self, observation_spec: Nest, state_spec: Nest = ()):
        super().__init__()
        self._observation_spec = observation_spec
        self._transformed_observation_spec = observation_spec
        self._state_spec = state_spec
        self._statistics_frozen = False

    @property
    def observation_spec(self) -> Nest:
        """Spec of the observation this transformer receives."""
        return self._observation_spec

    @property
    def transformed_observation_spec(self) -> Nest:
        """Spec of the observation after :meth:`transform_timestep`."""
        return self._transformed_observation_spec

    @property
    def state_spec(self) -> Nest:
        """Spec of the state threaded through :meth:`transform_timestep` (``()`` if none)."""
        return self._state_spec

    def get_initial_state(self, batch_size: int, device=None) -> Nest:
        """Zero state ``[batch_size, ...]`` for :attr:`state_spec`."""
        return zeros_from_spec(self._state_spec, batch_size, device=device)

    def transform_timestep(self, time_step: TimeStep, state: Nest) -> Tuple[TimeStep, Nest]:
        """Transform one batched step (``[B, ...]`` fields); returns ``(time_step, new_state)``."""
        raise NotImplementedError

    def transform_replay(self, time_step: TimeStep) -> TimeStep:
        """Transform stored RAW steps (an offline dataset's, any batch dims, e.g. ``[B, L]``)
        the way :meth:`transform_timestep` transforms live ones, with the current
        statistics and without updating them or threading a state.

        Offline datasets hold raw env data (docs/design/offline_dataset_format.md), so the
        algorithm's transformer is applied when they are sampled. A
        :class:`~alf.algorithms.frame_stacker.FrameStacker` returns the step as is: stored
        frames are re-stacked when sampled (``replay_buffers/experience_storage.py``).
        Subclasses that change observations or rewards override this.
        """
        raise NotImplementedError(
            f"{type(self).__name__} does not define transform_replay(), so it cannot be "
            "applied to offline (raw) data; implement it or train without an offline dataset")

    def transform_experience(self, experience: Experience) -> Experience:
        """Transform a mini-batch ``[B, L]`` sampled from the online replay buffer, before
        the algorithm's ``preprocess_experience``; ``experience.batch_info`` holds the rows,
        start positions and the buffer, so a transformer may read other stored steps
        (hindsight relabeling, :class:`~alf.algorithms.hindsight.HindsightRelabeler`).
        Called by :func:`~alf.algorithms.replay_training.preprocess_sampled` on the
        learner. Default: the batch unchanged (the same object)."""
        return experience

    def observe_dataset(self, time_step: TimeStep) -> None:
        """Fold a chunk of an offline dataset's RAW steps (any batch dims) into this
        transformer's statistics before offline/hybrid training starts, as d3rlpy fits
        its observation scaler on the dataset: without it a pure offline run, which
        steps no env, would normalise with the initial statistics. Default: nothing."""

    # ------------------------------------------------- learner-owned statistics
    @property
    def statistics_frozen(self) -> bool:
        """Whether :meth:`freeze_statistics` is on (see the module docstring)."""
        return self._statistics_frozen

    def freeze_statistics(self, frozen: bool = True) -> None:
        """Actor side: keep the (learner's) statistics fixed and accumulate what is seen in
        training mode for :meth:`pop_statistics` instead. Applies to every transformer and
        :class:`~alf.utils.normalizers.RunningMeanVar` inside this one."""
        for m in self.modules():
            if isinstance(m, DataTransformer):
                m._statistics_frozen = bool(frozen)
            elif isinstance(m, RunningMeanVar):
                m.freeze(frozen)

    def pop_statistics(self) -> Statistics:
        """The moments accumulated while frozen since the last call (then reset): a dict of
        tensors with the same keys every call; ``{}`` for a transformer without statistics.
        Subclasses with statistics override this and :meth:`merge_statistics`."""
        return {}

    def merge_statistics(self, statistics: Statistics) -> None:
        """Learner side: fold in a :meth:`pop_statistics` of a copy built from the same
        config, exactly (the result is as if this transformer had seen that data)."""
        if statistics:
            raise ValueError(f"{type(self).__name__} has no statistics to merge, got "
                             f"{sorted(statistics)}: the actor's transformer was built from a "
                             "different config")


@alf.configurable
class IdentityDataTransformer(DataTransformer):
    """Leaves time steps unchanged (what ``data_transformer_ctor=None`` gives)."""

    changes_observation = False

    def __init__(self, observation_spec: Nest):
        super().__init__(observation_spec)

    def transform_timestep(self, time_step: TimeStep, state: Nest) -> Tuple[TimeStep, Nest]:
        return time_step, state

    def transform_replay(self, time_step: TimeStep) -> TimeStep:
        return time_step


@alf.configurable
class SequentialDataTransformer(DataTransformer):
    """Applies several transformers in order; each is built on the previous one's output spec.

    Args:
        data_transformer_ctors: constructors called as ``ctor(observation_spec=...)``.
        observation_spec: spec of the environment observation.
    The state is a tuple with one entry per member (``()`` for stateless ones).
    """

    def __init__(self, data_transformer_ctors: Sequence[TransformerCtor], observation_spec: Nest):
        members = []
        spec = observation_spec
        for ctor in data_transformer_ctors:
            member = ctor(observation_spec=spec)
            if not isinstance(member, DataTransformer):
                raise TypeError(f"{ctor} built {type(member).__name__}, not a DataTransformer")
            if any(m.stacks_frames for m in members) and member.changes_observation:
                raise ConfigError(
                    f"{type(member).__name__} changes observations but comes after a "
                    "FrameStacker in data_transformer_ctor: replay buffers store single frames "
                    "and re-stack them, so list FrameStacker after every transformer that "
                    "changes observations (reward transformers may follow it).")
            members.append(member)
            spec = member.transformed_observation_spec
        super().__init__(observation_spec, state_spec=tuple(m.state_spec for m in members))
        self.members = nn.ModuleList(members)
        self._transformed_observation_spec = spec

    def transform_timestep(self, time_step: TimeStep, state: Nest) -> Tuple[TimeStep, Nest]:
        if len(state) != len(self.members):
            raise ValueError(f"SequentialDataTransformer expects a tuple of {len(self.members)} "
                             f"member states (see state_spec), got {state!r}")
        new_states = []
        for member, member_state in zip(self.members, state):
            time_step, member_state = member.transform_timestep(time_step, member_state)
            new_states.append(member_state)
        return time_step, tuple(new_states)

    def transform_replay(self, time_step: TimeStep) -> TimeStep:
        for member in self.members:
            time_step = member.transform_replay(time_step)
        return time_step

    def transform_experience(self, experience: Experience) -> Experience:
        for member in self.members:
            experience = member.transform_experience(experience)
        return experience

    def observe_dataset(self, time_step: TimeStep) -> None:
        for member in self.members:  # each member sees what it would see in training
            member.observe_dataset(time_step)
            time_step = member.transform_replay(time_step)

    def pop_statistics(self) -> Statistics:
        """``{str(member index): member.pop_statistics()}`` for members with statistics."""
        out = {}
        for i, member in enumerate(self.members):
            stats = member.pop_statistics()
            if stats:
                out[str(i)] = stats
        return out

    def merge_statistics(self, statistics: Statistics) -> None:
        """Hand every member its entry of a :meth:`pop_statistics` (``{}`` if none)."""
        keys = {str(i) for i in range(len(self.members))}
        unknown = sorted(set(statistics) - keys)
        if unknown:
            raise ValueError(f"SequentialDataTransformer.merge_statistics: no members {unknown} "
                             f"(it has {len(self.members)})")
        for i, member in enumerate(self.members):
            member.merge_statistics(statistics.get(str(i), {}))


@alf.configurable
class ObservationNormalizer(DataTransformer):
    """Normalise float observations by running mean/variance (like SB3's ``VecNormalize``).

    ``obs -> clip((obs - mean) / sqrt(var + epsilon), -clipping, clipping)``,
    statistics updated (training mode only) with every step before normalising.

    Args:
        observation_spec: observation spec nest; only floating-point leaves are
            normalised (uint8 images and integer leaves pass through).
        clipping: bound of the normalised values; ``None`` or 0 disables clipping.
        epsilon: added to the variance for numerical safety.
        fields: optional nest paths (``"state"``, ``"goal.pos"``) restricting which
            float leaves are normalised; ``None`` means all of them.
    Normalised leaves become unbounded float32 :class:`TensorSpec` of the same shape.

    Statistics (:meth:`pop_statistics`): ``{nest path: {"count", "mean", "var"}}``.
    """

    def __init__(self, observation_spec: Nest, clipping: Optional[NonNegative] = 5.0,
                 epsilon: NonNegative = 1e-8, fields: Optional[Sequence[str]] = None):
        super().__init__(observation_spec)
        self.normalizer = NestNormalizer(observation_spec, clip=clipping, epsilon=epsilon,
                                         fields=fields)
        self._transformed_observation_spec = self.normalizer.normalized_spec

    def transform_timestep(self, time_step: TimeStep, state: Nest) -> Tuple[TimeStep, Nest]:
        if self.training:  # into the pending moments when frozen
            self.normalizer.update(time_step.observation)
        return time_step._replace(observation=self.normalizer.normalize(time_step.observation)), state

    def transform_replay(self, time_step: TimeStep) -> TimeStep:
        return time_step._replace(observation=self.normalizer.normalize(time_step.observation))

    def observe_dataset(self, time_step: TimeStep) -> None:
        self.normalizer.update(time_step.observation)

    def pop_statistics(self) -> Statistics:
        return self.normalizer.pop_pending()

    def merge_statistics(self, statistics: Statistics) -> None:
        self.normalizer.merge(statistics)


@alf.configurable
class RewardScaling(DataTransformer):
    """Multiply rewards by ``scale``.

    Args:
        observation_spec: the env's observation spec (passed by the trainer).
        scale: the factor applied to every reward.
    """

    changes_observation = False

    def __init__(self, observation_spec: Nest, scale: float = 1.0):
        super().__init__(observation_spec)
        self._scale = scale

    def transform_timestep(self, time_step: TimeStep, state: Nest) -> Tuple[TimeStep, Nest]:
        return time_step._replace(reward=time_step.reward * self._scale), state

    def transform_replay(self, time_step: TimeStep) -> TimeStep:
        return self.transform_timestep(time_step, ())[0]


@alf.configurable
class RewardClipping(DataTransformer):
    """Clamp rewards to ``[minmax[0], minmax[1]]`` (``(-1, 1)`` is DQN-style Atari clipping).

    Args:
        observation_spec: the env's observation spec (passed by the trainer).
        minmax: ``(min, max)`` bounds of the clipped reward.
    """

    changes_observation = False

    def __init__(self, observation_spec: Nest, minmax: Tuple[float, float] = (-1.0, 1.0)):
        super().__init__(observation_spec)
        if minmax[0] > minmax[1]:
            raise ValueError(f"RewardClipping.minmax must be (min, max) with min <= max, got {minmax}")
        self._minmax = (float(minmax[0]), float(minmax[1]))

    def transform_timestep(self, time_step: TimeStep, state: Nest) -> Tuple[TimeStep, Nest]:
        return time_step._replace(reward=time_step.reward.clamp(*self._minmax)), state

    def transform_replay(self, time_step: TimeStep) -> TimeStep:
        return self.transform_timestep(time_step, ())[0]


@alf.configurable
class RewardNormalizer(DataTransformer):
    """Divide rewards by the running std of the discounted return (SB3 ``VecNormalize``).

    Per environment the state keeps ``R = gamma * R + reward`` (reset to 0 at
    ``FIRST``); in training mode the non-FIRST returns ``R`` update a running
    variance, and rewards become ``clip(reward / sqrt(var + epsilon), +-clip_value)``.
    The mean is not subtracted, so the sign of rewards is kept.

    Args:
        observation_spec: unused except to record the spec.
        gamma: discount of the running return (match the algorithm's).
        clip_value: bound of the normalised reward; ``None`` or 0 disables clipping.
        epsilon: added to the variance.
        update_max_calls: stop updating the statistics after this many training
            steps (``None``: never stop); the count is checkpointed. With statistics
            merged from actors (:meth:`merge_statistics`) the count is the number of
            actor steps merged, and a merge is taken whole or (once the count reached
            ``update_max_calls``) not at all.
        reward_shape: shape of one reward (``()``, or ``(k,)`` for multi-dim rewards).
    State: ``TensorSpec(reward_shape)`` per environment, i.e. ``[B]`` by default.

    Statistics (:meth:`pop_statistics`): ``{"return": {"count", "mean", "var"},
    "calls": int64 scalar}``, ``calls`` being the steps accumulated while frozen.
    """

    changes_observation = False

    def __init__(self, observation_spec: Nest, gamma: Discount = 0.99,
                 clip_value: Optional[NonNegative] = 10.0, epsilon: NonNegative = 1e-8,
                 update_max_calls: Optional[int] = None, reward_shape: Sequence[int] = ()):
        super().__init__(observation_spec, state_spec=TensorSpec(reward_shape, torch.float32))
        self._gamma = gamma
        self._clip_value = clip_value
        self._epsilon = epsilon
        self._update_max_calls = update_max_calls
        self._num_updates = 0
        self._pending_calls = 0
        self.return_stats = RunningMeanVar(reward_shape)

    def transform_timestep(self, time_step: TimeStep, state: torch.Tensor) -> Tuple[TimeStep, torch.Tensor]:
        reward = time_step.reward
        if tuple(reward.shape[1:]) != tuple(self.return_stats.shape):
            raise ConfigError(
                f"RewardNormalizer: the reward has shape {tuple(reward.shape[1:])} per env and "
                f"RewardNormalizer.reward_shape is {tuple(self.return_stats.shape)}: set "
                f"RewardNormalizer.reward_shape = {tuple(reward.shape[1:])} (one statistic per "
                "reward column)")
        is_first = time_step.step_type == StepType.FIRST  # [B]
        first = is_first.reshape(is_first.shape + (1,) * (reward.ndim - is_first.ndim))
        ret = torch.where(first, torch.zeros_like(state), state * self._gamma + reward)
        if self.training and (self._update_max_calls is None
                              or self._num_updates < self._update_max_calls):
            self.return_stats.update(ret, mask=~is_first)  # into the pending moments when frozen
            if self._statistics_frozen:
                self._pending_calls += 1
            else:
                self._num_updates += 1
        return time_step._replace(reward=self._scaled(reward)), ret

    def _scaled(self, reward: torch.Tensor) -> torch.Tensor:
        new_reward = reward * torch.rsqrt(self.return_stats.var + self._epsilon).to(reward.dtype)
        if self._clip_value:
            new_reward = new_reward.clamp(-self._clip_value, self._clip_value)
        return new_reward

    def transform_replay(self, time_step: TimeStep) -> TimeStep:
        """Scale by the current return std (the running return is not tracked for replay)."""
        return time_step._replace(reward=self._scaled(time_step.reward))

    def pop_statistics(self) -> Statistics:
        calls = torch.tensor(self._pending_calls, dtype=torch.int64)
        self._pending_calls = 0
        return {"return": self.return_stats.pop_pending(), "calls": calls}

    def merge_statistics(self, statistics: Statistics) -> None:
        if set(statistics) != {"return", "calls"}:
            raise ValueError(f"RewardNormalizer.merge_statistics expects keys ['calls', "
                             f"'return'] (a RewardNormalizer's pop_statistics), got "
                             f"{sorted(statistics)}")
        if self._update_max_calls is not None and self._num_updates >= self._update_max_calls:
            return
        m = statistics["return"]
        self.return_stats.merge(m["count"], m["mean"], m["var"])
        self._num_updates += int(statistics["calls"])

    def get_extra_state(self) -> dict:
        return {"num_updates": self._num_updates}

    def set_extra_state(self, state: dict) -> None:
        self._num_updates = int(state["num_updates"])


def create_data_transformer(
        data_transformer_ctor: Union[None, TransformerCtor, Sequence[TransformerCtor]],
        observation_spec: Nest) -> DataTransformer:
    """Build the trainer's data transformer.

    ``None`` (or an empty list) gives :class:`IdentityDataTransformer`; a list or
    tuple gives :class:`SequentialDataTransformer`; a single constructor is called
    as ``ctor(observation_spec=observation_spec)``.
    """
    if data_transformer_ctor is None:
        return IdentityDataTransformer(observation_spec=observation_spec)
    if isinstance(data_transformer_ctor, (list, tuple)):
        if not data_transformer_ctor:
            return IdentityDataTransformer(observation_spec=observation_spec)
        return SequentialDataTransformer(list(data_transformer_ctor),
                                         observation_spec=observation_spec)
    transformer = data_transformer_ctor(observation_spec=observation_spec)
    if not isinstance(transformer, DataTransformer):
        raise TypeError(f"data_transformer_ctor {data_transformer_ctor} built "
                        f"{type(transformer).__name__}, not a DataTransformer")
    return transformer
