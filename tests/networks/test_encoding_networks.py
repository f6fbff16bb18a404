"""EncodingNetwork / LSTMEncodingNetwork: shapes, input preprocessing, init, pickling."""
import copy
import math
import pickle

import gin
import pytest
import torch

import alf  # noqa: F401
from alf.errors import IncompatibleSpecError
from alf.networks import EncodingNetwork, LSTMEncodingNetwork, Network
from alf.tensor_specs import BoundedTensorSpec, TensorSpec

IMAGE = BoundedTensorSpec((4, 84, 84), torch.uint8, 0, 255)
ATARI_CONV = ((32, 8, 4), (64, 4, 2), (64, 3, 1))


def test_vector_input_shapes_and_outer_dims():
    net = EncodingNetwork(TensorSpec((4,)), fc_layer_params=(64, 32))
    out, state = net(torch.randn(5, 4))
    assert out.shape == (5, 32) and out.dtype == torch.float32 and state == ()
    assert net.output_spec == TensorSpec((32,)) and net.state_spec == ()
    out, _ = net(torch.randn(3, 5, 4))  # extra outer dims are kept
    assert out.shape == (3, 5, 32)


def test_image_input_uint8_is_scaled():
    net = EncodingNetwork(IMAGE, conv_layer_params=ATARI_CONV, fc_layer_params=(16,),
                          activation=torch.relu)
    assert net.output_size == 16
    img = torch.randint(0, 256, (2, 4, 84, 84), dtype=torch.uint8)
    out, _ = net(img)
    assert out.shape == (2, 16)
    ref, _ = EncodingNetwork(IMAGE, conv_layer_params=ATARI_CONV, preprocess_images=False)(img)
    # Nature CNN: 64 x 7 x 7 features
    assert ref.shape == (2, 64 * 7 * 7)
    # scaling by 1/255 == feeding the float image divided by 255
    float_net = EncodingNetwork(TensorSpec((4, 84, 84)), conv_layer_params=ATARI_CONV,
                                fc_layer_params=(16,), activation=torch.relu)
    float_net.load_state_dict(net.state_dict())
    torch.testing.assert_close(float_net(img.float() / 255)[0], out)


def test_conv_padding_and_mixed_dict_input():
    spec = {"image": BoundedTensorSpec((3, 8, 8), torch.uint8, 0, 255),
            "vec": TensorSpec((5,)), "discrete": BoundedTensorSpec((), torch.int64, 2, 4)}
    net = EncodingNetwork(spec, conv_layer_params=((4, 3, 1, 1),), fc_layer_params=(8,))
    obs = {"image": torch.zeros(2, 3, 8, 8, dtype=torch.uint8), "vec": torch.randn(2, 5),
           "discrete": torch.tensor([2, 4])}
    out, _ = net(obs)
    assert out.shape == (2, 8)
    no_fc = EncodingNetwork(spec, conv_layer_params=((4, 3, 1, 1),))
    # 3 one-hot + 4*8*8 conv features + 5 vector entries
    assert no_fc.output_size == 3 + 4 * 8 * 8 + 5


def test_dict_of_vectors_is_concatenated_in_sorted_key_order():
    spec = {"b": TensorSpec((2,)), "a": TensorSpec((3,)), "s": TensorSpec(())}
    net = EncodingNetwork(spec)
    out, _ = net({"b": torch.ones(4, 2), "a": torch.zeros(4, 3), "s": torch.full((4,), 7.0)})
    expected = torch.tensor([0, 0, 0, 1, 1, 7.0]).expand(4, 6)
    torch.testing.assert_close(out, expected)


def test_discrete_observation_is_one_hot():
    net = EncodingNetwork(BoundedTensorSpec((), torch.int64, 0, 3))
    out, _ = net(torch.tensor([0, 3]))
    torch.testing.assert_close(out, torch.tensor([[1.0, 0, 0, 0], [0, 0, 0, 1.0]]))


def test_orthogonal_init_gains():
    net = EncodingNetwork(TensorSpec((32,)), fc_layer_params=(64, 64), last_layer_size=16,
                          last_kernel_initializer_gain=0.5)
    for layer in net._fc_layers:
        sv = torch.linalg.svdvals(layer.weight.detach())
        torch.testing.assert_close(sv, torch.full_like(sv, math.sqrt(2)), atol=1e-4, rtol=1e-4)
        assert torch.all(layer.bias == 0)
    sv = torch.linalg.svdvals(net._last_layer.weight.detach())
    torch.testing.assert_close(sv, torch.full_like(sv, 0.5), atol=1e-4, rtol=1e-4)
    conv = EncodingNetwork(IMAGE, conv_layer_params=ATARI_CONV)._conv_layers[0]
    sv = torch.linalg.svdvals(conv.weight.detach().reshape(32, -1))
    torch.testing.assert_close(sv, torch.full_like(sv, math.sqrt(2)), atol=1e-4, rtol=1e-4)


def test_conv_needs_one_image():
    with pytest.raises(IncompatibleSpecError, match="found none"):
        EncodingNetwork(TensorSpec((4,)), conv_layer_params=ATARI_CONV)
    # two images outside a dict have no names to give each its own conv stack
    with pytest.raises(IncompatibleSpecError, match="2 images .* not a dict"):
        EncodingNetwork((IMAGE, IMAGE), conv_layer_params=ATARI_CONV)


def test_lstm_state_shapes_and_state_changes_output():
    net = LSTMEncodingNetwork(TensorSpec((3,)), hidden_size=(8, 6), pre_fc_layer_params=(16,),
                              post_fc_layer_params=(5,))
    assert net.state_spec == ((TensorSpec((8,)), TensorSpec((8,))),
                              (TensorSpec((6,)), TensorSpec((6,))))
    state = net.get_initial_state(4)
    assert [tuple(t.shape) for pair in state for t in pair] == [(4, 8), (4, 8), (4, 6), (4, 6)]
    x = torch.randn(4, 3)
    out1, state1 = net(x, state)
    out2, state2 = net(x, state1)
    assert out1.shape == (4, 5) and net.output_spec == TensorSpec((5,))
    assert not torch.allclose(out1, out2)  # same input, different state
    assert not torch.allclose(state1[1][0], state2[1][0])
    out1_again, _ = net(x, net.get_initial_state(4))  # zero state == episode start
    torch.testing.assert_close(out1, out1_again)


def test_pickle_round_trip_identical_outputs():
    net = LSTMEncodingNetwork(IMAGE, hidden_size=8, conv_layer_params=((4, 8, 4),),
                              activation=torch.relu)
    x = torch.randint(0, 256, (2, 4, 84, 84), dtype=torch.uint8)
    state = net.get_initial_state(2)
    clone = pickle.loads(pickle.dumps(net))
    torch.testing.assert_close(clone(x, state)[0], net(x, state)[0], rtol=0, atol=0)


def test_gin_configured_activation_is_picklable():
    gin.clear_config()
    try:
        gin.parse_config("EncodingNetwork.activation = @torch.nn.functional.elu\n"
                         "EncodingNetwork.fc_layer_params = (7,)")
        net = EncodingNetwork(TensorSpec((3,)))
        assert net.output_size == 7
        clone = pickle.loads(pickle.dumps(net))
        x = torch.randn(2, 3)
        torch.testing.assert_close(clone(x)[0], net(x)[0])
        assert net(100 * torch.randn(50, 3))[0].min() >= -1.0  # elu, not tanh's default
    finally:
        gin.clear_config()


def test_lstm_rejects_missing_state():
    net = LSTMEncodingNetwork(TensorSpec((3,)), hidden_size=4)
    with pytest.raises(ValueError, match="get_initial_state"):
        net(torch.randn(2, 3))


class _Doubler(Network):
    """A minimal custom network that declares no output spec."""

    def __init__(self):
        super().__init__(TensorSpec((2, 3)))
        self.scale = torch.nn.Parameter(torch.ones(()))

    def forward(self, inputs, state=()):
        return {"y": inputs.flatten(1) * 2 * self.scale}, state


def test_output_spec_by_dry_run_and_deepcopy():
    net = _Doubler()
    assert net.output_spec == {"y": TensorSpec((6,))}
    assert net.get_initial_state(3) == ()
    enc = EncodingNetwork(TensorSpec((3,)), fc_layer_params=(4,))
    clone = copy.deepcopy(enc)
    x = torch.randn(2, 3)
    torch.testing.assert_close(clone(x)[0], enc(x)[0])
