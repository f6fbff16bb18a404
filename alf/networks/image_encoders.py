"""Image encoders for Atari-like pixel observations: Nature CNN and IMPALA CNN.

Both map an image ``[*outer, C, H, W]`` (``C`` = stacked frames, e.g. ``uint8``
``4 x 84 x 84``; any number of outer dims such as ``[B]`` or ``[T, B]``) to
features ``[*outer, F]``. ``uint8`` pixels are scaled by ``1/255`` on the fly
(:func:`alf.networks.encoding_networks.preprocess_image`), so replay buffers keep
compact bytes. Weights are orthogonal with gain ``sqrt(2)`` and zero biases, as
in Stable-Baselines3 / CleanRL. Share one encoder between the policy and value
heads with ``PPOAlgorithm.encoding_network_ctor = @NatureCnnEncoder`` (see
:class:`alf.algorithms.actor_critic_algorithm.ActorCriticAlgorithm`).

CPU performance (``bench/atari_network_bench.py``; 1 thread; AMD EPYC Zen 4,
AVX-512; torch 2.13 CPU). PPO update = ``train_on_batch`` on ``[256, 4, 84, 84]``
uint8 (shared Nature CNN + linear policy (4 actions) / value heads, PPO loss,
backward, Adam); rollout = ``rollout_step`` on ``[8, 4, 84, 84]`` without grad.
Medians of process CPU time in ms, two runs (the machine was shared with two
training jobs, so wall-clock times were 1-1.5x these)::

    variant                                 update [256]     rollout [8]
    contiguous NCHW (torch default)          252 / 270       3.06 / 3.06
    channels_last conv input                 179 / 175       3.32 / 3.03
    channels_last + 1/255 folded in conv1    169 / 178       3.10 / 3.19
    auto (default: channels_last iff grad)   166 / 177       3.08 / 3.36
    contiguous, torch.backends.mkldnn off    369 / 387       5.25 / 5.26
    SB3 ActorCriticCnnPolicy (peer)          261 / 283       3.83 / 4.00

    rollout_step alone, 8 interleaved rounds:  B=1    B=8    B=32
    contiguous                                 0.94   2.35   7.73
    channels_last                              1.02   2.53   8.35

    ImpalaCnnEncoder (--encoder impala)     update [256]     rollout [8]
    contiguous                                 2334             29.6
    channels_last / auto                    1402 / 1409     13.8 / 14.0

Conclusions, applied by default (``conv_memory_format="auto"``):

* ``channels_last`` (NHWC) conv input makes oneDNN's conv backward much faster:
  the Nature CNN update is ~1.5x faster, but its no-grad forward is ~7% slower,
  so for it (:class:`EncodingNetwork` convs) ``"auto"`` is channels_last on CPU
  only while autograd records. The IMPALA CNN is 1.7-2x faster with
  channels_last with or without grad, so ``"auto"`` is always channels_last on
  CPU for it. On CUDA ``"auto"`` keeps torch's default layout. Reordering the
  ``uint8`` bytes before the float cast costs ~5 ms per 256 frames (vs ~13 ms
  for ``x.to(float32, memory_format=channels_last)``).
* Folding ``1/255`` into conv1's weights (mathematically identical) saves one
  pass over the float image, ~1 ms of a ~170 ms update: within noise, so the
  scale stays a separate in-place multiply.
* ``torch.backends.mkldnn.enabled`` must stay ``True`` (torch's default): without
  oneDNN the update is ~2.2x slower. alf never changes it.
"""
from typing import Any, Callable, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

import alf
from alf.errors import IncompatibleSpecError
from alf.networks.encoding_networks import (EncodingNetwork, auto_channels_last,
                                            check_conv_memory_format, preprocess_image)
from alf.networks.initializers import HIDDEN_GAIN, orthogonal_init_
from alf.networks.network import Network, dry_run_inputs
from alf.tensor_specs import TensorSpec

Nest = Any

#: Nature DQN convs (Mnih et al. 2015): ``(channels, kernel, stride)``.
NATURE_CONV_LAYERS = ((32, 8, 4), (64, 4, 2), (64, 3, 1))


def check_image_spec(name: str, input_spec: Nest) -> TensorSpec:
    """Return ``input_spec`` if it is one ``[C, H, W]`` TensorSpec, else raise
    :class:`IncompatibleSpecError` naming the spec and the fix."""
    if isinstance(input_spec, TensorSpec) and input_spec.ndim == 3:
        c, h, w = input_spec.shape
        if w <= 4 < min(c, h):  # e.g. (84, 84, 4): an [H, W, C] image
            raise IncompatibleSpecError(
                f"{name} needs a channels-first [C, H, W] image, got {input_spec!r}, which looks "
                "like [H, W, C]. Transpose the observation to [C, H, W] (alf's Atari environments "
                "are already channel-first).")
        return input_spec
    raise IncompatibleSpecError(
        f"{name} needs a single [C, H, W] image observation (e.g. uint8 (4, 84, 84) stacked "
        f"Atari frames), got {input_spec!r}. For vector observations drop the image encoder "
        "(e.g. unset encoding_network_ctor) and use the MLP of EncodingNetwork / "
        "ActorDistributionNetwork / ValueNetwork; for a dict observation, give each image its "
        "own encoder: EncodingNetwork.input_preprocessors = {'camera': @CnnEncoder} (or "
        "EncodingNetwork.conv_layer_params: one conv stack per image key), the other entries "
        "are concatenated.")


@alf.configurable
class NatureCnnEncoder(EncodingNetwork):
    """Nature DQN CNN (Mnih et al. 2015): image ``[*outer, C, H, W]`` -> ``[*outer, 512]``.

    conv 32 8x8/4 -> ReLU -> conv 64 4x4/2 -> ReLU -> conv 64 3x3/1 -> ReLU ->
    flatten -> fc 512 -> ReLU. On ``4 x 84 x 84`` the flattened conv output is
    ``64 x 7 x 7 = 3136`` and the network has 1,684,128 parameters. It is an
    :class:`EncodingNetwork` with these defaults (one conv implementation).
    """

    def __init__(self,
                 input_spec: TensorSpec,
                 conv_layer_params: Sequence[tuple] = NATURE_CONV_LAYERS,
                 fc_layer_params: Sequence[int] = (512,),
                 activation: Callable[[torch.Tensor], torch.Tensor] = torch.relu,
                 use_orthogonal_init: bool = True,
                 preprocess_images: bool = True,
                 conv_memory_format: str = "auto",
                 name: str = "NatureCnnEncoder"):
        """
        Args:
            input_spec: ``TensorSpec`` of one ``[C, H, W]`` image (``uint8`` or float).
            conv_layer_params: ``(channels, kernel, stride[, padding])`` per conv layer.
            fc_layer_params: fc layer sizes after the flatten (``()``: output the
                flattened conv features).
            activation: after every conv and fc layer.
            use_orthogonal_init: orthogonal init, gain sqrt(2), zero bias (SB3/CleanRL).
            preprocess_images: scale ``uint8`` pixels by 1/255.
            conv_memory_format: ``"auto"``, ``"contiguous"`` or ``"channels_last"``
                (see the module docstring).
            name: name of the network.
        """
        check_image_spec(name, input_spec)
        # every argument is passed so that no EncodingNetwork gin binding leaks in
        super().__init__(input_spec, conv_layer_params=tuple(conv_layer_params),
                         fc_layer_params=tuple(fc_layer_params), activation=activation,
                         last_layer_size=None, last_activation=None,
                         last_kernel_initializer_gain=None,
                         use_orthogonal_init=use_orthogonal_init,
                         preprocess_images=preprocess_images,
                         conv_memory_format=conv_memory_format, name=name)


class ImpalaResidualBlock(nn.Module):
    """``x + conv(relu(conv(relu(x))))`` with 3x3 convs: ``[N, C, H, W]`` -> ``[N, C, H, W]``."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv0 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv0(torch.relu(x))
        return x + self.conv1(torch.relu(y))


class ImpalaStage(nn.Module):
    """conv 3x3 -> max-pool 3x3/2 (padding 1) -> residual blocks:
    ``[N, C_in, H, W]`` -> ``[N, channels, ceil(H / 2), ceil(W / 2)]``."""

    def __init__(self, in_channels: int, channels: int, num_blocks: int = 2):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, channels, 3, padding=1)
        self.blocks = nn.ModuleList(ImpalaResidualBlock(channels) for _ in range(num_blocks))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(self.conv(x), kernel_size=3, stride=2, padding=1)
        for block in self.blocks:
            x = block(x)
        return x


@alf.configurable
class ImpalaCnnEncoder(Network):
    """IMPALA CNN (Espeholt et al. 2018): image ``[*outer, C, H, W]`` -> ``[*outer, 256]``.

    One :class:`ImpalaStage` per entry of ``channels`` (each halves H and W,
    rounding up), then ReLU -> flatten -> fc layers with ReLU. On ``4 x 84 x 84``
    with the default channels ``(16, 32, 32)`` the conv output is
    ``32 x 11 x 11 = 3872``.
    """

    def __init__(self,
                 input_spec: TensorSpec,
                 channels: Sequence[int] = (16, 32, 32),
                 num_residual_blocks: int = 2,
                 fc_layer_params: Sequence[int] = (256,),
                 use_orthogonal_init: bool = True,
                 preprocess_images: bool = True,
                 conv_memory_format: str = "auto",
                 name: str = "ImpalaCnnEncoder"):
        """
        Args:
            input_spec: ``TensorSpec`` of one ``[C, H, W]`` image (``uint8`` or float).
            channels: output channels of each stage.
            num_residual_blocks: residual blocks per stage.
            fc_layer_params: fc layer sizes (ReLU after each) after the flatten
                (``()``: output the flattened conv features).
            use_orthogonal_init: orthogonal init, gain sqrt(2), zero bias, of
                every conv and fc layer; else torch's default init.
            preprocess_images: scale ``uint8`` pixels by 1/255.
            conv_memory_format: ``"auto"``, ``"contiguous"`` or ``"channels_last"``
                (see the module docstring).
            name: name of the network.
        """
        check_image_spec(name, input_spec)
        if not channels:
            raise ValueError(f"{name}: channels must name at least one stage")
        super().__init__(input_spec, name=name)
        self._preprocess_images = preprocess_images
        self._conv_memory_format = check_conv_memory_format(name, conv_memory_format)
        in_channels = input_spec.shape[0]
        self._stages = nn.ModuleList()
        for c in channels:
            self._stages.append(ImpalaStage(in_channels, int(c), int(num_residual_blocks)))
            in_channels = int(c)
        with torch.no_grad():
            size = self._conv_features(dry_run_inputs(input_spec)).shape[-1]
        self._fc_layers = nn.ModuleList()
        for n in fc_layer_params or ():
            self._fc_layers.append(nn.Linear(size, int(n)))
            size = int(n)
        if use_orthogonal_init:
            for module in self.modules():
                if isinstance(module, (nn.Conv2d, nn.Linear)):
                    orthogonal_init_(module, HIDDEN_GAIN)
        self._output_size = size
        self._output_spec = TensorSpec((size,))

    @property
    def output_size(self) -> int:
        """Size of the feature vector."""
        return self._output_size

    def _conv_features(self, x: torch.Tensor) -> torch.Tensor:
        """``[*outer, C, H, W]`` -> ReLU'd, flattened stage output ``[*outer, D]``."""
        channels_last = auto_channels_last(self._conv_memory_format, x, grad_only=False)
        x, outer = preprocess_image(x, self._input_spec, self._preprocess_images, channels_last)
        for stage in self._stages:
            x = stage(x)
        return torch.relu(x).reshape(outer + (-1,))

    def forward(self, inputs: torch.Tensor, state: Nest = ()) -> Tuple[torch.Tensor, Nest]:
        """``inputs`` ``[*outer, C, H, W]`` -> (features ``[*outer, output_size]``, ``state``)."""
        x = self._conv_features(inputs)
        for layer in self._fc_layers:
            x = torch.relu(F.linear(x, layer.weight, layer.bias))
        return x, state
