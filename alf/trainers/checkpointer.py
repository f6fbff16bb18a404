"""Atomic, keep-last-N checkpoints with fallback to the previous one when the newest is bad.

Files: ``<dir>/ckpt-<iteration>.pt`` (model, optimizers, transformer
statistics, counters, RNG states) and, when enabled, a separate
``<dir>/replay_buffer-<iteration>.pt``. Each is written to a temporary name,
fsync'ed and renamed, so a crash mid-write never leaves a half file under a
real name. Loading tries the newest first and falls back with a warning.
Only tensors and plain Python containers are stored, so files load with
``torch.load(weights_only=True)``.
"""
import glob
import logging
import os
import re
from typing import Any, Dict, List, Optional, Tuple

import torch

from alf.errors import CheckpointError

FORMAT_VERSION = 1
_PATTERN = re.compile(r"ckpt-(\d+)\.pt$")


class Checkpointer:
    """Save / restore training state under ``ckpt_dir``.

    Args:
        ckpt_dir: directory for checkpoint files (created on first save).
        num_checkpoints: newest checkpoints kept; older ones are deleted.
    """

    def __init__(self, ckpt_dir: str, num_checkpoints: int = 3):
        self._dir = ckpt_dir
        self._keep = max(1, int(num_checkpoints))

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
             replay_buffer_state: Optional[Dict[str, Any]] = None) -> str:
        """Atomically write ``state`` (and optionally the replay buffer) for ``iteration``."""
        os.makedirs(self._dir, exist_ok=True)
        if replay_buffer_state is not None:
            _atomic_save({"format_version": FORMAT_VERSION, "replay_buffer": replay_buffer_state},
                         os.path.join(self._dir, f"replay_buffer-{iteration:010d}.pt"))
        path = os.path.join(self._dir, f"ckpt-{iteration:010d}.pt")
        _atomic_save(dict(state, format_version=FORMAT_VERSION, iteration=iteration,
                          complete=True), path)
        self._prune()
        return path

    def load_latest(self) -> Optional[Tuple[int, Dict[str, Any], Optional[Dict[str, Any]]]]:
        """Newest loadable ``(iteration, state, replay_buffer_state_or_None)``; None if no files.

        A checkpoint that cannot be read (truncated, corrupt, wrong format) is
        skipped with a warning naming it, and the previous one is tried.

        Raises:
            CheckpointError: there are checkpoint files but none is readable (starting
                over would silently discard the run, and keep-last-N pruning would
                then delete the new checkpoints before the bad newer-numbered ones).
        """
        checkpoints = self.list_checkpoints()
        for iteration, path in checkpoints:
            try:
                state = torch.load(path, map_location="cpu", weights_only=True)
                if not isinstance(state, dict) or not state.get("complete"):
                    raise ValueError("not a complete alf checkpoint")
            except Exception as e:  # noqa: BLE001 - any read failure means "skip this one"
                logging.warning("Checkpoint %s is unreadable (%s); falling back to the previous "
                                "one", path, unreadable_reason(path, e))
                continue
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

    def _prune(self) -> None:
        """Keep the newest ``num_checkpoints``; also drop ``*.tmp`` left by a killed writer."""
        doomed = [p for _, path in self.list_checkpoints()[self._keep:]
                  for p in (path, _replay_buffer_path(path))]
        doomed += glob.glob(os.path.join(self._dir, "*.pt.tmp"))
        for p in doomed:
            try:
                os.remove(p)
            except FileNotFoundError:
                pass


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
    if "zip archive" in text or "central directory" in text:
        return f"truncated or corrupt file ({size:,} bytes)"
    if isinstance(exc, (EOFError, KeyError, IndexError)) or "pickle" in text.lower():
        return f"not a torch checkpoint file ({size:,} bytes)"
    first = re.split(r"(?<=[.!?])\s", text.splitlines()[0] if text else "", maxsplit=1)[0]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _replay_buffer_path(ckpt_path: str) -> str:
    d, name = os.path.split(ckpt_path)
    return os.path.join(d, "replay_buffer-" + name[len("ckpt-"):])


def _atomic_save(obj: Any, path: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
