"""Tensor specifications: shape + dtype (+ bounds) of every nest that crosses a boundary.

Specs exist *before* data does: replay buffers, shared-memory transports and
checkpoints are built from them, never from a first sample.
``shape`` never includes batch or time dimensions; ``zeros(outer_dims)`` and
``sample(outer_dims)`` prepend them.
"""
from typing import Any, Optional, Sequence

import numpy as np
import torch

from alf import nest as alf_nest

_NP_TO_TORCH = {
    np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64,
    np.dtype(np.float16): torch.float16, np.dtype(np.int64): torch.int64,
    np.dtype(np.int32): torch.int32, np.dtype(np.int16): torch.int16,
    np.dtype(np.int8): torch.int8, np.dtype(np.uint8): torch.uint8,
    np.dtype(np.bool_): torch.bool,
}


def torch_dtype(dtype: Any) -> torch.dtype:
    """Convert a numpy dtype / python type / torch dtype to a torch dtype."""
    if isinstance(dtype, torch.dtype):
        return dtype
    return _NP_TO_TORCH[np.dtype(dtype)]


class TensorSpec:
    """Shape and dtype of one tensor, without outer (batch/time) dimensions."""

    __slots__ = ("_shape", "_dtype")

    def __init__(self, shape: Sequence[int] = (), dtype: Any = torch.float32):
        self._shape = torch.Size(tuple(int(d) for d in shape))
        self._dtype = torch_dtype(dtype)

    @property
    def shape(self) -> torch.Size:
        return self._shape

    @property
    def dtype(self) -> torch.dtype:
        return self._dtype

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def numel(self) -> int:
        return int(np.prod(self._shape)) if self._shape else 1

    @property
    def nbytes(self) -> int:
        """Bytes for one element of this spec (no outer dims)."""
        return self.numel * torch.empty((), dtype=self._dtype).element_size()

    def is_discrete(self) -> bool:
        return not (self._dtype.is_floating_point or self._dtype.is_complex)

    def is_continuous(self) -> bool:
        return self._dtype.is_floating_point

    @classmethod
    def from_tensor(cls, tensor: torch.Tensor, from_dim: int = 0) -> "TensorSpec":
        """Spec of ``tensor`` ignoring its first ``from_dim`` (outer) dims."""
        return cls(tensor.shape[from_dim:], tensor.dtype)

    def zeros(self, outer_dims: Sequence[int] = (), device=None) -> torch.Tensor:
        return torch.zeros(tuple(outer_dims) + tuple(self._shape), dtype=self._dtype, device=device)

    def ones(self, outer_dims: Sequence[int] = (), device=None) -> torch.Tensor:
        return torch.ones(tuple(outer_dims) + tuple(self._shape), dtype=self._dtype, device=device)

    def empty(self, outer_dims: Sequence[int] = (), device=None) -> torch.Tensor:
        return torch.empty(tuple(outer_dims) + tuple(self._shape), dtype=self._dtype, device=device)

    def sample(self, outer_dims: Sequence[int] = (), generator=None) -> torch.Tensor:
        """Standard-normal floats / zeros for unbounded specs."""
        if self.is_continuous():
            return torch.randn(tuple(outer_dims) + tuple(self._shape), dtype=self._dtype,
                               generator=generator)
        return self.zeros(outer_dims)

    def is_compatible_with(self, value: torch.Tensor, outer_ndim: Optional[int] = None) -> bool:
        if value.dtype != self._dtype:
            return False
        shape = tuple(value.shape)
        if outer_ndim is None:
            return shape[len(shape) - self.ndim:] == tuple(self._shape) and len(shape) >= self.ndim
        return shape[outer_ndim:] == tuple(self._shape)

    def __eq__(self, other: object) -> bool:
        return (type(self) is type(other) and self._shape == other._shape
                and self._dtype == other._dtype)

    def __hash__(self):
        return hash((tuple(self._shape), self._dtype))

    def __repr__(self) -> str:
        return f"TensorSpec(shape={tuple(self._shape)}, dtype={self._dtype})"

    def __reduce__(self):
        return (TensorSpec, (tuple(self._shape), self._dtype))


class BoundedTensorSpec(TensorSpec):
    """A :class:`TensorSpec` with inclusive ``minimum``/``maximum`` (scalars or arrays)."""

    __slots__ = ("_minimum", "_maximum")

    def __init__(self, shape: Sequence[int] = (), dtype: Any = torch.float32,
                 minimum: Any = 0, maximum: Any = 1):
        super().__init__(shape, dtype)
        np_dtype = torch.empty((), dtype=self._dtype).numpy().dtype
        self._minimum = np.broadcast_to(np.asarray(minimum, dtype=np_dtype), tuple(self._shape)).copy()
        self._maximum = np.broadcast_to(np.asarray(maximum, dtype=np_dtype), tuple(self._shape)).copy()
        if np.any(self._minimum > self._maximum):
            raise ValueError(f"minimum {minimum} exceeds maximum {maximum}")

    @property
    def minimum(self) -> np.ndarray:
        return self._minimum

    @property
    def maximum(self) -> np.ndarray:
        return self._maximum

    @property
    def num_actions(self) -> int:
        """Number of choices of a scalar discrete spec (``maximum - minimum + 1``)."""
        if not self.is_discrete() or self.ndim != 0:
            raise ValueError(f"num_actions is only defined for scalar discrete specs, not {self}")
        return int(self._maximum) - int(self._minimum) + 1

    def sample(self, outer_dims: Sequence[int] = (), generator=None) -> torch.Tensor:
        """Uniform sample within the bounds (integers inclusive)."""
        shape = tuple(outer_dims) + tuple(self._shape)
        if self.is_discrete() and self._minimum.size and np.all(self._minimum == self._minimum.flat[0]) \
                and np.all(self._maximum == self._maximum.flat[0]):
            # one kernel instead of ~8 float64 ops: this runs every step of random collection
            return torch.randint(int(self._minimum.flat[0]), int(self._maximum.flat[0]) + 1, shape,
                                 dtype=self._dtype, generator=generator)
        lo = torch.as_tensor(self._minimum)
        hi = torch.as_tensor(self._maximum)
        if self.is_discrete():
            u = torch.rand(shape, generator=generator, dtype=torch.float64)
            span = (hi.to(torch.float64) - lo.to(torch.float64) + 1)
            return (lo.to(torch.float64) + torch.floor(u * span)).clamp(max=hi.to(torch.float64)).to(self._dtype)
        u = torch.rand(shape, generator=generator, dtype=torch.float64)
        return (lo.to(torch.float64) + u * (hi.to(torch.float64) - lo.to(torch.float64))).to(self._dtype)

    def __eq__(self, other: object) -> bool:
        return (super().__eq__(other) and np.array_equal(self._minimum, other._minimum)
                and np.array_equal(self._maximum, other._maximum))

    def __hash__(self):
        return super().__hash__()

    def __repr__(self) -> str:
        lo = self._minimum.flat[0] if self._minimum.size and np.all(self._minimum == self._minimum.flat[0]) else self._minimum
        hi = self._maximum.flat[0] if self._maximum.size and np.all(self._maximum == self._maximum.flat[0]) else self._maximum
        return (f"BoundedTensorSpec(shape={tuple(self._shape)}, dtype={self._dtype}, "
                f"minimum={lo}, maximum={hi})")

    def __reduce__(self):
        return (BoundedTensorSpec, (tuple(self._shape), self._dtype, self._minimum, self._maximum))


def zeros_from_spec(spec_nest: Any, batch_size: Optional[int] = None, device=None) -> Any:
    """Zeros for every spec in ``spec_nest``, with an optional leading batch dim."""
    outer = () if batch_size is None else (batch_size,)
    return alf_nest.map_structure(lambda s: s.zeros(outer, device=device), spec_nest)


def sample_from_spec(spec_nest: Any, batch_size: Optional[int] = None, generator=None) -> Any:
    outer = () if batch_size is None else (batch_size,)
    return alf_nest.map_structure(lambda s: s.sample(outer, generator=generator), spec_nest)


def extract_spec(nest: Any, from_dim: int = 1) -> Any:
    """Specs of a tensor nest, dropping its first ``from_dim`` (outer) dims."""
    return alf_nest.map_structure(lambda t: TensorSpec.from_tensor(t, from_dim), nest)


def nbytes(spec_nest: Any) -> int:
    """Total bytes of one element of ``spec_nest``."""
    return sum(s.nbytes for s in alf_nest.flatten(spec_nest))
