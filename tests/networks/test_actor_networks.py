"""ActorNetwork: deterministic actions inside (asymmetric) bounds, spec errors."""
import math
import pickle

import gin
import pytest
import torch

import alf  # noqa: F401
from alf.errors import IncompatibleSpecError
from alf.networks import ActorNetwork
from alf.tensor_specs import BoundedTensorSpec, TensorSpec

OBS = TensorSpec((4,))
ASYM = BoundedTensorSpec((3,), torch.float32, [-2.0, 0.0, -0.3], [1.0, 5.0, 0.7])


def test_shapes_and_specs():
    net = ActorNetwork(OBS, ASYM, fc_layer_params=(16, 16))
    a, state = net(torch.randn(8, 4))
    assert a.shape == (8, 3) and a.dtype == torch.float32 and state == ()
    assert net.output_spec == ASYM and net.action_spec == ASYM
    a3, _ = net(torch.randn(2, 8, 4))
    assert a3.shape == (2, 8, 3)


def test_extreme_inputs_stay_within_and_reach_the_bounds():
    net = ActorNetwork(OBS, ASYM, fc_layer_params=(16,))
    lo, hi = torch.tensor(ASYM.minimum), torch.tensor(ASYM.maximum)
    x = torch.cat([torch.randn(64, 4) * s for s in (1.0, 1e3, 1e6, 1e30)])
    a, _ = net(x)
    assert torch.isfinite(a).all()
    assert (a >= lo).all() and (a <= hi).all()
    # saturated outputs land exactly on the bounds: drive the pre-tanh output to +-inf
    last = net._encoder._last_layer
    with torch.no_grad():
        last.weight.zero_()
        last.bias.copy_(torch.tensor([1e4, -1e4, 1e4]))
    a, _ = net(torch.randn(5, 4))
    torch.testing.assert_close(a, torch.tensor([1.0, 0.0, 0.7]).expand(5, 3), rtol=0, atol=0)


def test_affine_scaling_of_asymmetric_bounds():
    net = ActorNetwork(OBS, ASYM, fc_layer_params=(8,))
    last = net._encoder._last_layer
    u = torch.tensor([0.0, math.atanh(0.5), math.atanh(-0.5)])
    with torch.no_grad():
        last.weight.zero_()
        last.bias.copy_(u)
    a, _ = net(torch.randn(2, 4))
    # loc + scale * tanh(u): loc = (max + min) / 2, scale = (max - min) / 2
    expected = torch.tensor([-0.5 + 1.5 * 0.0, 2.5 + 2.5 * 0.5, 0.2 + 0.5 * -0.5])
    torch.testing.assert_close(a, expected.expand(2, 3), rtol=0, atol=1e-6)


def test_gradient_reaches_parameters():
    net = ActorNetwork(OBS, ASYM, fc_layer_params=(8,))
    net(torch.randn(4, 4))[0].sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in net.parameters())


def test_incompatible_action_specs():
    discrete = BoundedTensorSpec((), torch.int64, 0, 3)
    with pytest.raises(IncompatibleSpecError) as err:
        ActorNetwork(OBS, discrete)
    assert "ActorNetwork" in str(err.value) and repr(discrete) in str(err.value)
    with pytest.raises(IncompatibleSpecError, match="finite"):
        ActorNetwork(OBS, BoundedTensorSpec((2,), torch.float32, -math.inf, math.inf))
    with pytest.raises(IncompatibleSpecError):
        ActorNetwork(OBS, TensorSpec((2,)))  # unbounded
    with pytest.raises(IncompatibleSpecError):
        ActorNetwork(OBS, BoundedTensorSpec((2, 2), torch.float32, -1.0, 1.0))


def test_gin_and_pickle():
    gin.clear_config()
    try:
        gin.parse_config("""
ActorNetwork.fc_layer_params = (8, 4)
ActorNetwork.activation = @torch.tanh
""")
        net = ActorNetwork(OBS, ASYM)
        assert [l.out_features for l in net._encoder._fc_layers] == [8, 4]
        x = torch.randn(3, 4)
        clone = pickle.loads(pickle.dumps(net))
        torch.testing.assert_close(clone(x)[0], net(x)[0], rtol=0, atol=0)
    finally:
        gin.clear_config()
