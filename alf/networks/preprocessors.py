"""Per-key encoders for ``EncodingNetwork.input_preprocessors`` (one observation entry each).

Each maps one entry ``[*outer, *spec]`` to a ``[*outer, F]`` float feature and is
named in gin as a ctor, so every network (actor, value, critic, Q) builds its
own copy::

    EncodingNetwork.input_preprocessors = {'left': @CnnEncoder, 'right': @CnnEncoder,
                                           'proprio': @MlpEncoder}
    CnnEncoder.conv_layer_params = ((16, 3, 2), (32, 3, 2))

Use gin scopes for per-key settings (``{'map': @map/CnnEncoder}``,
``map/CnnEncoder.fc_layer_params = (64,)``).
"""
from typing import Callable, Sequence, Tuple

import torch
from torch import nn

import alf
from alf.errors import IncompatibleSpecError
from alf.networks.encoding_networks import EncodingNetwork
from alf.networks.image_encoders import check_image_spec
from alf.networks.initializers import orthogonal_init_
from alf.networks.network import Network
from alf.tensor_specs import BoundedTensorSpec, TensorSpec

#: CnnEncoder's default convs ``(channels, kernel, stride)``: fits images from 7x7 up.
SMALL_CONV_LAYERS = ((16, 3, 2), (32, 3, 2))


def _plain(cls_name: str, input_spec, **kwargs) -> dict:
    """Every EncodingNetwork argument, so that no EncodingNetwork gin binding leaks in."""
    args = dict(conv_layer_params=None, fc_layer_params=(), activation=torch.relu,
                last_layer_size=None, last_activation=None, last_kernel_initializer_gain=None,
                use_orthogonal_init=True, preprocess_images=True, conv_memory_format="auto",
                input_preprocessors=None, preprocessing_combiner=None, name=cls_name)
    args.update(kwargs)
    return args


@alf.configurable
class CnnEncoder(EncodingNetwork):
    """A conv stack for one ``[C, H, W]`` image entry -> ``[*outer, F]`` (flattened conv
    features, then optional fc layers); ``uint8`` pixels scaled by 1/255."""

    def __init__(self,
                 input_spec: TensorSpec,
                 conv_layer_params: Sequence[tuple] = SMALL_CONV_LAYERS,
                 fc_layer_params: Sequence[int] = (),
                 activation: Callable[[torch.Tensor], torch.Tensor] = torch.relu,
                 use_orthogonal_init: bool = True,
                 conv_memory_format: str = "auto",
                 name: str = "CnnEncoder"):
        """
        Args:
            input_spec: ``TensorSpec`` of one ``[C, H, W]`` image (``uint8`` or float).
            conv_layer_params: ``(channels, kernel, stride[, padding])`` per conv layer.
            fc_layer_params: fc layer sizes after the flatten (``()``: output the
                flattened conv features).
            activation: after every conv and fc layer.
            use_orthogonal_init: orthogonal init, gain sqrt(2), zero bias.
            conv_memory_format: ``"auto"``, ``"contiguous"`` or ``"channels_last"``
                (see :mod:`alf.networks.encoding_networks`).
            name: name of the network.
        """
        check_image_spec(name, input_spec)
        super().__init__(input_spec, **_plain(
            name, input_spec, conv_layer_params=tuple(conv_layer_params),
            fc_layer_params=tuple(fc_layer_params), activation=activation,
            use_orthogonal_init=use_orthogonal_init, conv_memory_format=conv_memory_format))


@alf.configurable
class MlpEncoder(EncodingNetwork):
    """Fully connected layers for one vector (or scalar / discrete one-hot) entry."""

    def __init__(self,
                 input_spec: TensorSpec,
                 fc_layer_params: Sequence[int] = (64,),
                 activation: Callable[[torch.Tensor], torch.Tensor] = torch.tanh,
                 use_orthogonal_init: bool = True,
                 name: str = "MlpEncoder"):
        """
        Args:
            input_spec: ``TensorSpec`` of the entry (``[D]``, a scalar, or a
                bounded discrete scalar, which is one-hot encoded first).
            fc_layer_params: sizes of the fc layers; the last is the feature size.
            activation: after every fc layer.
            use_orthogonal_init: orthogonal init, gain sqrt(2), zero bias.
            name: name of the network.
        """
        super().__init__(input_spec, **_plain(
            name, input_spec, fc_layer_params=tuple(fc_layer_params), activation=activation,
            use_orthogonal_init=use_orthogonal_init))


@alf.configurable
class PassThroughEncoder(EncodingNetwork):
    """No weights: the entry as a float vector (vectors as they are, discrete scalars
    one-hot, other shapes flattened, ``uint8`` scaled by 1/255), deliberately: an
    image given this encoder is flattened without the warning."""

    def __init__(self, input_spec: TensorSpec, name: str = "PassThroughEncoder"):
        """
        Args:
            input_spec: ``TensorSpec`` of the entry.
            name: name of the network.
        """
        super().__init__(input_spec, **_plain(name, input_spec))


@alf.configurable
class EmbeddingEncoder(Network):
    """A learned embedding of a discrete scalar entry (gymnasium ``Discrete``):
    ``[*outer]`` integers in ``[minimum, maximum]`` -> ``[*outer, embedding_dim]``."""

    def __init__(self, input_spec: BoundedTensorSpec, embedding_dim: int = 8,
                 name: str = "EmbeddingEncoder"):
        """
        Args:
            input_spec: bounded integer scalar spec (``Discrete(n)``).
            embedding_dim: size of each embedding vector.
            name: name of the network.
        """
        if not (isinstance(input_spec, BoundedTensorSpec) and input_spec.ndim == 0
                and input_spec.is_discrete()):
            raise IncompatibleSpecError(
                f"{name} needs a bounded discrete scalar entry (gymnasium Discrete), got "
                f"{input_spec!r}. Use MlpEncoder for vectors and CnnEncoder for images.")
        super().__init__(input_spec, name=name)
        self._minimum = int(input_spec.minimum)
        self.embedding = nn.Embedding(input_spec.num_actions, int(embedding_dim))
        self._output_spec = TensorSpec((int(embedding_dim),))

    def forward(self, inputs: torch.Tensor, state=()) -> Tuple[torch.Tensor, tuple]:
        """``[*outer]`` integers -> ``([*outer, embedding_dim], state)``."""
        return self.embedding((inputs - self._minimum).long()), state
