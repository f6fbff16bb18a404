"""Atomic, keep-last-N checkpoints with fallback to the previous one when the newest is bad.

Files: ``<dir>/ckpt-<iteration>.pt`` (model, optimizers, transformer
statistics, counters, RNG states) and, when enabled, a separate
``<dir>/replay_buffer-<iteration>.pt``. Each is written to a temporary name,
fsync'ed and renamed, so a crash mid-write never leaves a half file under a
real name; a write that fails (full disk) removes what it wrote for that
iteration and raises one :class:`~alf.errors.WriteFailedError`. Loading tries
the newest first and falls back with a warning; the trainer then moves the
unreadable files aside (``*.corrupt``) so that they never count toward
``num_checkpoints``. Only tensors and plain Python containers are stored, so
files load with ``torch.load(weights_only=True)``.
"""
import errno
import glob
import logging
import os
import re
import struct
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from alf.errors import CheckpointError, NonFiniteCheckpointError, WriteFailedError
from alf.utils.atomic_write import (atomic_write, format_bytes, free_space, mount_point,
                                    remove_quietly, write_failed)
from alf.utils.finite_guard import first_non_finite, flat_tensors

FORMAT_VERSION = 1
_PATTERN = re.compile(r"ckpt-(\d+)\.pt$")
_BUFFER_PATTERN = re.compile(r"replay_buffer-(\d+)\.pt$")
CORRUPT_SUFFIX = ".corrupt"


class Checkpointer:
    """Save / restore training state under ``ckpt_dir``.

    Args:
        ckpt_dir: directory for checkpoint files (created on first save).
        num_checkpoints: newest checkpoints kept; older ones are deleted.
    """

    def __init__(self, ckpt_dir: str, num_checkpoints: int = 3):
        self._dir = ckpt_dir
        self._keep = max(1, int(num_checkpoints))
        self._unreadable: List[str] = []  # skipped by the last load_latest()

    @property
    def directory(self) -> str:
        return self._dir

    def list_checkpoints(self) -> List[Tuple[int, str]]:
        """``[(iteration, path)]`` sorted newest first."""
        found = []
        for path in glob.glob(os.path.join(self._dir, "ckpt-*.pt")):
            m = _PATTERN.search(os.path.basename(path))
            if m:
                found.append((int(m.group(1)), path))
        return sorted(found, reverse=True)

    def save(self, iteration: int, state: Dict[str, Any],
             replay_buffer_state: Optional[Dict[str, Any]] = None,
             refuse_non_finite: Optional[Callable[[str, str], BaseException]] = None
             ) -> Optional[str]:
        """Atomically write ``state`` (and optionally the replay buffer) for ``iteration``;
        returns its path. A ``state["algorithm"]`` with a NaN or infinite tensor is never
        written: the older, finite checkpoints stay and are not pruned for it. Then
        ``refuse_non_finite(name, kind)`` (the run's guard is on: the Trainer passes
        :meth:`FiniteGuard.checkpoint_error`) gives the error to raise; without it a
        warning names the tensor and None is returned (``check_finite=False``: the run
        trains on, without checkpoints while the tensor stays non-finite).

        Raises:
            WriteFailedError: a file could not be written (e.g. the disk is full). Nothing
                of this iteration is left behind (no temporary file, no replay-buffer file
                without its checkpoint); older checkpoints are untouched.
            NonFiniteError: what ``refuse_non_finite`` returned, for a non-finite tensor.
        """
        bad = first_non_finite(flat_tensors(state.get("algorithm", {})))
        if bad is not None:  # never a NaN model under a good name, rotating good ones out
            if refuse_non_finite is not None:
                raise refuse_non_finite(*bad)
            older = self.list_checkpoints()
            logging.warning(
                "Not saving the checkpoint of iteration %s: the algorithm's %s is %s; %s. "
                "With TrainerConfig.check_finite=False training goes on, and no checkpoint "
                "is written while a tensor is non-finite", f"{iteration:,}", bad[0], bad[1],
                f"{os.path.basename(older[0][1])} stays the newest" if older else
                "there is no earlier checkpoint")
            return None
        try:
            os.makedirs(self._dir, exist_ok=True)
        except OSError as e:
            raise write_failed(self._dir, e, "the checkpoint directory") from None
        path = os.path.join(self._dir, f"ckpt-{iteration:010d}.pt")
        rb_path = replay_buffer_path(path)
        rb_written = False
        try:
            if replay_buffer_state is not None:
                rb = {"format_version": FORMAT_VERSION, "replay_buffer": replay_buffer_state}
                atomic_write(rb_path, lambda f: torch.save(rb, f), "replay buffer file")
                rb_written = True
            full = dict(state, format_version=FORMAT_VERSION, iteration=iteration,
                        complete=True)
            atomic_write(path, lambda f: torch.save(full, f), "checkpoint")
        except WriteFailedError as e:
            if rb_written:  # useless without its checkpoint
                remove_quietly(rb_path)
            raise self._not_saved(e, iteration,
                                  _nbytes(state) + _nbytes(replay_buffer_state)) from None
        self._prune()
        return path

    def _not_saved(self, error: WriteFailedError, iteration: int,
                   needed: int) -> WriteFailedError:
        """``error`` (space left measured again, after the cleanup) and what it means for
        the run: nothing saved for ``iteration``, which checkpoint a rerun resumes from."""
        base = write_failed(error.path, error.os_error, error.what, needed)
        older = [p for i, p in self.list_checkpoints() if i != iteration]
        resume = (f"the newest checkpoint, {os.path.basename(older[0])}, is intact: free "
                  "space, then rerun the same command to resume from it" if older else
                  "there is no earlier checkpoint: free space, then rerun the same command "
                  "(it starts over)")
        failure = WriteFailedError(f"{base}. Nothing was saved for iteration {iteration:,}; "
                                   f"{resume}.")
        failure.path, failure.what, failure.os_error = base.path, base.what, base.os_error
        return failure

    def check_space_for_next(self, with_replay_buffer: bool) -> None:
        """Refuse to start when the filesystem cannot hold one more checkpoint like the
        newest (new files are written before old ones are pruned): training until the
        next save would only end in :class:`WriteFailedError`.

        Args:
            with_replay_buffer: the next checkpoint saves the replay buffer too.
        """
        found = self.list_checkpoints()
        if not found:
            return
        iteration, path = found[0]
        rb_path = replay_buffer_path(path)
        with_rb = with_replay_buffer and os.path.exists(rb_path)
        try:
            needed = os.path.getsize(path) + (os.path.getsize(rb_path) if with_rb else 0)
        except OSError:
            return
        free = free_space(self._dir)
        if free is None or free >= needed:
            return
        what = os.path.basename(path) + (" with its replay buffer" if with_rb else "")
        raise WriteFailedError(
            f"not enough free space for the next checkpoint in {self._dir}: "
            f"{format_bytes(free)} free on {mount_point(self._dir)}, but the newest one "
            f"({what}) takes {format_bytes(needed)}. Free space, then rerun the same "
            f"command to resume from iteration {iteration:,}")

    def load_latest(self) -> Optional[Tuple[int, Dict[str, Any], Optional[Dict[str, Any]]]]:
        """Newest loadable ``(iteration, state, replay_buffer_state_or_None)``; None if no files.

        A checkpoint that cannot be read (truncated, corrupt, wrong format) is
        skipped with a warning naming it, and the previous one is tried.

        Raises:
            NonFiniteCheckpointError: the newest readable one holds a NaN or infinite tensor
                (one line naming the file, the tensor and an earlier checkpoint).
            CheckpointError: there are checkpoint files but none is readable (starting
                over would silently discard the run, and keep-last-N pruning would
                then delete the new checkpoints before the bad newer-numbered ones).
        """
        checkpoints = self.list_checkpoints()
        self._unreadable = []
        for k, (iteration, path) in enumerate(checkpoints):
            try:
                state = torch.load(path, map_location="cpu", weights_only=True)
                if not isinstance(state, dict) or not state.get("complete"):
                    raise ValueError("not a complete alf checkpoint")
            except (PermissionError, MemoryError) as e:
                # the file may be fine: never skip it (it would be set aside as corrupt)
                raise CheckpointError(
                    f"cannot read checkpoint {path}: "
                    f"{'out of memory' if isinstance(e, MemoryError) else e.strerror}; "
                    "nothing was changed: fix that, then rerun the same command") from None
            except Exception as e:  # noqa: BLE001 - any other read failure: skip this one
                logging.warning("Checkpoint %s is unreadable (%s); %s", path,
                                unreadable_reason(path, e),
                                "falling back to the previous one" if k + 1 < len(checkpoints)
                                else "no older checkpoint is left")
                self._unreadable.append(path)
                continue
            check_finite_checkpoint(path, state, [p for _, p in checkpoints[k + 1:]])
            rb_path = os.path.join(self._dir, f"replay_buffer-{iteration:010d}.pt")
            rb_state = None
            if os.path.exists(rb_path):
                try:
                    rb_state = torch.load(rb_path, map_location="cpu", weights_only=True)["replay_buffer"]
                except Exception as e:  # noqa: BLE001
                    logging.warning("Replay buffer file %s is unreadable (%s); continuing with an "
                                    "empty buffer", rb_path, type(e).__name__)
            return iteration, state, rb_state
        if checkpoints:
            raise CheckpointError(
                f"None of the {len(checkpoints)} checkpoint(s) in {self._dir} is readable (see the "
                "warnings above); move them away to start this run over")
        return None

    def set_aside_unreadable(self) -> List[Tuple[str, str]]:
        """Rename the checkpoints the last :meth:`load_latest` skipped as unreadable to
        ``<name>.corrupt`` (their replay-buffer files too), so that they no longer count
        toward ``num_checkpoints``: left in place, a bad newest file would make pruning
        delete the oldest *good* checkpoint. Only the run's trainer calls this, once its
        resume is accepted (readers such as play only skip them).

        Returns:
            ``[(old path, new path)]`` of the checkpoints moved.
        """
        moved = []
        for path in self._unreadable:
            target = _free_name(path + CORRUPT_SUFFIX)
            try:
                os.replace(path, target)
            except OSError as e:
                logging.warning("Could not move the unreadable checkpoint %s aside (%s)", path,
                                e.strerror or e)
                continue
            rb_path = replay_buffer_path(path)
            if os.path.exists(rb_path):
                try:
                    os.replace(rb_path, _free_name(rb_path + CORRUPT_SUFFIX))
                except OSError:
                    pass
            moved.append((path, target))
        self._unreadable = []
        return moved

    def _prune(self) -> None:
        """Keep the newest ``num_checkpoints``; also drop ``*.tmp`` left by a killed writer
        and replay-buffer files whose checkpoint was never written (killed in between)."""
        checkpoints = self.list_checkpoints()
        doomed = [p for _, path in checkpoints[self._keep:]
                  for p in (path, replay_buffer_path(path))]
        doomed += glob.glob(os.path.join(self._dir, "*.pt.*tmp"))  # <ckpt>.pt[.<pid>].tmp
        kept = {i for i, _ in checkpoints[:self._keep]}
        for path in glob.glob(os.path.join(self._dir, "replay_buffer-*.pt")):
            m = _BUFFER_PATTERN.search(os.path.basename(path))
            if m and int(m.group(1)) not in kept:
                doomed.append(path)
        for p in doomed:
            try:
                os.remove(p)
            except FileNotFoundError:
                pass


def check_finite_checkpoint(path: str, state: Dict[str, Any], earlier: List[str]) -> None:
    """Refuse the checkpoint ``state`` read from ``path`` if a tensor of its algorithm is NaN
    or infinite (acting or training on from it would only spread them).

    Args:
        earlier: paths of the run's older checkpoints, newest first: the message names the
            newest of them that is finite (read only in this failure case).
    Raises:
        NonFiniteCheckpointError: one line naming ``path``, the tensor and what to do.
    """
    bad = first_non_finite(flat_tensors(state.get("algorithm", {})))
    if bad is None:
        return
    good = None
    for older in earlier:
        try:
            s = torch.load(older, map_location="cpu", weights_only=True)
        except Exception:  # noqa: BLE001 - an unreadable one is no suggestion
            continue
        if isinstance(s, dict) and first_non_finite(flat_tensors(s.get("algorithm", {}))) is None:
            good = older
            break
    fix = (f"move it (and any newer one) aside to use {os.path.basename(good)}, the newest "
           "finite one" if good else "no earlier checkpoint of this run is finite: train again")
    raise NonFiniteCheckpointError(
        f"checkpoint {path} holds non-finite values ({bad[0]} is {bad[1]}): the run diverged "
        f"before it was saved; {fix}")


def unreadable_reason(path: str, exc: Exception) -> str:
    """A short, whole-sentence reason why ``path`` could not be loaded (torch's own
    messages run to several sentences; cutting them at N characters read badly)."""
    try:
        size = os.path.getsize(path)
    except OSError:
        size = -1
    if size == 0:
        return "empty file"
    text = str(exc).strip()
    truncated = isinstance(exc, OSError) and exc.errno == errno.EINVAL  # seek past the end
    if truncated or "zip archive" in text or "central directory" in text:
        return f"truncated or corrupt file ({size:,} bytes)"
    if isinstance(exc, (EOFError, KeyError, IndexError, struct.error)) or \
            "pickle" in text.lower():
        return f"not a torch checkpoint file ({size:,} bytes)"
    first = re.split(r"(?<=[.!?])\s", text.splitlines()[0] if text else "", maxsplit=1)[0]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def replay_buffer_path(ckpt_path: str) -> str:
    """The replay-buffer file that goes with checkpoint ``ckpt_path``."""
    d, name = os.path.split(ckpt_path)
    return os.path.join(d, "replay_buffer-" + name[len("ckpt-"):])


def _free_name(path: str) -> str:
    """``path``, or ``path.1``, ``path.2``, ... if taken (an earlier file set aside)."""
    candidate, n = path, 0
    while os.path.exists(candidate):
        n += 1
        candidate = f"{path}.{n}"
    return candidate


def _nbytes(obj: Any) -> int:
    """Bytes of the tensors in a nest of dicts / lists (about the size of its file)."""
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(_nbytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_nbytes(v) for v in obj)
    return 0
