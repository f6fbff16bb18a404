"""A vectorised sum tree for prioritized replay.

Layout: ``capacity`` leaves padded to ``P``, a power of two, and above them
levels of partial sums, each node summing ``fanout`` consecutive nodes of the
level below (the top group may be narrower, so any power-of-two ``P`` works);
the last level is the root. All levels live in one flat ``float64`` tensor
(leaves first, root last).

Every node is recomputed from its children whenever one of them changes
(never updated by adding deltas), so rounding errors cannot accumulate and a
node is 0 exactly when all leaves below it are 0. :meth:`SumTree.set` and
:meth:`SumTree.sample` walk the levels with one batch of tensor ops per level
and no Python loop over the batch.

Design choices:

- ``fanout=16`` (a 16-ary tree) instead of binary: 1M leaves need 5 levels
  instead of 20, i.e. far fewer kernel launches per ``set``/``sample`` (the
  cost of small-batch tensor code is the number of ops, not the flops: on one
  CPU thread, for a batch of 256 at 1M leaves, ``sample`` is 2.5x and ``set``
  4x faster than binary), and the inner levels take ``P / 15`` extra values
  instead of ``P``. ``fanout=2`` gives the classic binary tree.
- ``float64``: with a million leaves the root is ~1e6 times a typical leaf;
  ``float32`` (24-bit mantissa) would resolve a leaf's share of the root only
  to a few per cent, biasing sampling frequencies. The cost is ``8 * P * 16/15``
  bytes (8.9 MB for 1M leaves).
"""
import contextlib
from typing import Iterator, Union

import torch
import torch.nn.functional as F

_DTYPE = torch.float64


def _level_sizes(capacity: int, fanout: int):
    """``(sizes, widths)``: nodes per level (leaves first, root last) and the group
    width summed into each node of the next level."""
    sizes, widths = [1 << (capacity - 1).bit_length()], []
    while sizes[-1] > 1:
        w = min(fanout, sizes[-1])
        widths.append(w)
        sizes.append(sizes[-1] // w)
    return sizes, widths


class SumTree:
    """Sum tree over ``capacity`` non-negative values (leaves padded to a power of two).

    Args:
        capacity: number of usable leaves (indices ``0 .. capacity - 1``).
        device: where the tree lives.
        initial_max_value: what :meth:`max_value` returns before a larger value is set
            (prioritized replay gives new items this maximum: 1.0 by convention).
        fanout: children per inner node, a power of two >= 2 (see module docstring).
    """

    def __init__(self, capacity: int, device: Union[str, torch.device] = "cpu",
                 initial_max_value: float = 1.0, fanout: int = 16):
        if capacity < 1:
            raise ValueError(f"SumTree capacity must be >= 1, got {capacity}")
        if fanout < 2 or fanout & (fanout - 1):
            raise ValueError(f"SumTree fanout must be a power of two >= 2, got {fanout}")
        self._capacity = int(capacity)
        self._fanout = int(fanout)
        self._device = torch.device(device)
        self._sizes, self._widths = _level_sizes(self._capacity, self._fanout)
        self._shifts = [w.bit_length() - 1 for w in self._widths]
        self._offsets = [0]
        for s in self._sizes[:-1]:
            self._offsets.append(self._offsets[-1] + s)
        self._flat = torch.zeros(sum(self._sizes), dtype=_DTYPE, device=self._device)
        self._levels = [self._flat[o:o + s] for o, s in zip(self._offsets, self._sizes)]
        # groups[j][i] = the children (in level j) of node i of level j + 1
        self._groups = [self._levels[j].view(self._sizes[j + 1], w)
                        for j, w in enumerate(self._widths)]
        # right shifts from a leaf index to its ancestor on each level above the leaves
        self._level_shifts = torch.tensor(_cumulative(self._shifts)[1:], dtype=torch.int64,
                                          device=self._device)[:, None]
        self._path_offsets = torch.tensor(self._offsets, dtype=torch.int64, device=self._device)
        self._max = torch.tensor(float(initial_max_value), dtype=_DTYPE, device=self._device)

    @staticmethod
    def nbytes_for(capacity: int, fanout: int = 16) -> int:
        """Bytes a tree of this ``capacity`` takes (without building it)."""
        return 8 * sum(_level_sizes(capacity, fanout)[0]) + 8

    # ------------------------------------------------------------ properties
    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def num_leaves(self) -> int:
        """``P``: ``capacity`` rounded up to a power of two."""
        return self._sizes[0]

    @property
    def fanout(self) -> int:
        return self._fanout

    @property
    def nbytes(self) -> int:
        """Bytes of all levels plus the max (``~8 * P * fanout / (fanout - 1)``)."""
        return self._flat.numel() * self._flat.element_size() + self._max.element_size()

    @property
    def device(self) -> torch.device:
        return self._device

    def total(self) -> torch.Tensor:
        """Sum of all leaves, a 0-dim ``float64`` tensor (no host sync)."""
        return self._levels[-1][0]

    def max_value(self) -> torch.Tensor:
        """Largest value ever set (or ``initial_max_value``), a 0-dim ``float64`` tensor."""
        return self._max

    # ------------------------------------------------------------ read/write
    def get(self, indices: torch.Tensor) -> torch.Tensor:
        """Leaf values ``[N]`` float64 at ``indices`` ``[N]`` int64."""
        return self._levels[0][indices.to(self._device, torch.int64)]

    def set(self, indices: torch.Tensor, values: Union[torch.Tensor, float],
            assume_unique: bool = False) -> None:
        """Set leaves ``indices [N]`` (int64 in ``[0, capacity)``) to ``values [N]`` (>= 0).

        Duplicate indices: the last occurrence wins. ``assume_unique=True`` skips
        the de-duplication (one ``unique`` op) when the caller knows there is none.
        ``values`` may be a scalar or 0-dim tensor (broadcast). The values are not
        checked for negativity (that would need a host sync).
        """
        indices = indices.to(self._device, torch.int64).reshape(-1)
        n = indices.numel()
        if n == 0:
            return
        if isinstance(values, torch.Tensor):
            values = values.detach().to(self._device, _DTYPE).reshape(-1)
            values = values.expand(n) if values.numel() == 1 else values
        else:
            values = torch.full((n,), float(values), dtype=_DTYPE, device=self._device)
        if not assume_unique:
            indices, values = _last_write_wins(indices, values)
        self._max = torch.maximum(self._max, values.max())
        self._write(indices, values)

    def _write(self, indices: torch.Tensor, values: torch.Tensor) -> None:
        """Write distinct leaves and recompute their ancestors, level by level."""
        self._levels[0].index_copy_(0, indices, values)
        if not self._widths:
            return
        ancestors = indices[None, :] >> self._level_shifts  # [levels - 1, N]
        for j in range(len(self._widths)):
            parents = ancestors[j]
            # duplicate parents all write the same recomputed sum: no de-duplication needed
            self._levels[j + 1].index_copy_(0, parents,
                                            self._groups[j].index_select(0, parents).sum(1))

    def clear(self) -> None:
        """Zero every leaf (the max is kept: it is the max ever set)."""
        self._flat.zero_()

    @contextlib.contextmanager
    def masked(self, indices: torch.Tensor) -> Iterator[None]:
        """Within the ``with`` block leaves ``indices [M]`` (distinct) read as 0; on exit
        every node they touched gets its previous value back, bit for bit (restored
        from a snapshot of the ``M x levels`` ancestors, one gather + one write)."""
        indices = indices.to(self._device, torch.int64).reshape(-1)
        if indices.numel() == 0:
            yield
            return
        path = torch.cat([indices[None, :], indices[None, :] >> self._level_shifts])  # [levels, M]
        path = (path + self._path_offsets[:, None]).reshape(-1)
        saved = self._flat[path]
        self._write(indices, torch.zeros(indices.shape, dtype=_DTYPE, device=self._device))
        try:
            yield
        finally:
            self._flat.index_copy_(0, path, saved)  # duplicates carry identical values

    # -------------------------------------------------------------- sampling
    def sample(self, u: torch.Tensor) -> torch.Tensor:
        """Leaf indices ``[N]`` int64 for ``u [N]`` in ``[0, total())``.

        Leaf ``i`` is returned for ``u`` in ``[sum(v[:i]), sum(v[:i+1]))``, so uniform
        ``u`` gives ``P(i) = v[i] / total``. One descent step per level for the whole
        batch. A zero-valued leaf is never returned while ``total() > 0``: at each node
        the chosen child is the first whose inclusive prefix sum exceeds ``u`` (a
        child that raises the prefix sum is positive), and when rounding leaves ``u``
        at or above the node's sum, the child that last raised the prefix sum. (This
        needs the row-wise ``cumsum`` to be monotone and unchanged by adding 0: true
        of the sequential CPU kernel; tested on CPU only.)
        """
        u = u.to(self._device, _DTYPE).reshape(-1, 1)
        node = torch.zeros(u.shape[0], dtype=torch.int64, device=self._device)
        for j in reversed(range(len(self._widths))):
            children = self._groups[j].index_select(0, node)  # [N, w]
            cs = children.cumsum(1)
            c = torch.searchsorted(cs, u, right=True)  # first child with prefix sum > u
            last = torch.searchsorted(cs, cs[:, -1:].contiguous())  # last child raising it
            c = torch.minimum(c, last)
            u = u - F.pad(cs, (1, 0)).gather(1, c)  # exact: subtract the exclusive prefix
            node = node * self._widths[j] + c.squeeze(1)
        return node

    # ---------------------------------------------------------- checkpointing
    def state_dict(self) -> dict:
        """``{"tree": [all levels] float64, "max_value": 0-dim float64}`` (live tensors)."""
        return {"tree": self._flat, "max_value": self._max}

    def load_state_dict(self, state: dict) -> None:
        tree = state["tree"]
        if tuple(tree.shape) != tuple(self._flat.shape) or tree.dtype != self._flat.dtype:
            raise ValueError(f"SumTree: saved tree is {tuple(tree.shape)} {tree.dtype}, "
                             f"expected {tuple(self._flat.shape)} {self._flat.dtype}")
        self._flat.copy_(tree)
        self._max = state["max_value"].to(self._device, _DTYPE).clone()


def _cumulative(shifts):
    """``[0, s0, s0 + s1, ...]``: right-shift from a leaf index to its node on each level."""
    out = [0]
    for s in shifts:
        out.append(out[-1] + s)
    return out


def _last_write_wins(indices: torch.Tensor, values: torch.Tensor):
    """De-duplicate ``indices [N]``, keeping the value of each index's last occurrence."""
    uniq, inverse = torch.unique(indices, return_inverse=True)
    order = torch.arange(indices.numel(), device=indices.device)
    last = torch.full(uniq.shape, -1, dtype=torch.int64, device=indices.device)
    last.scatter_reduce_(0, inverse, order, reduce="amax")
    return uniq, values[last]
