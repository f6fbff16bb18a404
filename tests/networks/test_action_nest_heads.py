"""Heads and distributions of action spaces beyond one Box / one Discrete: MultiDiscrete
and MultiBinary (MultiCategorical), Dict/Tuple nests (JointDistribution)."""
import pytest
import torch
import torch.distributions as td

import alf  # noqa: F401
from alf.environments.spec_utils import action_spec_from_space
from alf.errors import IncompatibleSpecError
from alf.networks.actor_distribution_networks import (ActorDistributionNetwork,
                                                      ActorDistributionRNNNetwork)
from alf.networks.projection_networks import (CategoricalProjectionNetwork,
                                              MultiCategoricalProjectionNetwork,
                                              NestedProjectionNetwork)
from alf.tensor_specs import BoundedTensorSpec, TensorSpec
from alf.utils import dist_utils
from alf.utils.distributions import FastCategorical, JointDistribution, MultiCategorical
from gymnasium import spaces

MULTI = BoundedTensorSpec((3,), torch.int64, [0, 1, -1], [2, 4, 0])  # sizes 3, 4, 2
HYBRID = {"sign": BoundedTensorSpec((), torch.int64, 0, 1),
          "size": BoundedTensorSpec((2,), torch.float32, 0.0, 1.0)}


def test_multi_categorical_sums_independent_dimensions():
    logits = [torch.randn(5, 3), torch.randn(5, 4), torch.randn(5, 2)]
    dist = MultiCategorical(logits, [0, 1, -1])
    refs = [td.Categorical(logits=l) for l in logits]
    value = torch.tensor([[2, 1, -1], [0, 4, 0], [1, 2, -1], [0, 3, 0], [2, 4, 0]])
    want = sum(r.log_prob(value[:, i] - o) for i, (r, o) in enumerate(zip(refs, [0, 1, -1])))
    torch.testing.assert_close(dist.log_prob(value), want)
    torch.testing.assert_close(dist.entropy(), sum(r.entropy() for r in refs))
    assert dist.batch_shape == (5,) and dist.event_shape == (3,)
    mode = dist.mode
    assert mode.tolist() == torch.stack([r.probs.argmax(-1) + o for r, o in
                                         zip(refs, [0, 1, -1])], -1).tolist()


def test_multi_discrete_head_samples_each_dimension_in_its_own_range():
    net = MultiCategoricalProjectionNetwork(6, MULTI)
    dist, _ = net(torch.randn(4000, 6))
    a = dist.sample()
    assert a.shape == (4000, 3) and a.dtype == torch.int64
    assert [sorted(set(a[:, i].tolist())) for i in range(3)] == [[0, 1, 2], [1, 2, 3, 4], [-1, 0]]
    assert net._layer.weight.shape == (9, 6)
    assert dist_utils.compute_log_probability(dist, a).shape == (4000,)


def test_multibinary_and_multidiscrete_spaces_get_multi_categorical():
    for space, sizes in [(spaces.MultiDiscrete([3, 5]), [3, 5]), (spaces.MultiBinary(4), [2] * 4)]:
        net = ActorDistributionNetwork(TensorSpec((2,)), action_spec_from_space(space),
                                       fc_layer_params=(8,))
        dist, _ = net(torch.randn(7, 2))
        assert isinstance(dist, MultiCategorical)
        assert [d.logits.shape[-1] for d in dist.dims] == sizes
        assert space.contains(dist.sample()[0].numpy().astype(space.dtype))


def test_joint_distribution_sums_leaves_and_gives_the_nest():
    net = NestedProjectionNetwork(5, HYBRID)
    dist, _ = net(torch.randn(6, 5))
    assert isinstance(dist, JointDistribution) and dist.batch_shape == (6,)
    sign, size = dist.dists["sign"], dist.dists["size"]
    assert isinstance(sign, FastCategorical) and isinstance(size, td.Independent)
    action = dist_utils.sample_action(dist)
    assert set(action) == {"sign", "size"}
    assert action["sign"].shape == (6,) and action["size"].shape == (6, 2)
    torch.testing.assert_close(dist_utils.compute_log_probability(dist, action),
                               sign.log_prob(action["sign"]) + size.log_prob(action["size"]))
    torch.testing.assert_close(dist_utils.compute_entropy(dist), sign.entropy() + size.entropy())
    mode = dist_utils.get_mode(dist)
    assert torch.equal(mode["sign"], sign.logits.argmax(-1)) and torch.equal(mode["size"],
                                                                             size.base_dist.loc)
    greedy = dist_utils.epsilon_greedy_sample(dist, 0.0)
    assert torch.equal(greedy["size"], mode["size"])


def test_tuple_nest_with_multi_discrete_and_rnn_actor():
    spec = action_spec_from_space(spaces.Tuple((spaces.MultiDiscrete([2, 3]),
                                                spaces.Box(-1, 1, (1,)))))
    net = ActorDistributionRNNNetwork(TensorSpec((3,)), spec, input_fc_layer_params=(8,),
                                      lstm_hidden_size=8)
    dist, _ = net(torch.randn(4, 3), net.get_initial_state(4))
    assert isinstance(dist.dists, tuple) and isinstance(dist.dists[0], MultiCategorical)
    a = dist_utils.sample_action(dist)
    assert a[0].shape == (4, 2) and a[1].shape == (4, 1)
    assert dist.log_prob(a).shape == (4,)


def test_single_specs_keep_their_plain_heads():
    net = ActorDistributionNetwork(TensorSpec((2,)), BoundedTensorSpec((), torch.int64, 0, 2),
                                   fc_layer_params=(8,))
    assert isinstance(net._projection, CategoricalProjectionNetwork)
    assert type(net(torch.randn(3, 2))[0]) is FastCategorical


def test_scalar_spec_refused_by_multi_head_with_the_fix():
    with pytest.raises(IncompatibleSpecError, match="CategoricalProjectionNetwork"):
        MultiCategoricalProjectionNetwork(4, BoundedTensorSpec((), torch.int64, 0, 2))
