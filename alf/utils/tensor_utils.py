"""Small tensor helpers shared by unrollers, algorithms and trainers."""
from typing import Any

import torch

from alf import nest as alf_nest


def reset_state_if_necessary(state: Any, initial_state: Any, reset_mask: torch.Tensor) -> Any:
    """Replace rows of ``state`` (leaves ``[B, ...]``) by ``initial_state`` where ``reset_mask[B]``."""
    if alf_nest.is_empty(state):
        return state

    def _reset(s, i):
        m = reset_mask.reshape(reset_mask.shape + (1,) * (s.ndim - 1))
        return torch.where(m, i, s)

    return alf_nest.map_structure(_reset, state, initial_state)


def transpose2(nest: Any, dim1: int = 0, dim2: int = 1) -> Any:
    """Swap two leading dims of every leaf (e.g. ``[B, T] <-> [T, B]``)."""
    return alf_nest.map_structure(lambda x: x.transpose(dim1, dim2), nest)


def detach(nest: Any) -> Any:
    return alf_nest.map_structure(lambda x: x.detach() if isinstance(x, torch.Tensor) else x, nest)


def split_leading_dim(nest: Any, shape: tuple) -> Any:
    """``[d0*d1, ...] -> [d0, d1, ...]`` for every leaf."""
    return alf_nest.map_structure(lambda x: x.reshape(tuple(shape) + tuple(x.shape[1:])), nest)
