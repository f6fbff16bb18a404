"""Encoders: observation nest -> feature vector (MLP / CNN), and an LSTM variant.

``EncodingNetwork`` turns any observation nest into one feature vector:

* vectors ``[B, D]`` pass through (no copy, no nest op: the common fast path);
* a scalar discrete observation with bounds (gymnasium ``Discrete``) is
  one-hot encoded, as Stable-Baselines3 does; other scalars become ``[B, 1]``;
* ``uint8`` inputs are scaled by ``1/255`` on the fly (``preprocess_images``),
  so replay buffers can keep compact pixels;
* with ``conv_layer_params``, the one ``[C, H, W]`` leaf goes through a conv
  stack; every other leaf is flattened;
* leaves are concatenated in :func:`alf.nest.flatten` order (sorted dict keys),
  then the fully connected layers run.
"""
from typing import Any, Callable, Optional, Sequence, Tuple, Union

import optree
import torch
import torch.nn.functional as F
from torch import nn

import alf
from alf import nest as alf_nest
from alf.errors import IncompatibleSpecError
from alf.networks.initializers import HIDDEN_GAIN, orthogonal_init_
from alf.networks.network import Network, dry_run_inputs, picklable_fn
from alf.tensor_specs import BoundedTensorSpec, TensorSpec

Nest = Any

# How one input leaf becomes a flat float vector (see ``_leaf_kind``).
_VEC, _CAST, _SCALAR, _ONEHOT, _FLATTEN, _IMAGE = range(6)


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


def _make_conv_layers(in_channels: int, conv_layer_params: Sequence[tuple]) -> nn.ModuleList:
    layers = nn.ModuleList()
    for params in conv_layer_params:
        if len(params) not in (3, 4):
            raise ValueError("conv_layer_params entries are (channels, kernel, stride[, padding]), "
                             f"got {params!r}")
        channels, kernel, stride = params[:3]
        padding = params[3] if len(params) == 4 else 0
        layers.append(nn.Conv2d(in_channels, channels, kernel, stride, padding))
        in_channels = channels
    return layers


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
                 name: str = "EncodingNetwork"):
        """
        Args:
            input_spec: nest of ``TensorSpec`` of one observation.
            conv_layer_params: ``(channels, kernel, stride[, padding])`` per conv
                layer, applied to the single ``[C, H, W]`` input leaf.
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
            name: name of the network.
        """
        super().__init__(input_spec, name=name)
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

        self._conv_layers = None
        if has_conv:
            images = [s for s, k in zip(specs, self._kinds) if k == _IMAGE]
            if len(images) != 1:
                raise IncompatibleSpecError(
                    f"{name}: conv_layer_params needs exactly one [C, H, W] image in the "
                    f"observation, found {len(images)} in {input_spec!r}. Drop "
                    "conv_layer_params for vector observations.")
            self._conv_layers = _make_conv_layers(images[0].shape[0], conv_layer_params)
            if use_orthogonal_init:
                for layer in self._conv_layers:
                    orthogonal_init_(layer, HIDDEN_GAIN)

        with torch.no_grad():
            size = self._encode_leaves(dry_run_inputs(list(specs))).shape[-1]

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
        outer = x.shape[:x.ndim - spec.ndim]
        if x.dtype == torch.uint8 and self._preprocess_images:
            x = x.to(torch.float32).mul_(1.0 / 255)
        else:
            x = x.to(torch.float32)
        if kind == _SCALAR:
            return x.unsqueeze(-1)
        if kind == _IMAGE:
            x = x.reshape((-1,) + tuple(spec.shape))
            for conv in self._conv_layers:
                x = self._activation(conv(x))
        return x.reshape(outer + (-1,))

    def _encode_leaves(self, leaves) -> torch.Tensor:
        if len(leaves) == 1:
            return self._encode_leaf(leaves[0], self._kinds[0], self._specs[0])
        return torch.cat([self._encode_leaf(x, k, s)
                          for x, k, s in zip(leaves, self._kinds, self._specs)], dim=-1)

    def forward(self, inputs: Nest, state: Nest = ()) -> Tuple[torch.Tensor, Nest]:
        """``inputs``: nest matching ``input_spec`` with outer dims ``[B]`` -> ``([B, output_size], state)``."""
        if self._fast:
            x = inputs
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
            x = F.linear(x, self._last_layer.weight, self._last_layer.bias)
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
                use_orthogonal_init=use_orthogonal_init, name=name + ".post")
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
