"""NatureCnnEncoder / ImpalaCnnEncoder: shapes, uint8 scaling, layouts, sizes, init, errors;
QNetwork on a shared image encoder; linear actor / value heads on [512] features."""
import math
import pickle

import gin
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import alf  # noqa: F401
from alf.errors import IncompatibleSpecError
from alf.networks import (ActorDistributionNetwork, ImpalaCnnEncoder, LSTMEncodingNetwork,
                          NatureCnnEncoder, QNetwork, ValueNetwork)
from alf.networks.image_encoders import ImpalaResidualBlock, ImpalaStage
from alf.tensor_specs import BoundedTensorSpec, TensorSpec

ATARI = BoundedTensorSpec((4, 84, 84), torch.uint8, 0, 255)
SMALL = BoundedTensorSpec((4, 36, 36), torch.uint8, 0, 255)  # Nature CNN -> 64 x 1 x 1
ACTIONS = BoundedTensorSpec((), torch.int64, 0, 5)
ENCODERS = [NatureCnnEncoder, ImpalaCnnEncoder]


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)  # the tolerances below hold for any init; the seed makes runs repeatable


def _frames(*outer, spec=ATARI, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, tuple(outer) + tuple(spec.shape), dtype=torch.uint8, generator=g)


@pytest.mark.parametrize("ctor,size", [(NatureCnnEncoder, 512), (ImpalaCnnEncoder, 256)])
def test_shapes_and_dtypes_with_outer_dims(ctor, size):
    net = ctor(ATARI)
    assert net.output_spec == TensorSpec((size,)) and net.output_size == size
    assert net.state_spec == ()
    x = _frames(3, 2)                                   # [T=3, B=2, 4, 84, 84]
    out, state = net(x[0])                              # [B]
    assert out.shape == (2, size) and out.dtype == torch.float32 and state == ()
    out_tb, _ = net(x)                                  # [T, B]
    assert out_tb.shape == (3, 2, size)
    torch.testing.assert_close(out_tb[0], out, rtol=1e-4, atol=1e-4)  # rows are independent
    assert bool((out_tb >= 0).all())                    # ReLU after the last fc layer


@pytest.mark.parametrize("ctor", ENCODERS)
def test_uint8_equals_float_divided_by_255(ctor):
    net = ctor(ATARI)
    x = _frames(2)
    ref, _ = net(x)
    # equal up to float rounding (x * (1/255) vs x / 255, layouts, batch-size-dependent kernels)
    torch.testing.assert_close(net(x.float() / 255)[0], ref, rtol=1e-4, atol=1e-4)
    with torch.no_grad():  # the no-grad path (contiguous layout for the Nature CNN)
        torch.testing.assert_close(net(x)[0], ref, rtol=1e-4, atol=1e-4)
    assert x.dtype == torch.uint8 and int(x.max()) > 1  # the input is left untouched


@pytest.mark.parametrize("ctor", ENCODERS)
def test_memory_formats_give_the_same_output_and_gradients(ctor):
    nets = {fmt: ctor(SMALL, conv_memory_format=fmt)
            for fmt in ("auto", "contiguous", "channels_last")}
    for net in nets.values():
        net.load_state_dict(nets["auto"].state_dict())
    x = _frames(3, spec=SMALL)
    outs, grads = {}, {}
    for fmt, net in nets.items():
        out, _ = net(x)
        out.square().sum().backward()
        outs[fmt] = out.detach()
        grads[fmt] = [p.grad for p in net.parameters()]
    for fmt in ("contiguous", "channels_last"):
        torch.testing.assert_close(outs[fmt], outs["auto"], rtol=1e-4, atol=1e-4)
        for g, g_ref in zip(grads[fmt], grads["auto"]):
            scale = float(g_ref.abs().max())
            torch.testing.assert_close(g, g_ref, rtol=1e-3, atol=1e-4 * scale)
    with pytest.raises(ValueError, match="conv_memory_format must be one of"):
        ctor(SMALL, conv_memory_format="nhwc")


def test_nature_cnn_parameter_counts_on_4x84x84():
    net = NatureCnnEncoder(ATARI)
    convs = [m for m in net.modules() if isinstance(m, nn.Conv2d)]
    fcs = [m for m in net.modules() if isinstance(m, nn.Linear)]
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert [count(c) for c in convs] == [8_224, 32_832, 36_928]
    assert [(c.kernel_size, c.stride) for c in convs] == [((8, 8), (4, 4)), ((4, 4), (2, 2)),
                                                          ((3, 3), (1, 1))]
    assert [count(f) for f in fcs] == [3136 * 512 + 512]
    assert count(net) == 8_224 + 32_832 + 36_928 + 3136 * 512 + 512 == 1_684_128


def test_impala_residual_block_and_stage_shapes():
    block = ImpalaResidualBlock(16)
    x = torch.randn(2, 16, 21, 21)
    assert block(x).shape == x.shape
    for conv in (block.conv0, block.conv1):  # no residual branch: the identity
        nn.init.zeros_(conv.weight)
        nn.init.zeros_(conv.bias)
    torch.testing.assert_close(block(x), x)
    stage = ImpalaStage(4, 16, num_blocks=2)
    assert len(stage.blocks) == 2
    assert stage(torch.randn(2, 4, 84, 84)).shape == (2, 16, 42, 42)
    assert stage(torch.randn(2, 4, 21, 21)).shape == (2, 16, 11, 11)  # ceil(21 / 2)


def test_impala_stages_channels_and_fc_are_configurable():
    net = ImpalaCnnEncoder(ATARI, fc_layer_params=())
    assert net.output_size == 32 * 11 * 11  # 84 -> 42 -> 21 -> 11
    assert [s.conv.out_channels for s in net._stages] == [16, 32, 32]
    assert all(len(s.blocks) == 2 for s in net._stages)
    small = ImpalaCnnEncoder(ATARI, channels=(8, 16), num_residual_blocks=1,
                             fc_layer_params=(64, 32))
    assert small.output_size == 32 and small(_frames(2))[0].shape == (2, 32)
    assert [s.conv.out_channels for s in small._stages] == [8, 16]
    assert [len(s.blocks) for s in small._stages] == [1, 1]


@pytest.mark.parametrize("ctor", ENCODERS)
def test_orthogonal_init_gain_sqrt2_and_zero_bias(ctor):
    net = ctor(SMALL)
    layers = [m for m in net.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    assert layers
    for layer in layers:
        w = layer.weight.detach().reshape(layer.weight.shape[0], -1)
        sv = torch.linalg.svdvals(w)
        torch.testing.assert_close(sv, torch.full_like(sv, math.sqrt(2)), atol=1e-4, rtol=1e-4)
        assert bool((layer.bias == 0).all())


@pytest.mark.parametrize("ctor", ENCODERS)
def test_clear_errors_for_non_image_inputs(ctor):
    with pytest.raises(IncompatibleSpecError, match=r"\[C, H, W\] image.*shape=\(4,\).*"
                                                    r"vector observations"):
        ctor(TensorSpec((4,)))
    with pytest.raises(IncompatibleSpecError, match=r"looks like \[H, W, C\]"):
        ctor(BoundedTensorSpec((84, 84, 4), torch.uint8, 0, 255))
    with pytest.raises(IncompatibleSpecError, match="dict observation"):
        ctor({"image": ATARI})


def test_nature_cnn_too_small_image_is_a_spec_error():
    with pytest.raises(IncompatibleSpecError, match=r"conv layer 2 \(64, 3, 1\) leaves no pixels"):
        NatureCnnEncoder(BoundedTensorSpec((4, 20, 20), torch.uint8, 0, 255))


def test_gin_bindings_and_pickle(clean_gin):
    gin.parse_config("NatureCnnEncoder.fc_layer_params = (32,)\n"
                     "ImpalaCnnEncoder.channels = (8,)\n"
                     "EncodingNetwork.last_layer_size = 3\n")  # must not leak into NatureCnnEncoder
    nature, impala = NatureCnnEncoder(SMALL), ImpalaCnnEncoder(SMALL)
    assert nature.output_size == 32 and [s.conv.out_channels for s in impala._stages] == [8]
    x = _frames(2, spec=SMALL)
    for net in (nature, impala):
        clone = pickle.loads(pickle.dumps(net))
        torch.testing.assert_close(clone(x)[0], net(x)[0], rtol=0, atol=0)


# ------------------------------------------------------------------ heads on the features
def test_actor_and_value_networks_without_fc_layers_are_linear_heads():
    features = TensorSpec((512,))
    x = torch.randn(5, 512)
    actor = ActorDistributionNetwork(features, ACTIONS, fc_layer_params=())
    (w, b), = [(m.weight, m.bias) for m in actor.modules() if isinstance(m, nn.Linear)]
    assert w.shape == (6, 512) and sum(p.numel() for p in actor.parameters()) == 6 * 512 + 6
    torch.testing.assert_close(actor(x)[0].logits, F.log_softmax(F.linear(x, w, b), -1))
    sv = torch.linalg.svdvals(w.detach())
    torch.testing.assert_close(sv, torch.full_like(sv, 0.01), atol=1e-6, rtol=1e-4)  # SB3 policy
    value = ValueNetwork(features, fc_layer_params=())
    (w, b), = [(m.weight, m.bias) for m in value.modules() if isinstance(m, nn.Linear)]
    assert w.shape == (1, 512) and sum(p.numel() for p in value.parameters()) == 513
    torch.testing.assert_close(value(x)[0], F.linear(x, w, b).squeeze(-1))
    assert w.detach().norm().item() == pytest.approx(1.0, rel=1e-5)  # SB3 value gain 1
    assert bool((b == 0).all())


# ---------------------------------------------------------------- QNetwork on an encoder
def test_q_network_on_the_nature_cnn_is_nature_dqn():
    net = QNetwork(ATARI, ACTIONS, fc_layer_params=(), encoding_network_ctor=NatureCnnEncoder)
    n_params = sum(p.numel() for p in net.parameters())
    assert n_params == 1_684_128 + 512 * 6 + 6  # 3 convs + fc 512 + linear Q head
    assert sum(isinstance(m, nn.Conv2d) for m in net.modules()) == 3
    x = _frames(3, 2)
    q, _ = net(x)
    assert q.shape == (3, 2, 6) and net.output_spec == TensorSpec((6,))
    feat, _ = net._encoders[0](x)
    head = net._q_encoder._last_layer
    torch.testing.assert_close(q, F.linear(feat, head.weight, head.bias))
    q.sum().backward()
    assert net._encoders[0]._conv_layers[0].weight.grad.abs().sum() > 0


@pytest.mark.parametrize("dueling", [False, True])
def test_q_network_ensemble_gets_one_encoder_per_critic(dueling):
    net = QNetwork(SMALL, ACTIONS, fc_layer_params=(16,), num_critics=2, dueling=dueling,
                   encoding_network_ctor=NatureCnnEncoder)
    assert len(net._encoders) == 2 and net._encoders[0] is not net._encoders[1]
    assert net(_frames(4, spec=SMALL))[0].shape == (4, 2, 6)


def test_q_network_encoder_errors():
    with pytest.raises(ValueError, match="either conv_layer_params or encoding_network_ctor"):
        QNetwork(SMALL, ACTIONS, conv_layer_params=((8, 8, 4),),
                 encoding_network_ctor=NatureCnnEncoder)
    with pytest.raises(IncompatibleSpecError, match="stateless"):
        QNetwork(TensorSpec((3,)), ACTIONS, encoding_network_ctor=LSTMEncodingNetwork)
