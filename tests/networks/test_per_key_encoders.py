"""Per-key observation encoders (issue 41 item 2): a nest of ``input_preprocessors``
and a ``preprocessing_combiner`` in EncodingNetwork, defaults, the flatten note."""
import logging

import pytest
import torch

import alf  # noqa: F401
from alf.errors import IncompatibleSpecError
from alf.networks import EncodingNetwork
from alf.tensor_specs import BoundedTensorSpec, TensorSpec

CAM = BoundedTensorSpec((3, 16, 16), torch.uint8, 0, 255)
TWO_CAMS = {"left": CAM, "right": CAM, "proprio": TensorSpec((5,))}
CONV = ((4, 3, 2), (8, 3, 2))  # 16x16 -> 7x7 -> 3x3: 8 * 3 * 3 = 72 features per camera


def _obs(batch=2):
    g = torch.Generator().manual_seed(0)
    return {"left": torch.randint(0, 256, (batch, 3, 16, 16), dtype=torch.uint8, generator=g),
            "right": torch.randint(0, 256, (batch, 3, 16, 16), dtype=torch.uint8, generator=g),
            "proprio": torch.randn(batch, 5, generator=g)}


def test_two_cameras_with_conv_get_one_conv_stack_each():
    """Was refused: 'conv_layer_params needs exactly one [C, H, W] image ... Drop
    conv_layer_params'. Now each image gets its own conv stack (own weights)."""
    net = EncodingNetwork(TWO_CAMS, conv_layer_params=CONV, fc_layer_params=(16,))
    assert net.output_size == 16
    no_fc = EncodingNetwork(TWO_CAMS, conv_layer_params=CONV)
    assert no_fc.output_size == 72 + 5 + 72  # sorted keys: left, proprio, right
    out, _ = no_fc(_obs())
    assert out.shape == (2, 149)
    left, right = no_fc.preprocessors["left"], no_fc.preprocessors["right"]
    assert left._conv_layers[0].weight.data_ptr() != right._conv_layers[0].weight.data_ptr()
    obs = _obs()
    torch.testing.assert_close(out[:, :72], left(obs["left"])[0])
    torch.testing.assert_close(out[:, 72:77], obs["proprio"])
    torch.testing.assert_close(out[:, 77:], right(obs["right"])[0])


def test_image_flattened_without_conv_says_so_once(caplog):
    """Was silent: a [3, 32, 32] image without conv settings became 3,072 inputs."""
    from alf.networks.per_key_encoding import FLATTEN_NOTED
    FLATTEN_NOTED.clear()
    spec = {"cam": BoundedTensorSpec((3, 32, 32), torch.uint8, 0, 255), "v": TensorSpec((2,))}
    with caplog.at_level(logging.WARNING):
        net = EncodingNetwork(spec)
        EncodingNetwork(spec)  # the value network of the same observation: no second line
    assert net.output_size == 3 * 32 * 32 + 2
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1, lines
    assert "'cam'" in lines[0] and "3072" in lines[0] and "input_preprocessors" in lines[0]
    assert "\n" not in lines[0]
