"""Milestone checkpoints: the run's state every ``TrainerConfig.milestone_env_steps`` env
steps and/or every ``milestone_seconds`` of training, kept for later evaluation (Sample
Factory's ``save_milestones_sec``): the policy at 1M, 2M, ... env steps.

A milestone is the ordinary checkpoint of the iteration that reached it (the first
iteration boundary at or past each multiple; one iteration that passes several makes
one milestone), saved under a second name that the keep-last-``num_checkpoints``
rotation never touches::

    root_dir/train/milestones/ckpt-0000000245-env_steps-1003520.pt

(iteration, then the env steps the run had done). The second name is a hard link to
the checkpoint file (no extra space; a copy where the filesystem has no hard links),
so it is the same file in the same format: :class:`~alf.trainers.checkpointer.
Checkpointer` and ``torch.load(weights_only=True)`` read it, ``alf.bin.play`` and
``alf.bin.export_dataset`` pick it by ``--checkpoint=<iteration>``. The replay buffer
is not kept with it.
"""
import math
import os
import re
import shutil
from typing import Any, Dict, List, NamedTuple, Sequence, Tuple

import torch

from alf.errors import CheckpointError
from alf.trainers.checkpointer import check_finite_checkpoint, unreadable_reason
from alf.utils.atomic_write import atomic_write, remove_quietly, write_failed

MILESTONES_DIR = "milestones"
_PATTERN = re.compile(r"^ckpt-(\d+)-env_steps-(\d+)\.pt$")


class Milestone(NamedTuple):
    """One kept milestone checkpoint."""
    iteration: int
    env_steps: int
    path: str


def milestones_dir(train_dir: str) -> str:
    """Where the milestones of the checkpoints in ``train_dir`` go."""
    return os.path.join(train_dir, MILESTONES_DIR)


def milestone_name(iteration: int, env_steps: int) -> str:
    """``ckpt-<iteration, 10 digits>-env_steps-<env steps>.pt``."""
    return f"ckpt-{iteration:010d}-env_steps-{env_steps}.pt"


def list_milestones(train_dir: str) -> List[Milestone]:
    """The milestones kept for ``train_dir``, oldest first."""
    folder = milestones_dir(train_dir)
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    found = []
    for name in names:
        m = _PATTERN.match(name)
        if m:
            found.append(Milestone(int(m.group(1)), int(m.group(2)), os.path.join(folder, name)))
    return sorted(found)


def keep_milestone(checkpoint_path: str, iteration: int, env_steps: int) -> str:
    """Give the just-written ``checkpoint_path`` its milestone name; returns that path.

    Raises:
        WriteFailedError: the milestone could not be written (the checkpoint is intact).
    """
    folder = milestones_dir(os.path.dirname(checkpoint_path))
    target = os.path.join(folder, milestone_name(iteration, env_steps))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise write_failed(folder, e, "the milestone directory") from None
    tmp = f"{target}.{os.getpid()}.tmp"
    remove_quietly(tmp)
    try:
        os.link(checkpoint_path, tmp)  # all or nothing: the name appears complete
        os.replace(tmp, target)
    except OSError:
        remove_quietly(tmp)

        def copy(f) -> None:
            with open(checkpoint_path, "rb") as src:
                shutil.copyfileobj(src, f)

        atomic_write(target, copy, "milestone checkpoint", os.path.getsize(checkpoint_path))
    return target


def checkpoint_of_iteration(train_dir: str, iteration: int,
                            rotating: Sequence[Tuple[int, str]], asked: str = "") -> str:
    """The file holding ``iteration``: one of the ``rotating`` checkpoints
    (``[(iteration, path)]``, :meth:`Checkpointer.list_checkpoints`) or a milestone.

    Raises:
        CheckpointError: there is none; the message (after ``asked``, e.g. the flag)
            lists the iterations there are.
    """
    for i, path in rotating:
        if i == iteration:
            return path
    kept = list_milestones(train_dir)
    for m in kept:
        if m.iteration == iteration:
            return m.path
    have = ", ".join(f"{i:,}" for i in sorted(i for i, _ in rotating)) or "none"
    marks = ", ".join(f"{m.iteration:,} ({m.env_steps:,} env steps)" for m in kept)
    raise CheckpointError(f"{asked + ': ' if asked else ''}{train_dir} has no checkpoint of "
                          f"iteration {iteration:,} (it has: {have}"
                          + (f"; milestones: {marks}" if marks else "") + ")")


def load_iteration(train_dir: str, iteration: int, rotating: Sequence[Tuple[int, str]],
                   asked: str = "") -> Tuple[str, Dict[str, Any]]:
    """``(path, state)`` of the checkpoint of ``iteration`` (:func:`checkpoint_of_iteration`;
    ``asked`` starts the message when there is none).

    Raises:
        CheckpointError: there is none, or its file is unreadable (one line naming it).
    """
    path = checkpoint_of_iteration(train_dir, iteration, rotating, asked)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(state, dict) or not state.get("complete"):
            raise ValueError("not a complete alf checkpoint")
    except Exception as e:  # noqa: BLE001 - any read failure is the user's file
        raise CheckpointError(f"checkpoint {path} is unreadable ({unreadable_reason(path, e)})"
                              ) from None
    check_finite_checkpoint(path, state, [p for i, p in rotating if i < iteration])
    return path, state


class MilestoneClock:
    """When the next milestone is due: every ``every_env_steps`` env steps and every
    ``every_seconds`` of training (0: that kind is off), counted from the start of the
    run (a resume goes on from its checkpoint's env steps and training seconds).

    Args:
        every_env_steps: ``TrainerConfig.milestone_env_steps``.
        every_seconds: ``TrainerConfig.milestone_seconds``.
    """

    def __init__(self, every_env_steps: int, every_seconds: float):
        self.every_env_steps = int(every_env_steps)
        self.every_seconds = float(every_seconds)
        self._env_steps = 0  # at the last milestone (or the start)
        self._seconds = 0.0

    @property
    def enabled(self) -> bool:
        return self.every_env_steps > 0 or self.every_seconds > 0

    def start(self, env_steps: int, seconds: float) -> None:
        """The run (re)starts at ``env_steps`` and ``seconds`` of training."""
        self._env_steps, self._seconds = int(env_steps), float(seconds)

    def due(self, env_steps: int, seconds: float) -> bool:
        """Whether a multiple of either interval was passed since the last milestone
        (or the start); if so, the next one is counted from here."""
        hit = (_passed(self._env_steps, env_steps, self.every_env_steps)
               or _passed(self._seconds, seconds, self.every_seconds))
        if hit:
            self.start(env_steps, seconds)
        return hit


def _passed(before: float, now: float, every: float) -> bool:
    """Whether a multiple of ``every`` lies in ``(before, now]`` (``every`` 0: never)."""
    return every > 0 and math.floor(now / every) > math.floor(before / every)

