"""Q networks for discrete actions: observation -> one Q value per action.

:class:`QNetwork` serves DQN-style algorithms (``num_critics=1``) and discrete
SAC's twin critics (``num_critics=2``), optionally with a dueling head
(Wang et al. 2016): separate value and advantage streams combined as
``Q = V + A - mean_a(A)``.

Default initialisation is torch's (as SB3's and CleanRL's DQN);
``use_orthogonal_init=True`` switches the single-critic MLP/CNN to the
orthogonal init of the other alf networks.

Images: either ``conv_layer_params`` (a conv stack inside the network's
:class:`EncodingNetwork`) or ``encoding_network_ctor`` (any stateless feature
encoder, e.g. :class:`~alf.networks.image_encoders.NatureCnnEncoder`); Nature
DQN is ``QNetwork.encoding_network_ctor = @NatureCnnEncoder`` with
``QNetwork.fc_layer_params = ()``: 3 convs + fc 512 + a linear Q head.
"""
from typing import Any, Callable, Optional, Sequence, Tuple

import torch
from torch import nn

import alf
from alf.errors import IncompatibleSpecError
from alf.networks.encoding_networks import EncodingNetwork, check_feature_encoder
from alf.networks.ensemble_layers import EnsembleLinear, EnsembleMLP, ensemble_linear
from alf.networks.network import Network
from alf.tensor_specs import BoundedTensorSpec, TensorSpec
from alf.utils import precision

Nest = Any


def _check_discrete_action_spec(name: str, action_spec: Any) -> None:
    if not (isinstance(action_spec, BoundedTensorSpec) and action_spec.is_discrete()
            and action_spec.ndim == 0):
        raise IncompatibleSpecError(
            f"{name} needs a scalar discrete BoundedTensorSpec (gymnasium Discrete); got action "
            f"spec {action_spec!r}. For continuous (Box) actions use CriticNetwork (Q(s, a) with "
            "the action as input); MultiDiscrete/MultiBinary actions are not supported: wrap the "
            "env to a single Discrete action.")


@alf.configurable
class QNetwork(Network):
    """Observation ``[B, ...]`` -> (q ``[B, num_actions]``, ``()``), or
    ``[B, num_critics, num_actions]`` when ``num_critics > 1``.

    Column ``i`` of the output is the Q value of action ``action_spec.minimum + i``.
    Extra outer dims (``[T, B, ...]``) are kept.

    * ``num_critics == 1``: an :class:`EncodingNetwork` (convs, fc layers,
      linear output of size ``num_actions``), after the
      ``encoding_network_ctor`` encoder if one is given.
    * ``num_critics == K > 1``: each critic has its own conv stack or
      ``encoding_network_ctor`` encoder (if any); all fully connected layers
      of the ``K`` critics run as one :class:`EnsembleMLP`.
    * ``dueling``: the features (conv output or preprocessed observation)
      feed two streams with hidden layers ``fc_layer_params`` each, a value
      stream ending in 1 unit and an advantage stream ending in
      ``num_actions`` units; ``q = V + A - mean(A)``. Both streams of all
      critics run as one ensemble of ``2K`` MLPs.

    Args:
        input_spec: nest of ``TensorSpec`` of one observation.
        action_spec: scalar discrete ``BoundedTensorSpec`` (gymnasium Discrete);
            ``minimum`` may be non-zero.
        fc_layer_params: hidden fully connected layer sizes (per stream when dueling).
        activation: activation of the conv and hidden fc layers.
        conv_layer_params: ``(channels, kernel, stride[, padding])`` per conv
            layer, applied to the single ``[C, H, W]`` observation leaf.
        encoding_network_ctor: ``ctor(input_spec=)`` -> a stateless encoder with
            a ``[F]`` float output (e.g. ``NatureCnnEncoder``); one per critic.
            The fc layers, Q head and dueling streams run on its features.
            Excludes ``conv_layer_params``. The encoder keeps its own init.
        dueling: use separate value and advantage streams, ``q = V + A - mean(A)``.
        num_critics: number of independent Q networks ``K`` (2 for discrete SAC).
        use_orthogonal_init: orthogonal init (gain sqrt(2), zero bias) of the
            conv layers and, for a single non-dueling critic, of its fc layers
            (output gain 1); else torch's default init. Ensemble / dueling fc
            layers always use torch's default init.
        preprocess_images: scale ``uint8`` observations by 1/255.
        name: name of the network.
    """

    def __init__(self,
                 input_spec: Nest,
                 action_spec: BoundedTensorSpec,
                 fc_layer_params: Sequence[int] = (256, 256),
                 activation: Callable[[torch.Tensor], torch.Tensor] = torch.relu,
                 conv_layer_params: Optional[Sequence[tuple]] = None,
                 encoding_network_ctor: Optional[Callable[..., Network]] = None,
                 dueling: bool = False,
                 num_critics: int = 1,
                 use_orthogonal_init: bool = False,
                 preprocess_images: bool = True,
                 name: str = "QNetwork"):
        _check_discrete_action_spec(name, action_spec)
        if int(num_critics) < 1:
            raise ValueError(f"{name}: num_critics must be >= 1, got {num_critics}")
        if encoding_network_ctor is not None and conv_layer_params:
            raise ValueError(f"{name}: give either conv_layer_params or encoding_network_ctor, "
                             "not both (the encoder replaces the conv stack)")
        super().__init__(input_spec, name=name)
        self._action_spec = action_spec
        self._num_actions = action_spec.num_actions
        self._num_critics = k = int(num_critics)
        self._dueling = bool(dueling)
        n = self._num_actions

        def encoder(fc=(), last=None, suffix=".encoder", spec=input_spec):
            # the ".head" reads features, not the observation: no per-key encoders there
            per_key = {} if spec is input_spec else dict(input_preprocessors=None,
                                                         preprocessing_combiner=None)
            return EncodingNetwork(
                spec, conv_layer_params=conv_layer_params, fc_layer_params=fc,
                activation=activation, last_layer_size=last,
                use_orthogonal_init=use_orthogonal_init, preprocess_images=preprocess_images,
                name=name + suffix, **per_key)

        def features():
            enc = encoding_network_ctor(input_spec=input_spec)
            check_feature_encoder(name, enc)
            return enc

        self._q_encoder = None      # single plain critic: the whole network (or its head)
        self._encoders = None       # per-critic feature encoders (conv, ctor or preprocessing)
        self._mlp = None            # EnsembleMLP over the features
        self._value_head = self._adv_head = None
        if k == 1 and not self._dueling:
            if encoding_network_ctor is None:
                self._q_encoder = encoder(fc_layer_params, last=n)
            else:
                self._encoders = nn.ModuleList([features()])
                self._q_encoder = encoder(fc_layer_params, last=n, suffix=".head",
                                          spec=self._encoders[0].output_spec)
        else:
            if encoding_network_ctor is not None:
                self._encoders = nn.ModuleList(features() for _ in range(k))
            elif conv_layer_params:
                self._encoders = nn.ModuleList(encoder(suffix=f".encoder{i}") for i in range(k))
            else:  # preprocessing only, shared by all critics (it has no parameters)
                self._encoders = nn.ModuleList([encoder()])
            feat = self._encoders[0].output_spec.shape[0]
            if self._dueling:
                # members [0, K): value streams, [K, 2K): advantage streams
                self._mlp = EnsembleMLP(feat, fc_layer_params, 2 * k, activation=activation)
                hidden = self._mlp.output_size
                self._value_head = EnsembleLinear(hidden, 1, k)
                self._adv_head = EnsembleLinear(hidden, n, k)
            else:
                self._mlp = EnsembleMLP(feat, fc_layer_params, k, output_size=n,
                                        activation=activation)
        self._output_spec = TensorSpec((n,) if k == 1 else (k, n))

    @property
    def action_spec(self) -> BoundedTensorSpec:
        return self._action_spec

    @property
    def num_critics(self) -> int:
        return self._num_critics

    @property
    def dueling(self) -> bool:
        return self._dueling

    def _features(self, inputs: Nest) -> Tuple[torch.Tensor, tuple]:
        """Features ``[N, F]`` (shared) or ``[K, N, F]`` (per critic), and the outer dims."""
        feats = [enc(inputs)[0] for enc in self._encoders]
        outer = feats[0].shape[:-1]
        feats = [f.reshape(-1, f.shape[-1]) for f in feats]
        return (feats[0] if len(feats) == 1 else torch.stack(feats)), tuple(outer)

    def _reshape_out(self, y: torch.Tensor, outer: tuple) -> torch.Tensor:
        """``[K, N, X]`` -> ``[*outer, X]`` when ``K == 1``, else ``[*outer, K, X]``."""
        if self._num_critics == 1:
            return y[0].reshape(outer + y.shape[-1:])
        return y.transpose(0, 1).reshape(outer + y.shape[:1] + y.shape[-1:])

    def value_and_advantage(self, inputs: Nest) -> Tuple[torch.Tensor, torch.Tensor]:
        """Dueling streams before combination: (V ``[B(, K)]``, A ``[B(, K), num_actions]``)."""
        if not self._dueling:
            raise ValueError(f"{self.name}: value_and_advantage needs dueling=True")
        v, a, outer = self._dueling_streams(inputs)
        return self._reshape_out(v, outer).squeeze(-1), self._reshape_out(a, outer)

    def _dueling_streams(self, inputs: Nest):
        x, outer = self._features(inputs)
        k = self._num_critics
        if x.dim() == 3:  # per-critic features: the value and advantage streams both read them
            x = torch.cat([x, x], dim=0)
        h = self._mlp(x)                                  # [2K, N, H]
        # output layers in fp32 under a bf16 autocast (alf.utils.precision)
        v = precision.head_linear(h[:k], self._value_head.weight, self._value_head.bias,
                                  ensemble_linear)          # [K, N, 1]
        a = precision.head_linear(h[k:], self._adv_head.weight, self._adv_head.bias,
                                  ensemble_linear)          # [K, N, num_actions]
        return v, a, outer

    def forward(self, inputs: Nest, state: Nest = ()) -> Tuple[torch.Tensor, Nest]:
        """``inputs`` ``[B, ...]`` -> (q ``[B, num_actions]`` or ``[B, K, num_actions]``, ``state``)."""
        if self._q_encoder is not None:
            if self._encoders is not None:  # encoding_network_ctor's features
                inputs = self._encoders[0](inputs)[0]
            # the encoder is this network's own part: its forward is called directly
            # (nn.Module.__call__ costs ~5-25 us, 5% of a small DQN update; hooks belong
            # on the QNetwork)
            return self._q_encoder.forward(inputs)[0], state
        if self._dueling:
            v, a, outer = self._dueling_streams(inputs)
            q = v + (a - a.mean(dim=-1, keepdim=True))    # [K, N, num_actions]
        else:
            x, outer = self._features(inputs)
            q = self._mlp(x)                              # [K, N, num_actions]
        return self._reshape_out(q, outer), state
