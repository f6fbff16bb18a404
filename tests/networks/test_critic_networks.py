"""Ensemble layers and CriticNetwork: each member equals an nn.Sequential with its weights."""
import pickle

import gin
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import alf  # noqa: F401
from alf.errors import IncompatibleSpecError
from alf.networks import CriticNetwork, EnsembleLinear, EnsembleMLP
from alf.tensor_specs import BoundedTensorSpec, TensorSpec

OBS = TensorSpec((17,))
ACT = BoundedTensorSpec((6,), torch.float32, -1.0, 1.0)


def _sequential(layers, k: int, activation=nn.ReLU) -> nn.Sequential:
    """nn.Sequential of nn.Linear holding member ``k``'s weights of ``layers``."""
    modules = []
    for i, layer in enumerate(layers):
        lin = nn.Linear(layer.in_features, layer.out_features)
        with torch.no_grad():
            lin.weight.copy_(layer.weight[k].t())
            lin.bias.copy_(layer.bias[k, 0])
        modules.append(lin)
        if i < len(layers) - 1:
            modules.append(activation())
    return nn.Sequential(*modules)


def _linears(seq: nn.Sequential):
    return [m for m in seq if isinstance(m, nn.Linear)]


def _sb3_style_critics(d_in, hidden, k):
    """What SB3's ContinuousCritic builds: K sequentials, one after another."""
    out = []
    for _ in range(k):
        layers, size = [], d_in
        for h in hidden:
            layers += [nn.Linear(size, h), nn.ReLU()]
            size = h
        out.append(nn.Sequential(*layers, nn.Linear(size, 1)))
    return out


@pytest.mark.parametrize("out", [1, 3])  # 1: the multiply-and-sum head path
@pytest.mark.parametrize("bias", [True, False])
def test_ensemble_linear_shared_and_per_member_inputs(out, bias):
    layer = EnsembleLinear(5, out, ensemble_size=4, bias=bias)
    assert layer.weight.shape == (4, 5, out)
    assert layer.bias is None if not bias else layer.bias.shape == (4, 1, out)
    x = torch.randn(7, 5, requires_grad=True)
    y = layer(x)
    assert y.shape == (4, 7, out)
    xs = torch.randn(4, 7, 5)
    ys = layer(xs)
    for k in range(4):
        b = layer.bias[k, 0] if bias else None
        torch.testing.assert_close(y[k], F.linear(x, layer.weight[k].t(), b), rtol=0, atol=1e-6)
        torch.testing.assert_close(ys[k], F.linear(xs[k], layer.weight[k].t(), b), rtol=0, atol=1e-6)
    # gradient into a shared input sums over the members
    y.sum().backward()
    torch.testing.assert_close(x.grad, layer.weight.sum(dim=(0, 2)).expand(7, 5), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"\[4, B, 5\]"):
        layer(torch.randn(3, 7, 5))  # wrong ensemble size


def test_ensemble_init_is_nn_linear_default_and_same_random_stream():
    torch.manual_seed(123)
    ens = EnsembleMLP(23, (64, 32), ensemble_size=2, output_size=1)
    torch.manual_seed(123)
    seqs = _sb3_style_critics(23, (64, 32), 2)
    for k, seq in enumerate(seqs):
        for layer, lin in zip(ens.layers, _linears(seq)):
            assert torch.equal(layer.weight[k], lin.weight.t())
            assert torch.equal(layer.bias[k, 0], lin.bias)
    # bounds of nn.Linear's default init: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    big = EnsembleLinear(100, 50, 3)
    assert big.weight.abs().max() <= 0.1 and big.bias.abs().max() <= 0.1
    assert big.weight.abs().max() > 0.09  # uniform over the whole range, not a narrower init


def test_critic_network_init_equals_sb3_style_critics_from_same_seed():
    torch.manual_seed(7)
    net = CriticNetwork((OBS, ACT), fc_layer_params=(32, 32))
    torch.manual_seed(7)
    seqs = _sb3_style_critics(23, (32, 32), 2)
    obs, act = torch.randn(9, 17), torch.rand(9, 6) * 2 - 1
    q, _ = net((obs, act))
    x = torch.cat([obs, act], 1)
    torch.testing.assert_close(q, torch.cat([s(x) for s in seqs], 1), rtol=0, atol=1e-6)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_critic_members_equal_sequentials_values_and_gradients(k):
    net = CriticNetwork((OBS, ACT), fc_layer_params=(64, 48), num_critics=k)
    assert net.output_spec == TensorSpec((k,)) and net.num_critics == k
    layers = list(net._joint_mlp.layers)
    seqs = [_sequential(layers, i) for i in range(k)]
    obs = torch.randn(32, 17)
    act = (torch.rand(32, 6) * 2 - 1).requires_grad_(True)
    act_ref = act.detach().clone().requires_grad_(True)
    target = torch.randn(32, 1)

    q, state = net((obs, act))
    assert q.shape == (32, k) and state == ()
    x = torch.cat([obs, act_ref], 1)
    q_ref = torch.cat([s(x) for s in seqs], 1)
    torch.testing.assert_close(q, q_ref, rtol=0, atol=1e-6)

    # SB3's critic loss; and the gradients of every member and of the action agree
    (0.5 * ((q - target) ** 2).mean(0).sum()).backward()
    (0.5 * sum(F.mse_loss(q_ref[:, i:i + 1], target) for i in range(k))).backward()
    for i, seq in enumerate(seqs):
        for layer, lin in zip(layers, _linears(seq)):
            torch.testing.assert_close(layer.weight.grad[i], lin.weight.grad.t(), rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(layer.bias.grad[i, 0], lin.bias.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(act.grad, act_ref.grad, rtol=1e-5, atol=1e-6)


def test_frozen_critic_gives_action_gradient_only():
    net = CriticNetwork((OBS, ACT), fc_layer_params=(16, 16))
    seqs = [_sequential(list(net._joint_mlp.layers), i) for i in range(2)]
    net.requires_grad_(False)
    obs = torch.randn(8, 17)
    act = torch.zeros(8, 6, requires_grad=True)
    q, _ = net((obs, act))
    (-q.min(dim=1)[0].mean()).backward()  # SAC actor loss
    assert all(p.grad is None for p in net.parameters())
    act_ref = torch.zeros(8, 6, requires_grad=True)
    x = torch.cat([obs, act_ref], 1)
    (-torch.min(seqs[0](x), seqs[1](x))[:, 0].mean()).backward()
    torch.testing.assert_close(act.grad, act_ref.grad, rtol=1e-5, atol=1e-6)


def test_forward_critic_is_one_column_and_touches_one_member():
    net = CriticNetwork((OBS, ACT), fc_layer_params=(16,), num_critics=3,
                        observation_fc_layer_params=(8,))
    obs, act = torch.randn(5, 17), torch.randn(5, 6)
    q, _ = net((obs, act))
    for i in range(3):
        torch.testing.assert_close(net.forward_critic((obs, act), i), q[:, i], rtol=0, atol=1e-6)
    net.forward_critic((obs, act), 1).sum().backward()
    for layer in list(net._obs_mlp.layers) + list(net._joint_mlp.layers):
        assert layer.weight.grad[1].abs().sum() > 0
        assert layer.weight.grad[0].abs().sum() == 0 and layer.weight.grad[2].abs().sum() == 0
    with pytest.raises(IndexError):
        net.forward_critic((obs, act), 3)


def test_observation_fc_layers_and_outer_dims():
    net = CriticNetwork((OBS, ACT), fc_layer_params=(16,), num_critics=2,
                        observation_fc_layer_params=(12, 8))
    obs, act = torch.randn(4, 17), torch.randn(4, 6)
    q, _ = net((obs, act))
    for i in range(2):
        obs_seq = _sequential(list(net._obs_mlp.layers), i)
        h = torch.relu(obs_seq(obs))  # hidden layers: activation after the last one too
        ref = _sequential(list(net._joint_mlp.layers), i)(torch.cat([h, act], 1))
        torch.testing.assert_close(q[:, i:i + 1], ref, rtol=0, atol=1e-6)
    # [T, B, ...] in -> [T, B, K] out, same numbers as the flattened batch
    obs3, act3 = torch.randn(3, 4, 17), torch.randn(3, 4, 6)
    q3, _ = net((obs3, act3))
    assert q3.shape == (3, 4, 2)
    torch.testing.assert_close(q3.reshape(12, 2), net((obs3.reshape(12, 17), act3.reshape(12, 6)))[0])


def test_nested_observation_is_flattened_like_encoding_network():
    obs_spec = {"vel": TensorSpec((2,)), "pos": TensorSpec((3,)),
                "mode": BoundedTensorSpec((), torch.int64, 1, 3)}
    net = CriticNetwork((obs_spec, ACT), fc_layer_params=(16,), num_critics=2)
    obs = {"vel": torch.randn(5, 2), "pos": torch.randn(5, 3), "mode": torch.tensor([1, 2, 3, 1, 2])}
    act = torch.randn(5, 6)
    q, _ = net((obs, act))
    assert q.shape == (5, 2) and net._joint_mlp.input_size == 3 + 3 + 2 + 6
    # alf.nest.flatten order (sorted keys): mode (one-hot over {1, 2, 3}), pos, vel; then action
    x = torch.cat([F.one_hot(obs["mode"] - 1, 3).float(), obs["pos"], obs["vel"], act], 1)
    for i in range(2):
        ref = _sequential(list(net._joint_mlp.layers), i)(x)
        torch.testing.assert_close(q[:, i:i + 1], ref, rtol=0, atol=1e-6)


def test_incompatible_specs():
    discrete = BoundedTensorSpec((), torch.int64, 0, 3)
    with pytest.raises(IncompatibleSpecError, match=r"CriticNetwork.*BoundedTensorSpec\(shape=\(\)"):
        CriticNetwork((OBS, discrete))
    with pytest.raises(IncompatibleSpecError, match="observation_spec, action_spec"):
        CriticNetwork(OBS)


def test_gin_and_pickle():
    gin.clear_config()
    try:
        gin.parse_config("""
CriticNetwork.fc_layer_params = (32,)
CriticNetwork.num_critics = 3
CriticNetwork.activation = @torch.tanh
""")
        net = CriticNetwork((OBS, ACT))
        assert net.num_critics == 3 and net._joint_mlp.layers[0].out_features == 32
        obs, act = torch.randn(4, 17), torch.randn(4, 6)
        q, _ = net((obs, act))
        ref = _sequential(list(net._joint_mlp.layers), 1, nn.Tanh)(torch.cat([obs, act], 1))
        torch.testing.assert_close(q[:, 1:2], ref, rtol=0, atol=1e-6)
        clone = pickle.loads(pickle.dumps(net))
        torch.testing.assert_close(clone((obs, act))[0], q, rtol=0, atol=0)
    finally:
        gin.clear_config()
