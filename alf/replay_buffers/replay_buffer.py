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

With ``prioritized=True`` a :class:`~alf.replay_buffers.sum_tree.SumTree` holds
one leaf per storage slot (``env * capacity + slot``) with value
``priority ** alpha``; slots that hold no data have value 0. See
docs/replay_buffer.md for the user-facing description.
"""
import logging
from typing import Any, Callable, Optional, Tuple

import torch

from alf import nest as alf_nest
from alf.config import configurable
from alf.data_structures import BatchInfo
from alf.errors import UserError
from alf.replay_buffers.sum_tree import SumTree
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


@configurable
class ReplayBuffer:
    """Pre-allocated per-environment ring buffer, uniform or prioritized.

    Args:
        data_spec: nest of TensorSpec for one item (no batch/time dims).
        num_envs: number of rows (one per environment).
        max_length: capacity per environment.
        device: where storage lives ("cpu" or "cuda").
        name: used in the memory report and in error messages.
        prioritized: sample sequence starts in proportion to ``priority ** alpha``
            (Schaul et al. 2016) instead of uniformly.
        priority_alpha: exponent applied to priorities given to :meth:`update_priority`.
        priority_eps: added to ``|priority|`` before the exponent (must be > 0, so
            every stored item keeps a non-zero chance).
        enable_checkpoint: ask the trainer to save this buffer with each checkpoint
            (``ReplayBuffer.enable_checkpoint = True`` in gin; the trainer also saves it
            when ``TrainerConfig.save_replay_buffer``).
    """

    def __init__(self, data_spec: Any, num_envs: int, max_length: int, device: str = "cpu",
                 name: str = "ReplayBuffer", prioritized: bool = False,
                 priority_alpha: float = 0.7, priority_eps: float = 1e-6,
                 enable_checkpoint: bool = False):
        self._data_spec = data_spec
        self._num_envs = int(num_envs)
        self._max_length = int(max_length)
        self._device = torch.device(device)
        self._name = name
        self._prioritized = bool(prioritized)
        self._alpha = float(priority_alpha)
        self._eps = float(priority_eps)
        self._enable_checkpoint = bool(enable_checkpoint)
        if self._prioritized and not self._eps > 0:
            raise ValueError(f"{name}: priority_eps must be > 0, got {priority_eps}")
        storage_bytes = spec_nbytes(data_spec) * self._num_envs * self._max_length
        tree_bytes = (SumTree.nbytes_for(self._num_envs * self._max_length)
                      if self._prioritized else 0)
        total = storage_bytes + tree_bytes
        available = _available_memory_bytes() if self._device.type == "cpu" else None
        if available is not None and total > available:
            raise UserError(
                f"{name}: storage for {num_envs} envs x {max_length} steps needs "
                f"{_format_bytes(total)} but only {_format_bytes(available)} of memory is "
                f"available. Reduce TrainerConfig.replay_buffer_length or the number of envs.")
        try:
            self._storage = alf_nest.map_structure(
                lambda s: s.zeros((self._num_envs, self._max_length), device=self._device), data_spec)
            self._tree = (SumTree(self._num_envs * self._max_length, self._device,
                                  initial_max_value=1.0) if self._prioritized else None)
        except RuntimeError as e:  # allocation failure
            raise UserError(f"{name}: could not allocate {_format_bytes(total)}: {e}") from None
        self._init_views(storage_bytes)
        envs = f"{self._num_envs:,} env{'s' if self._num_envs != 1 else ''}"
        if self._prioritized:
            logging.info("%s: %s x %s steps, %s storage + %s priority tree = %s on %s", name, envs,
                         f"{self._max_length:,}", _format_bytes(storage_bytes),
                         _format_bytes(self._nbytes - storage_bytes),
                         _format_bytes(self._nbytes), self._device)
        else:
            logging.info("%s: %s x %s steps, %s on %s", name, envs, f"{self._max_length:,}",
                         _format_bytes(self._nbytes), self._device)

    def _init_views(self, storage_bytes: int) -> None:
        # the same memory viewed as [num_envs * capacity, ...]: reads are one index_select
        # per field (several times faster than 2-D advanced indexing)
        self._flat_storage = alf_nest.map_structure(
            lambda b: b.view((self._num_envs * self._max_length,) + tuple(b.shape[2:])),
            self._storage)
        self._storage_nbytes = storage_bytes
        self._nbytes = storage_bytes + (self._tree.nbytes if self._tree is not None else 0)
        self._current_pos = torch.zeros(self._num_envs, dtype=torch.int64, device=self._device)
        self._current_size = torch.zeros(self._num_envs, dtype=torch.int64, device=self._device)
        self._env_range = torch.arange(self._num_envs, device=self._device)

    @classmethod
    def from_storage(cls, data_spec: Any, storage: Any, row_lengths: torch.Tensor,
                     name: str = "OfflineReplayBuffer") -> "ReplayBuffer":
        """A uniform buffer over existing storage, without copying it.

        Args:
            data_spec: nest of TensorSpec for one item.
            storage: nest (matching ``data_spec``) of contiguous ``[num_envs, capacity, ...]``
                tensors, e.g. memory-mapped dataset files (``alf.datasets``): pages are read
                on demand, so the data may be larger than RAM.
            row_lengths: ``[num_envs]`` int64: row ``e`` holds items in slots
                ``[0, row_lengths[e])``, oldest first.
            name: for messages.
        The buffer can be sampled and gathered like any other; writing into it writes
        into ``storage``.
        """
        leaves = alf_nest.flatten(storage)
        num_envs, capacity = (tuple(leaves[0].shape[:2]) if leaves else (0, 0))
        for leaf, spec in zip(leaves, alf_nest.flatten(data_spec)):
            if tuple(leaf.shape) != (num_envs, capacity) + tuple(spec.shape) \
                    or leaf.dtype != spec.dtype or not leaf.is_contiguous():
                raise ValueError(f"{name}: storage leaf {tuple(leaf.shape)} {leaf.dtype} does not "
                                 f"match {(num_envs, capacity)} + spec {spec}")
        self = cls.__new__(cls)
        self._data_spec = data_spec
        self._num_envs, self._max_length = int(num_envs), int(capacity)
        self._device = leaves[0].device if leaves else torch.device("cpu")
        self._name = name
        self._prioritized, self._alpha, self._eps = False, 0.7, 1e-6
        self._enable_checkpoint = False
        self._storage = storage
        self._tree = None
        self._init_views(sum(leaf.numel() * leaf.element_size() for leaf in leaves))
        lengths = torch.as_tensor(row_lengths, dtype=torch.int64).to(self._device)
        if tuple(lengths.shape) != (self._num_envs,) or bool((lengths < 0).any()
                                                               or (lengths > capacity).any()):
            raise ValueError(f"{name}: row_lengths {lengths.tolist()} do not fit "
                             f"{self._num_envs} rows of {capacity} slots")
        self._current_pos.copy_(lengths)
        self._current_size.copy_(lengths)
        return self

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
        """Bytes of the pre-allocated storage plus the priority tree (if prioritized)."""
        return self._nbytes

    @property
    def storage_nbytes(self) -> int:
        """Bytes of the pre-allocated storage only (``num_envs x max_length x bytes(spec)``)."""
        return self._storage_nbytes

    @property
    def device(self) -> torch.device:
        return self._device

    @property
    def prioritized(self) -> bool:
        return self._prioritized

    @property
    def priority_alpha(self) -> float:
        return self._alpha

    @property
    def priority_eps(self) -> float:
        return self._eps

    @property
    def enable_checkpoint(self) -> bool:
        """Whether the trainer should save this buffer with each checkpoint."""
        return self._enable_checkpoint

    def total_size(self) -> int:
        """Number of items currently stored over all envs."""
        return int(self._current_size.sum())

    def current_size(self) -> torch.Tensor:
        """``[num_envs]`` items stored per env."""
        return self._current_size.clone()

    def current_pos(self) -> torch.Tensor:
        """``[num_envs]`` absolute position the next item of each env will get
        (= number of items ever added); stored items are ``[pos - size, pos)``."""
        return self._current_pos.clone()

    def is_stored(self, env_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """``[B]`` bool: whether absolute ``positions [B]`` of ``env_ids [B]`` are still stored
        (not overwritten, not cleared, already written)."""
        head = self._current_pos[env_ids]
        return (positions >= head - self._current_size[env_ids]) & (positions < head)

    # ---------------------------------------------------------------- writing
    def _leaves(self, env_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Sum-tree leaf (``env * capacity + slot``) of absolute ``positions`` (any shape)."""
        return env_ids * self._max_length + positions % self._max_length

    def add_batch(self, batch: Any, env_ids: Optional[torch.Tensor] = None) -> None:
        """Append one step per row: ``batch`` leaves are ``[B, ...]``, ``env_ids`` ``[B]``
        (defaults to ``arange(num_envs)``). Env ids in one call must be distinct.
        Prioritized: the new items get the largest priority set so far (1.0 initially)."""
        self.add_sequence(alf_nest.map_structure(lambda x: x.unsqueeze(0), batch), env_ids)

    def add_sequence(self, batch: Any, env_ids: Optional[torch.Tensor] = None) -> None:
        """Append ``T`` consecutive steps per row at once: ``batch`` leaves are time-major
        ``[T, B, ...]`` (as an unroll returns them), ``env_ids`` ``[B]`` distinct."""
        T = alf_nest.flatten(batch)[0].shape[0]
        if T > self._max_length:
            raise ValueError(f"{self._name}: cannot add {T} steps to a buffer of length "
                             f"{self._max_length}")
        all_rows = env_ids is None
        env_ids = self._env_range if all_rows else env_ids.to(self._device, torch.int64)
        start = self._current_pos if all_rows else self._current_pos[env_ids]
        pos = (start[None, :] + torch.arange(T, device=self._device)[:, None]) % self._max_length
        flat = (env_ids[None, :] * self._max_length + pos).reshape(-1)  # [T*B] storage rows
        # one index_copy_ per field into the [num_envs * capacity, ...] view of its storage
        alf_nest.map_structure(
            lambda buf, x: buf.index_copy_(0, flat, x.reshape((-1,) + tuple(x.shape[2:])).to(
                self._device, buf.dtype)), self._flat_storage, batch)
        if self._tree is not None:  # distinct (env, slot) pairs: no de-duplication needed
            self._tree.set(flat, self._tree.max_value(), assume_unique=True)
        if all_rows:
            self._current_pos += T
            self._current_size.add_(T).clamp_(max=self._max_length)
        else:
            self._current_pos[env_ids] += T
            self._current_size[env_ids] = torch.clamp(self._current_size[env_ids] + T,
                                                      max=self._max_length)

    def clear(self, keep_last: bool = False) -> None:
        """Forget the stored items; with ``keep_last`` the newest step of each env stays
        (so the next unroll continues the sequence: whole-buffer PPO loses no transition).
        Prioritized: forgotten slots get priority 0; a kept step keeps its priority."""
        if self._tree is not None:
            kept = self._leaves(self._env_range, self._current_pos - 1)
            kept_values = self._tree.get(kept) if keep_last else None
            self._tree.clear()
            if keep_last:  # envs with nothing stored had 0 there already
                self._tree.set(kept, kept_values, assume_unique=True)
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
        return self.get_by_position(self._env_range, self._current_pos - size, size)

    def get_batch(self, batch_size: int, batch_length: int = 1,
                  generator: Optional[torch.Generator] = None,
                  beta: float = 0.4) -> Tuple[Any, BatchInfo]:
        """Sample ``batch_size`` sequences of ``batch_length`` consecutive steps of one env.

        A start is valid when its whole sequence is stored: position ``s`` of env ``e``
        with ``pos[e] - size[e] <= s <= pos[e] - L``.

        - Uniform: every valid start has the same probability; importance weights are 1.
        - Prioritized: ``P(i) = p_i / sum_{valid j} p_j`` over valid starts, where
          ``p_i = priority_i ** alpha`` is the tree value. The last ``L - 1`` stored steps
          of each env are invalid starts; they read as 0 in the tree during the
          descent (:meth:`SumTree.masked`: one tree write of ``num_envs x (L - 1)``
          leaves, then their ancestors are restored bit-exactly from a snapshot).
          This samples exactly the priority distribution restricted to valid starts:
          no rejection loop, no bias from shifting starts, and a masked (0) leaf is
          never returned.
          Importance weights ``w_i = (N * P(i)) ** -beta / max_batch w``, with ``N``
          the number of valid starts, normalised by the max over the batch.

        Args:
            batch_size: ``B``.
            batch_length: ``L``.
            generator: optional ``torch.Generator`` (on the buffer's device) for
                reproducible sampling.
            beta: importance-weight exponent (ignored by uniform buffers).
        Returns:
            ``(data [B, L, ...], BatchInfo)``: ``env_ids [B]`` int64, ``positions [B]``
            int64 absolute start positions, ``importance_weights [B]`` float32.
        """
        valid = (self._current_size - batch_length + 1).clamp(min=0)
        total = int(valid.sum())
        if total <= 0:
            raise RuntimeError(f"{self._name}: not enough data for sequences of length "
                               f"{batch_length} (have {self.total_size()} steps)")
        if self._prioritized:
            env_ids, start, weights = self._prioritized_starts(batch_size, batch_length, total,
                                                               generator, beta)
        else:
            r = torch.randint(0, total, (batch_size,), device=self._device, generator=generator)
            cum = torch.cumsum(valid, 0)
            env_ids = torch.searchsorted(cum, r, right=True)
            offset = r - (cum[env_ids] - valid[env_ids])
            start = self._current_pos[env_ids] - self._current_size[env_ids] + offset
            weights = torch.ones(batch_size, device=self._device)
        data = self.get_by_position(env_ids, start, batch_length)
        info = BatchInfo(env_ids=env_ids, positions=start, importance_weights=weights,
                         replay_buffer=self)
        return data, info

    def _prioritized_starts(self, batch_size: int, L: int, num_valid: int,
                            generator: Optional[torch.Generator], beta: float):
        """``(env_ids [B], start positions [B], importance weights [B] float32)``."""
        tree = self._tree
        # hide the newest L-1 steps of every env (starts that would run past the head);
        # L <= size <= capacity, so these are distinct slots
        back = torch.arange(1, L, device=self._device)
        hidden = self._leaves(self._env_range[:, None],
                              self._current_pos[:, None] - back[None, :]).reshape(-1)
        with tree.masked(hidden):
            total = tree.total().clone()  # a view of the tree: freeze the masked total
            u = torch.rand(batch_size, generator=generator, dtype=torch.float64,
                           device=self._device) * total
            leaf = tree.sample(u)
            prob = tree.get(leaf) / total
        env_ids = leaf // self._max_length
        slot = leaf % self._max_length
        newest = self._current_pos[env_ids] - 1
        start = newest - (newest - slot) % self._max_length
        w = (num_valid * prob) ** (-float(beta))
        weights = (w / w.max()).to(torch.float32)
        return env_ids, start, weights

    def get_by_position(self, env_ids: torch.Tensor, positions: torch.Tensor,
                        length: int = 1, select: Optional[Callable[[Any], Any]] = None) -> Any:
        """Items at absolute ``positions`` ``[B]`` (+0..length-1) of ``env_ids`` ``[B]`` -> ``[B, L, ...]``.

        ``select`` picks a sub-nest of the storage to read (e.g. ``lambda s: s.action``)
        so that one field can be read without touching the others."""
        B = positions.shape[0]
        steps = positions[:, None] + torch.arange(length, device=self._device)
        flat = (env_ids[:, None] * self._max_length + steps % self._max_length).reshape(-1)
        storage = self._flat_storage if select is None else select(self._flat_storage)
        return alf_nest.map_structure(
            lambda b: b.index_select(0, flat).view((B, length) + tuple(b.shape[1:])), storage)

    # -------------------------------------------------------------- priorities
    def update_priority(self, env_ids: torch.Tensor, positions: torch.Tensor,
                        priorities: torch.Tensor) -> None:
        """Set the priority of the items at absolute ``positions [B]`` of ``env_ids [B]``.

        Stores ``(|priority| + eps) ** alpha`` (``priorities [B]``, e.g. ``LossInfo.priority``
        or absolute TD errors) and raises the max priority given to new items.
        Positions no longer stored (overwritten since they were sampled, or cleared)
        and positions not yet written are ignored; among duplicates the last wins.
        Vectorised, no host sync.
        """
        if self._tree is None:
            raise RuntimeError(f"{self._name}: update_priority needs prioritized=True")
        env_ids = env_ids.to(self._device, torch.int64).reshape(-1)
        positions = positions.to(self._device, torch.int64).reshape(-1)
        new = (priorities.detach().to(self._device, torch.float64).reshape(-1).abs()
               + self._eps) ** self._alpha
        stored = self.is_stored(env_ids, positions)
        leaves = self._leaves(env_ids, positions)
        # An ignored row rewrites its slot's current value; put those rows first so that
        # with last-write-wins a real update of the same slot is never undone.
        values = torch.where(stored, new, self._tree.get(leaves))
        order = torch.argsort(stored.to(torch.int8), stable=True)
        self._tree.set(leaves[order], values[order])

    def get_priority(self, env_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Tree values ``priority ** alpha`` ``[B]`` float64 of ``positions`` (0 if not stored)."""
        if self._tree is None:
            raise RuntimeError(f"{self._name}: get_priority needs prioritized=True")
        env_ids = env_ids.to(self._device, torch.int64)
        positions = positions.to(self._device, torch.int64)
        values = self._tree.get(self._leaves(env_ids, positions))
        return torch.where(self.is_stored(env_ids, positions), values, 0.0)

    # ---------------------------------------------------------- checkpointing
    def state_dict(self) -> dict:
        """The written part of the buffer, for checkpoints (``torch.load(weights_only=True)``
        loads it: tensors, ints, strings and lists only, no pickled objects).

        Env ``e`` has written slots ``[0, min(current_pos[e], capacity))`` of its row (a
        ring writes slots in order from 0 and wraps only once full), and every written
        slot may be read, not only the ``current_size`` stored items: ``prev_action``
        and frame re-stacking read the steps just before the oldest stored one, which
        ``clear()`` leaves in place. So each field is saved as ``[num_envs, W, ...]``,
        its slots ``[0, W)`` with ``W = max_e min(current_pos[e], capacity)``: 600
        transitions of a 1M-capacity buffer save 600 slots, not a million.

        Keys: ``version`` (2), ``fields`` (field paths), ``num_envs``, ``capacity``,
        ``storage`` (one tensor per field), ``current_pos``/``current_size`` ``[num_envs]``
        int64 and, prioritized, ``priority_tree``: ``leaves`` ``[num_envs, W]`` float64
        (the tree values of those slots; every other leaf is 0) and ``max_value``.
        A completely written buffer (``W == capacity``) returns the live storage
        tensors, not copies (as ``nn.Module.state_dict``); a partly written one
        returns compact copies (``torch.save`` of a slice would save its whole storage).
        """
        written = int(self._current_pos.clamp(max=self._max_length).max()) if self._num_envs else 0
        paths_and_leaves = alf_nest.flatten_with_paths(self._storage)
        state = {"version": _STATE_VERSION,
                 "fields": [path for path, _ in paths_and_leaves],
                 "num_envs": self._num_envs, "capacity": self._max_length,
                 "storage": [_written_slots(leaf, written) for _, leaf in paths_and_leaves],
                 "current_pos": self._current_pos.clone(),
                 "current_size": self._current_size.clone()}
        if self._tree is not None:
            slots = torch.arange(written, device=self._device)
            leaves = self._leaves(self._env_range[:, None], slots[None, :])
            state["priority_tree"] = {"leaves": self._tree.get(leaves.reshape(-1)).view(
                self._num_envs, written), "max_value": self._tree.max_value().clone()}
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` exactly: storage contents, positions, sizes and
        priorities, so sampling with the same generator gives the same batches.

        Also loads the older full-capacity format (``storage`` leaves ``[num_envs,
        capacity, ...]``, ``priority_tree`` the whole tree). Everything is checked
        before anything is copied; a mismatch raises :class:`UserError` naming the
        field (names, per-item shapes and dtypes), the ``num_envs x capacity`` layout
        or the bad counter. A prioritized buffer loading a state saved without
        priorities gives every stored item priority 1; a uniform buffer ignores
        saved priorities.
        """
        leaves = list(state["storage"])
        mine = alf_nest.flatten_with_paths(self._storage)
        self._check_saved_fields(state.get("fields"), [path for path, _ in mine], len(leaves))
        envs, capacity, written = self._check_saved_layout(state, leaves)
        for (path, dst), src in zip(mine, leaves):
            if tuple(src.shape[2:]) != tuple(dst.shape[2:]) or src.dtype != dst.dtype:
                raise UserError(
                    f"{self._name}: field '{path}' holds {tuple(src.shape[2:])} {src.dtype} items "
                    f"in the saved buffer but {tuple(dst.shape[2:])} {dst.dtype} items here")
            if tuple(src.shape[:2]) != (envs, written):
                raise UserError(f"{self._name}: field '{path}' of the saved buffer has "
                                f"{tuple(src.shape[:2])} env x slot entries, expected "
                                f"{(envs, written)}; the file is damaged")
        pos, size = self._check_saved_counters(state, written)
        saved_tree = state.get("priority_tree") if self._tree is not None else None
        if saved_tree is not None:
            self._check_saved_priorities(saved_tree, written)
        for (_, dst), src in zip(mine, leaves):
            dst[:, :written].copy_(src)
            dst[:, written:].zero_()
        self._current_pos.copy_(pos)
        self._current_size.copy_(size)
        if self._tree is None:
            return
        if saved_tree is None:
            logging.warning("%s: the saved buffer has no priorities; every stored item gets "
                            "priority 1", self._name)
            self._tree.clear()
            offsets = torch.arange(self._max_length, device=self._device)
            pos = self._current_pos[:, None] - 1 - offsets[None, :]  # [E, capacity], newest first
            stored = offsets[None, :] < self._current_size[:, None]
            tree_leaves = self._leaves(self._env_range[:, None], pos).reshape(-1)
            self._tree.set(tree_leaves, stored.reshape(-1).to(torch.float64), assume_unique=True)
        elif "tree" in saved_tree:  # older format: the whole tree
            self._tree.load_state_dict(saved_tree)
        else:
            self._restore_priorities(saved_tree["leaves"], saved_tree["max_value"])

    def _check_saved_fields(self, saved_fields: Optional[list], my_fields: list,
                            num_saved: int) -> None:
        """UserError naming missing/unexpected fields (``saved_fields`` None: states saved
        before field names were recorded, checked by count)."""
        if saved_fields is not None and list(saved_fields) != my_fields:
            missing = [f for f in my_fields if f not in saved_fields]
            extra = [f for f in saved_fields if f not in my_fields]
            what = "; ".join(x for x in (
                f"missing field(s) {', '.join(repr(f) for f in missing)}" if missing else "",
                f"unexpected field(s) {', '.join(repr(f) for f in extra)}" if extra else "")
                if x) or "fields in a different order"
            raise UserError(f"{self._name}: the saved buffer does not match this buffer's spec: "
                            f"{what}")
        if num_saved != len(my_fields):
            raise UserError(f"{self._name}: saved buffer has {num_saved} fields, expected "
                            f"{len(my_fields)}")

    def _check_saved_layout(self, state: dict, leaves: list) -> Tuple[int, int, int]:
        """``(num_envs, capacity, written slots W)`` of a saved state, checked against this
        buffer (the older format has no ``capacity``: its leaves are ``[E, capacity]``)."""
        if "capacity" in state:
            envs, capacity = int(state["num_envs"]), int(state["capacity"])
            written = int(leaves[0].shape[1]) if leaves else 0
        else:
            envs, capacity = (tuple(leaves[0].shape[:2]) if leaves
                              else (self._num_envs, self._max_length))
            written = capacity
        if (envs, capacity) != (self._num_envs, self._max_length):
            raise UserError(f"{self._name}: the saved buffer holds {envs} envs x {capacity} "
                            f"steps but this one {self._num_envs} envs x {self._max_length} steps")
        if written > capacity:
            raise UserError(f"{self._name}: the saved buffer has {written} slots per env, more "
                            f"than its capacity {capacity}")
        return envs, capacity, written

    def _check_saved_counters(self, state: dict, written: int) -> Tuple[torch.Tensor, torch.Tensor]:
        """Saved ``current_pos``/``current_size`` ``[num_envs]``, checked to describe data the
        state holds (size <= min(pos, capacity), written slots all saved)."""
        pos, size = state["current_pos"], state["current_size"]
        for name, x in (("current_pos", pos), ("current_size", size)):
            if tuple(x.shape) != (self._num_envs,) or x.dtype != torch.int64:
                raise UserError(f"{self._name}: the saved {name} is {tuple(x.shape)} {x.dtype}, "
                                f"expected ({self._num_envs},) torch.int64")
        filled = pos.clamp(max=self._max_length)
        if bool((size < 0).any() or (size > filled).any() or (filled > written).any()):
            raise UserError(f"{self._name}: the saved counters (current_pos {pos.tolist()}, "
                            f"current_size {size.tolist()}) do not match the {written} saved "
                            f"slots per env of a {self._max_length}-step ring; the file is damaged")
        return pos.to(self._device), size.to(self._device)

    def _check_saved_priorities(self, saved_tree: dict, written: int) -> None:
        if "tree" in saved_tree:  # older format
            expected, got = self._tree.state_dict()["tree"].shape, saved_tree["tree"].shape
            what = "nodes"
        else:
            expected, got = (self._num_envs, written), saved_tree["leaves"].shape
            what = "priorities"
        if tuple(got) != tuple(expected):
            raise UserError(f"{self._name}: the saved priority tree has {tuple(got)} {what}, "
                            f"expected {tuple(expected)}")

    def _restore_priorities(self, leaves: torch.Tensor, max_value: torch.Tensor) -> None:
        """Sum tree from the saved values ``[num_envs, W]`` of slots ``[0, W)`` (all other
        leaves 0) and the saved max. Every node is recomputed from its children, as on
        any write, so the tree equals the saved one bit for bit."""
        written = leaves.shape[1]
        slots = torch.arange(written, device=self._device)
        index = self._leaves(self._env_range[:, None], slots[None, :]).reshape(-1)
        self._tree.clear()
        self._tree.set(index, leaves.reshape(-1).to(self._device), assume_unique=True)
        # set() raised the max to at least max(leaves); the saved max is the one to keep
        self._tree.load_state_dict({"tree": self._tree.state_dict()["tree"],
                                    "max_value": max_value})


_STATE_VERSION = 2


def _written_slots(leaf: torch.Tensor, written: int) -> torch.Tensor:
    """Slots ``[0, written)`` of a ``[num_envs, capacity, ...]`` storage leaf: the leaf
    itself when all are written, else a compact copy (not a view of the whole storage)."""
    return leaf if written == leaf.shape[1] else leaf[:, :written].clone()
