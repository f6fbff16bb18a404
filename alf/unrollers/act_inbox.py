"""What a policy worker needs to act for one env group, in shared memory.

With policy workers (``TrainerConfig.num_policy_workers > 0``) an env worker
holds no network: it writes each raw env ``TimeStep [B]`` of an env group into
that group's :class:`ActInbox`, sends a small request (group, slot, step), and a
policy worker reads the time step from here, acts, writes the stored step into
the group's trajectory slot and the next states back here.

The states live with the group, not in the policy worker, so that any policy
worker (or its restarted replacement) can act for it, and recurrent policies
(LSTM) and stateful data transformers (frame stacking) work:

- ``policy_state``: the policy's rollout state ``[2, B, ...]``;
- ``transformer_state``: the data transformer's state ``[2, B, ...]``.

Both are double-buffered by step parity: the request for the group's step
``n`` reads buffer ``n % 2`` and writes buffer ``(n + 1) % 2``. A request
re-issued after its policy worker died therefore reads the same states again,
even if the dead worker had already written the next ones (acting is
idempotent apart from random draws).

Every leaf of the three nests is a view of one shared byte block (one file
descriptor per group: :mod:`alf.unrollers.shared_block`).
"""
from typing import Any, List, Tuple

import torch

from alf import nest as alf_nest
from alf.data_structures import TimeStep
from alf.unrollers.shared_block import carve


class ActInbox:
    """One env group's raw time step and double-buffered states (module docstring).

    Args:
        time_step_spec: the raw env's ``TimeStep`` spec (no batch dim).
        policy_state_spec: the algorithm's ``rollout_state_spec`` (may be an empty nest).
        transformer_state_spec: the data transformer's ``state_spec`` (may be empty).
        batch_size: envs ``B`` in the group.
        shared: allocate in shared memory (False: serial mode, one process).
    """

    def __init__(self, time_step_spec: TimeStep, policy_state_spec: Any,
                 transformer_state_spec: Any, batch_size: int, shared: bool = True):
        nests = (time_step_spec, policy_state_spec, transformer_state_spec)
        flat = [alf_nest.flatten(n) for n in nests]
        layout = ([((batch_size,) + tuple(s.shape), s.dtype) for s in flat[0]]
                  + [((2, batch_size) + tuple(s.shape), s.dtype) for s in flat[1] + flat[2]])
        leaves = carve(layout, shared)
        n_ts, n_ps = len(flat[0]), len(flat[1])
        self.batch_size = int(batch_size)
        self._specs = nests
        self._ts_leaves: List[torch.Tensor] = leaves[:n_ts]
        self._ps_leaves: List[torch.Tensor] = leaves[n_ts:n_ts + n_ps]
        self._tr_leaves: List[torch.Tensor] = leaves[n_ts + n_ps:]

    def write_time_step(self, time_step: TimeStep) -> None:
        """Copy the env's raw ``TimeStep [B]`` in (env worker side)."""
        for buf, x in zip(self._ts_leaves, alf_nest.flatten(time_step)):
            buf.copy_(x)

    def time_step(self) -> TimeStep:
        """The last written raw ``TimeStep [B]`` (views into shared memory)."""
        return alf_nest.pack_sequence_as(self._specs[0], list(self._ts_leaves))

    def states(self, parity: int) -> Tuple[Any, Any]:
        """``(policy_state [B, ...], transformer_state [B, ...])`` of buffer ``parity``
        (views)."""
        return (alf_nest.pack_sequence_as(self._specs[1], [b[parity] for b in self._ps_leaves]),
                alf_nest.pack_sequence_as(self._specs[2], [b[parity] for b in self._tr_leaves]))

    def write_states(self, parity: int, policy_state: Any, transformer_state: Any) -> None:
        """Store the states for the group's next step in buffer ``parity``."""
        for buf, x in zip(self._ps_leaves, alf_nest.flatten(policy_state)):
            buf[parity].copy_(x)
        for buf, x in zip(self._tr_leaves, alf_nest.flatten(transformer_state)):
            buf[parity].copy_(x)

    def __getstate__(self) -> Any:
        return {"batch_size": self.batch_size, "_specs": self._specs,
                "_ts_leaves": self._ts_leaves, "_ps_leaves": self._ps_leaves,
                "_tr_leaves": self._tr_leaves}

    def __setstate__(self, state: Any) -> None:
        self.__dict__.update(state)
