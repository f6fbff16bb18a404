"""``FrameStacker``: stack the last ``k`` observations, as a data transformer.

During rollout it keeps, per environment, the previous ``k - 1`` frames as its
state and emits ``concat(frame[t-k+1], ..., frame[t])`` along ``stack_axis``
(for Atari: ``[1, 84, 84]`` frames become a ``[4, 84, 84]`` observation).
At the first step of an episode the history is filled with that first frame,
so frames never leak across episode boundaries.

Replay buffers do not store the stacked observation: a stacked observation is
a function of the frames stored at the preceding positions of the same
buffer row (plus the step types, which say where an episode began). The
buffer keeps only the newest frame of each step (:meth:`newest_frames`) and
sampled sequences are re-stacked from the ``k - 1`` positions before them
(:meth:`stack_window`, called by
:mod:`alf.replay_buffers.experience_storage`). This is ALF's
``num_earliest_frames_ignored`` idea: a 1M-step Atari buffer with 4-frame
stacking takes 6.6 GiB of frames instead of 26 GiB.

For that reconstruction to be exact the stacked observation must reach the
algorithm unchanged: transformers after a ``FrameStacker`` may change rewards
but not observations (checked by :class:`SequentialDataTransformer`).
"""
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np
import torch

import alf
from alf import nest as alf_nest
from alf.algorithms.data_transformers import DataTransformer
from alf.config_ranges import PositiveInt
from alf.data_structures import StepType, TimeStep
from alf.errors import ConfigError
from alf.tensor_specs import BoundedTensorSpec, TensorSpec

Nest = Any


def _stacked_spec(spec: TensorSpec, axis: int, times: int) -> TensorSpec:
    """``spec`` with ``times`` copies concatenated along ``axis`` (bounds tiled too)."""
    shape = list(spec.shape)
    shape[axis] *= times
    if isinstance(spec, BoundedTensorSpec):
        reps = [1] * spec.ndim
        reps[axis] = times
        return BoundedTensorSpec(tuple(shape), spec.dtype, minimum=np.tile(spec.minimum, reps),
                                 maximum=np.tile(spec.maximum, reps))
    return TensorSpec(tuple(shape), spec.dtype)


@alf.configurable
class FrameStacker(DataTransformer):
    """Concatenate the last ``stack_size`` observations along ``stack_axis``.

    Args:
        observation_spec: nest of :class:`TensorSpec` of one observation.
        stack_size: ``k``, the number of frames stacked (4 for Atari).
        stack_axis: axis of each observation leaf (not counting batch dims)
            along which frames are concatenated; 0 is the channel axis of a
            ``[C, H, W]`` image, giving ``[k * C, H, W]``.
        fields: nest paths (``"image"``, ``"camera.rgb"``) of the leaves to
            stack; ``None`` stacks every leaf.

    State: per stacked leaf, the previous ``k - 1`` frames concatenated,
    ``[B, (k - 1) * C, H, W]`` for an image.
    """

    stacks_frames = True

    def __init__(self, observation_spec: Nest, stack_size: PositiveInt = 4, stack_axis: int = 0,
                 fields: Optional[Sequence[str]] = None):
        if int(stack_size) < 1:
            raise ConfigError(f"FrameStacker.stack_size must be >= 1, got {stack_size}")
        paths_specs = alf_nest.flatten_with_paths(observation_spec)
        paths = [p for p, _ in paths_specs]
        if fields is not None:
            unknown = [f for f in fields if not any(alf_nest.path_selected(p, [f]) for p in paths)]
            if unknown:
                raise ConfigError(f"FrameStacker.fields {unknown} not found in the observation; "
                                  f"its leaves are {paths}")
        self._stack_size = int(stack_size)
        self._fields = None if fields is None else list(fields)
        self._mask: List[bool] = [alf_nest.path_selected(p, fields) for p in paths]
        self._frame_sizes: List[int] = []  # size of one frame along the stack axis, per stacked leaf
        stacked_specs, state_specs = [], []
        for (path, spec), on in zip(paths_specs, self._mask):
            if not on:
                stacked_specs.append(spec)
                continue
            if not -spec.ndim <= stack_axis < spec.ndim:
                raise ConfigError(f"FrameStacker.stack_axis={stack_axis} does not exist in "
                                  f"observation leaf '{path or '<observation>'}' of shape "
                                  f"{tuple(spec.shape)}; stack a leaf with at least one dim "
                                  "(e.g. a [1, 84, 84] frame) or restrict FrameStacker.fields")
            axis = stack_axis % spec.ndim
            self._frame_sizes.append(spec.shape[axis])
            stacked_specs.append(_stacked_spec(spec, axis, self._stack_size))
            state_specs.append(TensorSpec(_stacked_spec(spec, axis, self._stack_size - 1).shape,
                                          spec.dtype))
        self._axes = [(stack_axis % s.ndim) for (_, s), on in zip(paths_specs, self._mask) if on]
        self._leaf_ndims = [s.ndim for (_, s), on in zip(paths_specs, self._mask) if on]
        super().__init__(observation_spec, state_spec=tuple(state_specs))
        self._transformed_observation_spec = alf_nest.pack_sequence_as(observation_spec,
                                                                       stacked_specs)

    @property
    def stack_size(self) -> int:
        """``k``: frames per stacked observation."""
        return self._stack_size

    @property
    def history_length(self) -> int:
        """``k - 1``: stored steps needed before a step to rebuild its stacked observation."""
        return self._stack_size - 1

    # ----------------------------------------------------------------- rollout
    def transform_replay(self, time_step: TimeStep) -> TimeStep:
        """Replayed observations are already stacked: sampling re-stacks the stored frames
        (``replay_buffers/experience_storage.py``), so nothing is left to do."""
        return time_step

    def transform_timestep(self, time_step: TimeStep, state: tuple) -> Tuple[TimeStep, tuple]:
        """``time_step.observation`` ``[B, ...]`` -> stacked; state ``[B, (k-1)C, ...]`` per leaf."""
        if self._stack_size == 1:
            return time_step, state
        leaves = alf_nest.flatten(time_step.observation)
        is_first = time_step.step_type == StepType.FIRST  # [B]
        any_first = bool(is_first.any())  # mostly False: skip building the reset history
        out, new_state, j = [], [], 0
        for x, on in zip(leaves, self._mask):
            if not on:
                out.append(x)
                continue
            ax = x.ndim - self._leaf_ndims[j] + self._axes[j]
            history = state[j]
            if any_first:  # envs at an episode start: history = their first frame repeated
                first = is_first.reshape(is_first.shape + (1,) * (x.ndim - is_first.ndim))
                history = torch.where(first, torch.cat([x] * (self._stack_size - 1), ax),
                                      history)
            stacked = torch.cat([history, x], ax)
            out.append(stacked)
            new_state.append(stacked.narrow(ax, self._frame_sizes[j],
                                            self._frame_sizes[j] * (self._stack_size - 1)))
            j += 1
        observation = alf_nest.pack_sequence_as(time_step.observation, out)
        return time_step._replace(observation=observation), tuple(new_state)

    # ------------------------------------------------------------------ replay
    def newest_frames(self, observation: Nest) -> Nest:
        """Stacked observation (any outer dims) -> the newest frame of each stacked leaf (a view).

        This is what a replay buffer stores; the spec of the result is
        :attr:`observation_spec`.
        """
        leaves = alf_nest.flatten(observation)
        out, j = [], 0
        for x, on in zip(leaves, self._mask):
            if on:
                ax = x.ndim - self._leaf_ndims[j] + self._axes[j]
                size = self._frame_sizes[j]
                x = x.narrow(ax, size * (self._stack_size - 1), size)
                j += 1
            out.append(x)
        return alf_nest.pack_sequence_as(observation, out)

    def stack_window(self, observation: Nest, step_type: torch.Tensor,
                     first_valid: torch.Tensor) -> Nest:
        """Re-stack a window of stored frames.

        Args:
            observation: newest-frame observation nest ``[B, W, ...]`` read from
                ``W = k - 1 + L`` consecutive positions of each buffer row.
            step_type: ``[B, W]`` step types of those positions.
            first_valid: ``[B]`` int64, index of the first window entry that
                still holds real data (entries before it were overwritten or
                precede the first stored step); frames are never taken from
                before it.
        Returns:
            the stacked observation ``[B, L, ...]`` of the last ``L`` window
            positions: for position ``i`` the frames at ``i-k+1 .. i``, where any
            frame before the episode's ``FIRST`` step (or before ``first_valid``)
            is replaced by the earliest allowed one, exactly what
            :meth:`transform_timestep` produced during rollout.
        """
        k = self._stack_size
        B, W = step_type.shape[:2]
        L = W - (k - 1)
        device = step_type.device
        idx = torch.arange(W, device=device)
        starts = torch.where(step_type == StepType.FIRST, idx, 0)  # [B, W]
        lower = torch.maximum(starts.cummax(dim=1).values, first_valid.to(device)[:, None])
        targets = idx[k - 1:]  # [L]
        lags = torch.arange(k - 1, -1, -1, device=device)  # oldest frame first
        src = torch.maximum(targets[None, :, None] - lags[None, None, :],
                            lower[:, k - 1:, None])  # [B, L, k]
        flat_src = (src + torch.arange(B, device=device)[:, None, None] * W).reshape(-1)
        leaves = alf_nest.flatten(observation)
        out, j = [], 0
        for x, on in zip(leaves, self._mask):
            if not on:
                out.append(x[:, k - 1:])
                continue
            frame_shape = tuple(x.shape[2:])
            frames = x.reshape((B * W,) + frame_shape).index_select(0, flat_src)
            frames = frames.reshape((B, L, k) + frame_shape)  # [B, L, k, ...frame]
            ax = self._axes[j]
            # move the k dim next to the stack axis, then merge them
            frames = frames.movedim(2, 2 + ax)
            shape = list(frame_shape)
            shape[ax] *= k
            out.append(frames.reshape((B, L) + tuple(shape)))
            j += 1
        return alf_nest.pack_sequence_as(observation, out)


def find_frame_stacker(transformer: Any) -> Optional[FrameStacker]:
    """The :class:`FrameStacker` inside ``transformer`` (itself or a member), or None."""
    if isinstance(transformer, FrameStacker):
        return transformer if transformer.stack_size > 1 else None
    for member in getattr(transformer, "members", ()):
        found = find_frame_stacker(member)
        if found is not None:
            return found
    return None
