"""Running mean / variance statistics for normalising observations and rewards.

Statistics are float64 buffers, so they travel with ``state_dict`` (checkpoints)
and ``.to(device)``; updates are exact (Chan et al.'s parallel combination of
batch moments), so after any sequence of batches ``mean``/``var`` equal the
population mean/variance of everything seen. No update needs a host sync.
"""
from typing import Any, Optional, Sequence

import torch
import torch.nn as nn

from alf import nest as alf_nest
from alf.tensor_specs import TensorSpec

Nest = Any


class RunningMeanVar(nn.Module):
    """Running population mean and variance of tensors of a fixed ``shape``.

    Buffers (checkpointed): ``mean`` and ``var`` (float64, ``shape``) and
    ``count`` (float64 scalar). Before any data ``mean = 0`` and ``var = 1``, so
    :meth:`normalize` is the identity (up to ``epsilon``).
    """

    def __init__(self, shape: Sequence[int] = ()):
        super().__init__()
        self._shape = torch.Size(shape)
        self.register_buffer("mean", torch.zeros(self._shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(self._shape, dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    @property
    def shape(self) -> torch.Size:
        return self._shape

    @torch.no_grad()
    def update(self, x: torch.Tensor, mask: Optional[torch.Tensor] = None) -> None:
        """Fold a batch into the statistics.

        Args:
            x: ``[*outer, *shape]``; every outer index is one sample.
            mask: optional ``[*outer]`` bool/0-1 tensor; only samples where it is
                true count. An all-false mask leaves the statistics unchanged.
        """
        n_outer = x.ndim - len(self._shape)
        if n_outer < 0 or tuple(x.shape[n_outer:]) != tuple(self._shape):
            raise ValueError(f"expected [..., {tuple(self._shape)}], got {tuple(x.shape)}")
        x = x.detach().to(torch.float64).reshape((-1,) + tuple(self._shape))
        if x.shape[0] == 0:
            return
        if mask is None:
            n = torch.tensor(float(x.shape[0]), dtype=torch.float64, device=x.device)
            batch_var, batch_mean = torch.var_mean(x, 0, correction=0)
        else:
            w = mask.detach().reshape(-1).to(torch.float64)
            w = w.reshape(w.shape + (1,) * len(self._shape))
            n = w.sum()
            safe_n = n.clamp(min=1.0)
            batch_mean = (w * x).sum(0) / safe_n
            batch_var = (w * (x - batch_mean) ** 2).sum(0) / safe_n
        total = self.count + n
        safe_total = total.clamp(min=1.0)
        delta = batch_mean - self.mean
        new_mean = self.mean + delta * (n / safe_total)
        m2 = self.var * self.count + batch_var * n + delta ** 2 * (self.count * n / safe_total)
        # with no data at all keep the (0, 1) prior
        new_var = torch.where(total > 0, m2 / safe_total, self.var)
        self.mean.copy_(new_mean)
        self.var.copy_(new_var)
        self.count.copy_(total)

    def normalize(self, x: torch.Tensor, clip: Optional[float] = None,
                  epsilon: float = 1e-8) -> torch.Tensor:
        """``(x - mean) / sqrt(var + epsilon)``, clipped to ``[-clip, clip]`` if ``clip``.

        ``x``: ``[*outer, *shape]``; the result has ``x``'s dtype if floating, else float32.
        """
        dtype = x.dtype if x.dtype.is_floating_point else torch.float32
        mean = self.mean.to(dtype)
        inv_std = torch.rsqrt(self.var + epsilon).to(dtype)
        y = (x.to(dtype) - mean) * inv_std
        if clip:
            y = y.clamp(-clip, clip)
        return y

    def extra_repr(self) -> str:
        return f"shape={tuple(self._shape)}"


def _module_key(path: str) -> str:
    """A ``ModuleDict`` key for a nest path (keys may not contain '.')."""
    return path.replace(".", "/") if path else "_"


class NestNormalizer(nn.Module):
    """One :class:`RunningMeanVar` per floating-point leaf of a spec nest.

    Args:
        spec: nest of :class:`TensorSpec` describing one (unbatched) sample.
        clip: clip normalised values to ``[-clip, clip]``; ``None`` or 0 = no clipping.
        epsilon: added to the variance before the square root.
        fields: if given, only leaves whose nest path (e.g. ``"image"``,
            ``"state.pos"``) equals or lies under one of these are normalised.
    Non-float and unselected leaves pass through untouched. Statistics live in
    ``state_dict`` under ``normalizers.<path with '/'>.{mean,var,count}``.
    """

    def __init__(self, spec: Nest, clip: Optional[float] = None, epsilon: float = 1e-8,
                 fields: Optional[Sequence[str]] = None):
        super().__init__()
        self._spec = spec
        self._clip = clip
        self._epsilon = epsilon
        self.normalizers = nn.ModuleDict()
        paths = []
        for path, s in alf_nest.flatten_with_paths(spec):
            if s.dtype.is_floating_point and alf_nest.path_selected(path, fields):
                self.normalizers[_module_key(path)] = RunningMeanVar(s.shape)
                paths.append(path)
        if fields is not None:
            all_paths = [p for p, _ in alf_nest.flatten_with_paths(spec)]
            unknown = [f for f in fields
                       if not any(p == f or p.startswith(f + ".") for p in all_paths)]
            if unknown:
                raise ValueError(f"fields {unknown} not found in the spec; its leaves are "
                                 f"{all_paths}")
        self._paths = frozenset(paths)

    @property
    def normalized_spec(self) -> Nest:
        """``spec`` with every normalised leaf replaced by an unbounded float32 :class:`TensorSpec`."""
        return alf_nest.map_structure_with_path(
            lambda p, s: TensorSpec(s.shape, torch.float32) if p in self._paths else s, self._spec)

    def update(self, nest: Nest, mask: Optional[torch.Tensor] = None) -> None:
        """Fold a batched nest (``[*outer, ...]`` leaves) into the statistics."""
        for path, x in alf_nest.flatten_with_paths(nest):
            if path in self._paths:
                self.normalizers[_module_key(path)].update(x, mask)

    def normalize(self, nest: Nest) -> Nest:
        """Normalised copy of a batched nest (float32 for normalised leaves)."""
        def _norm(path, x):
            if path not in self._paths:
                return x
            return self.normalizers[_module_key(path)].normalize(
                x.to(torch.float32), self._clip, self._epsilon)
        return alf_nest.map_structure_with_path(_norm, nest)
