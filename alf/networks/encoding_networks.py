"""Encoders: observation nest -> feature vector (MLP / CNN), and an LSTM variant.

``EncodingNetwork`` turns any observation nest into one feature vector:

* vectors ``[B, D]`` pass through (no copy, no nest op: the common fast path);
* a scalar discrete observation with bounds (gymnasium ``Discrete``) is
  one-hot encoded, as Stable-Baselines3 does; other scalars become ``[B, 1]``;
* ``uint8`` inputs are scaled by ``1/255`` on the fly (``preprocess_images``),
  so replay buffers can keep compact pixels;
* with ``conv_layer_params``, a ``[C, H, W]`` leaf goes through a conv
  stack (:func:`preprocess_image`, shared with the encoders in
  :mod:`alf.networks.image_encoders`); with several images in a dict
  observation, each image key gets its own conv stack (own weights); every
  other leaf is flattened. Without conv settings an image is flattened too,
  and one warning line says so (once per entry and shape);
* leaves are concatenated in :func:`alf.nest.flatten` order (sorted dict keys),
  then the fully connected layers run.

Per-key encoders (as ALF's ``EncodingNetwork``): ``input_preprocessors`` maps
keys of a dict observation to networks (any stateless ``[F]`` feature network,
e.g. :class:`alf.networks.CnnEncoder` per camera, :class:`alf.networks.MlpEncoder`
or :class:`alf.networks.EmbeddingEncoder` per vector,
:class:`alf.networks.PassThroughEncoder`); keys left out get the default
above (images through their own conv stack when ``conv_layer_params`` is set,
the rest flattened). ``preprocessing_combiner`` (:mod:`alf.networks.combiners`,
default concatenation) joins the per-key features before the fc layers. In
gin, for every actor / value / critic / Q network at once::

    EncodingNetwork.input_preprocessors = {'left': @CnnEncoder, 'right': @CnnEncoder,
                                           'proprio': @MlpEncoder}
    EncodingNetwork.preprocessing_combiner = @ConcatCombiner()

Each network builds its own encoders from these ctors (no weights shared).

Conv memory format (``conv_memory_format="auto"``): on CPU, while autograd
records (training), the conv input is laid out ``channels_last`` (NHWC), which
makes oneDNN's conv backward faster (Nature CNN PPO update at batch 256: ~1.5x),
while no-grad forwards (acting) are ~7% faster in torch's default NCHW layout;
see ``bench/atari_network_bench.py`` and :mod:`alf.networks.image_encoders` for
the figures. Only the layout changes: outputs are equal up to float rounding.
"""
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple, Union

import optree
import torch
import torch.nn.functional as F
from torch import nn

import alf
from alf import nest as alf_nest
from alf.errors import IncompatibleSpecError
from alf.networks.initializers import HIDDEN_GAIN, orthogonal_init_
from alf.networks.combiners import Combiner, ConcatCombiner
from alf.networks.network import Network, dry_run_inputs, picklable_fn
from alf.networks.per_key_encoding import (build_preprocessors, check_preprocessor_keys,
                                           note_flattened_image)
from alf.tensor_specs import BoundedTensorSpec, TensorSpec
from alf.utils import precision

Nest = Any

# >0 while an EncodingNetwork builds its default per-key encoders (its own note covers them).
_QUIET = [0]

# How one input leaf becomes a flat float vector (see ``_leaf_kind``).
_VEC, _CAST, _SCALAR, _ONEHOT, _FLATTEN, _IMAGE = range(6)

#: Values of ``conv_memory_format``: ``"auto"`` lets each network pick the layout
#: measured fastest for it (:func:`auto_channels_last`).
CONV_MEMORY_FORMATS = ("auto", "contiguous", "channels_last")


def check_conv_memory_format(name: str, conv_memory_format: str) -> str:
    if conv_memory_format not in CONV_MEMORY_FORMATS:
        raise ValueError(f"{name}: conv_memory_format must be one of {CONV_MEMORY_FORMATS}, "
                         f"got {conv_memory_format!r}")
    return conv_memory_format


def auto_channels_last(memory_format: str, x: torch.Tensor, grad_only: bool) -> bool:
    """Whether to feed the convs ``channels_last`` for input ``x``.

    ``"auto"`` means channels_last on CPU, and with ``grad_only`` only while
    autograd records (the layout speeds up the conv backward but slows small
    no-grad batches of some networks); on other devices torch's default layout.
    """
    if memory_format == "auto":
        return x.device.type == "cpu" and (torch.is_grad_enabled() or not grad_only)
    return memory_format == "channels_last"


def preprocess_image(x: torch.Tensor, spec: TensorSpec, scale_uint8: bool = True,
                     channels_last: bool = False) -> Tuple[torch.Tensor, Tuple[int, ...]]:
    """Image ``[*outer, C, H, W]`` (any dtype) -> float32 conv input ``[N, C, H, W]``
    (``N = prod(outer)``) and ``outer``.

    ``uint8`` images are scaled by ``1/255`` when ``scale_uint8``; other dtypes
    are only cast. ``channels_last`` lays the result out NHWC (same values).
    ``x`` itself is never modified.
    """
    outer = tuple(x.shape[:x.ndim - spec.ndim])
    x = x.reshape((-1,) + tuple(spec.shape))
    if channels_last:
        # Reorder while the pixels are still 1 byte each, then cast: ~2.5x faster than
        # x.to(float32, memory_format=channels_last) on [256, 4, 84, 84] uint8.
        x = x.contiguous(memory_format=torch.channels_last)
    if x.dtype == torch.uint8 and scale_uint8:
        x = x.to(torch.float32).mul_(1.0 / 255)  # .to copies, so mul_ leaves the input alone
    else:
        x = x.to(torch.float32)
    return x, outer


def _leaf_kind(spec: TensorSpec, has_conv: bool) -> int:
    if has_conv and spec.ndim == 3:
        return _IMAGE
    if spec.ndim == 0:
        if isinstance(spec, BoundedTensorSpec) and spec.is_discrete():
            return _ONEHOT
        return _SCALAR
    if spec.ndim == 1:
        return _VEC if spec.dtype == torch.float32 else _CAST
    return _FLATTEN


def _make_conv_layers(name: str, image_spec: TensorSpec,
                      conv_layer_params: Sequence[tuple]) -> nn.ModuleList:
    """``nn.Conv2d`` per ``(channels, kernel, stride[, padding])``; checks that the
    ``[C, H, W]`` image is large enough for the whole stack."""
    in_channels, h, w = (int(d) for d in image_spec.shape)
    layers = nn.ModuleList()
    for i, params in enumerate(conv_layer_params):
        if len(params) not in (3, 4):
            raise ValueError("conv_layer_params entries are (channels, kernel, stride[, padding]), "
                             f"got {params!r}")
        channels, kernel, stride = params[:3]
        padding = params[3] if len(params) == 4 else 0
        h, w = (h + 2 * padding - kernel) // stride + 1, (w + 2 * padding - kernel) // stride + 1
        if h < 1 or w < 1:
            raise IncompatibleSpecError(
                f"{name}: conv layer {i} {tuple(params)} leaves no pixels of the image "
                f"{image_spec!r}. Use a larger image or smaller kernels / strides in "
                "conv_layer_params.")
        layers.append(nn.Conv2d(in_channels, channels, kernel, stride, padding))
        in_channels = channels
    return layers


def check_feature_encoder(owner: str, encoder: Network) -> TensorSpec:
    """The ``[F]`` float output spec of ``encoder``, a stateless feature network
    built by ``owner``'s ``encoding_network_ctor``; else :class:`IncompatibleSpecError`."""
    if not isinstance(encoder, Network):
        raise TypeError(f"{owner}: encoding_network_ctor must build an alf Network, got "
                        f"{type(encoder).__name__}")
    if not alf_nest.is_empty(encoder.state_spec):
        raise IncompatibleSpecError(
            f"{owner}: encoding_network_ctor must build a stateless encoder; {encoder.name} has "
            f"state spec {encoder.state_spec!r}. Keep the shared encoder feed-forward and put "
            "recurrence in the heads (e.g. ActorDistributionRNNNetwork / ValueRNNNetwork).")
    spec = encoder.output_spec
    if not (isinstance(spec, TensorSpec) and spec.ndim == 1 and spec.dtype.is_floating_point):
        raise IncompatibleSpecError(
            f"{owner}: encoding_network_ctor must build a network that outputs a [F] float "
            f"feature vector; {encoder.name} outputs {spec!r}.")
    return spec


@alf.configurable
class EncodingNetwork(Network):
    """Observation nest ``[B, ...]`` -> features ``[B, output_size]`` (stateless).

    Stateless inputs may carry any number of outer dims (e.g. ``[T, B, ...]``);
    they are preserved in the output.
    """

    def __init__(self,
                 input_spec: Nest,
                 conv_layer_params: Optional[Sequence[tuple]] = None,
                 fc_layer_params: Sequence[int] = (),
                 activation: Callable[[torch.Tensor], torch.Tensor] = torch.tanh,
                 last_layer_size: Optional[int] = None,
                 last_activation: Optional[Callable[[torch.Tensor], torch.Tensor]] = None,
                 last_kernel_initializer_gain: Optional[float] = None,
                 use_orthogonal_init: bool = True,
                 preprocess_images: bool = True,
                 conv_memory_format: str = "auto",
                 input_preprocessors: Optional[Dict[str, Any]] = None,
                 preprocessing_combiner: Optional[Combiner] = None,
                 name: str = "EncodingNetwork"):
        """
        Args:
            input_spec: nest of ``TensorSpec`` of one observation.
            conv_layer_params: ``(channels, kernel, stride[, padding])`` per conv
                layer, applied to each ``[C, H, W]`` input leaf (a conv stack of
                its own per image key of a dict observation).
            fc_layer_params: sizes of the hidden fully connected layers.
            activation: applied after every conv and hidden fc layer.
            last_layer_size: size of an optional output layer (no activation
                unless ``last_activation``).
            last_activation: activation after the output layer.
            last_kernel_initializer_gain: orthogonal gain of the output layer
                (default 1.0: a linear read-out).
            use_orthogonal_init: orthogonal init (gain sqrt(2), zero bias) for
                hidden layers, as SB3/CleanRL; else torch's default init.
            preprocess_images: scale ``uint8`` inputs by 1/255.
            conv_memory_format: layout of the conv input, one of
                :data:`CONV_MEMORY_FORMATS`; ``"auto"`` (channels_last on CPU
                while autograd records, else contiguous) is the fastest measured
                for the Nature CNN.
            input_preprocessors: dict ``{observation key: encoder}`` for a dict
                observation: each encoder is an alf ``Network`` or a
                ``ctor(input_spec=)`` of one (gin: ``@CnnEncoder``), stateless,
                mapping that entry to a ``[F_key]`` float feature. Keys left out
                (or ``None``) get the default: their images through their own
                conv stack of ``conv_layer_params`` (flattened, with a one-line
                warning, when unset), vectors passed through, discrete scalars
                one-hot.
            preprocessing_combiner: joins the per-key features ``[[*outer, F_k]]``
                (sorted key order) into ``[*outer, F]`` before the fc layers:
                ``ConcatCombiner()`` (default), ``SumCombiner()`` or
                ``MeanCombiner()`` (equal ``F_k``).
            name: name of the network.
        """
        super().__init__(input_spec, name=name)
        self._conv_memory_format = check_conv_memory_format(name, conv_memory_format)
        specs = alf_nest.flatten(input_spec)
        if not specs or not all(isinstance(s, TensorSpec) for s in specs):
            raise IncompatibleSpecError(
                f"{name}: input_spec must be a non-empty nest of TensorSpec, got {input_spec!r}")
        has_conv = bool(conv_layer_params)
        self._kinds = tuple(_leaf_kind(s, has_conv) for s in specs)
        self._specs = tuple(specs)
        self._single = isinstance(input_spec, TensorSpec)
        self._fast = self._single and self._kinds[0] == _VEC
        self._preprocess_images = preprocess_images
        self._activation = picklable_fn(activation)
        self._last_activation = picklable_fn(last_activation)
        if input_preprocessors is not None:
            check_preprocessor_keys(name, input_spec, input_preprocessors)
        self._note_flattened_images(input_spec, has_conv, input_preprocessors or {})

        self._conv_layers = self._keys = self.preprocessors = self._combiner = None
        several_images = sum(k == _IMAGE for k in self._kinds) > 1
        if (input_preprocessors is not None or preprocessing_combiner is not None
                or (several_images and isinstance(input_spec, Mapping))):
            defaults = dict(conv_layer_params=conv_layer_params, activation=activation,
                            use_orthogonal_init=use_orthogonal_init,
                            preprocess_images=preprocess_images,
                            conv_memory_format=conv_memory_format)
            size = self._init_per_key(input_spec, input_preprocessors, preprocessing_combiner,
                                      defaults)
        else:
            size = self._init_conv(input_spec, conv_layer_params, use_orthogonal_init)
        self._init_fc(size, fc_layer_params, last_layer_size, last_kernel_initializer_gain,
                      use_orthogonal_init)

    def _note_flattened_images(self, input_spec: Nest, has_conv: bool,
                               input_preprocessors: Mapping) -> None:
        """One warning line per ``[C, H, W]`` leaf that no conv stack or chosen encoder takes."""
        if has_conv or _QUIET[0]:
            return
        for path, spec in alf_nest.flatten_with_paths(input_spec):
            if spec.ndim == 3 and input_preprocessors.get(path.split(".")[0]) is None:
                key = path.split(".")[0]
                hint = ("give it a CNN with the network's conv_layer_params (e.g. "
                        "ActorDistributionNetwork.conv_layer_params) or encoding_network_ctor "
                        "= @CnnEncoder" if not key else
                        "give it a CNN with EncodingNetwork.conv_layer_params (one conv stack "
                        f"per image) or EncodingNetwork.input_preprocessors = {{{key!r}: "
                        "@CnnEncoder}")
                note_flattened_image(self.name, path, spec, hint)

    def _init_per_key(self, input_spec: Mapping, input_preprocessors: Optional[Mapping],
                      combiner: Optional[Combiner], defaults: dict) -> int:
        """Build one network per top-level key and the combiner; return the feature size."""
        has_image = lambda spec: any(s.ndim == 3 for s in alf_nest.flatten(spec))

        def default(key: str, spec: Nest) -> Network:
            conv = defaults["conv_layer_params"] if has_image(spec) else None
            _QUIET[0] += 1  # the parent has already noted flattened images
            try:
                return EncodingNetwork(spec, **dict(defaults, conv_layer_params=conv),
                                       fc_layer_params=(), last_layer_size=None,
                                       last_activation=None, last_kernel_initializer_gain=None,
                                       input_preprocessors=None, preprocessing_combiner=None,
                                       name=f"{self.name}.{key}")
            finally:
                _QUIET[0] -= 1

        self._keys, self.preprocessors = build_preprocessors(
            self.name, input_spec, input_preprocessors, default)
        self._combiner = ConcatCombiner() if combiner is None else combiner
        sizes = [self.preprocessors[k].output_spec.shape[0] for k in self._keys]
        if isinstance(self._combiner, Combiner):
            return self._combiner.output_size(self.name, self._keys, sizes)
        with torch.no_grad():
            return self._encode_per_key(dry_run_inputs(input_spec)).shape[-1]

    def _init_conv(self, input_spec: Nest, conv_layer_params: Optional[Sequence[tuple]],
                   use_orthogonal_init: bool) -> int:
        """Today's path: one conv stack for the one image leaf (if any); return the size."""
        specs, name = self._specs, self.name
        if conv_layer_params:
            images = [s for s, k in zip(specs, self._kinds) if k == _IMAGE]
            if not images:
                raise IncompatibleSpecError(
                    f"{name}: conv_layer_params needs a [C, H, W] image in the observation, "
                    f"found none in {input_spec!r}. Drop conv_layer_params for vector "
                    "observations.")
            if len(images) > 1:  # a dict observation's images go per key (_init_per_key)
                raise IncompatibleSpecError(
                    f"{name}: {len(images)} images in the observation {input_spec!r}, which is "
                    "not a dict: give the observation as a dict of named entries (each image "
                    "key then gets its own conv stack or input_preprocessors entry).")
            self._conv_layers = _make_conv_layers(name, images[0], conv_layer_params)
            if use_orthogonal_init:
                for layer in self._conv_layers:
                    orthogonal_init_(layer, HIDDEN_GAIN)

        with torch.no_grad():
            return self._encode_leaves(dry_run_inputs(list(specs))).shape[-1]

    def _init_fc(self, size: int, fc_layer_params: Sequence[int], last_layer_size: Optional[int],
                 last_kernel_initializer_gain: Optional[float], use_orthogonal_init: bool) -> None:
        self._fc_layers = nn.ModuleList()
        for n in fc_layer_params or ():
            layer = nn.Linear(size, n)
            if use_orthogonal_init:
                orthogonal_init_(layer, HIDDEN_GAIN)
            self._fc_layers.append(layer)
            size = n
        self._last_layer = None
        if last_layer_size is not None:
            self._last_layer = nn.Linear(size, last_layer_size)
            gain = 1.0 if last_kernel_initializer_gain is None else last_kernel_initializer_gain
            if use_orthogonal_init or last_kernel_initializer_gain is not None:
                orthogonal_init_(self._last_layer, gain)
            size = last_layer_size
        self._output_size = size
        self._output_spec = TensorSpec((size,))

    @property
    def output_size(self) -> int:
        """Size of the feature vector."""
        return self._output_size

    def _encode_leaf(self, x: torch.Tensor, kind: int, spec: TensorSpec) -> torch.Tensor:
        if kind == _VEC:
            return x
        if kind == _ONEHOT:
            return F.one_hot((x - int(spec.minimum)).long(), spec.num_actions).to(torch.float32)
        if kind == _IMAGE:
            channels_last = auto_channels_last(self._conv_memory_format, x, grad_only=True)
            x, outer = preprocess_image(x, spec, self._preprocess_images, channels_last)
            for conv in self._conv_layers:
                x = self._activation(conv(x))
            return x.reshape(outer + (-1,))
        outer = x.shape[:x.ndim - spec.ndim]
        if x.dtype == torch.uint8 and self._preprocess_images:
            x = x.to(torch.float32).mul_(1.0 / 255)
        else:
            x = x.to(torch.float32)
        if kind == _SCALAR:
            return x.unsqueeze(-1)
        return x.reshape(outer + (-1,))

    def _encode_leaves(self, leaves) -> torch.Tensor:
        if len(leaves) == 1:
            return self._encode_leaf(leaves[0], self._kinds[0], self._specs[0])
        return torch.cat([self._encode_leaf(x, k, s)
                          for x, k, s in zip(leaves, self._kinds, self._specs)], dim=-1)

    def _encode_per_key(self, inputs: Mapping) -> torch.Tensor:
        return self._combiner([self.preprocessors[k](inputs[k])[0] for k in self._keys])

    def forward(self, inputs: Nest, state: Nest = ()) -> Tuple[torch.Tensor, Nest]:
        """``inputs``: nest matching ``input_spec`` with outer dims ``[B]`` -> ``([B, output_size], state)``."""
        if self._fast:
            x = inputs
        elif self._keys is not None:
            x = self._encode_per_key(inputs)
        elif self._single:
            x = self._encode_leaf(inputs, self._kinds[0], self._specs[0])
        else:
            x = self._encode_leaves(optree.tree_leaves(inputs, none_is_leaf=False))
        act = self._activation
        # F.linear on the layer's tensors skips nn.Module.__call__ (~5 us per layer),
        # which is a large share of a small policy's per-step cost.
        for layer in self._fc_layers:
            x = act(F.linear(x, layer.weight, layer.bias))
        if self._last_layer is not None:
            x = precision.head_linear(x, self._last_layer.weight, self._last_layer.bias)
            if self._last_activation is not None:
                x = self._last_activation(x)
        return x, state


def _lstm_state_spec(hidden_sizes: Tuple[int, ...]) -> tuple:
    return tuple((TensorSpec((h,)), TensorSpec((h,))) for h in hidden_sizes)


@alf.configurable
class LSTMEncodingNetwork(Network):
    """Encoder -> stacked ``nn.LSTMCell`` -> optional fc layers, one time step per call.

    ``state`` is a tuple with one ``(h, c)`` pair per LSTM layer, each
    ``[B, hidden_size]`` (spec ``TensorSpec((hidden_size,))``). The network
    never resets its state: the caller zeroes the state rows whose
    ``step_type == StepType.FIRST`` before calling (the unroller does this).
    """

    def __init__(self,
                 input_spec: Nest,
                 hidden_size: Union[int, Sequence[int]] = 64,
                 pre_fc_layer_params: Sequence[int] = (),
                 post_fc_layer_params: Sequence[int] = (),
                 activation: Callable[[torch.Tensor], torch.Tensor] = torch.tanh,
                 conv_layer_params: Optional[Sequence[tuple]] = None,
                 use_orthogonal_init: bool = True,
                 preprocess_images: bool = True,
                 name: str = "LSTMEncodingNetwork"):
        """
        Args:
            input_spec: nest of ``TensorSpec`` of one observation.
            hidden_size: LSTM size, or a tuple of sizes for stacked layers.
            pre_fc_layer_params: fc layers before the LSTM (after the optional convs).
            post_fc_layer_params: fc layers after the LSTM.
            activation: activation of the conv and fc layers.
            conv_layer_params: ``(channels, kernel, stride[, padding])`` per conv layer.
            use_orthogonal_init: orthogonal init (gain sqrt(2) for fc/conv, 1.0
                for LSTM weights, zero biases) as CleanRL's LSTM PPO.
            preprocess_images: scale ``uint8`` inputs by 1/255.
            name: name of the network.
        """
        hidden_sizes = (int(hidden_size),) if isinstance(hidden_size, int) else tuple(hidden_size)
        if not hidden_sizes:
            raise ValueError(f"{name}: hidden_size must name at least one LSTM layer")
        super().__init__(input_spec, _lstm_state_spec(hidden_sizes), name=name)
        self._pre = EncodingNetwork(
            input_spec, conv_layer_params=conv_layer_params, fc_layer_params=pre_fc_layer_params,
            activation=activation, use_orthogonal_init=use_orthogonal_init,
            preprocess_images=preprocess_images, name=name + ".pre")
        size = self._pre.output_size
        self._cells = nn.ModuleList()
        for h in hidden_sizes:
            cell = nn.LSTMCell(size, h)
            if use_orthogonal_init:
                orthogonal_init_(cell, 1.0)
            self._cells.append(cell)
            size = h
        self._post = None
        if post_fc_layer_params:
            self._post = EncodingNetwork(
                TensorSpec((size,)), fc_layer_params=post_fc_layer_params, activation=activation,
                use_orthogonal_init=use_orthogonal_init, input_preprocessors=None,
                preprocessing_combiner=None, name=name + ".post")
            size = self._post.output_size
        self._output_size = size
        self._output_spec = TensorSpec((size,))

    @property
    def output_size(self) -> int:
        return self._output_size

    def forward(self, inputs: Nest, state: tuple = ()) -> Tuple[torch.Tensor, tuple]:
        """One step: ``inputs`` ``[B, ...]``, ``state`` ``((h [B, H], c [B, H]), ...)``
        -> ``(features [B, output_size], new_state)``."""
        if len(state) != len(self._cells):
            raise ValueError(f"{self.name}: expected a state with {len(self._cells)} (h, c) "
                             f"pair(s) (see get_initial_state), got {len(state)}")
        x, _ = self._pre(inputs)
        new_state = []
        for cell, (h, c) in zip(self._cells, state):
            h, c = cell(x, (h, c))
            new_state.append((h, c))
            x = h
        if self._post is not None:
            x, _ = self._post(x)
        return x, tuple(new_state)
