"""Actor networks: observation -> action distribution (MLP/CNN, or with an LSTM).

The projection head is chosen from the action spec: discrete actions use
``discrete_projection_net_ctor`` (Categorical), continuous ones
``continuous_projection_net_ctor`` (Normal). Both are gin-configurable, e.g.
``NormalProjectionNetwork.scale_distribution=True`` for SAC. A ``[D]`` discrete action
(gymnasium ``MultiDiscrete``/``MultiBinary``) uses ``multi_discrete_projection_net_ctor``
(:class:`MultiCategoricalProjectionNetwork`), and an action nest (gymnasium
``Dict``/``Tuple``) a :class:`NestedProjectionNetwork`: one of these heads per leaf and a
``JointDistribution`` whose ``log_prob``/``entropy`` sum over the leaves.
"""
from typing import Any, Callable, Optional, Sequence, Tuple, Union

import torch
import torch.distributions as td

import alf
from alf.errors import IncompatibleSpecError
from alf.networks.encoding_networks import EncodingNetwork, LSTMEncodingNetwork
from alf.networks.network import Network
from alf.networks.projection_networks import (CategoricalProjectionNetwork,
                                              MultiCategoricalProjectionNetwork,
                                              NestedProjectionNetwork, NormalProjectionNetwork)
from alf.tensor_specs import TensorSpec

Nest = Any


def make_projection_net(name: str, input_size: int, action_spec: Nest,
                        discrete_ctor: Callable[..., Network],
                        continuous_ctor: Callable[..., Network],
                        multi_discrete_ctor: Callable[..., Network] = MultiCategoricalProjectionNetwork
                        ) -> Network:
    """Build the projection head that fits ``action_spec``: a scalar discrete action
    ``discrete_ctor``, a ``[D]`` discrete one ``multi_discrete_ctor``, a float one
    ``continuous_ctor``, and a nest a :class:`NestedProjectionNetwork` of those per leaf."""
    if not isinstance(action_spec, TensorSpec):
        if not isinstance(action_spec, (dict, tuple, list)):
            raise IncompatibleSpecError(
                f"{name} needs an action TensorSpec or a dict/tuple nest of them, got "
                f"{action_spec!r}")
        return NestedProjectionNetwork(input_size, action_spec, discrete_ctor=discrete_ctor,
                                       multi_discrete_ctor=multi_discrete_ctor,
                                       continuous_ctor=continuous_ctor, name=name + ".projection")
    if action_spec.is_discrete() and action_spec.ndim == 1:
        return multi_discrete_ctor(input_size=input_size, action_spec=action_spec)
    if action_spec.is_discrete() and action_spec.ndim > 1:
        raise IncompatibleSpecError(
            f"{name}: a discrete action of shape {tuple(action_spec.shape)} (a MultiDiscrete "
            f"with a {action_spec.ndim}-d nvec) is not supported; give the env a 1-d "
            "MultiDiscrete (flatten nvec) or a Tuple of them")
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
                 action_spec: Nest,
                 fc_layer_params: Sequence[int] = (64, 64),
                 activation: Callable[[torch.Tensor], torch.Tensor] = torch.tanh,
                 conv_layer_params: Optional[Sequence[tuple]] = None,
                 use_orthogonal_init: bool = True,
                 discrete_projection_net_ctor: Callable[..., Network] = CategoricalProjectionNetwork,
                 continuous_projection_net_ctor: Callable[..., Network] = NormalProjectionNetwork,
                 multi_discrete_projection_net_ctor: Callable[..., Network] = (
                     MultiCategoricalProjectionNetwork),
                 name: str = "ActorDistributionNetwork"):
        """
        Args:
            input_spec: nest of ``TensorSpec`` of one observation.
            action_spec: the action spec: scalar discrete, ``[D]`` discrete, ``[D]`` float,
                or a ``dict``/``tuple`` nest of those (one head per leaf).
            fc_layer_params: hidden layer sizes of the encoder.
            activation: activation of the hidden layers.
            conv_layer_params: ``(channels, kernel, stride[, padding])`` per conv layer.
            use_orthogonal_init: orthogonal init of the encoder (gain sqrt(2)).
            discrete_projection_net_ctor: head for discrete actions,
                called as ``ctor(input_size=, action_spec=)``.
            continuous_projection_net_ctor: head for continuous actions.
            multi_discrete_projection_net_ctor: head for ``[D]`` discrete actions
                (gymnasium MultiDiscrete/MultiBinary).
            name: name of the network.
        """
        super().__init__(input_spec, name=name)
        self._encoder = EncodingNetwork(
            input_spec, conv_layer_params=conv_layer_params, fc_layer_params=fc_layer_params,
            activation=activation, use_orthogonal_init=use_orthogonal_init, name=name + ".encoder")
        self._projection = make_projection_net(name, self._encoder.output_size, action_spec,
                                               discrete_projection_net_ctor,
                                               continuous_projection_net_ctor,
                                               multi_discrete_projection_net_ctor)
        self._action_spec = action_spec
        self._output_spec = action_spec

    @property
    def action_spec(self) -> Nest:
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
                 action_spec: Nest,
                 input_fc_layer_params: Sequence[int] = (64,),
                 lstm_hidden_size: Union[int, Sequence[int]] = 64,
                 actor_fc_layer_params: Sequence[int] = (),
                 activation: Callable[[torch.Tensor], torch.Tensor] = torch.tanh,
                 conv_layer_params: Optional[Sequence[tuple]] = None,
                 use_orthogonal_init: bool = True,
                 discrete_projection_net_ctor: Callable[..., Network] = CategoricalProjectionNetwork,
                 continuous_projection_net_ctor: Callable[..., Network] = NormalProjectionNetwork,
                 multi_discrete_projection_net_ctor: Callable[..., Network] = (
                     MultiCategoricalProjectionNetwork),
                 name: str = "ActorDistributionRNNNetwork"):
        """
        Args:
            input_spec: nest of ``TensorSpec`` of one observation.
            action_spec: the action spec: scalar discrete, ``[D]`` discrete, ``[D]`` float,
                or a ``dict``/``tuple`` nest of those (one head per leaf).
            input_fc_layer_params: fc layers before the LSTM.
            lstm_hidden_size: LSTM size, or a tuple of sizes for stacked LSTMs.
            actor_fc_layer_params: fc layers after the LSTM.
            activation: activation of the conv and fc layers.
            conv_layer_params: ``(channels, kernel, stride[, padding])`` per conv layer.
            use_orthogonal_init: orthogonal init of the encoder and LSTM.
            discrete_projection_net_ctor: head for discrete actions.
            continuous_projection_net_ctor: head for continuous actions.
            multi_discrete_projection_net_ctor: head for ``[D]`` discrete actions
                (gymnasium MultiDiscrete/MultiBinary).
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
                                               continuous_projection_net_ctor,
                                               multi_discrete_projection_net_ctor)
        self._action_spec = action_spec
        self._output_spec = action_spec

    @property
    def action_spec(self) -> Nest:
        return self._action_spec

    def forward(self, inputs: Nest, state: Nest = ()) -> Tuple[td.Distribution, Nest]:
        x, state = self._encoder(inputs, state)
        dist, _ = self._projection(x)
        return dist, state
