"""Projection networks: features ``[B, input_size]`` -> action distribution.

* :class:`CategoricalProjectionNetwork` -> :class:`FastCategorical` (a
  ``torch.distributions.Categorical``, offset by the action minimum) for a
  scalar discrete action (gymnasium ``Discrete``).
* :class:`NormalProjectionNetwork` -> ``Independent(Normal, 1)`` over a
  ``[D]`` continuous action, or, with ``scale_distribution``, that Gaussian
  squashed by ``tanh`` and affinely mapped onto the action bounds (SAC).

Heads are initialised orthogonally with gain 0.01 (near-uniform / near-zero
initial policy, as SB3 and CleanRL).
"""
import math
from typing import Any, Optional, Tuple

import numpy as np
import torch
import torch.distributions as td
from torch import nn

import alf
from alf.errors import IncompatibleSpecError
from alf.networks.initializers import POLICY_GAIN, orthogonal_init_
from alf.networks.network import Network
from alf.tensor_specs import BoundedTensorSpec, TensorSpec
# the distributions the heads return live in alf.utils (dist_utils, below networks, uses them)
from alf.utils.distributions import FastCategorical, StableTanhTransform
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
                "For continuous (Box) actions use NormalProjectionNetwork; multi-dimensional "
                "discrete actions (MultiDiscrete/MultiBinary) are not supported by "
                "ActorDistributionNetwork: wrap the env to a single Discrete action.")
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
