"""Deterministic actor for continuous actions (DDPG / TD3): observation -> action.

The last layer's output ``u`` is squashed into the action bounds as
``loc + scale * tanh(u)`` with ``loc = (max + min) / 2`` and
``scale = (max - min) / 2`` per dimension (SB3's and CleanRL's TD3 actor).
Default initialisation is torch's, as in those libraries.
"""
from typing import Any, Callable, Optional, Sequence, Tuple

import numpy as np
import torch

import alf
from alf.errors import IncompatibleSpecError
from alf.networks.encoding_networks import EncodingNetwork
from alf.networks.network import Network
from alf.tensor_specs import BoundedTensorSpec

Nest = Any


@alf.configurable
class ActorNetwork(Network):
    """Observation ``[B, ...]`` -> (action ``[B, D]`` within the bounds, ``()``).

    Extra outer dims (``[T, B, ...]``) are kept.
    """

    def __init__(self,
                 input_spec: Nest,
                 action_spec: BoundedTensorSpec,
                 fc_layer_params: Sequence[int] = (256, 256),
                 activation: Callable[[torch.Tensor], torch.Tensor] = torch.relu,
                 conv_layer_params: Optional[Sequence[tuple]] = None,
                 use_orthogonal_init: bool = False,
                 name: str = "ActorNetwork"):
        """
        Args:
            input_spec: nest of ``TensorSpec`` of one observation.
            action_spec: float ``BoundedTensorSpec`` of shape ``[D]`` with finite
                bounds (scalars or per-dimension arrays).
            fc_layer_params: hidden layer sizes.
            activation: activation of the conv and hidden layers.
            conv_layer_params: ``(channels, kernel, stride[, padding])`` per conv
                layer, applied to the single ``[C, H, W]`` observation leaf.
            use_orthogonal_init: orthogonal init (hidden gain sqrt(2), output
                gain 1, zero biases) instead of torch's default.
            name: name of the network.
        """
        if not (isinstance(action_spec, BoundedTensorSpec) and action_spec.is_continuous()
                and action_spec.ndim == 1 and np.all(np.isfinite(action_spec.minimum))
                and np.all(np.isfinite(action_spec.maximum))):
            raise IncompatibleSpecError(
                f"{name} needs a float BoundedTensorSpec of shape [D] with finite bounds "
                f"(gymnasium Box with 1-d shape and finite low/high); got action spec "
                f"{action_spec!r}. For discrete actions use QNetwork (DQN) or "
                "ActorDistributionNetwork; for unbounded Box actions clip the action space "
                "with a wrapper.")
        super().__init__(input_spec, name=name)
        self._action_spec = action_spec
        self._encoder = EncodingNetwork(
            input_spec, conv_layer_params=conv_layer_params, fc_layer_params=fc_layer_params,
            activation=activation, last_layer_size=action_spec.shape[0],
            use_orthogonal_init=use_orthogonal_init, name=name + ".encoder")
        lo = torch.as_tensor(action_spec.minimum, dtype=torch.float32)
        hi = torch.as_tensor(action_spec.maximum, dtype=torch.float32)
        self.register_buffer("_action_loc", (hi + lo) / 2, persistent=False)
        self.register_buffer("_action_scale", (hi - lo) / 2, persistent=False)
        self.register_buffer("_action_min", lo, persistent=False)
        self.register_buffer("_action_max", hi, persistent=False)
        self._output_spec = action_spec

    @property
    def action_spec(self) -> BoundedTensorSpec:
        return self._action_spec

    def forward(self, inputs: Nest, state: Nest = ()) -> Tuple[torch.Tensor, Nest]:
        """``inputs`` ``[B, ...]`` -> (action ``[B, D]`` in ``[minimum, maximum]``, ``state``)."""
        u, _ = self._encoder(inputs)
        action = torch.addcmul(self._action_loc, self._action_scale, torch.tanh(u))
        # loc + scale * tanh(u) may round one ulp past a bound when tanh saturates.
        return torch.clamp(action, self._action_min, self._action_max), state
