"""Pre-allocated trajectory slots: where env workers write experience, step by step.

One :class:`TrajectorySlots` per env group holds ``num_slots`` trajectories of
``T + 1`` steps for ``B`` envs, every leaf of the algorithm's
:class:`~alf.data_structures.Experience` spec as one tensor
``[num_slots, T + 1, B, *leaf_shape]``. With ``shared=True`` the tensors live
in shared memory (``Tensor.share_memory_``; torch's ``file_descriptor``
strategy unlinks the segment at once, so nothing is left in ``/dev/shm``
however the processes end), and are handed to a worker process once at start:
afterwards the worker writes steps in place and a message carries only the slot
index (no per-step pickling, Sample Factory's transport).
"""
from typing import Any, List

import torch

from alf import nest as alf_nest
from alf.data_structures import Experience
from alf.unrollers.shared_block import carve
from alf.utils.act_step import executed_action


class TrajectorySlots:
    """``num_slots`` trajectories ``[T + 1, B]`` of one env group.

    Args:
        experience_spec: spec nest of one step of Experience (no batch dim), from
            :meth:`alf.algorithms.rl_algorithm.RLAlgorithm.experience_spec`.
        num_slots: trajectories that can be in flight (being written or waiting).
        length: steps per trajectory, ``T + 1`` (the last is the bootstrap step).
        batch_size: envs ``B`` in the group.
        shared: allocate in shared memory (for worker processes).
    """

    def __init__(self, experience_spec: Experience, num_slots: int, length: int,
                 batch_size: int, shared: bool = True):
        specs = alf_nest.flatten(experience_spec)
        leaves = carve([((num_slots, length, batch_size) + tuple(s.shape), s.dtype)
                        for s in specs], shared)  # one block: one file descriptor
        self.num_slots = int(num_slots)
        self.length = int(length)
        self.batch_size = int(batch_size)
        self.buffers: Experience = alf_nest.pack_sequence_as(experience_spec, leaves)
        self._leaves: List[torch.Tensor] = leaves

    @property
    def nbytes(self) -> int:
        """Bytes held by all slots."""
        return sum(t.numel() * t.element_size() for t in self._leaves)

    def write_step(self, slot: int, t: int, step: Experience) -> None:
        """Copy one step ``[B, ...]`` (a nest like the spec) into ``slot`` at time ``t``."""
        for buf, x in zip(self._leaves, alf_nest.flatten(step)):
            buf[slot, t].copy_(x)

    def overwrite_with_executed_action(self, slot: int, t: int, next_time_step: Any) -> None:
        """``TrainerConfig.overwrite_policy_output``: the action stored at ``slot``, ``t``
        becomes what the env executed, as ``next_time_step [B]`` (the env's answer to
        it) reports (:func:`alf.utils.act_step.executed_action`)."""
        stored = alf_nest.map_structure(lambda buf: buf[slot, t], self.buffers.action)
        alf_nest.map_structure(lambda buf, x: buf.copy_(x), stored,
                               executed_action(stored, next_time_step))

    def copy_step(self, src_slot: int, src_t: int, dst_slot: int, dst_t: int) -> None:
        """Copy a written step to another slot/time (the bootstrap step starts the next
        trajectory)."""
        for buf in self._leaves:
            buf[dst_slot, dst_t].copy_(buf[src_slot, src_t])

    def read(self, slot: int) -> Experience:
        """A private copy of trajectory ``slot``: time-major ``Experience [T + 1, B]``
        (the slot may be reused as soon as this returns)."""
        return alf_nest.pack_sequence_as(self.buffers,
                                         [buf[slot].clone() for buf in self._leaves])

    def __getstate__(self) -> Any:
        return {"num_slots": self.num_slots, "length": self.length,
                "batch_size": self.batch_size, "buffers": self.buffers}

    def __setstate__(self, state: Any) -> None:
        self.__dict__.update(state)
        self._leaves = alf_nest.flatten(self.buffers)
