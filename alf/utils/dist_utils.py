"""Helpers on action distributions, used every env step and every train step.

Each function accepts a single ``torch.distributions.Distribution`` (the fast
path: one ``isinstance`` check) or a nest of them (distributions are leaves
for optree), whose per-leaf results are
summed (log-probabilities, entropies) or mapped (modes, samples).

Supported leaves: ``Categorical`` (incl. :class:`FastCategorical`),
``Normal``, ``Independent`` and ``TransformedDistribution`` (e.g. the
tanh-squashed Gaussian of ``NormalProjectionNetwork(scale_distribution=True)``),
:class:`MultiCategorical` (``MultiDiscrete``/``MultiBinary`` actions) and
:class:`JointDistribution` (an action nest: each function recurses into its leaves, so a
squashed-Gaussian leaf gets the same treatment as on its own).

:class:`DistributionSpec` records how to rebuild a distribution from its
parameter tensors, so parameters (not distribution objects) can be stored in
replay buffers / rollout info and turned back into distributions, e.g. for a
KL penalty against the behaviour policy.
"""
from typing import Any, Callable, Dict, Tuple

import math

import torch
import torch.distributions as td

from alf import nest as alf_nest
from alf.tensor_specs import TensorSpec
from alf.utils.distributions import FastCategorical, JointDistribution

Nest = Any
_Dist = td.Distribution


def get_mode(dist: Nest) -> Nest:
    """Most likely action: ``argmax`` for Categorical, the mean for Normal /
    Independent, the transformed base mode for ``TransformedDistribution``
    (``tanh(mean)`` mapped to the bounds for a squashed Gaussian). Shape ``[B, ...]``."""
    if not isinstance(dist, _Dist):
        return alf_nest.map_structure(get_mode, dist)
    if isinstance(dist, td.Categorical):
        mode = dist.logits.argmax(-1)
        return mode + dist.offset if isinstance(dist, FastCategorical) else mode
    if isinstance(dist, td.Independent):
        return get_mode(dist.base_dist)
    if isinstance(dist, td.TransformedDistribution):
        x = get_mode(dist.base_dist)
        for t in dist.transforms:
            x = t(x)
        return x
    if isinstance(dist, td.Normal):
        return dist.loc
    if isinstance(dist, JointDistribution):
        return alf_nest.map_structure(get_mode, dist.dists)
    return dist.mode


def compute_entropy(dist: Nest) -> torch.Tensor:
    """Entropy ``[B]``: closed form where torch has one; for a
    ``TransformedDistribution`` the unbiased single-sample estimate
    ``-log_prob(rsample())`` (differentiable through the reparameterised sample)."""
    if not isinstance(dist, _Dist):
        return sum(compute_entropy(d) for d in alf_nest.flatten(dist))
    if isinstance(dist, td.TransformedDistribution):
        x = dist.rsample() if dist.has_rsample else dist.sample()
        return -dist.log_prob(x)
    if isinstance(dist, JointDistribution):
        return sum(compute_entropy(d) for d in dist.leaves)
    return dist.entropy()


def compute_log_probability(dist: Nest, action: Nest) -> torch.Tensor:
    """``log p(action)`` ``[B]`` (summed over the leaves of a distribution nest)."""
    if not isinstance(dist, _Dist):
        return sum(d.log_prob(a) for d, a in zip(alf_nest.flatten(dist),
                                                 alf_nest.flatten(action)))
    return dist.log_prob(action)


def sample_action(dist: Nest) -> Nest:
    """A sample ``[B, ...]``: ``rsample()`` (differentiable) when available, else ``sample()``."""
    if not isinstance(dist, _Dist):
        return alf_nest.map_structure(sample_action, dist)
    if isinstance(dist, JointDistribution):
        return alf_nest.map_structure(sample_action, dist.dists)
    return dist.rsample() if dist.has_rsample else dist.sample()


def rsample_and_log_prob(dist: _Dist) -> Tuple[Nest, torch.Tensor]:
    """A reparameterised sample ``[B, D]`` and its ``log p`` ``[B]`` in one pass.

    For a squashed Gaussian (``TransformedDistribution`` over ``Independent(Normal)``,
    as ``NormalProjectionNetwork(scale_distribution=True)`` builds for SAC) the log
    density is computed from the pre-tanh sample, which is both faster and more
    accurate than inverting ``tanh`` inside ``log_prob``:
    ``log p(a) = log N(u) - sum log|d transform / du|``.

    A :class:`JointDistribution` (an action nest) gives the nest of its leaves' samples
    (each ``[B, D_leaf]``, drawn in ``alf.nest.flatten`` order) and the sum of their
    ``log p``, each leaf computed as above: a saturated ``tanh`` in one leaf gives a
    finite log-density, where ``JointDistribution.log_prob`` would invert it.
    """
    if isinstance(dist, JointDistribution):
        pairs = [rsample_and_log_prob(d) for d in dist.leaves]
        action = alf_nest.pack_sequence_as(dist.dists, [a for a, _ in pairs])
        return action, sum(lp for _, lp in pairs)
    if isinstance(dist, td.TransformedDistribution) and isinstance(dist.base_dist, td.Independent) \
            and isinstance(dist.base_dist.base_dist, td.Normal) \
            and dist.base_dist.reinterpreted_batch_ndims == 1:
        normal = dist.base_dist.base_dist
        eps = torch.randn_like(normal.loc)
        x = normal.loc + normal.scale * eps
        log_prob = (-0.5 * eps.square() - normal.scale.log()).sum(-1) \
            - 0.5 * math.log(2 * math.pi) * eps.shape[-1]
        for t in dist.transforms:
            y = t(x)
            log_prob = log_prob - t.log_abs_det_jacobian(x, y).sum(-1)
            x = y
        return x, log_prob
    action = dist.rsample()
    return action, dist.log_prob(action)


def epsilon_greedy_sample(dist: Nest, epsilon: float = 0.1) -> Nest:
    """``sample_action`` when ``epsilon >= 1``, the mode when ``epsilon <= 0``,
    else per row the mode with probability ``1 - epsilon`` and a sample otherwise."""
    if not isinstance(dist, _Dist):
        return alf_nest.map_structure(lambda d: epsilon_greedy_sample(d, epsilon), dist)
    if isinstance(dist, JointDistribution):
        return epsilon_greedy_sample(dist.dists, epsilon)
    if epsilon >= 1.0:
        return sample_action(dist)
    mode = get_mode(dist)
    if epsilon <= 0.0:
        return mode
    sample = sample_action(dist)
    explore = torch.rand(mode.shape[:len(dist.batch_shape)], device=mode.device) < epsilon
    explore = explore.reshape(explore.shape + (1,) * (mode.ndim - explore.ndim))
    return torch.where(explore, sample, mode)


# --------------------------------------------------------------------------------------
# Distribution parameters <-> distributions
# --------------------------------------------------------------------------------------

def _build_categorical(params: Dict[str, torch.Tensor], offset: int = 0) -> td.Categorical:
    return FastCategorical(params["logits"], offset)


def _build_normal(params: Dict[str, torch.Tensor], reinterpreted_batch_ndims: int = 0,
                  transforms: tuple = ()) -> td.Distribution:
    dist = td.Normal(params["loc"], params["scale"])
    if reinterpreted_batch_ndims:
        dist = td.Independent(dist, reinterpreted_batch_ndims)
    if transforms:
        dist = td.TransformedDistribution(dist, [t.with_cache(1) for t in transforms])
    return dist


class DistributionSpec:
    """How to rebuild a distribution from its parameters.

    ``params_spec`` is a dict of :class:`TensorSpec` (no batch dims);
    ``builder(params, **kwargs)`` is a module-level function, so the spec
    pickles.
    """

    def __init__(self, builder: Callable[..., td.Distribution], params_spec: Dict[str, TensorSpec],
                 **kwargs):
        self.builder = builder
        self.params_spec = params_spec
        self.kwargs = kwargs

    def build_distribution(self, params: Dict[str, torch.Tensor]) -> td.Distribution:
        """Distribution with parameters ``params`` (batched ``[B, ...]``)."""
        return self.builder(params, **self.kwargs)

    def __repr__(self) -> str:
        return f"DistributionSpec({self.builder.__name__}, {self.params_spec}, {self.kwargs})"


def extract_params(dist: _Dist) -> Dict[str, torch.Tensor]:
    """Parameter tensors of ``dist``: ``{'logits'}`` or ``{'loc', 'scale'}`` ``[B, ...]``."""
    if isinstance(dist, td.Categorical):
        return {"logits": dist.logits}
    base = dist
    if isinstance(base, td.TransformedDistribution):
        base = base.base_dist
    if isinstance(base, td.Independent):
        base = base.base_dist
    if isinstance(base, td.Normal):
        return {"loc": base.loc, "scale": base.scale}
    raise TypeError(f"extract_params: unsupported distribution {type(dist).__name__}")


def distribution_param_spec(dist: _Dist, from_dim: int = 1) -> DistributionSpec:
    """:class:`DistributionSpec` of ``dist``; ``from_dim`` outer (batch) dims are dropped."""
    params_spec = {k: TensorSpec.from_tensor(v, from_dim) for k, v in extract_params(dist).items()}
    if isinstance(dist, td.Categorical):
        return DistributionSpec(_build_categorical, params_spec,
                                offset=getattr(dist, "offset", 0))
    transforms = ()
    if isinstance(dist, td.TransformedDistribution):
        transforms = tuple(t.with_cache(0) for t in dist.transforms)
        dist = dist.base_dist
    ndims = dist.reinterpreted_batch_ndims if isinstance(dist, td.Independent) else 0
    return DistributionSpec(_build_normal, params_spec, reinterpreted_batch_ndims=ndims,
                            transforms=transforms)
