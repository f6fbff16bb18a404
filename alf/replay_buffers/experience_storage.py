"""What an off-policy replay buffer stores: the Experience minus derivable fields.

Two fields of every :class:`~alf.data_structures.TimeStep` can be rebuilt from
the rest of a per-env ring (see docs/replay_buffer.md):

- ``time_step.env_id``: it is the buffer row the step lives in;
- ``time_step.prev_action``: it is the ``action`` stored one position earlier in
  the same row, or zeros where the step is ``FIRST`` (the environment zeroes it
  there, see :class:`alf.environments.spec_utils.ActionConverter`).

Dropping them saves ``bytes(action) + 8`` per transition (32 of 136 bytes for
HalfCheetah). The algorithm strips them on the way in (:func:`storage_spec`,
:func:`to_storage`) and puts them back on the way out
(:func:`restore_derived_fields`, with :func:`gather_all_positions` for
``gather_all()``), at the cost of one extra ``[B]`` gather of the action field.

A restored ``prev_action`` is zeros where the previous step is no longer in the
buffer (overwritten, or dropped by ``clear()``); this only matters for the first
step of a sequence that starts exactly at the oldest stored step mid-episode.

With a :class:`~alf.algorithms.frame_stacker.FrameStacker` a third field is
derived: a stacked observation is rebuilt from the newest frames stored at its
own and the ``k - 1`` preceding positions (only the newest frame is stored).
Frames that precede the oldest physically present step are replaced by the
oldest one, which again only affects sequences starting within ``k - 1`` steps
of the oldest stored step mid-episode; whole-buffer training sizes its ring so
that this never happens.
"""
from typing import Any, Optional, Tuple

import torch

from alf import nest as alf_nest
from alf.data_structures import Experience, StepType, TimeStep


def _strip(experience: Experience, frame_stacker: Any = None) -> Experience:
    ts = experience.time_step
    if not isinstance(ts, TimeStep):
        raise TypeError(f"expected Experience.time_step to be a TimeStep, got {type(ts).__name__}")
    ts = ts._replace(prev_action=(), env_id=())
    return experience._replace(time_step=ts)


def storage_spec(experience_spec: Experience, frame_stacker: Any = None) -> Experience:
    """The spec a replay buffer is built with: ``experience_spec`` with
    ``time_step.prev_action = ()`` and ``time_step.env_id = ()``; with a
    ``frame_stacker``, the observation is one frame (its ``observation_spec``)."""
    spec = _strip(experience_spec)
    if frame_stacker is not None:
        spec = spec._replace(time_step=spec.time_step._replace(
            observation=frame_stacker.observation_spec))
    return spec


def to_storage(experience: Experience, frame_stacker: Any = None) -> Experience:
    """``experience`` (any batch dims, e.g. ``[T, B]``) without the derived fields; no copy
    (stacked observations become views of their newest frame)."""
    exp = _strip(experience)
    if frame_stacker is not None:
        ts = exp.time_step
        exp = exp._replace(time_step=ts._replace(
            observation=frame_stacker.newest_frames(ts.observation)))
    return exp


def history_length(frame_stacker: Any = None) -> int:
    """Stored steps needed before a sequence to restore it: 1 (``prev_action``), or
    ``k - 1`` with a ``k``-frame stacker when that is more."""
    return max(1, frame_stacker.history_length if frame_stacker is not None else 0)


def gather_all_positions(buffer) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(env_ids [num_envs], positions [num_envs])``: the rows and absolute start
    positions of what ``buffer.gather_all()`` returns (``[num_envs, T]``)."""
    env_ids = torch.arange(buffer.num_envs, device=buffer.device)
    return env_ids, buffer.current_pos() - buffer.current_size()


def restore_derived_fields(buffer, data: Experience, env_ids: torch.Tensor,
                           positions: torch.Tensor, full_prev_action_spec: Any,
                           frame_stacker: Any = None) -> Experience:
    """Put ``time_step.env_id`` and ``time_step.prev_action`` back into stored data.

    Args:
        buffer: the :class:`~alf.replay_buffers.ReplayBuffer` ``data`` came from.
        data: batch-major ``Experience [B, L]`` as ``get_batch`` / ``gather_all``
            return it (built from :func:`storage_spec`).
        env_ids: ``[B]`` int64, the row of each sequence.
        positions: ``[B]`` int64, absolute position of each sequence's first step.
        full_prev_action_spec: the ``prev_action`` spec nest (the action spec), used
            for the dtype of the restored field.
        frame_stacker: the run's :class:`~alf.algorithms.frame_stacker.FrameStacker`
            (None: observations are stored whole).
    Returns:
        ``data`` with ``time_step.env_id`` ``[B, L]`` int64 (the row) and
        ``time_step.prev_action`` (nest of ``[B, L, ...]``): the stored action of
        the previous step, zeros where the step is ``FIRST`` or where the previous
        step has been overwritten (the oldest step of a full ring); with a
        ``frame_stacker`` the stacked ``time_step.observation``. ``batch_info`` is
        left as it is.
    """
    step_type = data.time_step.step_type
    B, L = step_type.shape[:2]
    device = step_type.device
    env_ids = env_ids.to(device, torch.int64)
    positions = positions.to(device, torch.int64)
    prev_pos = positions - 1
    # the one extra read: the action just before each sequence
    before = buffer.get_by_position(env_ids, prev_pos, 1, select=lambda s: s.action)
    keep = step_type != StepType.FIRST  # [B, L]
    head = buffer.current_pos().to(device)[env_ids]
    if L > 0:
        # the slot still holds the previous step unless it was overwritten (a cleared step
        # is still there: clear() only moves counters, and the env stream is continuous)
        keep[:, 0] &= (prev_pos >= 0) & (prev_pos >= head - buffer.max_length) & (prev_pos < head)

    def _prev(action: torch.Tensor, first: torch.Tensor, spec) -> torch.Tensor:
        shifted = torch.cat([first, action[:, :L - 1]], 1)[:, :L]  # [B, L, ...]
        mask = keep.reshape(keep.shape + (1,) * (shifted.ndim - 2))
        return torch.where(mask, shifted, 0).to(spec.dtype)

    prev_action = alf_nest.map_structure(_prev, data.action, before, full_prev_action_spec)
    env_id = env_ids[:, None].expand(B, L).contiguous()
    ts = data.time_step._replace(prev_action=prev_action, env_id=env_id)
    if frame_stacker is not None:
        ts = ts._replace(observation=_restack(buffer, ts, env_ids, positions, head,
                                              frame_stacker))
    return data._replace(time_step=ts)


def _restack(buffer, ts: TimeStep, env_ids: torch.Tensor, positions: torch.Tensor,
             head: torch.Tensor, frame_stacker: Any) -> Any:
    """Stacked observations ``[B, L, ...]`` from the stored newest frames of the ``k - 1``
    positions before each sequence and of the sequence itself."""
    h = frame_stacker.history_length
    start = positions - h
    history = buffer.get_by_position(
        env_ids, start, h, select=lambda s: (s.time_step.observation, s.time_step.step_type))
    # history slots still hold real data unless overwritten or before the first step; the
    # invalid ones form a prefix of the window
    hist_pos = start[:, None] + torch.arange(h, device=start.device)
    invalid = (hist_pos < 0) | (hist_pos < (head - buffer.max_length)[:, None])
    first_valid = invalid.sum(dim=1)
    observation = alf_nest.map_structure(lambda a, b: torch.cat([a, b], 1), history[0],
                                         ts.observation)
    step_type = torch.cat([history[1], ts.step_type], 1)
    return frame_stacker.stack_window(observation, step_type, first_valid)
