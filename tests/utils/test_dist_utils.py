"""dist_utils: mode, entropy, log-probability, sampling, parameter round trip."""
import math
import pickle

import torch
import torch.distributions as td

import alf  # noqa: F401
from alf.networks import FastCategorical, NormalProjectionNetwork
from alf.tensor_specs import BoundedTensorSpec
from alf.utils import dist_utils

BOX = BoundedTensorSpec((2,), torch.float32, [0.0, -3.0], [2.0, 1.0])


def _squashed(batch: int = 4):
    torch.manual_seed(0)
    net = NormalProjectionNetwork(3, BOX, scale_distribution=True)
    return net(torch.randn(batch, 3))[0]


def test_mode():
    logits = torch.tensor([[0.1, 2.0, -1.0], [3.0, 0.0, 0.0]])
    assert dist_utils.get_mode(td.Categorical(logits=logits)).tolist() == [1, 0]
    assert dist_utils.get_mode(FastCategorical(logits, offset=-1)).tolist() == [0, -1]
    loc = torch.randn(4, 2)
    torch.testing.assert_close(dist_utils.get_mode(td.Normal(loc, 1.0)), loc)
    torch.testing.assert_close(dist_utils.get_mode(td.Independent(td.Normal(loc, 1.0), 1)), loc)
    dist = _squashed()
    lo, hi = torch.as_tensor(BOX.minimum), torch.as_tensor(BOX.maximum)
    expected = lo + (hi - lo) * (torch.tanh(dist.base_dist.mean) + 1) / 2
    torch.testing.assert_close(dist_utils.get_mode(dist), expected)


def test_entropy_closed_form_and_estimate():
    logits = torch.randn(5, 3)
    torch.testing.assert_close(dist_utils.compute_entropy(FastCategorical(logits)),
                               td.Categorical(logits=logits).entropy())
    normal = td.Independent(td.Normal(torch.zeros(5, 2), torch.ones(5, 2)), 1)
    torch.testing.assert_close(dist_utils.compute_entropy(normal),
                               torch.full((5,), math.log(2 * math.pi * math.e)))
    # Single-sample estimate of a tanh-squashed Gaussian: unbiased, so the mean over many
    # batch rows of the same distribution approaches the Monte-Carlo entropy.
    torch.manual_seed(1)
    base = td.Independent(td.Normal(torch.zeros(20000, 1), torch.ones(20000, 1)), 1)
    from alf.networks import StableTanhTransform
    squashed = td.TransformedDistribution(base, [StableTanhTransform(cache_size=1)])
    est = dist_utils.compute_entropy(squashed)
    assert est.shape == (20000,)
    # H = H(N(0,1)) + E[log(1 - tanh(u)^2)] ~= 1.4189 - 0.7494 (numerical integration)
    assert abs(est.mean().item() - 0.6695) < 0.02


def test_log_probability_and_sample_action():
    dist = _squashed()
    a = dist_utils.sample_action(dist)
    assert a.shape == (4, 2) and a.requires_grad  # rsample
    lp = dist_utils.compute_log_probability(dist, a)
    assert lp.shape == (4,) and torch.isfinite(lp).all()
    cat = FastCategorical(torch.randn(4, 3), offset=2)
    a = dist_utils.sample_action(cat)
    assert a.dtype == torch.int64 and ((a >= 2) & (a <= 4)).all()
    torch.testing.assert_close(dist_utils.compute_log_probability(cat, a),
                               cat.logits.gather(-1, (a - 2).unsqueeze(-1)).squeeze(-1))
    # nests: log-probs and entropies add up, samples keep the structure
    nest = {"d": cat, "c": dist}
    actions = dist_utils.sample_action(nest)
    assert set(actions) == {"c", "d"}
    torch.testing.assert_close(
        dist_utils.compute_log_probability(nest, actions),
        cat.log_prob(actions["d"]) + dist.log_prob(actions["c"]))


def test_epsilon_greedy_sample():
    cat = FastCategorical(torch.tensor([[5.0, 0.0, 0.0]]).expand(2000, 3))
    assert (dist_utils.epsilon_greedy_sample(cat, 0.0) == 0).all()
    frac = (dist_utils.epsilon_greedy_sample(cat, 0.5) != 0).float().mean().item()
    assert 0.0 < frac < 0.1  # explore with prob 0.5, and then pick non-mode ~1%
    normal = td.Independent(td.Normal(torch.zeros(3, 2), 1.0), 1)
    assert (dist_utils.epsilon_greedy_sample(normal, 0.0) == 0).all()


def test_distribution_param_round_trip():
    for dist in (_squashed(), FastCategorical(torch.randn(4, 3), offset=1),
                 td.Independent(td.Normal(torch.randn(4, 2), torch.rand(4, 2) + 0.1), 1)):
        spec = pickle.loads(pickle.dumps(dist_utils.distribution_param_spec(dist)))
        params = dist_utils.extract_params(dist)
        assert {k: tuple(s.shape) for k, s in spec.params_spec.items()} == {
            k: tuple(v.shape[1:]) for k, v in params.items()}
        rebuilt = spec.build_distribution(params)
        a = dist_utils.get_mode(dist)
        torch.testing.assert_close(rebuilt.log_prob(a), dist.log_prob(a))
