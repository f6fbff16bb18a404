"""Actor networks: observation -> action distribution (MLP/CNN, or with an LSTM).

The projection head is chosen from the action spec: discrete actions use
``discrete_projection_net_ctor`` (Categorical), continuous ones
``continuous_projection_net_ctor`` (Normal). Both are gin-configurable, e.g.
``NormalProjectionNetwork.scale_distribution=True`` for SAC.
"""
from typing import Any, Callable, Optional, Sequence, Tuple, Union

import torch
import torch.distributions as td

import alf
from alf.errors import IncompatibleSpecError
from alf.networks.encoding_networks import EncodingNetwork, LSTMEncodingNetwork
from alf.networks.network import Network
from alf.networks.projection_networks import CategoricalProjectionNetwork, NormalProjectionNetwork
from alf.tensor_specs import TensorSpec

Nest = Any


def make_projection_net(name: str, input_size: int, action_spec: TensorSpec,
                        discrete_ctor: Callable[..., Network],
                        continuous_ctor: Callable[..., Network]) -> Network:
    """Build the projection head that fits ``action_spec`` (discrete or continuous)."""
    if not isinstance(action_spec, TensorSpec):
        raise IncompatibleSpecError(
            f"{name} needs a single action TensorSpec, got the nest {action_spec!r}. Nested "
            "(gymnasium Dict/Tuple) action spaces are not supported; flatten the action space "
            "with a wrapper.")
    ctor = discrete_ctor if action_spec.is_discrete() else continuous_ctor
    return ctor(input_size=input_size, action_spec=action_spec)


@alf.configurable
class ActorDistributionNetwork(Network):
    """Observation ``[B, ...]`` -> (action distribution with batch shape ``[B]``, ``()``).

    On a shared encoder's features (``input_spec=TensorSpec((F,))``) with
    ``fc_layer_params=()`` this is a linear policy head: one ``Linear(F, n)``
    with orthogonal gain 0.01 and zero bias for discrete actions, as SB3/CleanRL.
    """

    def __init__(self,
                 input_spec: Nest,
                 action_spec: TensorSpec,
                 fc_layer_params: Sequence[int] = (64, 64),
                 activation: Callable[[torch.Tensor], torch.Tensor] = torch.tanh,
                 conv_layer_params: Optional[Sequence[tuple]] = None,
                 use_orthogonal_init: bool = True,
                 discrete_projection_net_ctor: Callable[..., Network] = CategoricalProjectionNetwork,
                 continuous_projection_net_ctor: Callable[..., Network] = NormalProjectionNetwork,
                 name: str = "ActorDistributionNetwork"):
        """
        Args:
            input_spec: nest of ``TensorSpec`` of one observation.
            action_spec: a single action spec (scalar discrete or ``[D]`` float).
            fc_layer_params: hidden layer sizes of the encoder.
            activation: activation of the hidden layers.
            conv_layer_params: ``(channels, kernel, stride[, padding])`` per conv layer.
            use_orthogonal_init: orthogonal init of the encoder (gain sqrt(2)).
            discrete_projection_net_ctor: head for discrete actions,
                called as ``ctor(input_size=, action_spec=)``.
            continuous_projection_net_ctor: head for continuous actions.
            name: name of the network.
        """
        super().__init__(input_spec, name=name)
        self._encoder = EncodingNetwork(
            input_spec, conv_layer_params=conv_layer_params, fc_layer_params=fc_layer_params,
            activation=activation, use_orthogonal_init=use_orthogonal_init, name=name + ".encoder")
        self._projection = make_projection_net(name, self._encoder.output_size, action_spec,
                                               discrete_projection_net_ctor,
                                               continuous_projection_net_ctor)
        self._action_spec = action_spec
        self._output_spec = action_spec

    @property
    def action_spec(self) -> TensorSpec:
        return self._action_spec

    def forward(self, inputs: Nest, state: Nest = ()) -> Tuple[td.Distribution, Nest]:
        x, _ = self._encoder(inputs)
        dist, _ = self._projection(x)
        return dist, state


@alf.configurable
class ActorDistributionRNNNetwork(Network):
    """Observation ``[B, ...]`` + LSTM state -> (action distribution ``[B]``, new state).

    ``state`` is the LSTM state (one ``(h, c)`` pair per layer, ``[B, H]``
    each); the caller resets it at episode starts (``StepType.FIRST``).
    """

    def __init__(self,
                 input_spec: Nest,
                 action_spec: TensorSpec,
                 input_fc_layer_params: Sequence[int] = (64,),
                 lstm_hidden_size: Union[int, Sequence[int]] = 64,
                 actor_fc_layer_params: Sequence[int] = (),
                 activation: Callable[[torch.Tensor], torch.Tensor] = torch.tanh,
                 conv_layer_params: Optional[Sequence[tuple]] = None,
                 use_orthogonal_init: bool = True,
                 discrete_projection_net_ctor: Callable[..., Network] = CategoricalProjectionNetwork,
                 continuous_projection_net_ctor: Callable[..., Network] = NormalProjectionNetwork,
                 name: str = "ActorDistributionRNNNetwork"):
        """
        Args:
            input_spec: nest of ``TensorSpec`` of one observation.
            action_spec: a single action spec (scalar discrete or ``[D]`` float).
            input_fc_layer_params: fc layers before the LSTM.
            lstm_hidden_size: LSTM size, or a tuple of sizes for stacked LSTMs.
            actor_fc_layer_params: fc layers after the LSTM.
            activation: activation of the conv and fc layers.
            conv_layer_params: ``(channels, kernel, stride[, padding])`` per conv layer.
            use_orthogonal_init: orthogonal init of the encoder and LSTM.
            discrete_projection_net_ctor: head for discrete actions.
            continuous_projection_net_ctor: head for continuous actions.
            name: name of the network.
        """
        encoder = LSTMEncodingNetwork(
            input_spec, hidden_size=lstm_hidden_size, pre_fc_layer_params=input_fc_layer_params,
            post_fc_layer_params=actor_fc_layer_params, activation=activation,
            conv_layer_params=conv_layer_params, use_orthogonal_init=use_orthogonal_init,
            name=name + ".encoder")
        super().__init__(input_spec, encoder.state_spec, name=name)
        self._encoder = encoder
        self._projection = make_projection_net(name, encoder.output_size, action_spec,
                                               discrete_projection_net_ctor,
                                               continuous_projection_net_ctor)
        self._action_spec = action_spec
        self._output_spec = action_spec

    @property
    def action_spec(self) -> TensorSpec:
        return self._action_spec

    def forward(self, inputs: Nest, state: Nest = ()) -> Tuple[td.Distribution, Nest]:
        x, state = self._encoder(inputs, state)
        dist, _ = self._projection(x)
        return dist, state
