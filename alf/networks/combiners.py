"""Preprocessing combiners: the per-key features of an observation -> one vector.

:class:`alf.networks.EncodingNetwork` with ``input_preprocessors`` encodes each
top-level observation entry to a ``[*outer, F_k]`` feature (``k`` in the nest's
key order: sorted dict keys) and hands the list to its
``preprocessing_combiner``, whose ``[*outer, F]`` result feeds the fully
connected layers. Concatenation keeps every feature (the default, as ALF's
``NestConcat``); sum and mean need equal sizes and keep ``F`` independent of
the number of entries (e.g. several cameras, each through an encoder with the
same output size). A stack ``[*outer, K, F]`` is not offered: the fc layers
read a vector, and a flattened stack is the concatenation.
"""
from typing import List, Sequence

import torch
from torch import nn

import alf
from alf.errors import IncompatibleSpecError


class Combiner(nn.Module):
    """Base class: ``forward(features)`` maps ``[[*outer, F_k], ...]`` to ``[*outer, F]``."""

    def output_size(self, owner: str, keys: Sequence[str], sizes: Sequence[int]) -> int:
        """``F`` for features of ``sizes`` (one per entry of ``keys``); raises
        :class:`IncompatibleSpecError` naming the entries when they cannot combine."""
        raise NotImplementedError

    def forward(self, features: List[torch.Tensor]) -> torch.Tensor:
        raise NotImplementedError


@alf.configurable
class ConcatCombiner(Combiner):
    """Concatenate the features along the last dim: ``F = sum(F_k)`` (the default)."""

    def __init__(self):
        super().__init__()

    def output_size(self, owner: str, keys: Sequence[str], sizes: Sequence[int]) -> int:
        return int(sum(sizes))

    def forward(self, features: List[torch.Tensor]) -> torch.Tensor:
        return features[0] if len(features) == 1 else torch.cat(features, dim=-1)


class _ElementwiseCombiner(Combiner):
    _what = ""

    def output_size(self, owner: str, keys: Sequence[str], sizes: Sequence[int]) -> int:
        if len(set(sizes)) != 1:
            listed = ", ".join(f"{k!r}: {s}" for k, s in zip(keys, sizes))
            raise IncompatibleSpecError(
                f"{owner}: {type(self).__name__} {self._what}s the per-key features, which "
                f"needs one size, got {listed}. Give each entry an encoder with the same "
                "output size (e.g. MlpEncoder.fc_layer_params / CnnEncoder.fc_layer_params) "
                "or use ConcatCombiner.")
        return int(sizes[0])


@alf.configurable
class SumCombiner(_ElementwiseCombiner):
    """Element-wise sum of equal-sized features: ``F = F_k``."""
    _what = "sum"

    def __init__(self):
        super().__init__()

    def forward(self, features: List[torch.Tensor]) -> torch.Tensor:
        out = features[0]
        for f in features[1:]:
            out = out + f
        return out


@alf.configurable
class MeanCombiner(_ElementwiseCombiner):
    """Element-wise mean of equal-sized features: ``F = F_k``."""
    _what = "average"

    def __init__(self):
        super().__init__()

    def forward(self, features: List[torch.Tensor]) -> torch.Tensor:
        return torch.stack(features, dim=0).mean(dim=0)
