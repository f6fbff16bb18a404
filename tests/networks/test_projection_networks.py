"""Categorical / Normal projection networks and FastCategorical."""
import math

import pytest
import torch
import torch.distributions as td

import alf  # noqa: F401
from alf.errors import IncompatibleSpecError
from alf.networks import CategoricalProjectionNetwork, FastCategorical, NormalProjectionNetwork
from alf.tensor_specs import BoundedTensorSpec, TensorSpec

BOX = BoundedTensorSpec((3,), torch.float32, [-1.0, 0.0, -4.0], [1.0, 2.0, 4.0])


def test_categorical_shapes_and_head_gain():
    net = CategoricalProjectionNetwork(8, BoundedTensorSpec((), torch.int64, 0, 5))
    dist, _ = net(torch.randn(4, 8))
    assert isinstance(dist, td.Categorical) and dist.logits.shape == (4, 6)
    assert dist.sample().shape == (4,) and dist.sample().dtype == torch.int64
    sv = torch.linalg.svdvals(net._layer.weight.detach())
    torch.testing.assert_close(sv, torch.full_like(sv, 0.01), atol=1e-6, rtol=1e-4)
    assert net.output_spec == BoundedTensorSpec((), torch.int64, 0, 5)


def test_categorical_minimum_offset():
    net = CategoricalProjectionNetwork(4, BoundedTensorSpec((), torch.int64, 3, 5))
    dist, _ = net(torch.randn(1000, 4))
    a = dist.sample()
    assert a.min() >= 3 and a.max() <= 5 and set(a.tolist()) == {3, 4, 5}
    logits = torch.log(torch.tensor([[0.2, 0.5, 0.3]]))
    d = FastCategorical(logits, offset=3)
    torch.testing.assert_close(d.log_prob(torch.tensor([4])), torch.log(torch.tensor([0.5])))
    assert d.mode.item() == 4
    assert d.enumerate_support(expand=False).flatten().tolist() == [3, 4, 5]


def test_fast_categorical_matches_torch():
    logits = torch.randn(5, 4)
    fast, ref = FastCategorical(logits), td.Categorical(logits=logits)
    a = torch.tensor([0, 1, 2, 3, 1])
    torch.testing.assert_close(fast.log_prob(a), ref.log_prob(a))
    torch.testing.assert_close(fast.entropy(), ref.entropy())
    torch.testing.assert_close(fast.probs, ref.probs)
    torch.testing.assert_close(fast.log_prob(torch.tensor(2)), ref.log_prob(torch.tensor(2)))
    # Gumbel-max sampling frequencies match the probabilities
    probs = torch.tensor([0.1, 0.6, 0.3])
    counts = torch.bincount(FastCategorical(probs.log()).sample((20000,)), minlength=3)
    torch.testing.assert_close(counts / 20000.0, probs, atol=0.02, rtol=0)
    # masked (-inf) actions are never sampled
    masked = FastCategorical(torch.tensor([[0.0, -math.inf, 0.0]]).expand(1000, 3))
    assert (masked.sample() != 1).all()
    assert masked.expand((2, 1000)).sample().shape == (2, 1000)


def test_normal_shapes_std_and_gain():
    net = NormalProjectionNetwork(8, BOX, init_std=0.5)
    dist, _ = net(torch.randn(4, 8))
    assert isinstance(dist, td.Independent) and dist.batch_shape == (4,) and dist.event_shape == (3,)
    torch.testing.assert_close(dist.stddev, torch.full((4, 3), 0.5))
    assert dist.log_prob(dist.sample()).shape == (4,)
    sv = torch.linalg.svdvals(net._mean_layer.weight.detach())
    torch.testing.assert_close(sv, torch.full_like(sv, 0.01), atol=1e-6, rtol=1e-4)


def test_normal_state_dependent_std_clipping_and_squash_mean():
    net = NormalProjectionNetwork(8, BOX, state_dependent_std=True, squash_mean=True,
                                  min_std=0.1, max_std=2.0)
    dist, _ = net(1e4 * torch.randn(64, 8))
    std, mean = dist.stddev, dist.mean
    assert std.min() >= 0.1 - 1e-6 and std.max() <= 2.0 + 1e-6
    lo, hi = torch.as_tensor(BOX.minimum), torch.as_tensor(BOX.maximum)
    assert (mean >= lo).all() and (mean <= hi).all()


def test_squashed_normal_within_bounds_and_finite_log_prob_at_bounds():
    net = NormalProjectionNetwork(8, BOX, scale_distribution=True, init_std=3.0)
    dist, _ = net(10 * torch.randn(256, 8))
    lo, hi = torch.as_tensor(BOX.minimum), torch.as_tensor(BOX.maximum)
    a = dist.rsample()
    assert (a >= lo).all() and (a <= hi).all()
    assert torch.isfinite(dist.log_prob(a)).all()
    for bound in (lo, hi):
        lp = dist.log_prob(bound.expand(256, 3))
        assert torch.isfinite(lp).all()
    # gradients flow through the squashed sample and its log-probability
    (dist.log_prob(a).sum() + a.sum()).backward()
    assert torch.isfinite(net._mean_layer.weight.grad).all()


def test_squashed_log_prob_matches_change_of_variables():
    net = NormalProjectionNetwork(2, BoundedTensorSpec((1,), torch.float32, -2.0, 2.0),
                                  scale_distribution=True)
    dist, _ = net(torch.zeros(1, 2))  # mean 0, std 1
    a = torch.tensor([[1.0]])
    u = torch.atanh(a / 2)
    expected = td.Normal(0.0, 1.0).log_prob(u) - torch.log(2 * (1 - torch.tanh(u) ** 2))
    torch.testing.assert_close(dist.log_prob(a), expected.reshape(1))


@pytest.mark.parametrize("spec", [
    BoundedTensorSpec((2,), torch.int64, 0, 3),   # MultiDiscrete
    BoundedTensorSpec((2,), torch.float32, -1.0, 1.0),  # continuous
    TensorSpec((), torch.int64),                  # unbounded discrete
])
def test_categorical_incompatible_spec(spec):
    with pytest.raises(IncompatibleSpecError, match="CategoricalProjectionNetwork.*scalar discrete"):
        CategoricalProjectionNetwork(4, spec)


def test_normal_incompatible_spec():
    with pytest.raises(IncompatibleSpecError, match="NormalProjectionNetwork.*CategoricalProjection"):
        NormalProjectionNetwork(4, BoundedTensorSpec((), torch.int64, 0, 3))
    with pytest.raises(IncompatibleSpecError, match="finite bounds"):
        NormalProjectionNetwork(4, TensorSpec((2,)), scale_distribution=True)
    dist, _ = NormalProjectionNetwork(4, TensorSpec((2,)))(torch.randn(3, 4))  # unbounded is fine
    assert dist.sample().shape == (3, 2)
