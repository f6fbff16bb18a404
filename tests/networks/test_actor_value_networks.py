"""Actor-distribution and value networks (MLP, CNN, LSTM), gin, pickling, devices."""
import math
import pickle

import gin
import pytest
import torch
import torch.distributions as td

import alf  # noqa: F401
from alf.errors import IncompatibleSpecError
from alf.networks import (ActorDistributionNetwork, ActorDistributionRNNNetwork,
                          NormalProjectionNetwork, ValueNetwork, ValueRNNNetwork)
from alf.tensor_specs import BoundedTensorSpec, TensorSpec

OBS = TensorSpec((4,))
DISCRETE = BoundedTensorSpec((), torch.int64, 0, 1)
BOX = BoundedTensorSpec((2,), torch.float32, -1.0, 1.0)
IMAGE = BoundedTensorSpec((4, 84, 84), torch.uint8, 0, 255)


def test_actor_discrete_and_continuous():
    x = torch.randn(8, 4)
    dist, state = ActorDistributionNetwork(OBS, DISCRETE)(x)
    assert isinstance(dist, td.Categorical) and dist.logits.shape == (8, 2) and state == ()
    dist, _ = ActorDistributionNetwork(OBS, BOX)(x)
    assert dist.sample().shape == (8, 2) and dist.log_prob(dist.sample()).shape == (8,)
    # policy head gain 0.01: initial policy is nearly uniform
    dist, _ = ActorDistributionNetwork(OBS, DISCRETE)(x)
    torch.testing.assert_close(dist.probs, torch.full((8, 2), 0.5), atol=0.05, rtol=0)


def test_actor_image_and_dict_inputs():
    net = ActorDistributionNetwork(IMAGE, BoundedTensorSpec((), torch.int64, 0, 5),
                                   conv_layer_params=((8, 8, 4), (8, 4, 2)), fc_layer_params=(32,),
                                   activation=torch.relu)
    dist, _ = net(torch.randint(0, 256, (2, 4, 84, 84), dtype=torch.uint8))
    assert dist.logits.shape == (2, 6)
    spec = {"pos": TensorSpec((3,)), "vel": TensorSpec((2,))}
    net = ActorDistributionNetwork(spec, BOX, fc_layer_params=(16,))
    dist, _ = net({"pos": torch.randn(5, 3), "vel": torch.randn(5, 2)})
    assert dist.sample().shape == (5, 2)


def test_value_networks():
    net = ValueNetwork(OBS)
    value, state = net(torch.randn(8, 4))
    assert value.shape == (8,) and value.dtype == torch.float32 and state == ()
    assert net.output_spec == TensorSpec(())
    sv = torch.linalg.svdvals(net._encoder._last_layer.weight.detach())
    torch.testing.assert_close(sv, torch.ones_like(sv), atol=1e-5, rtol=1e-5)  # value gain 1.0
    value, _ = ValueNetwork(IMAGE, conv_layer_params=((8, 8, 4),), fc_layer_params=(16,))(
        torch.zeros(3, 4, 84, 84, dtype=torch.uint8))
    assert value.shape == (3,)


def test_rnn_actor_and_value():
    actor = ActorDistributionRNNNetwork(OBS, BOX, input_fc_layer_params=(16,), lstm_hidden_size=8,
                                        actor_fc_layer_params=(8,))
    value = ValueRNNNetwork(OBS, input_fc_layer_params=(16,), lstm_hidden_size=(8, 4))
    assert actor.state_spec == ((TensorSpec((8,)), TensorSpec((8,))),)
    x = torch.randn(3, 4)
    state = actor.get_initial_state(3)
    d1, s1 = actor(x, state)
    d2, _ = actor(x, s1)
    assert d1.mean.shape == (3, 2) and s1[0][0].shape == (3, 8)
    assert not torch.allclose(d1.mean, d2.mean)
    v_state = value.get_initial_state(3)
    v, v_state = value(x, v_state)
    assert v.shape == (3,) and v_state[1][1].shape == (3, 4)


def test_gin_bindings():
    gin.clear_config()
    try:
        gin.parse_config("""
ActorDistributionNetwork.fc_layer_params = (32, 16)
ActorDistributionNetwork.activation = @torch.relu
ActorDistributionNetwork.continuous_projection_net_ctor = @NormalProjectionNetwork
NormalProjectionNetwork.scale_distribution = True
""")
        net = ActorDistributionNetwork(OBS, BOX)
        assert [l.out_features for l in net._encoder._fc_layers] == [32, 16]
        dist, _ = net(torch.randn(2, 4))
        assert isinstance(dist, td.TransformedDistribution)
        clone = pickle.loads(pickle.dumps(net))
        x = torch.randn(3, 4)
        torch.testing.assert_close(clone(x)[0].base_dist.mean, net(x)[0].base_dist.mean)
    finally:
        gin.clear_config()


def test_incompatible_action_specs():
    # [D] discrete actions and Dict/Tuple nests have their own heads
    # (tests/networks/test_action_nest_heads.py); a 2-d MultiDiscrete and a nest leaf that
    # is no spec are refused, naming the fix
    with pytest.raises(IncompatibleSpecError, match="flatten nvec"):
        ActorDistributionNetwork(OBS, BoundedTensorSpec((2, 3), torch.int64, 0, 2))
    with pytest.raises(IncompatibleSpecError, match="must be a TensorSpec"):
        ActorDistributionNetwork(OBS, {"a": DISCRETE, "b": "box"})


@pytest.mark.parametrize("ctor", [
    lambda: ActorDistributionNetwork(OBS, DISCRETE),
    lambda: ActorDistributionNetwork(OBS, BOX,
                                     continuous_projection_net_ctor=NormalProjectionNetwork),
    lambda: ValueNetwork(OBS),
])
def test_pickle_round_trip_identical_outputs(ctor):
    net = ctor()
    clone = pickle.loads(pickle.dumps(net))
    x = torch.randn(6, 4)
    for a, b in zip(_as_tensors(net(x)[0]), _as_tensors(clone(x)[0])):
        torch.testing.assert_close(b, a, rtol=0, atol=0)


def _as_tensors(out):
    if isinstance(out, td.Categorical):
        return [out.logits]
    if isinstance(out, td.Distribution):
        return [out.mean, out.stddev]
    return [out]


def test_buffers_move_with_to():
    squashed = NormalProjectionNetwork(3, BOX, scale_distribution=True).to(torch.float64)
    assert squashed._action_scale.dtype == torch.float64
    dist, _ = squashed(torch.randn(1, 3, dtype=torch.float64))
    assert math.isfinite(dist.log_prob(torch.ones(1, 2, dtype=torch.float64)).item())
    assert "_action_scale" not in squashed.state_dict()  # derived from the spec, not saved


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_forward_sample_log_prob():
    from alf.utils import dist_utils
    dev = torch.device("cuda")
    for spec in (DISCRETE, BoundedTensorSpec((), torch.int64, 2, 4), BOX):
        actor = ActorDistributionRNNNetwork(OBS, spec, lstm_hidden_size=8).to(dev)
        dist, state = actor(torch.randn(3, 4, device=dev), actor.get_initial_state(3))
        a = dist_utils.sample_action(dist)
        assert a.device.type == "cuda" and state[0][0].device.type == "cuda"
        assert dist_utils.compute_log_probability(dist, a).shape == (3,)
        assert dist_utils.compute_entropy(dist).device.type == "cuda"
    squashed = NormalProjectionNetwork(4, BOX, scale_distribution=True).to(dev)
    dist, _ = squashed(torch.randn(3, 4, device=dev))
    assert torch.isfinite(dist.log_prob(torch.ones(3, 2, device=dev))).all()
    value = ValueNetwork(IMAGE, conv_layer_params=((8, 8, 4),)).to(dev)
    assert value(torch.zeros(2, 4, 84, 84, dtype=torch.uint8, device=dev))[0].shape == (2,)
