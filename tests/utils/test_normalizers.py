"""Tests for alf.utils.normalizers: exact running moments, masking, checkpoints."""
import io
import pickle

import numpy as np
import pytest
import torch

from alf.tensor_specs import BoundedTensorSpec, TensorSpec
from alf.utils.normalizers import NestNormalizer, RunningMeanVar


def test_running_mean_var_matches_numpy_after_several_batches():
    rng = np.random.default_rng(0)
    rmv = RunningMeanVar((3,))
    batches = [rng.normal(loc=[1., -2., 5.], scale=[0.5, 3., 10.], size=(n, 3))
               for n in (1, 7, 64, 3)]
    for b in batches:
        rmv.update(torch.as_tensor(b, dtype=torch.float32))
    data = np.concatenate([b.astype(np.float32) for b in batches]).astype(np.float64)
    np.testing.assert_allclose(rmv.mean.numpy(), data.mean(0), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(rmv.var.numpy(), data.var(0), rtol=1e-10)
    assert rmv.count.item() == len(data)
    assert rmv.mean.dtype == torch.float64
    x = torch.as_tensor(data[:5], dtype=torch.float32)
    expected = np.clip((data[:5] - data.mean(0)) / np.sqrt(data.var(0) + 1e-8), -1.5, 1.5)
    np.testing.assert_allclose(rmv.normalize(x, clip=1.5).numpy(), expected, rtol=1e-5, atol=1e-6)


def test_outer_dims_and_mask():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4, 5, 2))  # [T, B, 2]
    mask = rng.random((4, 5)) < 0.6
    rmv = RunningMeanVar((2,))
    rmv.update(torch.as_tensor(x), mask=torch.as_tensor(mask))
    np.testing.assert_allclose(rmv.mean.numpy(), x[mask].mean(0), rtol=1e-10)
    np.testing.assert_allclose(rmv.var.numpy(), x[mask].var(0), rtol=1e-10)
    before = {k: v.clone() for k, v in rmv.state_dict().items()}
    rmv.update(torch.as_tensor(x), mask=torch.zeros(4, 5, dtype=torch.bool))
    for k, v in rmv.state_dict().items():
        torch.testing.assert_close(v, before[k])
    with pytest.raises(ValueError):
        rmv.update(torch.zeros(4, 3))


def test_identity_before_any_data():
    rmv = RunningMeanVar(())
    x = torch.tensor([-3., 0., 2.])
    torch.testing.assert_close(rmv.normalize(x), x)


def test_nest_normalizer_float_leaves_only_and_state_dict_round_trip():
    spec = {"image": BoundedTensorSpec((2, 2), torch.uint8, 0, 255),
            "state": TensorSpec((3,)), "goal": {"pos": TensorSpec((2,), torch.float64)}}
    norm = NestNormalizer(spec, clip=5.0)
    out_spec = norm.normalized_spec
    assert out_spec["image"] == spec["image"]
    assert out_spec["goal"]["pos"] == TensorSpec((2,), torch.float32)
    g = torch.Generator().manual_seed(0)
    def batch(n):
        return {"image": torch.randint(0, 255, (n, 2, 2), dtype=torch.uint8, generator=g),
                "state": 3 + 2 * torch.randn(n, 3, generator=g),
                "goal": {"pos": torch.randn(n, 2, generator=g, dtype=torch.float64)}}
    for _ in range(3):
        norm.update(batch(16))
    sd = norm.state_dict()
    assert "normalizers.goal/pos.mean" in sd and "normalizers.state.var" in sd
    assert not any(k.startswith("normalizers.image") for k in sd)
    x = batch(4)
    y = norm.normalize(x)
    assert torch.equal(y["image"], x["image"])
    assert y["goal"]["pos"].dtype == torch.float32
    restored = NestNormalizer(spec, clip=5.0)
    buf = io.BytesIO()
    torch.save(sd, buf)
    buf.seek(0)
    restored.load_state_dict(torch.load(buf))
    y2 = restored.normalize(x)
    torch.testing.assert_close(y2["state"], y["state"])
    torch.testing.assert_close(y2["goal"]["pos"], y["goal"]["pos"])
    clone = pickle.loads(pickle.dumps(norm))
    torch.testing.assert_close(clone.normalize(x)["state"], y["state"])


def test_nest_normalizer_fields():
    spec = {"a": TensorSpec((1,)), "b": {"c": TensorSpec((1,)), "d": TensorSpec((1,))}}
    norm = NestNormalizer(spec, fields=["b.c"])
    assert list(norm.normalizers.keys()) == ["b/c"]
    with pytest.raises(ValueError, match="not found"):
        NestNormalizer(spec, fields=["nope"])


def test_running_mean_var_folds_every_ranks_batch_when_summed_over_ranks():
    """Two "ranks" with different batches: each folds the union (its own sums plus the
    other's, as an all-reduce would hand them), so both end identical and equal to one
    process that saw both batches; masked rows do not count."""
    from alf.utils.normalizers import RunningMeanVar
    torch.manual_seed(0)
    xa, xb = torch.randn(5, 3), torch.randn(7, 3) * 2 + 1
    mask_b = torch.tensor([1, 1, 0, 1, 1, 1, 0], dtype=torch.bool)
    sums = {}

    def fake_all_reduce(rank):
        def reduce(t):
            sums[rank] = t.clone()
            return t  # replaced below, once both ranks have contributed
        return reduce

    ra, rb, single = RunningMeanVar((3,)), RunningMeanVar((3,)), RunningMeanVar((3,))
    # what each rank contributes, then fold the sum of both on each rank
    ra._moments_over_ranks(xa.double(), None, fake_all_reduce("a"))
    rb._moments_over_ranks(xb.double(), mask_b, fake_all_reduce("b"))
    total = sums["a"] + sums["b"]
    ra.update(xa, sum_over_ranks=lambda t: total.clone())
    rb.update(xb, mask=mask_b, sum_over_ranks=lambda t: total.clone())
    single.update(torch.cat([xa, xb[mask_b]]))
    for name in ("mean", "var", "count"):
        assert torch.equal(getattr(ra, name), getattr(rb, name)), name
        assert torch.allclose(getattr(ra, name), getattr(single, name), atol=1e-12), name
    assert int(ra.count) == 5 + 5
