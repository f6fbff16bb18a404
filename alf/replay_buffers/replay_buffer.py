"""Ring-buffer replay storage for any nest described by a spec.

Layout (hard to change later, see docs/design/replay_buffer_layout.md):
every leaf is one pre-allocated tensor ``[num_envs, capacity, *spec.shape]``
on ``device``. Each environment owns a row and writes into it in time order,
so a sequence ``[L]`` for one env is a contiguous slice modulo ``capacity``:
sampling ``[B, L]`` sequences needs no per-episode bookkeeping, and storage is
exactly the raw data plus a few counters.

``_current_pos[e]`` counts every step ever added for env ``e`` (it never wraps),
``_current_size[e]`` is how many of them are still stored. Positions handed out
in :class:`BatchInfo` are these absolute counts.
"""
import logging
from typing import Any, Optional, Tuple

import torch

from alf import nest as alf_nest
from alf.data_structures import BatchInfo
from alf.errors import UserError
from alf.tensor_specs import nbytes as spec_nbytes


def _format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def _available_memory_bytes() -> Optional[int]:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class ReplayBuffer:
    """Pre-allocated per-environment ring buffer.

    Args:
        data_spec: nest of TensorSpec for one item (no batch/time dims).
        num_envs: number of rows (one per environment).
        max_length: capacity per environment.
        device: where storage lives ("cpu" or "cuda").
        name: used in the memory report.
    """

    def __init__(self, data_spec: Any, num_envs: int, max_length: int, device: str = "cpu",
                 name: str = "ReplayBuffer", verbose: bool = True):
        self._data_spec = data_spec
        self._num_envs = int(num_envs)
        self._max_length = int(max_length)
        self._device = torch.device(device)
        self._name = name
        total = spec_nbytes(data_spec) * self._num_envs * self._max_length
        self._nbytes = total
        available = _available_memory_bytes() if self._device.type == "cpu" else None
        if available is not None and total > available:
            raise UserError(
                f"{name}: storage for {num_envs} envs x {max_length} steps needs "
                f"{_format_bytes(total)} but only {_format_bytes(available)} of memory is "
                f"available. Reduce TrainerConfig.replay_buffer_length or the number of envs.")
        try:
            self._storage = alf_nest.map_structure(
                lambda s: s.zeros((self._num_envs, self._max_length), device=self._device), data_spec)
        except RuntimeError as e:  # allocation failure
            raise UserError(f"{name}: could not allocate {_format_bytes(total)}: {e}") from None
        self._current_pos = torch.zeros(self._num_envs, dtype=torch.int64, device=self._device)
        self._current_size = torch.zeros(self._num_envs, dtype=torch.int64, device=self._device)
        if verbose and total > 64 * 1024 * 1024:
            logging.info("%s: %d envs x %d steps, %s", name, num_envs, max_length,
                         _format_bytes(total))

    # ------------------------------------------------------------ properties
    @property
    def data_spec(self) -> Any:
        return self._data_spec

    @property
    def num_envs(self) -> int:
        return self._num_envs

    @property
    def max_length(self) -> int:
        return self._max_length

    @property
    def nbytes(self) -> int:
        """Bytes of the pre-allocated storage."""
        return self._nbytes

    @property
    def device(self) -> torch.device:
        return self._device

    def total_size(self) -> int:
        """Number of items currently stored over all envs."""
        return int(self._current_size.sum())

    def current_size(self) -> torch.Tensor:
        """``[num_envs]`` items stored per env."""
        return self._current_size.clone()

    # ---------------------------------------------------------------- writing
    def add_batch(self, batch: Any, env_ids: Optional[torch.Tensor] = None) -> None:
        """Append one step per row: ``batch`` leaves are ``[B, ...]``, ``env_ids`` ``[B]``
        (defaults to ``arange(num_envs)``). Env ids in one call must be distinct."""
        if env_ids is None:
            pos = self._current_pos % self._max_length
            rows = torch.arange(self._num_envs, device=self._device)
            alf_nest.map_structure(lambda buf, x: buf.__setitem__((rows, pos), x.to(self._device)),
                                   self._storage, batch)
            self._current_pos += 1
            self._current_size.clamp_(max=self._max_length - 1).add_(1)
            return
        env_ids = env_ids.to(self._device, torch.int64)
        pos = self._current_pos[env_ids] % self._max_length
        alf_nest.map_structure(lambda buf, x: buf.__setitem__((env_ids, pos), x.to(self._device)),
                               self._storage, batch)
        self._current_pos[env_ids] += 1
        self._current_size[env_ids] = torch.clamp(self._current_size[env_ids] + 1,
                                                  max=self._max_length)

    def add_sequence(self, batch: Any, env_ids: Optional[torch.Tensor] = None) -> None:
        """Append ``T`` consecutive steps per row at once: ``batch`` leaves are time-major
        ``[T, B, ...]`` (as an unroll returns them), ``env_ids`` ``[B]`` distinct."""
        T = alf_nest.flatten(batch)[0].shape[0]
        if T > self._max_length:
            raise ValueError(f"{self._name}: cannot add {T} steps to a buffer of length "
                             f"{self._max_length}")
        if env_ids is None:
            env_ids = torch.arange(self._num_envs, device=self._device)
        env_ids = env_ids.to(self._device, torch.int64)
        pos = (self._current_pos[env_ids][None, :]
               + torch.arange(T, device=self._device)[:, None]) % self._max_length  # [T, B]
        rows = env_ids[None, :].expand(T, -1)
        alf_nest.map_structure(lambda buf, x: buf.__setitem__((rows, pos), x.to(self._device)),
                               self._storage, batch)
        self._current_pos[env_ids] += T
        self._current_size[env_ids] = torch.clamp(self._current_size[env_ids] + T,
                                                  max=self._max_length)

    def clear(self, keep_last: bool = False) -> None:
        """Forget the stored items; with ``keep_last`` the newest step of each env stays
        (so the next unroll continues the sequence: whole-buffer PPO loses no transition)."""
        if keep_last:
            self._current_size.clamp_(max=1)
        else:
            self._current_size.zero_()

    # ---------------------------------------------------------------- reading
    def gather_all(self) -> Any:
        """Everything stored, ``[num_envs, size, ...]`` in time order (equal sizes required)."""
        size = int(self._current_size[0])
        if not bool((self._current_size == size).all()):
            raise RuntimeError("gather_all needs every env to hold the same number of steps")
        offsets = torch.arange(size, device=self._device)
        idx = (self._current_pos[:, None] - size + offsets[None, :]) % self._max_length
        rows = torch.arange(self._num_envs, device=self._device)[:, None]
        return alf_nest.map_structure(lambda b: b[rows, idx], self._storage)

    def get_batch(self, batch_size: int, batch_length: int = 1,
                  generator: Optional[torch.Generator] = None) -> Tuple[Any, BatchInfo]:
        """Uniformly sample ``batch_size`` sequences of ``batch_length`` consecutive steps.

        Returns ``(data [B, L, ...], BatchInfo)``; env rows are chosen in proportion
        to how many valid sequence starts they hold.
        """
        valid = (self._current_size - batch_length + 1).clamp(min=0)
        total = int(valid.sum())
        if total <= 0:
            raise RuntimeError(f"{self._name}: not enough data for sequences of length "
                               f"{batch_length} (have {self.total_size()} steps)")
        r = torch.randint(0, total, (batch_size,), device=self._device, generator=generator)
        cum = torch.cumsum(valid, 0)
        env_ids = torch.searchsorted(cum, r, right=True)
        offset = r - (cum[env_ids] - valid[env_ids])
        start = self._current_pos[env_ids] - self._current_size[env_ids] + offset
        data = self.get_by_position(env_ids, start, batch_length)
        info = BatchInfo(env_ids=env_ids, positions=start,
                         importance_weights=torch.ones(batch_size, device=self._device),
                         replay_buffer=self)
        return data, info

    def get_by_position(self, env_ids: torch.Tensor, positions: torch.Tensor,
                        length: int = 1) -> Any:
        """Items at absolute ``positions`` ``[B]`` (+0..length-1) of ``env_ids`` ``[B]`` -> ``[B, L, ...]``."""
        idx = (positions[:, None] + torch.arange(length, device=self._device)[None, :]) % self._max_length
        rows = env_ids[:, None]
        return alf_nest.map_structure(lambda b: b[rows, idx], self._storage)

    # ---------------------------------------------------------- checkpointing
    def state_dict(self) -> dict:
        """Storage, counters and field names (tensors, strings and lists only; no pickled
        objects). The tensors are the live storage, not copies (as ``nn.Module.state_dict``)."""
        paths_and_leaves = alf_nest.flatten_with_paths(self._storage)
        return {"storage": [leaf for _, leaf in paths_and_leaves],
                "fields": [path for path, _ in paths_and_leaves],
                "current_pos": self._current_pos, "current_size": self._current_size}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`; a saved buffer whose fields, shapes or dtypes differ
        from this buffer's spec raises :class:`UserError` naming the field."""
        leaves = state["storage"]
        mine = alf_nest.flatten_with_paths(self._storage)
        my_fields = [path for path, _ in mine]
        saved_fields = state.get("fields")  # absent in buffers saved before fields were recorded
        if saved_fields is not None and list(saved_fields) != my_fields:
            missing = [f for f in my_fields if f not in saved_fields]
            extra = [f for f in saved_fields if f not in my_fields]
            what = "; ".join(x for x in (
                f"missing field(s) {', '.join(repr(f) for f in missing)}" if missing else "",
                f"unexpected field(s) {', '.join(repr(f) for f in extra)}" if extra else "")
                if x) or "fields in a different order"
            raise UserError(f"{self._name}: the saved buffer does not match this buffer's spec: "
                            f"{what}")
        if len(leaves) != len(mine):
            raise UserError(f"{self._name}: saved buffer has {len(leaves)} fields, expected {len(mine)}")
        dims = tuple(leaves[0].shape[:2]) if leaves else (self._num_envs, self._max_length)
        if dims != (self._num_envs, self._max_length):
            raise UserError(f"{self._name}: the saved buffer holds {dims[0]} envs x {dims[1]} "
                            f"steps but this one {self._num_envs} envs x {self._max_length} steps")
        for (path, dst), src in zip(mine, leaves):  # check everything before copying anything
            if dst.shape != src.shape or dst.dtype != src.dtype:
                raise UserError(f"{self._name}: field '{path}' is {tuple(src.shape)} {src.dtype} in "
                                f"the saved buffer but {tuple(dst.shape)} {dst.dtype} here")
        for (_, dst), src in zip(mine, leaves):
            dst.copy_(src)
        self._current_pos.copy_(state["current_pos"])
        self._current_size.copy_(state["current_size"])

