"""Projection networks: features ``[B, input_size]`` -> action distribution.

* :class:`CategoricalProjectionNetwork` -> :class:`FastCategorical` (a
  ``torch.distributions.Categorical``, offset by the action minimum) for a
  scalar discrete action (gymnasium ``Discrete``).
* :class:`NormalProjectionNetwork` -> ``Independent(Normal, 1)`` over a
  ``[D]`` continuous action, or, with ``scale_distribution``, that Gaussian
  squashed by ``tanh`` and affinely mapped onto the action bounds (SAC).
* :class:`MultiCategoricalProjectionNetwork` -> :class:`MultiCategorical` over a ``[D]``
  discrete action (gymnasium ``MultiDiscrete``/``MultiBinary``): one categorical per
  dimension, each with its own number of actions.
* :class:`NestedProjectionNetwork` -> :class:`JointDistribution` over an action nest
  (gymnasium ``Dict``/``Tuple``): one of the heads above per leaf, chosen from the
  leaf's spec.

Heads are initialised orthogonally with gain 0.01 (near-uniform / near-zero
initial policy, as SB3 and CleanRL).
"""
import math
from typing import Any, Callable, Optional, Tuple

import numpy as np
import torch
import torch.distributions as td
from torch import nn

import alf
from alf import nest as alf_nest
from alf.errors import IncompatibleSpecError
from alf.networks.initializers import POLICY_GAIN, orthogonal_init_
from alf.networks.network import Network
from alf.tensor_specs import BoundedTensorSpec, TensorSpec
# the distributions the heads return live in alf.utils (dist_utils, below networks, uses them)
from alf.utils.distributions import (FastCategorical, JointDistribution, MultiCategorical,
                                     StableTanhTransform)
from alf.utils import precision


def _spec_error(net: str, spec: Any, need: str, instead: str) -> IncompatibleSpecError:
    return IncompatibleSpecError(f"{net} needs {need}; got action spec {spec!r}. {instead}")


@alf.configurable
class CategoricalProjectionNetwork(Network):
    """``[B, input_size]`` -> ``Categorical`` over a scalar discrete action."""

    def __init__(self, input_size: int, action_spec: BoundedTensorSpec,
                 logits_init_output_factor: float = POLICY_GAIN,
                 name: str = "CategoricalProjectionNetwork"):
        """
        Args:
            input_size: size of the input features.
            action_spec: scalar discrete ``BoundedTensorSpec`` (``minimum`` may be non-zero).
            logits_init_output_factor: orthogonal gain of the logits layer.
            name: name of the network.
        """
        if not (isinstance(action_spec, BoundedTensorSpec) and action_spec.is_discrete()
                and action_spec.ndim == 0):
            raise _spec_error(
                name, action_spec, "a scalar discrete BoundedTensorSpec (gymnasium Discrete)",
                "For continuous (Box) actions use NormalProjectionNetwork, for [D] discrete "
                "actions (MultiDiscrete/MultiBinary) MultiCategoricalProjectionNetwork.")
        super().__init__(TensorSpec((input_size,)), name=name)
        self._offset = int(action_spec.minimum)
        self._layer = orthogonal_init_(nn.Linear(input_size, action_spec.num_actions),
                                       logits_init_output_factor)
        self._output_spec = action_spec

    def forward(self, inputs: torch.Tensor, state: Any = ()) -> Tuple[FastCategorical, Any]:
        """``inputs [B, input_size]`` -> (``FastCategorical`` with ``logits [B, n]``, state)."""
        layer = self._layer
        # the output layer runs in fp32 under a bf16 autocast (alf.utils.precision)
        return FastCategorical(precision.head_linear(inputs, layer.weight, layer.bias),
                               self._offset), state


@alf.configurable
class NormalProjectionNetwork(Network):
    """``[B, input_size]`` -> diagonal Gaussian over a ``[D]`` continuous action.

    The std is ``exp(log_std)`` with ``log_std`` a free parameter (SB3/CleanRL
    PPO) or, with ``state_dependent_std``, a linear function of the input
    (SAC). ``min_std``/``max_std`` clip ``log_std`` (SAC commonly uses
    ``exp(-20)``/``exp(2)``).
    """

    def __init__(self, input_size: int, action_spec: TensorSpec,
                 state_dependent_std: bool = False,
                 squash_mean: bool = False,
                 scale_distribution: bool = False,
                 init_std: float = 1.0,
                 std_bias_initializer_value: Optional[float] = None,
                 min_std: Optional[float] = None,
                 max_std: Optional[float] = None,
                 projection_output_init_gain: float = POLICY_GAIN,
                 name: str = "NormalProjectionNetwork"):
        """
        Args:
            input_size: size of the input features.
            action_spec: float ``TensorSpec`` of shape ``[D]``; bounded when
                ``squash_mean`` or ``scale_distribution``.
            state_dependent_std: compute ``log_std`` from the input instead of
                a free parameter.
            squash_mean: map the mean into the bounds with ``tanh`` (ignored
                when ``scale_distribution``: samples are already bounded).
            scale_distribution: squash the Gaussian with ``tanh`` and map it
                affinely onto the action bounds (``TransformedDistribution``).
            init_std: initial std (the initial ``log_std`` is ``log(init_std)``).
            std_bias_initializer_value: initial ``log_std`` (parameter or bias of
                the std layer); overrides ``init_std`` when given.
            min_std: lower clip of the std (``None``: no clip).
            max_std: upper clip of the std (``None``: no clip).
            projection_output_init_gain: orthogonal gain of the mean (and std) layer.
            name: name of the network.
        """
        if not (isinstance(action_spec, TensorSpec) and action_spec.is_continuous()
                and action_spec.ndim == 1):
            raise _spec_error(
                name, action_spec, "a float TensorSpec of shape [D] (gymnasium Box with 1-d shape)",
                "For discrete actions use CategoricalProjectionNetwork.")
        bounded = isinstance(action_spec, BoundedTensorSpec) and bool(
            np.all(np.isfinite(action_spec.minimum)) and np.all(np.isfinite(action_spec.maximum)))
        if (squash_mean or scale_distribution) and not bounded:
            raise _spec_error(
                name, action_spec, "a BoundedTensorSpec with finite bounds for squash_mean or "
                "scale_distribution", "Set squash_mean=False and scale_distribution=False to "
                "use an unbounded Gaussian.")
        super().__init__(TensorSpec((input_size,)), name=name)
        dim = action_spec.shape[0]
        self._scale_distribution = scale_distribution
        self._squash_mean = squash_mean and not scale_distribution
        self._state_dependent_std = state_dependent_std
        log_std0 = math.log(init_std) if std_bias_initializer_value is None else std_bias_initializer_value
        self._mean_layer = orthogonal_init_(nn.Linear(input_size, dim), projection_output_init_gain)
        if state_dependent_std:
            self._std_layer = orthogonal_init_(nn.Linear(input_size, dim), projection_output_init_gain,
                                               bias=log_std0)
        else:
            self._log_std = nn.Parameter(torch.full((dim,), float(log_std0)))
        self._log_std_min = None if min_std is None else math.log(min_std)
        self._log_std_max = None if max_std is None else math.log(max_std)
        self._clip_std = min_std is not None or max_std is not None
        if bounded:
            lo = torch.as_tensor(action_spec.minimum, dtype=torch.float32)
            hi = torch.as_tensor(action_spec.maximum, dtype=torch.float32)
            loc, scale = (hi + lo) / 2, (hi - lo) / 2
        else:
            loc, scale = torch.zeros(dim), torch.ones(dim)
        self.register_buffer("_action_loc", loc, persistent=False)
        self.register_buffer("_action_scale", scale, persistent=False)
        self._identity_affine = bool((loc == 0).all() and (scale == 1).all())
        self._output_spec = action_spec

    def forward(self, inputs: torch.Tensor, state: Any = ()) -> Tuple[td.Distribution, Any]:
        """``inputs [B, input_size]`` -> (distribution with event shape ``[D]``, state)."""
        # output layers in fp32 under a bf16 autocast (alf.utils.precision)
        mean = precision.head_linear(inputs, self._mean_layer.weight, self._mean_layer.bias)
        if self._squash_mean:
            mean = self._action_loc + self._action_scale * torch.tanh(mean)
        log_std = (precision.head_linear(inputs, self._std_layer.weight, self._std_layer.bias)
                   if self._state_dependent_std else self._log_std)
        if self._clip_std:
            log_std = log_std.clamp(self._log_std_min, self._log_std_max)
        dist = td.Independent(td.Normal(mean, log_std.exp()), 1)
        if not self._scale_distribution:
            return dist, state
        transforms = [StableTanhTransform(cache_size=1)]
        if not self._identity_affine:
            transforms.append(td.AffineTransform(self._action_loc, self._action_scale, cache_size=1))
        return td.TransformedDistribution(dist, transforms), state


@alf.configurable
class MultiCategoricalProjectionNetwork(Network):
    """``[B, input_size]`` -> :class:`MultiCategorical` over a ``[D]`` discrete action.

    One linear layer gives the ``sum_i n_i`` logits, split into one ``[B, n_i]`` block per
    dimension (``n_i = maximum_i - minimum_i + 1``; gymnasium ``MultiDiscrete(nvec)`` gives
    ``n_i = nvec[i]``, ``MultiBinary(D)`` ``n_i = 2``). The dimensions are independent
    given the input, as SB3's and CleanRL's MultiDiscrete PPO.
    """

    def __init__(self, input_size: int, action_spec: BoundedTensorSpec,
                 logits_init_output_factor: float = POLICY_GAIN,
                 name: str = "MultiCategoricalProjectionNetwork"):
        """
        Args:
            input_size: size of the input features.
            action_spec: discrete ``BoundedTensorSpec`` of shape ``[D]`` (per-dimension
                bounds may differ).
            logits_init_output_factor: orthogonal gain of the logits layer.
            name: name of the network.
        """
        if not (isinstance(action_spec, BoundedTensorSpec) and action_spec.is_discrete()
                and action_spec.ndim == 1):
            raise _spec_error(
                name, action_spec, "a discrete BoundedTensorSpec of shape [D] (gymnasium "
                "MultiDiscrete or MultiBinary)", "For a scalar discrete action use "
                "CategoricalProjectionNetwork.")
        super().__init__(TensorSpec((input_size,)), name=name)
        dim = action_spec.shape[0]
        low = np.broadcast_to(np.asarray(action_spec.minimum), (dim,)).astype(np.int64)
        high = np.broadcast_to(np.asarray(action_spec.maximum), (dim,)).astype(np.int64)
        self._offsets = [int(v) for v in low]
        self._sizes = [int(h - l + 1) for l, h in zip(low, high)]
        self._layer = orthogonal_init_(nn.Linear(input_size, sum(self._sizes)),
                                       logits_init_output_factor)
        self._output_spec = action_spec

    def forward(self, inputs: torch.Tensor, state: Any = ()) -> Tuple[MultiCategorical, Any]:
        """``inputs [B, input_size]`` -> (``MultiCategorical``, batch ``[B]``, event ``[D]``)."""
        layer = self._layer
        logits = precision.head_linear(inputs, layer.weight, layer.bias)
        return MultiCategorical(torch.split(logits, self._sizes, dim=-1), self._offsets), state


def _leaf_kind(spec: Any) -> str:
    """Which head fits a leaf action spec: 'discrete', 'multi_discrete' or 'continuous'."""
    if not isinstance(spec, TensorSpec):
        raise IncompatibleSpecError(f"an action nest leaf must be a TensorSpec, got {spec!r}")
    if spec.is_discrete():
        return "discrete" if spec.ndim == 0 else "multi_discrete"
    return "continuous"


@alf.configurable
class NestedProjectionNetwork(Network):
    """``[B, input_size]`` -> :class:`JointDistribution` over an action nest.

    Every leaf of ``action_spec`` gets its own head on the same input features: a scalar
    discrete leaf ``discrete_ctor`` (Categorical), a ``[D]`` discrete leaf
    ``multi_discrete_ctor`` (:class:`MultiCategorical`), a float leaf ``continuous_ctor``
    (Normal). The joint ``log_prob``/``entropy`` are the sums over the leaves.
    """

    def __init__(self, input_size: int, action_spec: Any,
                 discrete_ctor: Callable[..., Network] = CategoricalProjectionNetwork,
                 multi_discrete_ctor: Callable[..., Network] = MultiCategoricalProjectionNetwork,
                 continuous_ctor: Callable[..., Network] = NormalProjectionNetwork,
                 name: str = "NestedProjectionNetwork"):
        """
        Args:
            input_size: size of the input features.
            action_spec: a ``dict``/``tuple`` nest of action ``TensorSpec``.
            discrete_ctor: head of a scalar discrete leaf, ``ctor(input_size=, action_spec=)``.
            multi_discrete_ctor: head of a ``[D]`` discrete leaf.
            continuous_ctor: head of a float leaf.
            name: name of the network.
        """
        super().__init__(TensorSpec((input_size,)), name=name)
        ctors = {"discrete": discrete_ctor, "multi_discrete": multi_discrete_ctor,
                 "continuous": continuous_ctor}
        leaves = alf_nest.flatten(action_spec)
        if not leaves:
            raise IncompatibleSpecError(f"{name}: the action nest {action_spec!r} has no leaf")
        self._heads = nn.ModuleList(
            ctors[_leaf_kind(spec)](input_size=input_size, action_spec=spec) for spec in leaves)
        self._output_spec = action_spec

    def forward(self, inputs: torch.Tensor, state: Any = ()) -> Tuple[JointDistribution, Any]:
        """``inputs [B, input_size]`` -> (``JointDistribution`` over the action nest, state)."""
        dists = [head(inputs)[0] for head in self._heads]
        return JointDistribution(alf_nest.pack_sequence_as(self._output_spec, dists)), state
