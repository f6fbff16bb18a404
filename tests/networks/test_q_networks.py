"""QNetwork: shapes for one and K critics, dueling identity, image path, spec errors."""
import pickle

import gin
import pytest
import torch
import torch.nn.functional as F

import alf  # noqa: F401
from alf.errors import IncompatibleSpecError
from alf.networks import QNetwork
from alf.tensor_specs import BoundedTensorSpec, TensorSpec

OBS = TensorSpec((4,))
ACTIONS = BoundedTensorSpec((), torch.int64, 2, 6)  # 5 actions, minimum 2
IMAGE = BoundedTensorSpec((4, 36, 36), torch.uint8, 0, 255)
CONV = ((8, 8, 4), (16, 4, 2))


@pytest.mark.parametrize("dueling", [False, True])
@pytest.mark.parametrize("k", [1, 3])
def test_shapes_and_specs(k, dueling):
    net = QNetwork(OBS, ACTIONS, fc_layer_params=(16, 8), num_critics=k, dueling=dueling)
    expected = (5,) if k == 1 else (k, 5)
    assert net.output_spec == TensorSpec(expected) and net.num_critics == k
    q, state = net(torch.randn(7, 4))
    assert q.shape == (7,) + expected and q.dtype == torch.float32 and state == ()
    q3, _ = net(torch.randn(2, 7, 4))  # outer dims [T, B] are kept
    assert q3.shape == (2, 7) + expected


def test_single_critic_matches_manual_mlp():
    net = QNetwork(OBS, ACTIONS, fc_layer_params=(16,))
    enc = net._q_encoder
    x = torch.randn(6, 4)
    h = torch.relu(F.linear(x, enc._fc_layers[0].weight, enc._fc_layers[0].bias))
    ref = F.linear(h, enc._last_layer.weight, enc._last_layer.bias)
    torch.testing.assert_close(net(x)[0], ref, rtol=0, atol=1e-6)
    # torch's default init (as SB3/CleanRL DQN): uniform within 1/sqrt(fan_in), nonzero bias
    assert enc._fc_layers[0].bias.abs().sum() > 0 and enc._fc_layers[0].weight.abs().max() <= 0.5


def test_ensemble_members_are_independent_mlps():
    net = QNetwork(OBS, ACTIONS, fc_layer_params=(16,), num_critics=2)
    x = torch.randn(6, 4)
    q, _ = net(x)
    l0, l1 = net._mlp.layers
    for i in range(2):
        h = torch.relu(x @ l0.weight[i] + l0.bias[i])
        torch.testing.assert_close(q[:, i], h @ l1.weight[i] + l1.bias[i], rtol=0, atol=1e-6)
    assert not torch.allclose(q[:, 0], q[:, 1])


@pytest.mark.parametrize("k", [1, 2])
def test_dueling_identity(k):
    net = QNetwork(OBS, ACTIONS, fc_layer_params=(16,), num_critics=k, dueling=True)
    x = torch.randn(9, 4)
    q, _ = net(x)
    v, a = net.value_and_advantage(x)
    assert v.shape == q.shape[:-1] and a.shape == q.shape
    # q - V is the mean-free advantage: zero mean over actions, A's differences kept
    torch.testing.assert_close((q - v.unsqueeze(-1)).mean(-1), torch.zeros_like(v), rtol=0, atol=1e-6)
    torch.testing.assert_close(q - v.unsqueeze(-1), a - a.mean(-1, keepdim=True), rtol=0, atol=1e-6)
    # value and advantage streams have separate hidden layers
    assert net._mlp.ensemble_size == 2 * k
    with pytest.raises(ValueError, match="dueling"):
        QNetwork(OBS, ACTIONS).value_and_advantage(x)


@pytest.mark.parametrize("k,dueling", [(1, False), (2, False), (2, True)])
def test_uint8_images_are_scaled(k, dueling):
    kw = dict(conv_layer_params=CONV, fc_layer_params=(16,), num_critics=k, dueling=dueling)
    net = QNetwork(IMAGE, ACTIONS, **kw)
    float_net = QNetwork(TensorSpec((4, 36, 36)), ACTIONS, **kw)
    float_net.load_state_dict(net.state_dict())
    img = torch.randint(0, 256, (3, 4, 36, 36), dtype=torch.uint8)
    q, _ = net(img)
    assert q.shape == ((3, 5) if k == 1 else (3, k, 5))
    torch.testing.assert_close(q, float_net(img.float() / 255)[0], rtol=1e-5, atol=1e-5)
    # no scaling would give different values
    assert not torch.allclose(q, float_net(img.float())[0])
    if k > 1:  # each critic has its own conv stack
        c0, c1 = (enc._conv_layers[0].weight for enc in net._encoders)
        assert c0.shape == c1.shape and not torch.equal(c0, c1)


def test_incompatible_action_specs_name_the_spec():
    box = BoundedTensorSpec((2,), torch.float32, -1.0, 1.0)
    with pytest.raises(IncompatibleSpecError) as err:
        QNetwork(OBS, box)
    msg = str(err.value)
    assert "QNetwork" in msg and repr(box) in msg and "CriticNetwork" in msg
    multi = BoundedTensorSpec((3,), torch.int64, 0, 2)
    with pytest.raises(IncompatibleSpecError, match="MultiDiscrete"):
        QNetwork(OBS, multi, name="MyQ")
    with pytest.raises(IncompatibleSpecError, match="MyQ"):
        QNetwork(OBS, TensorSpec((), torch.int64), name="MyQ")  # unbounded


def test_gin_and_pickle():
    gin.clear_config()
    try:
        gin.parse_config("""
QNetwork.fc_layer_params = (8,)
QNetwork.dueling = True
QNetwork.num_critics = 2
""")
        net = QNetwork(OBS, ACTIONS)
        assert net.dueling and net.num_critics == 2
        x = torch.randn(3, 4)
        clone = pickle.loads(pickle.dumps(net))
        torch.testing.assert_close(clone(x)[0], net(x)[0], rtol=0, atol=0)
    finally:
        gin.clear_config()
