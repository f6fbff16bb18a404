"""alf.nest (paths, mapping, packing) and alf.tensor_specs (bounds, sampling, pickling, sizes)."""
import pickle
from typing import Any, NamedTuple

import numpy as np
import pytest
import torch

from alf import nest
from alf.data_structures import Experience, TimeStep
from alf.tensor_specs import (BoundedTensorSpec, TensorSpec, extract_spec, nbytes,
                              sample_from_spec, zeros_from_spec)


class Pair(NamedTuple):
    first: Any = ()
    second: Any = ()


def _experience():
    ts = TimeStep(step_type=torch.zeros(2, dtype=torch.int32), reward=torch.ones(2),
                  observation={"image": torch.zeros(2, 3), "vec": [torch.ones(2, 1), torch.ones(2, 4)]})
    return Experience(time_step=ts, action=torch.zeros(2), rollout_info=Pair(torch.ones(2), ()))


# ----------------------------------------------------------------------------- nest
def test_flatten_with_paths_names_named_tuple_fields_dict_keys_and_indices():
    paths = [p for p, _ in nest.flatten_with_paths(_experience())]
    assert paths == ["time_step.step_type", "time_step.reward", "time_step.observation.image",
                     "time_step.observation.vec.0", "time_step.observation.vec.1", "action",
                     "rollout_info.first"]
    e = _experience()
    assert [leaf for _, leaf in nest.flatten_with_paths(e)] == nest.flatten(e)  # same order


def test_flatten_skips_empty_nodes_and_none():
    assert nest.flatten({"a": (), "b": None, "c": 1}) == [1]
    assert nest.is_empty(()) and nest.is_empty({"a": ((), None)}) and not nest.is_empty([0])
    assert nest.flatten({"b": 2, "a": 1}) == [1, 2]  # sorted dict keys


def test_map_structure_with_path():
    out = nest.map_structure_with_path(lambda path, x, y: f"{path}={x + y}",
                                       Pair(first={"k": 1}, second=[2, 3]),
                                       Pair(first={"k": 10}, second=[20, 30]))
    assert out == Pair(first={"k": "first.k=11"}, second=["second.0=22", "second.1=33"])
    with pytest.raises(ValueError):
        nest.map_structure_with_path(lambda p, x, y: x, (1, 2), (1, 2, 3))
    with pytest.raises(ValueError):  # same number of leaves, different structure
        nest.map_structure_with_path(lambda p, x, y: x, {"a": 1, "b": 2}, {"a": 1, "c": 2})


def test_map_pack_stack_and_structure_checks():
    e = _experience()
    doubled = nest.map_structure(lambda x: 2 * x, e)
    assert isinstance(doubled, Experience) and torch.equal(doubled.time_step.reward, 2 * torch.ones(2))
    with pytest.raises(ValueError):
        nest.map_structure(lambda x, y: x, (1, 2), (1, 2, 3))
    leaves = nest.flatten(e)
    repacked = nest.pack_sequence_as(e, [torch.full_like(x, i) for i, x in enumerate(leaves)])
    assert repacked.action.eq(5).all() and repacked.time_step.observation["vec"][1].eq(4).all()
    stacked = nest.stack([e, doubled], dim=0)
    assert stacked.time_step.observation["vec"][1].shape == (2, 2, 4)
    assert torch.equal(stacked.time_step.reward, torch.tensor([[1.0, 1.0], [2.0, 2.0]]))
    with pytest.raises(ValueError):
        nest.stack([(torch.ones(1),), [torch.ones(1)]])  # tuple vs list
    with pytest.raises(ValueError, match="at least one nest"):
        nest.stack([])
    nest.assert_same_structure(e, doubled)
    with pytest.raises(ValueError, match="different structures"):
        nest.assert_same_structure({"a": 1}, {"b": 1})


# ---------------------------------------------------------------------------- specs
def test_tensor_spec_zeros_ones_shapes_and_nbytes():
    s = TensorSpec((3, 2), torch.float32)
    assert s.zeros().shape == (3, 2) and s.zeros((4, 5)).shape == (4, 5, 3, 2)
    assert s.ones((2,)).eq(1).all() and s.empty((7,)).shape == (7, 3, 2)
    assert s.nbytes == 24 and s.numel == 6 and s.ndim == 2
    assert TensorSpec((), torch.int64).nbytes == 8
    assert TensorSpec((84, 84, 4), np.uint8).nbytes == 84 * 84 * 4
    assert TensorSpec((2,), np.float64).dtype == torch.float64  # numpy dtypes convert
    assert nbytes({"a": TensorSpec((3,)), "b": [BoundedTensorSpec((), torch.int32, 0, 5)]}) == 16
    assert s.is_continuous() and TensorSpec((), torch.int64).is_discrete()
    assert TensorSpec.from_tensor(torch.zeros(4, 5, 6), from_dim=1) == TensorSpec((5, 6))


def test_spec_nest_helpers():
    spec = {"obs": TensorSpec((3,)), "act": BoundedTensorSpec((), torch.int64, 0, 3)}
    zeros = zeros_from_spec(spec, batch_size=4)
    assert zeros["obs"].shape == (4, 3) and zeros["act"].dtype == torch.int64
    assert zeros_from_spec(spec)["obs"].shape == (3,)
    sample = sample_from_spec(spec, batch_size=5)
    assert sample["act"].shape == (5,) and bool(((sample["act"] >= 0) & (sample["act"] <= 3)).all())
    assert extract_spec({"x": torch.zeros(2, 7, 3)}, from_dim=2) == {"x": TensorSpec((3,))}


def test_discrete_sample_is_inclusive_of_both_bounds():
    s = BoundedTensorSpec((), torch.int64, minimum=-1, maximum=2)
    assert s.num_actions == 4
    x = s.sample((2000,), generator=torch.Generator().manual_seed(0))
    assert x.dtype == torch.int64 and set(x.tolist()) == {-1, 0, 1, 2}
    counts = torch.bincount(x + 1)
    assert bool((counts > 400).all())  # roughly uniform (500 expected each)
    per_dim = BoundedTensorSpec((2,), torch.int32, minimum=[0, 5], maximum=[1, 5])
    y = per_dim.sample((500,))
    assert set(y[:, 0].tolist()) == {0, 1} and set(y[:, 1].tolist()) == {5}


def test_continuous_sample_within_bounds():
    s = BoundedTensorSpec((3,), torch.float32, minimum=[-1.0, 0.0, 10.0], maximum=[1.0, 0.5, 10.0])
    x = s.sample((1000,), generator=torch.Generator().manual_seed(0))
    assert x.shape == (1000, 3) and x.dtype == torch.float32
    lo, hi = torch.as_tensor(s.minimum), torch.as_tensor(s.maximum)
    assert bool(((x >= lo) & (x <= hi)).all())
    assert x[:, 0].min() < -0.9 and x[:, 0].max() > 0.9  # spans the range
    assert bool((x[:, 2] == 10.0).all())
    unbounded = TensorSpec((2,))
    assert unbounded.sample((3,)).shape == (3, 2)


def test_bounded_spec_validation_and_equality():
    with pytest.raises(ValueError, match="exceeds maximum"):
        BoundedTensorSpec((), torch.float32, minimum=1.0, maximum=0.0)
    with pytest.raises(ValueError, match="num_actions is only defined for scalar discrete"):
        BoundedTensorSpec((2,), torch.int64, 0, 1).num_actions
    a = BoundedTensorSpec((2,), torch.float32, -1.0, 1.0)
    assert a == BoundedTensorSpec((2,), torch.float32, [-1.0, -1.0], [1.0, 1.0])
    assert a != BoundedTensorSpec((2,), torch.float32, -1.0, 2.0)
    assert a != TensorSpec((2,), torch.float32) and TensorSpec((2,)) != a
    assert hash(a) == hash(BoundedTensorSpec((2,), torch.float32, -1.0, 1.0))
    assert a.minimum.shape == (2,) and a.maximum.dtype == np.float32


def test_specs_pickle_round_trip():
    specs = [TensorSpec((3, 4), torch.uint8),
             BoundedTensorSpec((2,), torch.float32, [-1.0, 0.0], [1.0, 2.0]),
             BoundedTensorSpec((), torch.int64, 0, 5)]
    for s in specs:
        t = pickle.loads(pickle.dumps(s))
        assert t == s and type(t) is type(s) and repr(t) == repr(s)
    assert pickle.loads(pickle.dumps(specs[1])).maximum.tolist() == [1.0, 2.0]
