"""Learner -> actor weights through shared memory, stamped with a policy version.

The learner publishes the algorithm's rollout-only state (``rollout_state_dict``:
no optimizer state, no target networks; the data transformer's statistics
included) together with the run counters rollout reads (iteration, env steps,
updates: e.g. an epsilon schedule). Nothing is pickled after start-up: the
tensors are allocated once in shared memory and copied into in place.

Two buffers, written alternately, each guarded by a sequence lock (an even
counter when stable, odd while written): a reader copies the buffer it wants
and retries if the counter moved, so a worker never blocks the learner and a
worker killed mid-read cannot wedge anyone (no lock is held across
processes). With two buffers, a reader wanting the newest version is never
overwritten by the very next publish; :meth:`read` with an exact ``version``
serves the deterministic mode (the actor acts with exactly the version one
behind the learner).
"""
import time
from typing import Callable, Dict, Optional, Tuple

import torch

from alf.unrollers.shared_block import carve

COUNTERS = ("iteration", "env_steps", "num_updates")


class WeightChannel:
    """Shared-memory double buffer of a state dict plus ``(version, counters)``.

    Args:
        template: the state dict to mirror (shapes/dtypes; values copied by :meth:`publish`).
        shared: allocate in shared memory (False: serial mode, one process).
    """

    def __init__(self, template: Dict[str, torch.Tensor], shared: bool = True):
        self.keys = list(template)
        layout = [(tuple(template[k].shape), template[k].dtype) for k in self.keys]
        self._buffers = [carve(layout, shared) for _ in range(2)]  # one block each
        # per buffer: [seqlock counter, version, *counters]
        self._meta = torch.full((2, 2 + len(COUNTERS)), -1, dtype=torch.int64)
        self._meta[:, 0] = 0
        if shared:
            self._meta.share_memory_()
        self._latest = torch.full((1,), -1, dtype=torch.int64)
        if shared:
            self._latest.share_memory_()
        self._next_buffer = 0

    def publish(self, state: Dict[str, torch.Tensor], version: int,
                counters: Tuple[int, int, int]) -> None:
        """Copy ``state`` in as ``version`` (learner side; one writer only)."""
        b = self._next_buffer
        self._next_buffer = 1 - b
        meta = self._meta[b]
        meta[0] += 1  # odd: being written
        for dst, key in zip(self._buffers[b], self.keys):
            dst.copy_(state[key].detach())
        meta[1] = int(version)
        for i, c in enumerate(counters):
            meta[2 + i] = int(c)
        meta[0] += 1  # even: stable
        self._latest[0] = b

    def latest_version(self) -> int:
        """The newest published version (-1 before the first publish)."""
        b = int(self._latest[0])
        return -1 if b < 0 else int(self._meta[b, 1])

    def read(self, load: Callable[[Dict[str, torch.Tensor]], None],
             version: Optional[int] = None) -> Optional[Tuple[int, Tuple[int, ...]]]:
        """Hand a consistent copy of the newest (or exactly ``version``) weights to
        ``load(state_dict)``; returns ``(version, counters)``, or None if that version is
        not (or no longer) published. ``load`` must copy (e.g. ``load_rollout_state_dict``),
        since the buffers are rewritten later."""
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline:
            if version is None:
                b = int(self._latest[0])
                if b < 0:
                    return None
            else:
                matches = [b for b in (0, 1) if int(self._meta[b, 1]) == version]
                if not matches:
                    return None
                b = matches[0]
            seq = int(self._meta[b, 0])
            if seq % 2 == 1:
                time.sleep(0.0005)
                continue
            got_version = int(self._meta[b, 1])
            counters = tuple(int(x) for x in self._meta[b, 2:])
            if version is not None and got_version != version:
                continue  # republished between the lookup and the read: look again
            load(dict(zip(self.keys, self._buffers[b])))
            if int(self._meta[b, 0]) == seq:
                return got_version, counters
        raise RuntimeError("WeightChannel.read: no consistent copy of the weights for 30 s "
                           "(the learner kept rewriting them)")
