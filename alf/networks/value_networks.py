"""Value networks: observation -> state value ``[B]`` (MLP/CNN, or with an LSTM).

The output layer has orthogonal gain 1.0 and zero bias (SB3/CleanRL).
"""
from typing import Any, Callable, Optional, Sequence, Tuple, Union

import torch
from torch import nn

import alf
from alf.networks.encoding_networks import EncodingNetwork, LSTMEncodingNetwork
from alf.networks.initializers import VALUE_GAIN, orthogonal_init_
from alf.networks.network import Network
from alf.tensor_specs import TensorSpec
from alf.utils import precision

Nest = Any


@alf.configurable
class ValueNetwork(Network):
    """Observation ``[B, ...]`` -> (value ``[B]``, ``()``), or ``[B, k]`` with
    ``output_size=k`` (one value per reward column). Outer dims beyond ``[B]`` are kept.

    On a shared encoder's features (``input_spec=TensorSpec((F,))``) with
    ``fc_layer_params=()`` this is a linear value head: one ``Linear(F, 1)``
    with orthogonal gain 1 and zero bias, as SB3/CleanRL.
    """

    def __init__(self,
                 input_spec: Nest,
                 fc_layer_params: Sequence[int] = (64, 64),
                 activation: Callable[[torch.Tensor], torch.Tensor] = torch.tanh,
                 conv_layer_params: Optional[Sequence[tuple]] = None,
                 use_orthogonal_init: bool = True,
                 output_size: Optional[int] = None,
                 name: str = "ValueNetwork"):
        """
        Args:
            input_spec: nest of ``TensorSpec`` of one observation.
            fc_layer_params: hidden layer sizes.
            activation: activation of the hidden layers.
            conv_layer_params: ``(channels, kernel, stride[, padding])`` per conv layer.
            use_orthogonal_init: orthogonal init (hidden gain sqrt(2), output gain 1).
            output_size: None: one value ``[B]``; ``k``: one per reward column ``[B, k]``
                (an actor-critic algorithm's ``reward_spec [k]``).
            name: name of the network.
        """
        super().__init__(input_spec, name=name)
        self._encoder = EncodingNetwork(
            input_spec, conv_layer_params=conv_layer_params, fc_layer_params=fc_layer_params,
            activation=activation, last_layer_size=output_size or 1,
            last_kernel_initializer_gain=VALUE_GAIN,
            use_orthogonal_init=use_orthogonal_init, name=name + ".encoder")
        self._columns = output_size is not None
        self._output_spec = TensorSpec((output_size,)) if self._columns else TensorSpec(())

    def forward(self, inputs: Nest, state: Nest = ()) -> Tuple[torch.Tensor, Nest]:
        value, _ = self._encoder(inputs)
        return (value if self._columns else value.squeeze(-1)), state


@alf.configurable
class ValueRNNNetwork(Network):
    """Observation ``[B, ...]`` + LSTM state -> (value ``[B]``, or ``[B, k]`` with
    ``output_size=k``; new state).

    The caller resets the state at episode starts (``StepType.FIRST``).
    """

    def __init__(self,
                 input_spec: Nest,
                 input_fc_layer_params: Sequence[int] = (64,),
                 lstm_hidden_size: Union[int, Sequence[int]] = 64,
                 value_fc_layer_params: Sequence[int] = (),
                 activation: Callable[[torch.Tensor], torch.Tensor] = torch.tanh,
                 conv_layer_params: Optional[Sequence[tuple]] = None,
                 use_orthogonal_init: bool = True,
                 output_size: Optional[int] = None,
                 name: str = "ValueRNNNetwork"):
        """
        Args:
            input_spec: nest of ``TensorSpec`` of one observation.
            input_fc_layer_params: fc layers before the LSTM.
            lstm_hidden_size: LSTM size, or a tuple of sizes for stacked LSTMs.
            value_fc_layer_params: fc layers after the LSTM.
            activation: activation of the conv and fc layers.
            conv_layer_params: ``(channels, kernel, stride[, padding])`` per conv layer.
            use_orthogonal_init: orthogonal init of the encoder, LSTM and output layer.
            output_size: None: one value ``[B]``; ``k``: one per reward column ``[B, k]``.
            name: name of the network.
        """
        encoder = LSTMEncodingNetwork(
            input_spec, hidden_size=lstm_hidden_size, pre_fc_layer_params=input_fc_layer_params,
            post_fc_layer_params=value_fc_layer_params, activation=activation,
            conv_layer_params=conv_layer_params, use_orthogonal_init=use_orthogonal_init,
            name=name + ".encoder")
        super().__init__(input_spec, encoder.state_spec, name=name)
        self._encoder = encoder
        self._value_layer = nn.Linear(encoder.output_size, output_size or 1)
        if use_orthogonal_init:
            orthogonal_init_(self._value_layer, VALUE_GAIN)
        self._columns = output_size is not None
        self._output_spec = TensorSpec((output_size,)) if self._columns else TensorSpec(())

    def forward(self, inputs: Nest, state: Nest = ()) -> Tuple[torch.Tensor, Nest]:
        x, state = self._encoder(inputs, state)
        value = precision.head_linear(x, self._value_layer.weight, self._value_layer.bias)
        return (value if self._columns else value.squeeze(-1)), state
