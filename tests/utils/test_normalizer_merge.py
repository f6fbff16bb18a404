"""Learner-owned running statistics: exact merging of moments computed elsewhere, frozen
copies that accumulate pending moments, and what travels (pickles) between processes."""
import pickle

import numpy as np
import pytest
import torch

from alf.tensor_specs import BoundedTensorSpec, TensorSpec
from alf.utils.normalizers import NestNormalizer, RunningMeanVar, combine_moments


def _batches(seed, sizes, shape=(3,)):
    rng = np.random.default_rng(seed)
    return [torch.as_tensor(rng.normal(loc=[2., -7., 40.], scale=[0.1, 3., 25.],
                                       size=(n,) + shape)) for n in sizes]


def _assert_moments_equal(a: RunningMeanVar, b: RunningMeanVar, tol=1e-12):
    assert a.count.item() == b.count.item()
    torch.testing.assert_close(a.mean, b.mean, rtol=tol, atol=tol)
    torch.testing.assert_close(a.var, b.var, rtol=tol, atol=tol)


def test_merge_of_three_workers_equals_one_update_with_all_data():
    # three "workers", each folding several uneven batches into its own statistics
    workers = [_batches(0, (5, 1, 17)), _batches(1, (64,)), _batches(2, (2, 9, 3, 30))]
    all_data = torch.cat([b for w in workers for b in w])
    reference = RunningMeanVar((3,))
    reference.update(all_data)

    learner = RunningMeanVar((3,))
    for batches in workers:
        worker = RunningMeanVar((3,))
        for b in batches:
            worker.update(b)
        m = worker.moments()
        learner.merge(m["count"], m["mean"], m["var"])
    _assert_moments_equal(learner, reference)
    x = all_data.numpy()
    np.testing.assert_allclose(learner.mean.numpy(), x.mean(0), rtol=1e-12)
    np.testing.assert_allclose(learner.var.numpy(), x.var(0), rtol=1e-12)
    assert learner.count.item() == len(x) == 131


def test_merge_into_statistics_that_already_have_data_and_with_masks():
    rng = np.random.default_rng(3)
    x = torch.as_tensor(rng.normal(size=(6, 4, 2)))  # [T, B, 2]
    mask = torch.as_tensor(rng.random((6, 4)) < 0.5)
    learner, reference, worker = RunningMeanVar((2,)), RunningMeanVar((2,)), RunningMeanVar((2,))
    learner.update(x[:3], mask[:3])
    reference.update(x, mask)
    worker.update(x[3:], mask[3:])
    learner.merge(**worker.moments())
    _assert_moments_equal(learner, reference)
    np.testing.assert_allclose(learner.var.numpy(), x[mask].numpy().var(0), rtol=1e-12)


def test_merge_nothing_changes_nothing_and_bad_moments_fail_clearly():
    rmv = RunningMeanVar((2,))
    rmv.update(torch.tensor([[1., 2.], [3., 5.]], dtype=torch.float64))
    before = rmv.moments()
    rmv.merge(0.0, torch.full((2,), 123.), torch.full((2,), 9.))  # count 0: no samples
    for k, v in rmv.moments().items():
        assert torch.equal(v, before[k])
    fresh = RunningMeanVar((2,))
    fresh.merge(**RunningMeanVar((2,)).moments())  # empty into empty keeps the (0, 1) prior
    assert torch.equal(fresh.var, torch.ones(2, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"shape \(2,\)"):
        rmv.merge(1.0, torch.zeros(3), torch.ones(3))
    with pytest.raises(ValueError, match="count must be >= 0"):
        rmv.merge(-1.0, torch.zeros(2), torch.ones(2))


def test_combine_moments_by_hand():
    # {1, 3} (mean 2, var 1) with {6} (mean 6, var 0): {1, 3, 6} has mean 10/3, var 38/9
    n, mean, var = combine_moments(*(torch.tensor(v, dtype=torch.float64)
                                     for v in (2., 2., 1., 1., 6., 0.)))
    assert n.item() == 3
    assert mean.item() == pytest.approx(10 / 3, abs=1e-15)
    assert var.item() == pytest.approx(np.var([1., 3., 6.]), abs=1e-14)


def test_frozen_statistics_stay_put_and_pending_moments_pop_once():
    rmv = RunningMeanVar((3,))
    rmv.update(_batches(4, (10,))[0])
    before = rmv.moments()
    rmv.freeze()
    assert rmv.frozen
    seen = _batches(5, (7, 4))
    for b in seen:
        rmv.update(b)
    for k, v in rmv.moments().items():
        assert torch.equal(v, before[k]), k  # the learner's statistics are not touched
    pending = rmv.pop_pending()
    x = torch.cat(seen).numpy()
    assert pending["count"].item() == 11
    np.testing.assert_allclose(pending["mean"].numpy(), x.mean(0), rtol=1e-12)
    np.testing.assert_allclose(pending["var"].numpy(), x.var(0), rtol=1e-12)
    again = rmv.pop_pending()  # reset: nothing new seen
    assert again["count"].item() == 0
    assert torch.equal(again["var"], torch.ones(3, dtype=torch.float64))
    # pending moments are not weights: not in state_dict (loading weights leaves them alone)
    assert sorted(rmv.state_dict()) == ["count", "mean", "var"]
    rmv.freeze(False)
    rmv.update(seen[0])
    assert rmv.count.item() == 17


def test_nest_normalizer_pop_merge_and_pickle():
    spec = {"image": BoundedTensorSpec((2,), torch.uint8, 0, 255), "state": TensorSpec((3,)),
            "goal": {"pos": TensorSpec((2,))}}
    g = torch.Generator().manual_seed(0)

    def batch(n):
        return {"image": torch.zeros(n, 2, dtype=torch.uint8),
                "state": 5 + 3 * torch.randn(n, 3, generator=g, dtype=torch.float64),
                "goal": {"pos": torch.randn(n, 2, generator=g, dtype=torch.float64)}}

    learner, reference = NestNormalizer(spec), NestNormalizer(spec)
    actors = [NestNormalizer(spec) for _ in range(3)]
    for a in actors:
        a.freeze()
    for i in range(6):
        b = batch(3 + i)
        actors[i % 3].update(b)
        reference.update(b)
    for a in actors:
        moments = pickle.loads(pickle.dumps(a.pop_pending()))  # it crosses a process
        assert sorted(moments) == ["goal.pos", "state"]
        learner.merge(moments)
    for path, m in reference.moments().items():
        got = learner.moments()[path]
        assert got["count"].item() == m["count"].item()
        torch.testing.assert_close(got["mean"], m["mean"], rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(got["var"], m["var"], rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match=r"got moments for \['state'\]"):
        learner.merge({"state": actors[0].pop_pending()["state"]})
