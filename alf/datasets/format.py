"""alf's offline dataset format: a directory of raw ``.npy`` files plus a JSON manifest.

Layout (see ``docs/design/offline_dataset_format.md`` for why)::

    PATH/
      alf_dataset.json      manifest, written last (tmp file + os.replace)
      <field>.npy           one plain .npy per flattened field path, shape [R, T, ...]
      episodes.npy          int64 [E, 4]: (row, start, length, complete 0/1) per episode fragment
      episode_returns.npy   float64 [E, *reward_shape]: rewards of steps 1..length-1 summed

Fields are ``step_type`` (int32), ``reward``, ``discount`` (float32), ``observation[.key...]``
(raw, before any data transformer) and ``action[.key...]``. Row ``r`` is one env's steps in
time order, valid at ``t < row_lengths[r]`` and zero after. The action of a LAST step is
meaningless and every writer stores zeros there.

Reading never unpickles (headers are parsed by :mod:`numpy.lib.format`, arrays are mapped
raw) and, by default, maps every file copy-on-write so a dataset bigger than RAM is paged in
on demand; the torch tensors share that memory. Every damaged-file case is one
:class:`DatasetError` line naming the file and field.
"""
import datetime
import json
import os
import shutil
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

import numpy as np
import torch

from alf import nest as alf_nest
from alf.data_structures import StepType
from alf.datasets.episode_table import (TableReserve, fragment_starts, npy_size, save_npy,
                                        table_size)
from alf.datasets.spec_json import dtype_name, spec_from_json, spec_to_json
from alf.errors import UserError
from alf.tensor_specs import TensorSpec
from alf.utils.atomic_write import os_error_in, write_failed
from alf.utils.disk_reserve import block_size, on_disk, reserve_files

FORMAT_NAME = "alf-dataset"
FORMAT_VERSION = 1
MANIFEST = "alf_dataset.json"
EPISODES_FILE = "episodes.npy"
RETURNS_FILE = "episode_returns.npy"
EXPORT_HINT = "make one with `python -m alf.bin.export_dataset --root_dir=RUN --out=PATH`"


class DatasetError(UserError):
    """A dataset directory is missing, damaged, or not readable by this alf (one line)."""


class DatasetSteps(NamedTuple):
    """The stored fields of a dataset; every leaf is ``[R, T, ...]`` (``[t, R, ...]``
    time-major when given to :meth:`DatasetWriter.append`)."""
    step_type: Any = ()
    reward: Any = ()
    discount: Any = ()
    observation: Any = ()
    action: Any = ()


@dataclass
class DatasetInfo:
    """The parsed manifest (specs are :class:`~alf.tensor_specs.TensorSpec` nests)."""
    env_name: str
    observation_spec: Any
    action_spec: Any
    reward_spec: Any
    num_rows: int
    row_length: int
    row_lengths: List[int]
    num_steps: int
    num_episodes: int
    data_transformers: list
    frame_stack: int
    source: dict
    format_version: int = FORMAT_VERSION
    fields: Dict[str, dict] = field(default_factory=dict)
    created: str = ""
    alf_version: str = ""

    def step_spec(self) -> DatasetSteps:
        """Spec nest of one stored step (no row/time dims)."""
        return step_spec(self.observation_spec, self.action_spec, self.reward_spec)


def step_spec(observation_spec: Any, action_spec: Any, reward_spec: Any) -> DatasetSteps:
    """Spec nest of one stored step, from the env's specs."""
    return DatasetSteps(step_type=TensorSpec((), torch.int32), reward=reward_spec,
                        discount=TensorSpec((), torch.float32), observation=observation_spec,
                        action=action_spec)


def field_paths(spec: DatasetSteps) -> List[str]:
    """Flattened field paths (``"observation.camera"``) in :func:`alf.nest.flatten` order."""
    return [p for p, _ in alf_nest.flatten_with_paths(spec)]


def _alf_version() -> str:
    try:
        return metadata.version("alf")
    except Exception:  # not installed as a distribution (source checkout)
        return "unknown"


class Dataset:
    """An opened dataset: ``info`` (manifest), ``path`` and ``steps`` (tensors ``[R, T, ...]``,
    memory-mapped copy-on-write unless opened with ``mmap=False``)."""

    def __init__(self, path: str, info: DatasetInfo, steps: DatasetSteps, episodes: np.ndarray,
                 returns: np.ndarray):
        self.path = path
        self.info = info
        self.steps = steps
        self._episodes = episodes
        self._returns = returns

    def episodes(self) -> np.ndarray:
        """``[E, 4]`` int64: (row, start, length, complete) of every episode fragment."""
        return self._episodes

    def episode_returns(self) -> np.ndarray:
        """``[E, *reward_shape]`` float64: summed rewards of each fragment's steps 1..length-1."""
        return self._returns

    def __repr__(self) -> str:
        i = self.info
        return (f"Dataset({self.path!r}, env={i.env_name!r}, rows={i.num_rows}, "
                f"row_length={i.row_length}, steps={i.num_steps}, episodes={i.num_episodes})")


# ----------------------------------------------------------------------------- reading


def open_dataset(path: str, mmap: bool = True) -> Dataset:
    """Open the dataset directory ``path``; raises :class:`DatasetError` (one line) when it
    is missing, not a dataset, from a newer alf, or has a truncated/damaged file."""
    path = os.path.abspath(os.path.expanduser(str(path)))
    manifest_path = os.path.join(path, MANIFEST)
    if not os.path.exists(path):
        raise DatasetError(f"dataset {path} does not exist; {EXPORT_HINT}")
    if not os.path.isfile(manifest_path):
        what = "a file" if not os.path.isdir(path) else f"a directory without {MANIFEST}"
        raise DatasetError(f"{path} is not an alf dataset ({what}); {EXPORT_HINT}")
    manifest = _read_manifest(manifest_path)
    info = _parse_manifest(manifest, manifest_path)
    spec = info.step_spec()
    leaves = []
    for fpath, leaf_spec in alf_nest.flatten_with_paths(spec):
        entry = info.fields[fpath]
        shape = (info.num_rows, info.row_length) + tuple(leaf_spec.shape)
        dtype = np.dtype(dtype_name(leaf_spec.dtype))
        where = f"field '{fpath}'"
        if tuple(entry["shape"]) != shape or entry["dtype"] != dtype.name:
            raise DatasetError(f"{manifest_path} is damaged: {where} is listed as "
                               f"{entry['dtype']}{list(entry['shape'])} but its spec and counts "
                               f"give {dtype.name}{list(shape)}")
        if "nbytes" in entry and entry["nbytes"] != int(np.prod(shape)) * dtype.itemsize:
            raise DatasetError(f"{manifest_path} is damaged: {where} lists {entry['nbytes']} "
                               f"bytes for {dtype.name}{list(shape)}")
        array = _read_npy(os.path.join(path, entry["file"]), where, shape, dtype, mmap)
        leaves.append(torch.from_numpy(array))
    steps = alf_nest.pack_sequence_as(spec, leaves)
    reward_shape = tuple(info.reward_spec.shape) if isinstance(info.reward_spec, TensorSpec) else ()
    episodes = _read_npy(os.path.join(path, EPISODES_FILE), "episode table", None,
                         np.dtype(np.int64), mmap=False)
    if episodes.ndim != 2 or episodes.shape[1] != 4:
        raise DatasetError(f"{os.path.join(path, EPISODES_FILE)} (episode table) is damaged: "
                           f"shape {list(episodes.shape)}, expected [E, 4]")
    returns = _read_npy(os.path.join(path, RETURNS_FILE), "episode returns",
                        (episodes.shape[0],) + reward_shape, np.dtype(np.float64), mmap=False)
    lengths = np.asarray(info.row_lengths + [0], dtype=np.int64)  # [0]: never indexed when ok
    row, start, length, done = (episodes[:, i] for i in range(4))
    bad = ((row < 0) | (row >= info.num_rows) | (start < 0) | (length < 1)
           | ((done != 0) & (done != 1)))
    if np.any(bad) or np.any(start + length > lengths[np.where(bad, -1, row)]):
        raise DatasetError(f"{os.path.join(path, EPISODES_FILE)} (episode table) is damaged: "
                           "an episode lies outside the rows")
    complete = int(done.sum()) if len(episodes) else 0
    if complete != info.num_episodes:
        raise DatasetError(f"{os.path.join(path, EPISODES_FILE)} (episode table) is damaged: "
                           f"{complete} complete episodes, the manifest says {info.num_episodes}")
    return Dataset(path, info, steps, episodes, returns)


def _read_manifest(manifest_path: str) -> dict:
    try:
        with open(manifest_path, "rb") as f:
            text = f.read().decode("utf-8")
        manifest = json.loads(text)
    except UnicodeDecodeError as e:
        raise DatasetError(f"{manifest_path} is damaged: not UTF-8 text ({e.reason} at byte "
                           f"{e.start}); re-export the dataset") from None
    except json.JSONDecodeError as e:
        raise DatasetError(f"{manifest_path} is damaged: bad JSON ({e.msg} at line {e.lineno} "
                           f"column {e.colno}); re-export the dataset") from None
    except OSError as e:
        raise DatasetError(f"cannot read {manifest_path}: {e.strerror}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        fmt = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
        raise DatasetError(f"{manifest_path} is not an alf dataset manifest (format {fmt!r}, "
                           f"expected {FORMAT_NAME!r})")
    return manifest


_MANIFEST_TYPES = {
    "format_version": int, "env_name": str, "num_rows": int, "row_length": int,
    "row_lengths": list, "num_steps": int, "num_episodes": int, "fields": dict,
}


def _parse_manifest(m: dict, manifest_path: str) -> DatasetInfo:
    version = m.get("format_version")
    if isinstance(version, int) and version > FORMAT_VERSION:
        raise DatasetError(f"{manifest_path} has dataset format version {version}, newer than "
                           f"this alf reads (up to {FORMAT_VERSION}): upgrade alf to read it")
    for key, typ in _MANIFEST_TYPES.items():
        if key not in m:
            raise DatasetError(f"{manifest_path} is damaged: key '{key}' is missing")
        if not isinstance(m[key], typ) or (typ is int and isinstance(m[key], bool)):
            raise DatasetError(f"{manifest_path} is damaged: '{key}' is "
                               f"{type(m[key]).__name__} {m[key]!r}, expected {typ.__name__}")
    if version < 1:
        raise DatasetError(f"{manifest_path} is damaged: format_version {version}")
    specs = {}
    for key in ("observation_spec", "action_spec", "reward_spec"):
        if key not in m:
            raise DatasetError(f"{manifest_path} is damaged: key '{key}' is missing")
        try:
            specs[key] = spec_from_json(m[key])
        except ValueError as e:
            raise DatasetError(f"{manifest_path} is damaged: {key}: {e}") from None
    rows, length, lengths = m["num_rows"], m["row_length"], m["row_lengths"]
    if (rows < 0 or length < 0 or len(lengths) != rows
            or not all(isinstance(n, int) and 0 <= n <= length for n in lengths)):
        raise DatasetError(f"{manifest_path} is damaged: row_lengths must be {rows} integers in "
                           f"[0, {length}]")
    if sum(lengths) != m["num_steps"]:
        raise DatasetError(f"{manifest_path} is damaged: num_steps {m['num_steps']} is not the "
                           f"sum of row_lengths ({sum(lengths)})")
    expected = field_paths(step_spec(specs["observation_spec"], specs["action_spec"],
                                     specs["reward_spec"]))
    fields = m["fields"]
    for p in expected:
        entry = fields.get(p)
        if not (isinstance(entry, dict) and isinstance(entry.get("file"), str)
                and isinstance(entry.get("shape"), list) and isinstance(entry.get("dtype"), str)):
            raise DatasetError(f"{manifest_path} is damaged: field '{p}' is missing or lacks "
                               f"file/shape/dtype")
        if os.path.basename(entry["file"]) != entry["file"] or not entry["file"].endswith(".npy"):
            raise DatasetError(f"{manifest_path} is damaged: field '{p}' names file "
                               f"{entry['file']!r}, not a .npy file in the dataset directory")
    try:
        frame_stack, source = int(m.get("frame_stack", 1)), dict(m.get("source", {}))
        data_transformers = list(m.get("data_transformers", []))
    except (TypeError, ValueError):
        raise DatasetError(f"{manifest_path} is damaged: frame_stack, source or "
                           "data_transformers has the wrong type") from None
    return DatasetInfo(
        env_name=m["env_name"], num_rows=rows, row_length=length, row_lengths=list(lengths),
        num_steps=m["num_steps"], num_episodes=m["num_episodes"],
        data_transformers=data_transformers, frame_stack=frame_stack, source=source,
        format_version=version, fields=fields, created=str(m.get("created", "")),
        alf_version=str(m.get("alf_version", "")), **specs)


def _read_npy(file: str, where: str, shape: Optional[tuple], dtype: np.dtype,
              mmap: bool) -> np.ndarray:
    """Validate ``file``'s header and size against ``shape``/``dtype`` (``shape=None``:
    any), then map (copy-on-write) or read it. Never unpickles; numpy's own errors never
    reach the user."""
    name = os.path.basename(file)
    damaged = f"dataset file {file} ({where}) is truncated or damaged"
    if not os.path.isfile(file):
        raise DatasetError(f"dataset file {file} ({where}) is missing; re-export the dataset")
    size = os.path.getsize(file)
    try:
        with open(file, "rb") as f:
            major, _ = np.lib.format.read_magic(f)
            if major == 1:
                hshape, fortran, hdtype = np.lib.format.read_array_header_1_0(f)
            elif major == 2:
                hshape, fortran, hdtype = np.lib.format.read_array_header_2_0(f)
            else:
                raise ValueError(f".npy format version {major} is not one alf writes")
            offset = f.tell()
    except (ValueError, OSError, EOFError, SyntaxError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise DatasetError(f"{damaged}: bad .npy header ({first})") from None
    if hdtype.hasobject or fortran:
        raise DatasetError(f"{damaged}: header declares "
                           f"{'Python objects' if hdtype.hasobject else 'Fortran order'}, "
                           "which alf never writes")
    if hdtype != dtype or (shape is not None and tuple(hshape) != tuple(shape)):
        want = f"{dtype.name}{list(shape) if shape is not None else ''}"
        raise DatasetError(f"{damaged}: it holds {hdtype.name}{list(hshape)}, the manifest says "
                           f"{want}")
    nbytes = int(np.prod(hshape, dtype=np.int64)) * hdtype.itemsize
    if size != offset + nbytes:
        raise DatasetError(f"{damaged}: {size} bytes, expected {offset + nbytes} "
                           f"({name} header + {list(hshape)} {hdtype.name}); re-export the dataset")
    if nbytes == 0:
        return np.zeros(hshape, dtype=hdtype)
    if mmap:
        return np.memmap(file, dtype=hdtype, mode="c", offset=offset, shape=tuple(hshape))
    array = np.empty(hshape, dtype=hdtype)
    with open(file, "rb") as f:
        f.seek(offset)
        if f.readinto(memoryview(array.reshape(-1)).cast("B")) != nbytes:
            raise DatasetError(f"{damaged}: it shrank while being read")
    return array


# ----------------------------------------------------------------------------- writing


def _as_numpy(x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)


class DatasetWriter:
    """Streaming writer: ``append`` time-major chunks ``[t, R, ...]`` (or ``[t, len(rows), ...]``
    for a subset of rows), then ``close``. Files are ``[num_rows, row_length, ...]``
    memory-mapped .npy files in ``PATH.tmp-<pid>``, their disk space allocated when the writer
    is made (a disk too small for them is a :class:`~alf.errors.WriteFailedError` naming the
    space needed and free, not a SIGBUS mid-write); ``close`` computes the episode table,
    writes the manifest last and renames the directory to ``PATH``, so an interrupted
    collection never looks like a dataset. Use as a context manager to remove the staging
    directory when an exception escapes (:meth:`abort`).

    ``overwrite=False`` refuses an existing ``PATH``; with ``overwrite=True`` only an
    existing alf dataset (or an empty directory) is replaced.
    """

    def __init__(self, path: str, num_rows: int, row_length: int, env_name: str,
                 observation_spec: Any, action_spec: Any, reward_spec: Any, *,
                 data_transformers: Sequence[dict] = (), frame_stack: int = 1,
                 source: Optional[dict] = None, overwrite: bool = False):
        self.path = os.path.abspath(os.path.expanduser(str(path)))
        self._overwrite = overwrite
        check_output_path(self.path, overwrite)
        if num_rows < 1 or row_length < 0:
            raise ValueError(f"num_rows must be >= 1 and row_length >= 0, got {num_rows}, "
                             f"{row_length}")
        self.num_rows, self.row_length = int(num_rows), int(row_length)
        self._spec = step_spec(observation_spec, action_spec, reward_spec)
        self._meta = dict(env_name=str(env_name), observation_spec=observation_spec,
                          action_spec=action_spec, reward_spec=reward_spec,
                          data_transformers=[dict(d) for d in data_transformers],
                          frame_stack=int(frame_stack), source=dict(source or {}))
        self._paths = field_paths(self._spec)
        self._leaf_specs = alf_nest.flatten(self._spec)
        self._action_idx = [i for i, p in enumerate(self._paths)
                            if p == "action" or p.startswith("action.")]
        self._lengths = np.zeros(self.num_rows, dtype=np.int64)
        # per row: its next step starts an episode fragment (none stored yet, or a LAST)
        self._row_starts = np.ones(self.num_rows, dtype=bool)
        self.tmp_path = f"{self.path}.tmp-{os.getpid()}"
        self._arrays: List[np.ndarray] = []
        self._closed = False
        self._table: Optional[TableReserve] = None
        layout = [((self.num_rows, self.row_length) + tuple(s.shape),
                   np.dtype(dtype_name(s.dtype))) for s in self._leaf_specs]
        # every file, in whole blocks: the step files, then the episode table, its returns
        # and the manifest (one fragment per row to begin with: TableReserve grows)
        block = block_size(self.path)
        self._steps_size = sum(on_disk(npy_size(shape, dtype), block) for shape, dtype in layout)
        reward_shape = tuple(reward_spec.shape) if isinstance(reward_spec, TensorSpec) else ()
        manifest_size = self._manifest_size_bound()
        needed = self._steps_size + table_size(self.num_rows, reward_shape, manifest_size, block)
        try:
            if os.path.exists(self.tmp_path):
                shutil.rmtree(self.tmp_path)
            os.makedirs(self.tmp_path)
            mapped = []
            for p, (shape, dtype) in zip(self._paths, layout):
                file = os.path.join(self.tmp_path, p + ".npy")
                if int(np.prod(shape)) == 0:
                    np.save(file, np.zeros(shape, dtype))
                    self._arrays.append(np.zeros(shape, dtype))
                else:
                    self._arrays.append(np.lib.format.open_memmap(file, mode="w+", dtype=dtype,
                                                                  shape=shape))
                    mapped.append((file, os.path.getsize(file)))
            # the files are sparse: a write through the map into a block the disk cannot
            # allocate would kill the process (SIGBUS); allocate every block now instead
            reserve_files(mapped)
            self._table = TableReserve(self.tmp_path, reward_shape, manifest_size,
                                       self.num_rows, block)
        except BaseException as e:
            self._fail(e, needed)

    @property
    def row_lengths(self) -> List[int]:
        return [int(n) for n in self._lengths]

    def __enter__(self) -> "DatasetWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abort()
        elif not self._closed:
            self.close()

    def append(self, steps: DatasetSteps, rows: Optional[Sequence[int]] = None) -> None:
        """Append ``t`` more steps to each of ``rows`` (default: every row); every leaf of
        ``steps`` is time-major ``[t, len(rows), ...]`` with the field's dtype. The action of
        LAST steps is stored as zeros."""
        if self._closed:
            raise RuntimeError(f"DatasetWriter for {self.path} is closed")
        leaves = [_as_numpy(x) for x in _flatten_steps(steps, self._spec)]
        idx = np.arange(self.num_rows) if rows is None else np.asarray(rows, dtype=np.int64)
        n = len(idx)
        t = leaves[0].shape[0] if leaves[0].ndim else -1
        for p, s, x in zip(self._paths, self._leaf_specs, leaves):
            _check_leaf(p, s, x, (t, n))
        if len(np.unique(idx)) != n or (n and (idx.min() < 0 or idx.max() >= self.num_rows)):
            raise ValueError(f"rows {list(idx)} must be distinct indices in [0, {self.num_rows})")
        pos = self._lengths[idx]
        if n and pos.max() + t > self.row_length:
            raise ValueError(f"appending {t} steps to rows at {pos.max()} exceeds row_length "
                             f"{self.row_length} of dataset {self.path}")
        step_type = leaves[self._paths.index("step_type")]
        leaves = _zero_last_actions(leaves, self._action_idx, step_type)
        if t == 0 or n == 0:
            return
        starts = fragment_starts(np.swapaxes(step_type, 0, 1), self._row_starts[idx])
        stored = int(self._lengths.sum()) + t * n
        self._hold_table(self._table.fragments + int(starts.sum()), stored)
        self._row_starts[idx] = step_type[-1] == StepType.LAST
        same = bool(np.all(pos == pos[0]))
        for array, x in zip(self._arrays, leaves):
            x = np.swapaxes(x, 0, 1)  # [n, t, ...]
            if same and rows is None:
                array[:, pos[0]:pos[0] + t] = x
            elif same:
                array[idx, pos[0]:pos[0] + t] = x
            else:
                for j, r in enumerate(idx):
                    array[r, pos[j]:pos[j] + t] = x[j]
        self._lengths[idx] += t

    def close(self) -> DatasetInfo:
        """Finish: episode table, manifest (last), rename into place. Returns the manifest."""
        if self._closed:
            raise RuntimeError(f"DatasetWriter for {self.path} is already closed")
        try:
            episodes, returns = self._episode_table()
            # the space the placeholder held is the space these files now take
            self._table.release()
            save_npy(os.path.join(self.tmp_path, EPISODES_FILE), episodes)
            save_npy(os.path.join(self.tmp_path, RETURNS_FILE), returns)
            info = self._write_manifest(episodes)
            self._arrays = []
            check_output_path(self.path, self._overwrite)
            _move_into_place(self.tmp_path, self.path)
        except BaseException as e:
            self._fail(e, self._steps_size + self._table.size(self._table.fragments))
        self._closed = True
        return info

    def _episode_table(self) -> tuple:
        """Flush the step files; ``(episodes, returns)`` of the stored rows
        (:func:`compute_episodes`). A method of its own so that no memory map outlives it
        in a failure's traceback (a mapped file keeps its disk space after :meth:`abort`
        deletes it, and the one-line error would say less is free than there is)."""
        for array in self._arrays:
            if isinstance(array, np.memmap):
                array.flush()
        return compute_episodes(self._arrays[self._paths.index("step_type")],
                                self._arrays[self._paths.index("reward")], self._lengths)

    def _hold_table(self, fragments: int, stored: int) -> None:
        """Hold disk space for an episode table of ``fragments`` fragments (and its
        returns and the manifest), ``stored`` steps being stored; a disk without it is
        :meth:`_fail`'s one line, the space needed extrapolated to full rows."""
        try:
            self._table.grow(fragments)
        except BaseException as e:
            capacity = self.num_rows * self.row_length
            expected = max(fragments, -(-fragments * capacity // max(stored, 1)))
            self._fail(e, self._steps_size + self._table.size(expected))

    def _fail(self, error: BaseException, needed: int = 0) -> None:
        """:meth:`abort`, then re-raise ``error``; a file that could not be written (full
        disk, read-only) as one :class:`~alf.errors.WriteFailedError` line naming the
        dataset, the reason and, for a full disk, the space ``needed`` and free."""
        self.abort()
        cause = os_error_in(error)
        if cause is None or not isinstance(error, Exception) or isinstance(error, UserError):
            raise error
        raise write_failed(self.path, cause, "dataset", needed or None) from None

    def abort(self) -> None:
        """Drop everything written so far (the staging directory)."""
        self._arrays = []
        self._closed = True
        shutil.rmtree(self.tmp_path, ignore_errors=True)

    def _write_manifest(self, episodes: np.ndarray) -> DatasetInfo:
        num_episodes = int(episodes[:, 3].sum()) if len(episodes) else 0
        text = self._manifest_text(self.row_lengths, num_episodes)
        tmp = os.path.join(self.tmp_path, MANIFEST + ".tmp")
        with open(tmp, "w") as f:
            f.write(text + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(self.tmp_path, MANIFEST))
        return _parse_manifest(json.loads(text), os.path.join(self.path, MANIFEST))

    def _manifest_size_bound(self) -> int:
        """At least the bytes of the manifest :meth:`close` writes: the largest numbers
        it can hold (full rows, an episode per step), the same text otherwise."""
        text = self._manifest_text([self.row_length] * self.num_rows,
                                   self.num_rows * self.row_length)
        return len(text.encode("utf-8")) + 1

    def _manifest_text(self, lengths: List[int], num_episodes: int) -> str:
        """The manifest's JSON for rows of ``lengths`` holding ``num_episodes`` complete
        episodes."""
        fields = {}
        for p, s in zip(self._paths, self._leaf_specs):
            shape = (self.num_rows, self.row_length) + tuple(s.shape)
            dtype = np.dtype(dtype_name(s.dtype))
            fields[p] = {"file": p + ".npy", "shape": list(shape), "dtype": dtype.name,
                         "nbytes": int(np.prod(shape)) * dtype.itemsize}
        meta = self._meta
        manifest = {
            "format": FORMAT_NAME, "format_version": FORMAT_VERSION,
            "env_name": meta["env_name"],
            "observation_spec": spec_to_json(meta["observation_spec"]),
            "action_spec": spec_to_json(meta["action_spec"]),
            "reward_spec": spec_to_json(meta["reward_spec"]),
            "fields": fields, "num_rows": self.num_rows, "row_length": self.row_length,
            "row_lengths": lengths, "num_steps": int(sum(lengths)),
            "num_episodes": num_episodes, "data_transformers": meta["data_transformers"],
            "frame_stack": meta["frame_stack"], "source": meta["source"],
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "alf_version": _alf_version(),
        }
        return json.dumps(manifest, indent=1)


def write_dataset(path: str, steps: DatasetSteps, row_lengths: Sequence[int], env_name: str,
                  observation_spec: Any, action_spec: Any, reward_spec: Any, *,
                  data_transformers: Sequence[dict] = (), frame_stack: int = 1,
                  source: Optional[dict] = None, overwrite: bool = False) -> DatasetInfo:
    """Write ``steps`` (leaves ``[R, T, ...]`` tensors or arrays; row ``r`` valid at
    ``t < row_lengths[r]``, the rest is stored as zeros) as a dataset at ``path``.
    Byte-identical to streaming the same rows through :class:`DatasetWriter`."""
    spec = step_spec(observation_spec, action_spec, reward_spec)
    leaves = [_as_numpy(x) for x in _flatten_steps(steps, spec)]
    if leaves[0].ndim < 2:
        raise ValueError(f"step_type must be [R, T], got shape {list(leaves[0].shape)}")
    num_rows, row_length = leaves[0].shape[:2]
    lengths = np.asarray(row_lengths, dtype=np.int64)
    if lengths.shape != (num_rows,) or np.any(lengths < 0) or np.any(lengths > row_length):
        raise ValueError(f"row_lengths {list(lengths)} must be {num_rows} values in "
                         f"[0, {row_length}]")
    writer = DatasetWriter(path, num_rows, row_length, env_name, observation_spec, action_spec,
                           reward_spec, data_transformers=data_transformers,
                           frame_stack=frame_stack, source=source, overwrite=overwrite)
    with writer:
        paths = writer._paths  # pylint: disable=protected-access
        for p, s, x in zip(paths, alf_nest.flatten(spec), leaves):
            _check_leaf(p, s, x, (num_rows, row_length))
        step_type = leaves[paths.index("step_type")]
        valid = np.arange(row_length) < lengths[:, None]  # [R, T]
        starts = fragment_starts(step_type, np.ones(num_rows, dtype=bool)) & valid
        writer._hold_table(int(starts.sum()), int(lengths.sum()))  # pylint: disable=protected-access
        last = step_type == StepType.LAST  # [R, T]
        padded = np.flatnonzero(lengths < row_length)
        for i, (array, x) in enumerate(zip(writer._arrays, leaves)):  # pylint: disable=protected-access
            if not array.size:
                continue
            array[...] = x  # then fix up in place: no copy of a big field
            if i in writer._action_idx:  # pylint: disable=protected-access
                array[last] = 0
            for r in padded:
                array[r, lengths[r]:] = 0
        writer._lengths[:] = lengths  # pylint: disable=protected-access
        return writer.close()


# ----------------------------------------------------------------------------- helpers


def _flatten_steps(steps: DatasetSteps, spec: DatasetSteps) -> List[Any]:
    if not isinstance(steps, DatasetSteps):
        raise TypeError(f"expected DatasetSteps, got {type(steps).__name__}")
    try:
        alf_nest.assert_same_structure(steps, spec)
    except ValueError:
        raise ValueError("steps do not have the structure of the dataset's specs: "
                         f"{field_paths(steps)} vs {field_paths(spec)}") from None
    return alf_nest.flatten(steps)


def _check_leaf(path: str, spec: TensorSpec, x: np.ndarray, outer: tuple) -> None:
    want = tuple(outer) + tuple(spec.shape)
    dtype = np.dtype(dtype_name(spec.dtype))
    if tuple(x.shape) != want or x.dtype != dtype:
        raise ValueError(f"field '{path}' is {x.dtype.name}{list(x.shape)}, expected "
                         f"{dtype.name}{list(want)}")


def _expand(mask: np.ndarray, ndim: int) -> np.ndarray:
    return mask.reshape(mask.shape + (1,) * (ndim - mask.ndim))


def _zero_last_actions(leaves: List[np.ndarray], action_idx: List[int],
                       step_type: np.ndarray) -> List[np.ndarray]:
    last = step_type == StepType.LAST
    if not np.any(last):
        return leaves
    out = list(leaves)
    for i in action_idx:
        out[i] = np.where(_expand(last, leaves[i].ndim), 0, leaves[i]).astype(leaves[i].dtype)
    return out


def compute_episodes(step_type: np.ndarray, reward: np.ndarray,
                     row_lengths: Sequence[int]) -> tuple:
    """Episode fragments of ``[R, T]`` ``step_type`` / ``[R, T, ...]`` ``reward``.

    A fragment starts at a row's first step, at a FIRST step, or after a LAST step, and
    ends before the next start or at the row's end. Returns ``episodes`` int64 ``[E, 4]``
    (row, start, length, complete) -- complete means it starts with FIRST and ends with LAST
    -- and ``returns`` float64 ``[E, *reward_shape]``, the rewards of steps 1..length-1 summed
    (a FIRST step's reward is 0 and a mid-episode start's reward belongs to a step before
    the row).
    """
    episodes, returns = [], []
    reward_shape = tuple(reward.shape[2:])
    for r, n in enumerate(row_lengths):
        n = int(n)
        if n == 0:
            continue
        st = np.asarray(step_type[r, :n])
        rw = np.asarray(reward[r, :n], dtype=np.float64)
        is_start = st == StepType.FIRST
        is_start[0] = True
        is_start[1:] |= st[:-1] == StepType.LAST
        starts = np.flatnonzero(is_start)
        ends = np.append(starts[1:], n)  # exclusive
        complete = (st[starts] == StepType.FIRST) & (st[ends - 1] == StepType.LAST)
        csum = np.concatenate([np.zeros((1,) + reward_shape), np.cumsum(rw, axis=0)])
        ret = csum[ends] - csum[starts + 1]  # steps start+1 .. end-1
        for s, e, c in zip(starts, ends, complete):
            episodes.append((r, s, e - s, int(c)))
        returns.append(ret)
    ep = np.asarray(episodes, dtype=np.int64).reshape(-1, 4)
    ret = (np.concatenate(returns) if returns else np.zeros((0,) + reward_shape)).astype(np.float64)
    return ep, ret


def check_output_path(path: str, overwrite: bool) -> None:
    """Raise DatasetError (one line) unless a dataset may be written at ``path``: it does
    not exist, is an empty directory, or (``overwrite``) is an alf dataset."""
    if not os.path.lexists(path):
        return
    is_dataset = os.path.isfile(os.path.join(path, MANIFEST))
    is_empty_dir = os.path.isdir(path) and not os.listdir(path)
    if not overwrite and not is_empty_dir:
        raise DatasetError(f"{path} already exists; choose another path, or replace that "
                           "dataset with --overwrite (overwrite=True)")
    if overwrite and not (is_dataset or is_empty_dir):
        raise DatasetError(f"{path} exists and is not an alf dataset; refusing to replace it "
                           "(remove it yourself or choose another path)")


def _move_into_place(tmp: str, path: str) -> None:
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    if os.path.lexists(path):
        old = f"{path}.old-{os.getpid()}"
        os.rename(path, old)
        os.rename(tmp, path)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, path)
