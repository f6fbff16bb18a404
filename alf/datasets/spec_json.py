"""Spec nests <-> JSON, so a dataset manifest describes its own tensors.

A nest is written as JSON with the nest's own shape: dicts stay dicts (same keys),
tuples/lists become JSON lists, and each leaf :class:`~alf.tensor_specs.TensorSpec` becomes

    {"shape": [3], "dtype": "float32"}                                   # TensorSpec
    {"shape": [3], "dtype": "float32", "minimum": -2.0, "maximum": 2.0}  # BoundedTensorSpec

Bounds are a single number when every element shares it, else a nested list of the
spec's shape. Floats round-trip exactly (float32 -> Python float -> float32), and
non-finite bounds are written as JSON's ``Infinity``/``NaN`` extensions that Python's
:mod:`json` reads back. Named tuples are written as dicts of their fields and read back as
dicts (a manifest must not name Python classes: reading it never imports or unpickles).
"""
from typing import Any

import numpy as np
import torch

from alf.tensor_specs import BoundedTensorSpec, TensorSpec, torch_dtype

_LEAF_KEYS = {"shape", "dtype"}
_BOUND_KEYS = {"minimum", "maximum"}


def dtype_name(dtype: Any) -> str:
    """numpy-style name of a torch/numpy dtype (``"float32"``, ``"int64"``, ``"bool"``)."""
    if isinstance(dtype, torch.dtype):
        return torch.empty((), dtype=dtype).numpy().dtype.name
    return np.dtype(dtype).name


def spec_to_json(spec_nest: Any) -> Any:
    """JSON-serialisable form of a nest of (Bounded)TensorSpecs (see the module doc)."""
    if isinstance(spec_nest, TensorSpec):
        leaf = {"shape": [int(d) for d in spec_nest.shape], "dtype": dtype_name(spec_nest.dtype)}
        if isinstance(spec_nest, BoundedTensorSpec):
            leaf["minimum"] = _bound_to_json(spec_nest.minimum)
            leaf["maximum"] = _bound_to_json(spec_nest.maximum)
        return leaf
    if isinstance(spec_nest, dict):
        return {str(k): spec_to_json(v) for k, v in spec_nest.items()}
    if isinstance(spec_nest, tuple) and hasattr(spec_nest, "_fields"):
        return {k: spec_to_json(v) for k, v in zip(spec_nest._fields, spec_nest)}
    if isinstance(spec_nest, (tuple, list)):
        return [spec_to_json(v) for v in spec_nest]
    raise TypeError(f"cannot describe {type(spec_nest).__name__} {spec_nest!r} as a tensor spec")


def _bound_to_json(bound: np.ndarray) -> Any:
    flat = bound.reshape(-1)
    if flat.size and np.all(flat == flat[0]):
        return flat[0].item()
    return bound.tolist()


def is_spec_leaf(obj: Any) -> bool:
    """Whether a JSON value is one spec leaf (a dict with a string ``dtype`` and a list
    ``shape``), as opposed to a dict nest whose keys happen to be named like them."""
    return (isinstance(obj, dict) and _LEAF_KEYS <= set(obj) and set(obj) <= _LEAF_KEYS | _BOUND_KEYS
            and isinstance(obj["dtype"], str) and isinstance(obj["shape"], list))


def spec_from_json(obj: Any) -> Any:
    """Inverse of :func:`spec_to_json` (lists come back as tuples, named tuples as dicts).

    Raises ``ValueError`` naming the nest path of anything that is not a valid spec."""
    return _from_json(obj, "")


def _from_json(obj: Any, path: str) -> Any:
    where = path or "<root>"
    if is_spec_leaf(obj):
        try:
            shape = [int(d) for d in obj["shape"]]
            if any(d < 0 for d in shape):
                raise ValueError("negative dimension")
            dtype = torch_dtype(np.dtype(obj["dtype"]))
        except (TypeError, ValueError, KeyError) as e:
            raise ValueError(f"spec {where} has a bad shape/dtype {obj['shape']}/{obj['dtype']!r} "
                             f"({e})") from None
        has = _BOUND_KEYS & set(obj)
        if not has:
            return TensorSpec(shape, dtype)
        if has != _BOUND_KEYS:
            raise ValueError(f"spec {where} has only one of minimum/maximum")
        try:
            return BoundedTensorSpec(shape, dtype, minimum=np.asarray(obj["minimum"]),
                                     maximum=np.asarray(obj["maximum"]))
        except (TypeError, ValueError) as e:
            raise ValueError(f"spec {where} has bad bounds ({e})") from None
    if isinstance(obj, dict):
        return {k: _from_json(v, f"{path}.{k}" if path else k) for k, v in obj.items()}
    if isinstance(obj, list):
        return tuple(_from_json(v, f"{path}.{i}" if path else str(i)) for i, v in enumerate(obj))
    raise ValueError(f"spec {where} is {type(obj).__name__} {obj!r}, not a spec nest")
