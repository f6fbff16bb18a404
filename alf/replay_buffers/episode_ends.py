"""Where each stored step's episode ends in a replay buffer of experience.

Hindsight relabeling (HER, Andrychowicz et al. 2017) draws a goal from a *later step
of the same episode*; it needs, for a sampled step, the last stored step of its
episode. The buffer stores the ``step_type`` of every step, so this is read rather
than tracked at write time: from each sampled position the rows' step types are
scanned forward in windows until the first ``LAST`` (the episode's end), the step before
a later ``FIRST`` (an episode cut without a ``LAST``, as when a resumed run restarts its
envs) or the newest stored step (an episode still running: its later steps are not
collected yet).
Episodes of up to ``window`` steps after the start cost one ``[B, window]`` gather.
"""
import torch

from alf.data_structures import StepType

#: Steps read per row and per pass of :func:`episode_ends`.
WINDOW = 64


def episode_ends(buffer, env_ids: torch.Tensor, positions: torch.Tensor,
                 window: int = WINDOW) -> torch.Tensor:
    """``[B]`` int64: for each stored step (``env_ids [B]``, absolute ``positions [B]``),
    the absolute position of the last step of its episode that is stored: the first
    ``LAST`` step at or after it, or the step before the first later ``FIRST`` (an
    episode cut short, as when a resumed run restarts its envs), else the newest step
    of that env's row.

    ``buffer`` is a :class:`~alf.replay_buffers.ReplayBuffer` of
    :class:`~alf.data_structures.Experience` (it reads ``time_step.step_type``).
    """
    head = buffer.current_pos()[env_ids]  # [B] one past the newest stored step
    newest = head - 1
    ends = newest.clone()
    open_rows = torch.ones_like(ends, dtype=torch.bool)
    offsets = torch.arange(window, device=positions.device)
    start = positions.clone()
    while bool(open_rows.any()):
        rows = open_rows.nonzero(as_tuple=True)[0]
        steps = start[rows, None] + offsets[None, :]  # [R, W]
        # read only stored positions: past the head, read the newest step (masked below)
        clamped = torch.minimum(steps, newest[rows, None])
        types = buffer.get_by_position(
            env_ids[rows].repeat_interleave(window), clamped.reshape(-1), 1,
            select=lambda s: s.time_step.step_type).view(len(rows), window)
        stored = steps <= newest[rows, None]
        # a LAST step ends its episode there; a FIRST after the start (an episode cut
        # without a LAST: envs restarted on resume) ends it one step before
        last = (types == StepType.LAST) & stored
        cut = (types == StepType.FIRST) & stored & (steps > positions[rows, None])
        is_end = last | cut
        found = is_end.any(dim=1)
        first = torch.argmax(is_end.to(torch.int8), dim=1)  # first True per row
        at = torch.arange(len(rows), device=rows.device)
        end = steps[at, first] - cut[at, first].to(steps.dtype)
        ends[rows[found]] = end[found]
        past = steps[:, -1] >= newest[rows]  # scanned up to the newest step
        open_rows[rows[found | past]] = False
        start[rows] += window
    return ends
