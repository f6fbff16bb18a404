"""Running mean / variance statistics for normalising observations and rewards.

Statistics are float64 buffers, so they travel with ``state_dict`` (checkpoints)
and ``.to(device)``; updates are exact (Chan et al.'s parallel combination of
batch moments), so after any sequence of batches ``mean``/``var`` equal the
population mean/variance of everything seen. No update needs a host sync.

Learner-owned statistics (async collection, several workers or ranks): an
actor's copy is :meth:`RunningMeanVar.freeze` -ed, so it normalises with the
statistics the learner shipped and folds what it sees into a separate pending
accumulator instead; :meth:`RunningMeanVar.pop_pending` hands those moments
over and the learner folds them in with :meth:`RunningMeanVar.merge`. The
combination is exact, so the learner ends up with the statistics of one
normaliser that saw every worker's data.
"""
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn

from alf import nest as alf_nest
from alf.tensor_specs import TensorSpec

Nest = Any


#: Moments of a set of samples: ``{"count": [], "mean": shape, "var": shape}`` float64
#: tensors (``var`` is the population variance; ``count = 0`` means no samples).
Moments = Dict[str, torch.Tensor]


def combine_moments(count_a: torch.Tensor, mean_a: torch.Tensor, var_a: torch.Tensor,
                    count_b: torch.Tensor, mean_b: torch.Tensor, var_b: torch.Tensor
                    ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Moments of the union of two sample sets (Chan et al.'s parallel combination).

    Exact up to rounding: ``mean = mean_a + delta * n_b / n`` and
    ``var = (var_a n_a + var_b n_b + delta^2 n_a n_b / n) / n`` with
    ``delta = mean_b - mean_a``. With no samples at all (``n = 0``) ``var_a`` is kept.
    """
    total = count_a + count_b
    safe_total = total.clamp(min=1.0)
    delta = mean_b - mean_a
    mean = mean_a + delta * (count_b / safe_total)
    m2 = var_a * count_a + var_b * count_b + delta ** 2 * (count_a * count_b / safe_total)
    var = torch.where(total > 0, m2 / safe_total, var_a)
    return total, mean, var


class RunningMeanVar(nn.Module):
    """Running population mean and variance of tensors of a fixed ``shape``.

    Buffers (checkpointed): ``mean`` and ``var`` (float64, ``shape``) and
    ``count`` (float64 scalar). Before any data ``mean = 0`` and ``var = 1``, so
    :meth:`normalize` is the identity (up to ``epsilon``).

    Frozen (:meth:`freeze`, on an actor's copy): :meth:`update` leaves the
    statistics alone and folds the batch into a pending accumulator
    (non-persistent buffers: not in ``state_dict``, so shipping or loading
    weights never touches it) that :meth:`pop_pending` returns and resets.
    """

    def __init__(self, shape: Sequence[int] = ()):
        super().__init__()
        self._shape = torch.Size(shape)
        self.register_buffer("mean", torch.zeros(self._shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(self._shape, dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.register_buffer("_pending_mean", torch.zeros(self._shape, dtype=torch.float64),
                             persistent=False)
        self.register_buffer("_pending_var", torch.ones(self._shape, dtype=torch.float64),
                             persistent=False)
        self.register_buffer("_pending_count", torch.zeros((), dtype=torch.float64),
                             persistent=False)
        self._frozen = False

    @property
    def shape(self) -> torch.Size:
        return self._shape

    @property
    def frozen(self) -> bool:
        """Whether :meth:`update` goes to the pending accumulator (see :meth:`freeze`)."""
        return self._frozen

    def freeze(self, frozen: bool = True) -> None:
        """Frozen: keep ``mean``/``var``/``count`` as they are (someone else owns them) and
        send :meth:`update` s to the pending accumulator; unfrozen: update them again."""
        self._frozen = bool(frozen)

    @torch.no_grad()
    def update(self, x: torch.Tensor, mask: Optional[torch.Tensor] = None,
               sum_over_ranks: Optional[Callable[[torch.Tensor], torch.Tensor]] = None
               ) -> None:
        """Fold a batch into the statistics (into the pending accumulator when frozen).

        Args:
            x: ``[*outer, *shape]``; every outer index is one sample.
            mask: optional ``[*outer]`` bool/0-1 tensor; only samples where it is
                true count. An all-false mask leaves the statistics unchanged.
            sum_over_ranks: in a data-parallel run, ``fn(t) -> t`` summed over ranks
                (``DataParallel.sum_over_ranks``; every rank calls it with its own batch
                at the same point): the batch folded in is the union of every rank's,
                so the statistics stay identical on all ranks.
        """
        n_outer = x.ndim - len(self._shape)
        if n_outer < 0 or tuple(x.shape[n_outer:]) != tuple(self._shape):
            raise ValueError(f"expected [..., {tuple(self._shape)}], got {tuple(x.shape)}")
        x = x.detach().to(torch.float64).reshape((-1,) + tuple(self._shape))
        if sum_over_ranks is not None:
            n, batch_mean, batch_var = self._moments_over_ranks(x, mask, sum_over_ranks)
        elif x.shape[0] == 0:
            return
        elif mask is None:
            n = torch.tensor(float(x.shape[0]), dtype=torch.float64, device=x.device)
            batch_var, batch_mean = torch.var_mean(x, 0, correction=0)
        else:
            w = mask.detach().reshape(-1).to(torch.float64)
            w = w.reshape(w.shape + (1,) * len(self._shape))
            n = w.sum()
            safe_n = n.clamp(min=1.0)
            batch_mean = (w * x).sum(0) / safe_n
            batch_var = (w * (x - batch_mean) ** 2).sum(0) / safe_n
        if sum_over_ranks is not None and float(n) == 0:
            return
        if self._frozen:
            self._fold(self._pending_count, self._pending_mean, self._pending_var,
                       n, batch_mean, batch_var)
        else:
            self._fold(self.count, self.mean, self.var, n, batch_mean, batch_var)

    def _moments_over_ranks(self, x: torch.Tensor, mask: Optional[torch.Tensor],
                            sum_over_ranks: Callable[[torch.Tensor], torch.Tensor]):
        """``(n, mean, var)`` of every rank's ``x [N, *shape]`` (masked) together: one sum
        of ``[n, sum x, sum x^2]`` over ranks (float64)."""
        w = (torch.ones(x.shape[0], dtype=torch.float64, device=x.device) if mask is None
             else mask.detach().reshape(-1).to(torch.float64))
        wx = w.reshape(w.shape + (1,) * len(self._shape)) * x
        sums = torch.cat([w.sum().reshape(1), wx.sum(0).reshape(-1),
                          (wx * x).sum(0).reshape(-1)])
        sums = sum_over_ranks(sums)
        size = int(torch.Size(self._shape).numel())
        n = sums[0]
        safe_n = n.clamp(min=1.0)
        mean = (sums[1:1 + size] / safe_n).reshape(self._shape)
        var = (sums[1 + size:] / safe_n).reshape(self._shape) - mean ** 2
        return n, mean, var.clamp(min=0.0)

    @staticmethod
    def _fold(count: torch.Tensor, mean: torch.Tensor, var: torch.Tensor, n: torch.Tensor,
              batch_mean: torch.Tensor, batch_var: torch.Tensor) -> None:
        total, new_mean, new_var = combine_moments(count, mean, var, n, batch_mean, batch_var)
        mean.copy_(new_mean)
        var.copy_(new_var)
        count.copy_(total)

    @torch.no_grad()
    def merge(self, count: Union[torch.Tensor, float], mean: Union[torch.Tensor, float],
              var: Union[torch.Tensor, float]) -> None:
        """Fold in the moments of samples seen elsewhere (e.g. a :meth:`pop_pending` of an
        actor's copy): afterwards the statistics are those of the union, exactly.

        Args:
            count: number of samples (scalar, ``>= 0``; 0 changes nothing).
            mean: their mean, ``shape``.
            var: their population variance, ``shape``.
        Merges into ``mean``/``var``/``count`` even while frozen.
        """
        def _t(v):
            return torch.as_tensor(v, dtype=torch.float64, device=self.mean.device)
        count, mean, var = _t(count), _t(mean), _t(var)
        if count.ndim != 0 or tuple(mean.shape) != tuple(self._shape) \
                or tuple(var.shape) != tuple(self._shape):
            raise ValueError(f"RunningMeanVar.merge: expected a scalar count and mean/var of "
                             f"shape {tuple(self._shape)}, got count {tuple(count.shape)}, mean "
                             f"{tuple(mean.shape)}, var {tuple(var.shape)}")
        if bool(count < 0):
            raise ValueError(f"RunningMeanVar.merge: count must be >= 0, got {float(count)}")
        self._fold(self.count, self.mean, self.var, count, mean, var)

    def moments(self) -> Moments:
        """A copy of the statistics as ``{"count", "mean", "var"}`` (see :data:`Moments`)."""
        return {"count": self.count.clone(), "mean": self.mean.clone(), "var": self.var.clone()}

    @torch.no_grad()
    def pop_pending(self) -> Moments:
        """The moments accumulated while frozen since the last call (``count = 0``: none),
        as a copy; the accumulator is reset."""
        out = {"count": self._pending_count.clone(), "mean": self._pending_mean.clone(),
               "var": self._pending_var.clone()}
        self._pending_count.zero_()
        self._pending_mean.zero_()
        self._pending_var.fill_(1.0)
        return out

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
        self._ordered_paths = tuple(paths)

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

    def freeze(self, frozen: bool = True) -> None:
        """:meth:`RunningMeanVar.freeze` every leaf's statistics."""
        for rmv in self.normalizers.values():
            rmv.freeze(frozen)

    def moments(self) -> Dict[str, Moments]:
        """``{nest path: moments}`` of every normalised leaf (copies)."""
        return {path: self._stats(path).moments() for path in self._ordered_paths}

    def pop_pending(self) -> Dict[str, Moments]:
        """``{nest path: moments}`` accumulated while frozen (see
        :meth:`RunningMeanVar.pop_pending`); every normalised leaf is present."""
        return {path: self._stats(path).pop_pending() for path in self._ordered_paths}

    def merge(self, moments: Dict[str, Moments]) -> None:
        """Fold in a :meth:`pop_pending` (or :meth:`moments`) of a normaliser built from the
        same spec; its keys must be exactly this one's normalised paths."""
        if set(moments) != set(self._ordered_paths):
            raise ValueError(f"NestNormalizer.merge: got moments for {sorted(moments)}, this "
                             f"normaliser has {list(self._ordered_paths)}")
        for path in self._ordered_paths:
            m = moments[path]
            self._stats(path).merge(m["count"], m["mean"], m["var"])

    def _stats(self, path: str) -> RunningMeanVar:
        return self.normalizers[_module_key(path)]

    def normalize(self, nest: Nest) -> Nest:
        """Normalised copy of a batched nest (float32 for normalised leaves)."""
        def _norm(path, x):
            if path not in self._paths:
                return x
            return self.normalizers[_module_key(path)].normalize(
                x.to(torch.float32), self._clip, self._epsilon)
        return alf_nest.map_structure_with_path(_norm, nest)
