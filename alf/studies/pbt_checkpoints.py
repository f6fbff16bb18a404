"""PBT's exploit step on disk: a member continues from another member's checkpoint.

The newest checkpoint of the source run (weights, optimizer state, normaliser and
data-transformer statistics, counters: everything ``ckpt-<iteration>.pt`` holds) is
copied into the destination run's ``train/`` as its newest, atomically; the destination's
own checkpoints at or past that iteration are removed first so it resumes from the copy.
The replay buffer (a separate ``replay_buffer-<iteration>.pt``) is copied only when asked;
otherwise the member keeps its own experience: its newest buffer file is renamed to go with
the copied checkpoint.
"""
import os
import shutil
from typing import Optional

from alf.trainers.checkpointer import Checkpointer, replay_buffer_path
from alf.utils.atomic_write import atomic_write


def newest_checkpoint(run_dir: str) -> Optional[str]:
    """The newest ``ckpt-*.pt`` of a run, or None."""
    listed = Checkpointer(os.path.join(run_dir, "train")).list_checkpoints()
    return max(listed)[1] if listed else None


def copy_checkpoint(src_run: str, dst_run: str, copy_replay_buffer: bool = False) -> str:
    """Make ``src_run``'s newest checkpoint ``dst_run``'s newest; returns its new path.

    Raises:
        FileNotFoundError: ``src_run`` has no checkpoint.
    """
    src = newest_checkpoint(src_run)
    if src is None:
        raise FileNotFoundError(f"{src_run} has no checkpoint to copy")
    train_dir = os.path.join(dst_run, "train")
    os.makedirs(train_dir, exist_ok=True)
    dst = os.path.join(train_dir, os.path.basename(src))
    own = newest_checkpoint(dst_run)
    own_buffer = replay_buffer_path(own) if own is not None else None
    leftover = [os.path.join(train_dir, f) for f in os.listdir(train_dir) if f.endswith(".keep")]
    kept_buffer = leftover[0] if leftover else None  # a copy cut short set it aside already
    if kept_buffer is None and not copy_replay_buffer and own_buffer and \
            os.path.exists(own_buffer):
        kept_buffer = own_buffer + ".keep"
        os.replace(own_buffer, kept_buffer)
    for _, path in Checkpointer(train_dir).list_checkpoints():
        if os.path.basename(path) >= os.path.basename(src):  # same zero-padded width
            os.remove(path)
            if os.path.exists(replay_buffer_path(path)):
                os.remove(replay_buffer_path(path))
    _copy(src, dst)
    if copy_replay_buffer and os.path.exists(replay_buffer_path(src)):
        _copy(replay_buffer_path(src), replay_buffer_path(dst))
    elif kept_buffer is not None:
        os.replace(kept_buffer, replay_buffer_path(dst))
    return dst


def _copy(src: str, dst: str) -> None:
    with open(src, "rb") as f:
        atomic_write(dst, lambda out: shutil.copyfileobj(f, out), "a copied checkpoint")
