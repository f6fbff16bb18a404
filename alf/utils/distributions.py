"""Action distributions built by alf's policy heads (:mod:`alf.networks.projection_networks`).

:class:`FastCategorical` (a cheaper ``torch.distributions.Categorical`` over actions offset
by the action minimum) and :class:`StableTanhTransform` (``tanh`` whose inverse stays
finite at the bounds). They are plain torch distributions, not networks, and live here so
that :mod:`alf.utils.dist_utils` can rebuild them without importing the networks layer
(``docs/design/layers.md``); :mod:`alf.networks` re-exports both.

For action spaces beyond one ``Box`` or one ``Discrete``:

* :class:`MultiCategorical`: independent categoricals, one per dimension of a
  ``[D]`` discrete action (gymnasium ``MultiDiscrete``, sizes may differ per dimension,
  and ``MultiBinary``, size 2 each); ``log_prob`` and ``entropy`` are the sums over the
  dimensions.
* :class:`JointDistribution`: independent distributions, one per leaf of an action nest
  (gymnasium ``Dict``/``Tuple``); ``log_prob`` and ``entropy`` are the sums over the leaves,
  ``sample``/``mode`` are the action nest. The losses use it like any distribution (they
  only call ``log_prob``/``entropy`` through :mod:`alf.utils.dist_utils`).

A single ``Box`` or ``Discrete`` action never goes through these two classes: its
head returns the plain distribution it always did.
"""
from typing import Any, List, Optional, Sequence

from alf import nest as alf_nest

import torch
import torch.distributions as td


class FastCategorical(td.Categorical):
    """``torch.distributions.Categorical`` from raw logits, cheaper per env step,
    over the actions ``{offset, ..., offset + n - 1}`` (``offset`` = action spec minimum).

    Same maths and attributes as the torch class (``isinstance`` checks still
    hold); it normalises logits with ``log_softmax`` instead of
    ``logsumexp`` (~10x cheaper for small batches), samples by Gumbel-max
    instead of ``multinomial`` and gathers log-probabilities directly. Together
    this roughly halves the cost of construct + sample + log_prob of a small
    policy head.

    Args:
        logits: unnormalised log-probabilities ``[B, n]``.
        offset: value of the first action.
    """

    def __init__(self, logits: torch.Tensor, offset: int = 0, validate_args: Optional[bool] = None):
        # Not calling Categorical.__init__: it normalises with the slower logsumexp.
        self.logits = torch.log_softmax(logits, dim=-1)
        self._param = self.logits
        self._num_events = logits.shape[-1]
        self.offset = int(offset)
        td.Distribution.__init__(self, logits.shape[:-1], validate_args=validate_args)

    @property
    def support(self):
        return td.constraints.integer_interval(self.offset, self.offset + self._num_events - 1)

    @property
    def mode(self) -> torch.Tensor:
        mode = self.logits.argmax(-1)
        return mode + self.offset if self.offset else mode

    def sample(self, sample_shape=torch.Size()) -> torch.Tensor:
        """Gumbel-max: ``argmax(logits + Gumbel noise)``, ``[*sample_shape, B]`` int64."""
        logits = self.logits.detach()
        if sample_shape:
            logits = logits.expand(torch.Size(sample_shape) + logits.shape)
        noise = torch.empty_like(logits).exponential_()
        # exponential_ may return 0 in float32: keep the log finite so -inf logits stay unchosen.
        noise = noise.clamp_(min=torch.finfo(noise.dtype).tiny).log_()
        sample = (logits - noise).argmax(-1)
        return sample + self.offset if self.offset else sample

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        """``log p(value)``; ``value`` ``[B]`` (or broadcastable to the batch shape)."""
        if self.offset:
            value = value - self.offset
        value = value.long().unsqueeze(-1)
        logits = self.logits
        if value.shape[:-1] != logits.shape[:-1]:
            value, logits = torch.broadcast_tensors(value, logits)
            value = value[..., :1]
        return logits.gather(-1, value).squeeze(-1)

    def enumerate_support(self, expand: bool = True) -> torch.Tensor:
        return super().enumerate_support(expand) + self.offset

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(FastCategorical, _instance)
        super().expand(batch_shape, _instance=new)
        new.offset = self.offset
        return new


class StableTanhTransform(td.transforms.TanhTransform):
    """``TanhTransform`` whose inverse clips ``y`` into the open interval ``(-1, 1)``.

    ``atanh(+-1)`` is infinite, so the log-probability of an action exactly
    at a bound (a replayed, clipped or deterministic action) would be
    ``-inf``/``nan``; clipping by one float epsilon keeps it finite. Samples
    drawn from the distribution hit the cache and never use the inverse.
    """

    def with_cache(self, cache_size: int = 1) -> "StableTanhTransform":
        if self._cache_size == cache_size:
            return self
        return StableTanhTransform(cache_size=cache_size)

    def _inverse(self, y: torch.Tensor) -> torch.Tensor:
        eps = torch.finfo(y.dtype).eps
        return torch.atanh(y.clamp(-1.0 + eps, 1.0 - eps))


class MultiCategorical(td.Distribution):
    """Independent categoricals over a ``[D]`` discrete action (gymnasium ``MultiDiscrete``
    / ``MultiBinary``): dimension ``i`` takes ``{offset_i, ..., offset_i + n_i - 1}``.

    ``log_prob(value [B, D]) = sum_i log p_i(value[:, i])`` and ``entropy = sum_i H_i``
    (independent dimensions), both ``[B]``. Samples and the mode are ``[B, D]`` int64.

    Args:
        logits: one ``[B, n_i]`` tensor per dimension (unnormalised).
        offsets: the value of each dimension's first action (the spec minimum).
    """

    arg_constraints = {}
    has_rsample = False

    def __init__(self, logits: Sequence[torch.Tensor], offsets: Sequence[int],
                 validate_args: Optional[bool] = None):
        self.dims: List[FastCategorical] = [FastCategorical(l, o) for l, o in zip(logits, offsets)]
        batch_shape = logits[0].shape[:-1]
        super().__init__(batch_shape, torch.Size([len(self.dims)]), validate_args=validate_args)

    @property
    def offsets(self) -> List[int]:
        return [d.offset for d in self.dims]

    @property
    def mode(self) -> torch.Tensor:
        """``[B, D]``: the most likely value of each dimension."""
        return torch.stack([d.mode for d in self.dims], -1)

    def sample(self, sample_shape=torch.Size()) -> torch.Tensor:
        """``[*sample_shape, B, D]`` int64, each dimension sampled independently."""
        return torch.stack([d.sample(sample_shape) for d in self.dims], -1)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        """``[B]``: the sum over the dimensions of ``value [B, D]``."""
        return sum(d.log_prob(value[..., i]) for i, d in enumerate(self.dims))

    def entropy(self) -> torch.Tensor:
        """``[B]``: the sum of the dimensions' entropies."""
        return sum(d.entropy() for d in self.dims)


class JointDistribution(td.Distribution):
    """Independent distributions, one per leaf of an action nest (``dict``/``tuple``).

    ``log_prob(action_nest)`` and ``entropy()`` are the sums over the leaves, ``[B]``
    (the leaves are independent given the observation); ``sample()``/``mode`` give the
    action nest (each leaf ``[B, ...]``). ``dists`` is the nest of leaf distributions, e.g.
    ``{"sign": FastCategorical, "size": Independent(Normal)}`` for
    ``Dict(sign=Discrete(2), size=Box(1))``.

    Args:
        dists: a nest of distributions with the same batch shape ``[B]``.
    """

    arg_constraints = {}

    def __init__(self, dists: Any, validate_args: Optional[bool] = None):
        self.dists = dists
        self._leaves = alf_nest.flatten(dists)
        super().__init__(self._leaves[0].batch_shape, validate_args=validate_args)

    @property
    def leaves(self) -> List[td.Distribution]:
        """The leaf distributions in the action nest's flattening order."""
        return self._leaves

    @property
    def has_rsample(self) -> bool:  # type: ignore[override]
        return all(d.has_rsample for d in self._leaves)

    def _map(self, fn) -> Any:
        return alf_nest.map_structure(fn, self.dists)

    @property
    def mode(self) -> Any:
        return self._map(lambda d: d.mode)

    def sample(self, sample_shape=torch.Size()) -> Any:
        return self._map(lambda d: d.sample(sample_shape))

    def rsample(self, sample_shape=torch.Size()) -> Any:
        return self._map(lambda d: d.rsample(sample_shape))

    def log_prob(self, value: Any) -> torch.Tensor:
        """``[B]``: the sum of each leaf's ``log_prob`` of its part of ``value``."""
        return sum(d.log_prob(a) for d, a in zip(self._leaves, alf_nest.flatten(value)))

    def entropy(self) -> torch.Tensor:
        """``[B]``: the sum of the leaves' entropies (closed forms only; see
        :func:`alf.utils.dist_utils.compute_entropy` for squashed Gaussians)."""
        return sum(d.entropy() for d in self._leaves)
