"""Check the *values* a dataset holds before anything trains on them.

Why: ``open_dataset`` checks that every file is what the manifest says (shape, dtype,
size), not what is inside. A dataset with a NaN observation and every ``step_type`` = 7
used to train to NaN parameters and exit 0. Here every valid step (``t < row_lengths[r]``)
of every row is checked:

- every float (observations, actions, rewards, discounts) is finite;
- step types are FIRST 0, MID 1 or LAST 2;
- episode boundaries agree with them: the step after a LAST is a FIRST, and a FIRST
  follows a LAST (or starts the row);
- discounts are in [0, 1] (0 also at a MID step: Atari's lost life, which ends no
  episode);
- actions lie within the action spec's bounds, except at LAST steps, whose action is
  never executed (writers store zeros there).

A problem is one :class:`~alf.datasets.format.DatasetError` line naming the file, the field
and the first bad row and step. The work is numpy over whole arrays in chunks of
``chunk_elements`` values (bounded temporary memory, also for a memory-mapped dataset
bigger than RAM); it reads every byte once, so a huge dataset on a slow disk may skip it
with ``TrainerConfig.offline_buffer_check_values=False``.
"""
import os
from typing import Any, Iterator, Optional, Tuple

import numpy as np

from alf import nest as alf_nest
from alf.data_structures import StepType
from alf.datasets.format import Dataset, DatasetError
from alf.tensor_specs import BoundedTensorSpec

#: values per chunk: 4M float32 are 16 MB read plus 4 MB of temporary booleans
CHUNK_ELEMENTS = 1 << 22
_NAMES = {int(StepType.FIRST): "FIRST", int(StepType.MID): "MID", int(StepType.LAST): "LAST"}


def check_dataset_values(dataset: Dataset, action_spec: Any = None,
                         chunk_elements: int = CHUNK_ELEMENTS) -> None:
    """Raise :class:`DatasetError` (one line) for the first bad value of ``dataset``.

    Args:
        dataset: an opened dataset (``steps`` leaves ``[R, T, ...]``).
        action_spec: the experiment's action spec nest; bounded leaves bound the actions
            (None: the dataset's own spec).
        chunk_elements: values scanned at a time (tests use small ones).
    """
    checker = _Checker(dataset, max(1, int(chunk_elements)))
    checker.step_types()
    checker.discounts()
    for path, array in _float_fields(dataset):
        checker.finite(path, array)
    spec = dataset.info.action_spec if action_spec is None else action_spec
    for path, leaf_spec in alf_nest.flatten_with_paths(spec):
        if isinstance(leaf_spec, BoundedTensorSpec):
            field = "action" + (f".{path}" if path else "")
            checker.within(field, checker.array(field), leaf_spec)


def _float_fields(dataset: Dataset) -> Iterator[Tuple[str, np.ndarray]]:
    """Every float field but ``discount`` (checked first, with its range)."""
    for path, leaf in alf_nest.flatten_with_paths(dataset.steps):
        if leaf.dtype.is_floating_point and path != "discount":
            yield path, leaf.numpy()


class _Checker:
    """The scans, sharing the ``[R, T]`` masks of valid and LAST steps."""

    def __init__(self, dataset: Dataset, chunk_elements: int):
        self._ds = dataset
        self._chunk = chunk_elements
        self._step_type = dataset.steps.step_type.numpy()  # [R, T] int32
        length = self._step_type.shape[1]
        self._valid = np.arange(length)[None, :] < np.asarray(
            dataset.info.row_lengths, dtype=np.int64)[:, None]  # [R, T]
        self._last = self._step_type == StepType.LAST  # [R, T]

    def array(self, field: str) -> np.ndarray:
        return dict(alf_nest.flatten_with_paths(self._ds.steps))[field].numpy()

    def step_types(self) -> None:
        st, valid = self._step_type, self._valid
        bad = valid & ((st < StepType.FIRST) | (st > StepType.LAST))
        if bad.any():
            r, t = _first(bad)
            self._fail("step_type", r, t, f"has step type {st[r, t]}",
                       "step types are FIRST 0, MID 1, LAST 2")
        first = st == StepType.FIRST
        # a FIRST exactly where the previous step is a LAST (both steps valid)
        wrong = valid[:, 1:] & (first[:, 1:] != self._last[:, :-1])
        if wrong.any():
            r, t = _first(wrong)
            t += 1
            self._fail("step_type", r, t,
                       f"has a {_NAMES[int(st[r, t])]} step after a {_NAMES[int(st[r, t - 1])]} "
                       "step", "an episode ends with a LAST step and the step after a LAST is "
                       "the next episode's FIRST")

    def discounts(self) -> None:
        d = self._ds.steps.discount.numpy()  # [R, T]
        self.finite("discount", d)
        bad = self._valid & ((d < 0) | (d > 1))
        if bad.any():
            r, t = _first(bad)
            self._fail("discount", r, t, f"has discount {d[r, t]:g}",
                       "a discount must be in [0, 1] (0 where an episode terminated)")

    def finite(self, field: str, array: np.ndarray) -> None:
        """Every valid value of ``array`` ``[R, T, ...]`` is finite."""
        found = self._scan(array, lambda x: ~np.isfinite(x))
        if found is not None:
            r, t, value = found
            self._fail(field, r, t, f"has a non-finite value ({value})",
                       "every float in a dataset must be finite: repair or drop those steps")

    def within(self, field: str, array: np.ndarray, spec: BoundedTensorSpec) -> None:
        """Every valid, non-LAST value of ``array`` ``[R, T, *spec.shape]`` is in the bounds."""
        lo, hi = spec.minimum, spec.maximum
        # per-element bounds, flattened like _scan's [n, prod(shape)] rows
        flat_lo = np.broadcast_to(np.asarray(lo), tuple(spec.shape)).reshape(-1)
        flat_hi = np.broadcast_to(np.asarray(hi), tuple(spec.shape)).reshape(-1)
        found = self._scan(array, lambda x: (x < flat_lo) | (x > flat_hi), skip_last=True)
        if found is not None:
            r, t, value = found
            self._fail(field, r, t, f"has action {value}",
                       f"outside the action spec's bounds {_bounds(lo, hi)}")

    def _scan(self, array: np.ndarray, is_bad, skip_last: bool = False
              ) -> Optional[Tuple[int, int, Any]]:
        """``(row, step, value)`` of the first valid step (row-major) where ``is_bad`` holds
        for an element of ``array`` ``[R, T, ...]``, else None; ``chunk_elements`` at a time."""
        rows, length = array.shape[:2]
        per_step = max(1, int(np.prod(array.shape[2:], dtype=np.int64)))
        flat = array.reshape(rows * length, per_step)  # a view: files are C-order
        mask = self._valid & ~self._last if skip_last else self._valid
        mask = mask.reshape(-1)
        step = max(1, self._chunk // per_step)
        for start in range(0, rows * length, step):
            bad = is_bad(flat[start:start + step])  # [n, per_step]
            if not bad.any():  # the common case: one reduction per chunk
                continue
            hits = bad.any(axis=1) & mask[start:start + step]
            if hits.any():
                i = int(np.argmax(hits))
                j = int(np.argmax(bad[i]))
                value = flat[start + i, j]
                return (start + i) // length, (start + i) % length, _plain(value)
        return None

    def _fail(self, field: str, row: int, step: int, what: str, why: str) -> None:
        entry = self._ds.info.fields.get(field, {})
        file = os.path.join(self._ds.path, entry.get("file", field + ".npy"))
        raise DatasetError(f"dataset file {file} (field '{field}') {what} at row {row}, "
                           f"step {step}; {why}")


def _first(mask: np.ndarray) -> Tuple[int, int]:
    """``(row, step)`` of the first True of a ``[R, T']`` mask (row-major)."""
    r, t = np.unravel_index(int(np.argmax(mask)), mask.shape)
    return int(r), int(t)


def _plain(value: Any) -> Any:
    value = value.item() if hasattr(value, "item") else value
    return f"{value:g}" if isinstance(value, float) else value


def _bounds(lo: np.ndarray, hi: np.ndarray) -> str:
    if lo.size and np.all(lo == lo.flat[0]) and np.all(hi == hi.flat[0]):
        return f"[{_plain(lo.flat[0])}, {_plain(hi.flat[0])}]"
    return f"[{lo.tolist()}, {hi.tolist()}]"
