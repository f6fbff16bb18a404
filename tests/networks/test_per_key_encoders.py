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
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        EncodingNetwork(CAM)  # a lone image observation: no keys to name
        EncodingNetwork(spec, conv_layer_params=CONV)  # given a CNN: nothing to say
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert lines == ["EncodingNetwork: the observation [3, 16, 16] is flattened into 768 inputs "
                     "of the fc layers (no conv settings); give it a CNN with the network's "
                     "conv_layer_params (e.g. ActorDistributionNetwork.conv_layer_params) or "
                     "encoding_network_ctor = @CnnEncoder"]


def test_chosen_encoders_per_key_and_concat_values():
    from alf.networks import CnnEncoder, MlpEncoder, PassThroughEncoder
    net = EncodingNetwork(TWO_CAMS, input_preprocessors={
        "left": CnnEncoder, "right": lambda input_spec: CnnEncoder(input_spec, fc_layer_params=(6,)),
        "proprio": MlpEncoder})
    pre = net.preprocessors
    assert [pre[k].output_size for k in ("left", "proprio", "right")] == [32 * 3 * 3, 64, 6]
    assert net.output_size == 288 + 64 + 6
    obs = _obs(3)
    out, _ = net(obs)
    expected = torch.cat([pre["left"](obs["left"])[0], pre["proprio"](obs["proprio"])[0],
                          pre["right"](obs["right"])[0]], dim=-1)
    torch.testing.assert_close(out, expected)
    out_tb, _ = net({k: v.unsqueeze(0).expand(2, *v.shape) for k, v in obs.items()})
    assert out_tb.shape == (2, 3, 358)  # [T, B] outer dims kept
    torch.testing.assert_close(out_tb[1], out)
    # a CnnEncoder is the conv stack on the scaled image: same weights, float input / 255
    ref = EncodingNetwork(TensorSpec((3, 16, 16)), conv_layer_params=((16, 3, 2), (32, 3, 2)),
                          activation=torch.relu)
    ref.load_state_dict(pre["left"].state_dict())
    torch.testing.assert_close(ref(obs["left"].float() / 255)[0], out[:, :288])
    passthru = EncodingNetwork(TWO_CAMS, input_preprocessors={"left": PassThroughEncoder},
                               conv_layer_params=CONV)
    torch.testing.assert_close(passthru(obs)[0][:, :768], obs["left"].reshape(3, -1) / 255)


def test_sum_and_mean_combiners_need_equal_sizes():
    from alf.networks import MeanCombiner, MlpEncoder, SumCombiner
    spec = {"a": TensorSpec((3,)), "b": TensorSpec((4,))}
    enc = {"a": MlpEncoder, "b": MlpEncoder}
    s = EncodingNetwork(spec, input_preprocessors=enc, preprocessing_combiner=SumCombiner(),
                        fc_layer_params=(5,))
    m = EncodingNetwork(spec, input_preprocessors=enc, preprocessing_combiner=MeanCombiner())
    assert s.output_size == 5 and m.output_size == 64
    x = {"a": torch.randn(4, 3), "b": torch.randn(4, 4)}
    fa, fb = (m.preprocessors[k](x[k])[0] for k in ("a", "b"))
    torch.testing.assert_close(m(x)[0], (fa + fb) / 2)
    ga, gb = (s.preprocessors[k](x[k])[0] for k in ("a", "b"))
    summed = ga + gb
    w, b = s._fc_layers[0].weight, s._fc_layers[0].bias
    torch.testing.assert_close(s(x)[0], torch.tanh(summed @ w.T + b))
    with pytest.raises(IncompatibleSpecError, match=r"'a': 3, 'b': 4.*ConcatCombiner"):
        EncodingNetwork(spec, preprocessing_combiner=SumCombiner())


def test_embedding_encoder_values():
    from alf.networks import EmbeddingEncoder
    spec = {"room": BoundedTensorSpec((), torch.int64, 1, 4), "v": TensorSpec((2,))}
    net = EncodingNetwork(spec, input_preprocessors={
        "room": lambda input_spec: EmbeddingEncoder(input_spec, embedding_dim=3)})
    assert net.output_size == 3 + 2
    out, _ = net({"room": torch.tensor([1, 4]), "v": torch.zeros(2, 2)})
    table = net.preprocessors["room"].embedding.weight
    torch.testing.assert_close(out[:, :3], table[[0, 3]])
    with pytest.raises(IncompatibleSpecError, match="bounded discrete scalar"):
        EmbeddingEncoder(TensorSpec((2,)))


def test_bad_input_preprocessors_are_named():
    from alf.networks import LSTMEncodingNetwork, MlpEncoder
    with pytest.raises(IncompatibleSpecError, match=r"\['cam'\].*keys are \['left', 'proprio'"):
        EncodingNetwork(TWO_CAMS, input_preprocessors={"cam": MlpEncoder})
    with pytest.raises(IncompatibleSpecError, match="not a dict"):
        EncodingNetwork(TensorSpec((3,)), input_preprocessors={"x": MlpEncoder})
    with pytest.raises(IncompatibleSpecError, match=r"\['proprio'\].*state"):
        EncodingNetwork(TWO_CAMS, input_preprocessors={
            "proprio": lambda input_spec: LSTMEncodingNetwork(input_spec, hidden_size=4)})


def test_gin_per_key_encoders_reach_every_network():
    """One gin binding gives actor, value, critic and Q networks their own per-key encoders."""
    import gin
    from alf.networks import (ActorDistributionNetwork, CriticNetwork, QNetwork,
                              ValueNetwork)
    action = BoundedTensorSpec((), torch.int64, 0, 2)
    box = BoundedTensorSpec((2,), torch.float32, -1.0, 1.0)
    gin.clear_config()
    try:
        gin.parse_config("""
            EncodingNetwork.input_preprocessors = {'left': @CnnEncoder, 'right': @CnnEncoder,
                                                   'proprio': @MlpEncoder}
            CnnEncoder.fc_layer_params = (8,)
            MlpEncoder.fc_layer_params = (4,)
        """)
        actor = ActorDistributionNetwork(TWO_CAMS, action, fc_layer_params=(16,))
        value = ValueNetwork(TWO_CAMS, fc_layer_params=(16,))
        q = QNetwork(TWO_CAMS, action, fc_layer_params=(16,))
        critic = CriticNetwork((TWO_CAMS, box), fc_layer_params=(16,))
    finally:
        gin.clear_config()
    obs = _obs(2)
    encoders = [actor._encoder, value._encoder, q._q_encoder, critic._obs_encoder]
    for enc in encoders:
        assert [enc.preprocessors[k].output_size for k in ("left", "proprio", "right")] \
            == [8, 4, 8]
        assert sorted(enc.preprocessors) == ["left", "proprio", "right"]
    ptrs = {enc.preprocessors["left"]._conv_layers[0].weight.data_ptr() for enc in encoders}
    assert len(ptrs) == 4  # own weights per network
    assert value(obs)[0].shape == (2,) and q(obs)[0].shape == (2, 3)
    assert critic((obs, torch.zeros(2, 2)))[0].shape == (2, critic._num_critics)


def test_describe_documents_the_per_key_configurables(alf_cli, tmp_path):
    names = ["EncodingNetwork.input_preprocessors", "EncodingNetwork.preprocessing_combiner",
             "CnnEncoder", "MlpEncoder", "EmbeddingEncoder", "PassThroughEncoder",
             "ConcatCombiner", "SumCombiner", "MeanCombiner"]
    args = [a for n in names for a in ("--describe", n)]
    proc = alf_cli.run("alf.bin.train", args, tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "EncodingNetwork.input_preprocessors = None" in out
    assert "dict `{observation key: encoder}`" in out
    assert "\nCnnEncoder  (class alf.networks.preprocessors.CnnEncoder)" in out, out
    assert "conv_layer_params = ((16, 3, 2), (32, 3, 2))" in out
    assert "embedding_dim = 8" in out and "Element-wise sum" in out
    assert "unknown configurable" not in proc.stderr and list(tmp_path.iterdir()) == []
