"""Networks: encoders, actor-distribution, value, Q, critic and actor networks (MLP, CNN, LSTM),
the Atari image encoders (``NatureCnnEncoder``, ``ImpalaCnnEncoder``), and the per-key
observation encoders and combiners of ``EncodingNetwork.input_preprocessors``.

Importing this package registers every network with gin, plus the torch
activations gin files may name, e.g. ``ActorDistributionNetwork.activation=@torch.relu``.
"""
import gin
import torch
import torch.nn.functional as F

from alf.networks.network import Network  # noqa: F401
from alf.networks.encoding_networks import EncodingNetwork, LSTMEncodingNetwork  # noqa: F401
from alf.networks.image_encoders import ImpalaCnnEncoder, NatureCnnEncoder  # noqa: F401
from alf.networks.combiners import ConcatCombiner, MeanCombiner, SumCombiner  # noqa: F401
from alf.networks.preprocessors import (  # noqa: F401
    CnnEncoder, EmbeddingEncoder, MlpEncoder, PassThroughEncoder)
from alf.networks.projection_networks import (  # noqa: F401
    CategoricalProjectionNetwork, NormalProjectionNetwork, FastCategorical, StableTanhTransform)
from alf.networks.actor_distribution_networks import (  # noqa: F401
    ActorDistributionNetwork, ActorDistributionRNNNetwork)
from alf.networks.value_networks import ValueNetwork, ValueRNNNetwork  # noqa: F401
from alf.networks.ensemble_layers import EnsembleLinear, EnsembleMLP  # noqa: F401
from alf.networks.q_networks import QNetwork  # noqa: F401
from alf.networks.critic_networks import CriticNetwork  # noqa: F401
from alf.networks.actor_networks import ActorNetwork  # noqa: F401

_ACTIVATIONS = {
    "torch.tanh": torch.tanh,
    "torch.relu": torch.relu,
    "torch.sigmoid": torch.sigmoid,
    "torch.nn.functional.elu": F.elu,
    "torch.nn.functional.leaky_relu": F.leaky_relu,
    "torch.nn.functional.gelu": F.gelu,
    "torch.nn.functional.silu": F.silu,
    "torch.nn.functional.softplus": F.softplus,
}


def _register_activations() -> None:
    """Register ``_ACTIVATIONS`` with gin once (another module may have done it)."""
    for name, fn in _ACTIVATIONS.items():
        try:
            registered = gin.config._REGISTRY.get_match(name)  # pylint: disable=protected-access
        except Exception:  # noqa: BLE001 - ambiguous partial match: treat as not registered
            registered = None
        if registered is None or registered.selector != name:
            gin.external_configurable(fn, name)


_register_activations()
