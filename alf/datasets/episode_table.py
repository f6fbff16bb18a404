"""Disk space for the files a dataset writer writes last: the episode table
(``episodes.npy``), its returns (``episode_returns.npy``) and the manifest.

Their size depends on how many episode fragments the rows hold, which is known only as the
steps arrive. :class:`TableReserve` holds the space for them in a placeholder file in the
staging directory, allocated ahead like the step files (``posix_fallocate``, or the free
space checked where the filesystem cannot allocate ahead) and grown as fragments are
counted; it is deleted just before the files are written. A disk too small for them then
fails as soon as the table outgrows it, in one line, instead of after the whole collection
in a write cut short (numpy's "N requested and M written").
"""
import io
import os
from typing import Tuple

import numpy as np

from alf.data_structures import StepType
from alf.utils.disk_reserve import on_disk, reserve_files

#: the placeholder's name in the staging directory (never part of a finished dataset)
RESERVE_FILE = ".episode_table.reserved"


def npy_size(shape: Tuple[int, ...], dtype: np.dtype) -> int:
    """Bytes of the ``.npy`` file ``np.save`` writes for an array of ``shape``/``dtype``
    (header included)."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {
        "descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False,
        "shape": tuple(int(n) for n in shape)})
    return len(header.getvalue()) + int(np.prod(shape)) * np.dtype(dtype).itemsize


def table_size(fragments: int, reward_shape: Tuple[int, ...], manifest_size: int,
               block: int = 1) -> int:
    """Bytes of ``episodes.npy`` (int64 ``[E, 4]``), ``episode_returns.npy`` (float64
    ``[E, *reward_shape]``) for ``E = fragments`` and a manifest of ``manifest_size``
    bytes, each file in whole ``block``-byte blocks."""
    return (on_disk(npy_size((fragments, 4), np.dtype(np.int64)), block)
            + on_disk(npy_size((fragments,) + tuple(reward_shape), np.dtype(np.float64)),
                      block)
            + on_disk(manifest_size, block))


def fragment_starts(step_type: np.ndarray, row_starts: np.ndarray) -> np.ndarray:
    """Where episode fragments start in ``step_type`` ``[n, t]`` (``n`` rows of ``t``
    consecutive steps): at a FIRST step, after a LAST step, and at step 0 of a row whose
    ``row_starts`` ``[n]`` is True (a row's first step, or one after a LAST). The rule of
    :func:`alf.datasets.format.compute_episodes`. Returns bool ``[n, t]``."""
    starts = step_type == StepType.FIRST
    if starts.shape[1]:
        starts[:, 0] |= row_starts
        starts[:, 1:] |= step_type[:, :-1] == StepType.LAST
    return starts


def save_npy(path: str, array: np.ndarray) -> None:
    """``np.save`` through a plain file write, so that a full disk is an ``OSError`` with
    its errno (ENOSPC), not numpy's errno-less "N requested and M written"."""
    data = io.BytesIO()
    np.lib.format.write_array(data, array, allow_pickle=False)
    with open(path, "wb") as f:
        f.write(data.getbuffer())


class TableReserve:
    """The placeholder holding the space of the episode table, its returns and the
    manifest (at most ``manifest_size`` bytes) while a dataset is staged in ``directory``.

    Args:
        directory: the staging directory (exists).
        reward_shape: the reward spec's shape.
        manifest_size: an upper bound of the manifest's bytes.
        fragments: fragments to hold space for from the start (one per row).
        block: the filesystem's allocation unit (each file takes whole blocks).

    Raises:
        OSError: ENOSPC where the disk cannot hold the first ``fragments`` (here) or more
            (:meth:`grow`); the caller removes the staging directory.
    """

    def __init__(self, directory: str, reward_shape: Tuple[int, ...], manifest_size: int,
                 fragments: int, block: int = 1):
        self.path = os.path.join(directory, RESERVE_FILE)
        self._reward_shape = tuple(reward_shape)
        self._manifest_size = int(manifest_size)
        self._block = int(block)
        self.fragments = 0
        self._held = 0
        open(self.path, "wb").close()
        self.grow(fragments)

    def size(self, fragments: int) -> int:
        """Bytes of the table, its returns and the manifest for ``fragments`` fragments."""
        return table_size(fragments, self._reward_shape, self._manifest_size, self._block)

    def grow(self, fragments: int) -> None:
        """Hold space for ``fragments`` in all (never shrinks)."""
        self.fragments = max(self.fragments, int(fragments))
        size = self.size(self.fragments)
        if size > self._held:
            reserve_files([(self.path, size)])
            self._held = size

    def release(self) -> None:
        """Delete the placeholder (just before the files it held space for are written)."""
        if os.path.exists(self.path):
            os.remove(self.path)
        self._held = 0
