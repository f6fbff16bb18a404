"""Actor-critic / PPO with one encoder shared by the policy and value heads
(``encoding_network_ctor``): parameters, one encoder pass per step, gradients of
both losses, recurrent heads, gin, and unchanged behaviour without it."""
import functools

import gin
import pytest
import torch
from torch import nn

import alf  # noqa: F401
from alf import nest
from alf.algorithms.actor_critic_algorithm import ActorCriticAlgorithm
from alf.algorithms.ppo_algorithm import PPOAlgorithm, PPORolloutInfo
from alf.algorithms.ppo_loss import PPOLoss
from alf.algorithms.replay_training import train_on_batch
from alf.data_structures import Experience, StepType, TimeStep
from alf.errors import IncompatibleSpecError
from alf.networks import (ActorDistributionNetwork, ActorDistributionRNNNetwork,
                          LSTMEncodingNetwork, NatureCnnEncoder, ValueNetwork, ValueRNNNetwork)
from alf.tensor_specs import BoundedTensorSpec, TensorSpec
from alf.utils.optimizers import Adam
from alf.utils.run_context import RunContext

IMAGE = BoundedTensorSpec((4, 36, 36), torch.uint8, 0, 255)  # Nature CNN: 64 x 1 x 1 -> fc 512
ACTIONS = BoundedTensorSpec((), torch.int64, 0, 3)
LINEAR_HEADS = dict(
    actor_network_ctor=functools.partial(ActorDistributionNetwork, fc_layer_params=()),
    value_network_ctor=functools.partial(ValueNetwork, fc_layer_params=()))
NATURE_PARAMS = (4 * 32 * 64 + 32) + (32 * 64 * 16 + 64) + (64 * 64 * 9 + 64) + (64 * 512 + 512)
HEAD_PARAMS = (512 * 4 + 4) + (512 + 1)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _alg(cls=PPOAlgorithm, heads=LINEAR_HEADS, **kwargs):
    kwargs.setdefault("encoding_network_ctor", NatureCnnEncoder)
    return cls(IMAGE, ACTIONS, context=RunContext(num_iterations=10), optimizer=Adam(lr=1e-3),
               **dict(heads, **kwargs))


def _time_step(n, seed=0, step_type=StepType.MID):
    g = torch.Generator().manual_seed(seed)
    return TimeStep(step_type=torch.full((n,), int(step_type), dtype=torch.int32),
                    reward=torch.rand(n, generator=g), discount=torch.ones(n),
                    observation=torch.randint(0, 256, (n,) + tuple(IMAGE.shape), dtype=torch.uint8,
                                              generator=g),
                    prev_action=torch.zeros(n, dtype=torch.int64), env_id=torch.arange(n),
                    env_info={})


def _experience(alg, n=6, length=1, advantages=None):
    """An Experience ``[n, length]`` as PPO's preprocess_experience leaves it."""
    steps = [_time_step(n, seed=t, step_type=StepType.FIRST if t == 0 else StepType.MID)
             for t in range(length)]
    state = alg.get_initial_rollout_state(n)
    exps = []
    with torch.no_grad():
        for ts in steps:
            out = alg.rollout_step(ts, state)
            adv = torch.randn(n) if advantages is None else advantages
            info = out.info._replace(advantages=adv, returns=torch.randn(n))
            exps.append(Experience(time_step=ts, action=out.output, rollout_info=info,
                                   state=state))
            state = out.state
    return nest.map_structure(lambda *xs: torch.stack(xs, dim=1), *exps)  # [n, length]


def _count(module):
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("cls", [PPOAlgorithm, ActorCriticAlgorithm])
def test_exactly_one_encoder_and_linear_heads(cls):
    alg = _alg(cls)
    assert isinstance(alg._encoder, NatureCnnEncoder)
    assert _count(alg) == NATURE_PARAMS + HEAD_PARAMS
    assert sum(isinstance(m, nn.Conv2d) for m in alg.modules()) == 3
    assert alg._actor_network.input_spec == TensorSpec((512,))
    assert alg._value_network.input_spec == TensorSpec((512,))
    names = [n for n, _ in alg.named_parameters()]
    assert names[0].startswith("_encoder.")  # the encoder comes first in the state dict


@pytest.mark.parametrize("cls", [PPOAlgorithm, ActorCriticAlgorithm])
def test_encoder_runs_once_per_step_and_feeds_both_heads(cls):
    alg = _alg(cls)
    calls = []
    alg._encoder.register_forward_hook(lambda m, i, o: calls.append(o[0].shape))
    ts = _time_step(5)
    out = alg.rollout_step(ts, alg.get_initial_rollout_state(5))
    assert calls == [(5, 512)]
    features, _ = alg._encoder(ts.observation)
    assert out.output.shape == (5,)
    torch.testing.assert_close(out.info.value, alg._value_network(features)[0])
    dist, _ = alg._actor_network(features)
    torch.testing.assert_close(out.info.log_prob, dist.log_prob(out.output))
    calls.clear()
    pred = alg.predict_step(ts, alg.get_initial_predict_state(5))
    assert calls == [(5, 512)] and torch.equal(pred.output, dist.mode)


def _changed(before, module):
    return [not torch.equal(b, p) for b, p in zip(before, module.parameters())]


def _snapshot(module):
    return [p.detach().clone() for p in module.parameters()]


def test_policy_loss_alone_and_value_loss_alone_both_train_the_encoder():
    # policy loss only: no value term, no entropy
    alg = _alg(loss_ctor=functools.partial(PPOLoss, td_loss_weight=0.0))
    parts = (alg._encoder, alg._actor_network, alg._value_network)
    before = [_snapshot(m) for m in parts]
    train_on_batch(alg, _experience(alg))
    enc, actor, value = (_changed(b, m) for b, m in zip(before, parts))
    assert all(enc) and all(actor) and not any(value)

    # value loss only: zero advantages (no normalisation) give no policy gradient
    alg = _alg(loss_ctor=functools.partial(PPOLoss, normalize_advantages=False))
    parts = (alg._encoder, alg._actor_network, alg._value_network)
    before = [_snapshot(m) for m in parts]
    train_on_batch(alg, _experience(alg, advantages=torch.zeros(6)))
    enc, actor, value = (_changed(b, m) for b, m in zip(before, parts))
    assert all(enc) and all(value) and not any(actor)


def test_both_gradients_reach_the_shared_encoder():
    alg = _alg()
    ts = _time_step(4)
    dist, value, _ = alg._policy(ts.observation, alg.get_initial_train_state(4))
    conv = alg._encoder._conv_layers[0].weight
    g_value, = torch.autograd.grad(value.sum(), conv, retain_graph=True)
    g_policy, = torch.autograd.grad(dist.log_prob(torch.zeros(4, dtype=torch.int64)).sum(), conv)
    assert g_value.abs().sum() > 0 and g_policy.abs().sum() > 0
    assert not torch.allclose(g_value, g_policy)


def test_a2c_update_trains_the_shared_encoder():
    alg = _alg(ActorCriticAlgorithm)
    before = _snapshot(alg._encoder)
    state = alg.get_initial_rollout_state(3)
    infos = []
    for t in range(3):  # on-policy: the unroll keeps the graph
        out = alg.rollout_step(_time_step(3, seed=t), state)
        infos.append(out.info)
        state = out.state
    alg.update_with_gradient(alg.calc_loss(nest.stack(infos)))  # [T, B]
    assert all(_changed(before, alg._encoder))


def test_recurrent_heads_on_the_shared_encoder():
    heads = dict(
        actor_network_ctor=functools.partial(ActorDistributionRNNNetwork,
                                             input_fc_layer_params=(16,), lstm_hidden_size=8),
        value_network_ctor=functools.partial(ValueRNNNetwork, input_fc_layer_params=(16,),
                                             lstm_hidden_size=8))
    alg = _alg(heads=heads)
    assert alg.train_state_spec.actor == ((TensorSpec((8,)), TensorSpec((8,))),)
    state = alg.get_initial_rollout_state(2)
    out = alg.rollout_step(_time_step(2), state)
    h, c = out.state.actor[0]
    assert h.shape == (2, 8) and h.abs().sum() > 0 and out.state.value[0][0].abs().sum() > 0
    pred = alg.predict_step(_time_step(2), alg.get_initial_predict_state(2))
    assert pred.state.actor[0][0].shape == (2, 8)
    # mini-batch of sequences [B=2, L=3]: train_step is stepped with the carried state
    before = _snapshot(alg._encoder)
    loss_info, info = train_on_batch(alg, _experience(alg, n=2, length=3))
    assert info.value.shape == (3, 2) and torch.isfinite(loss_info.loss)
    assert all(_changed(before, alg._encoder))


def test_stateful_or_non_vector_encoders_are_rejected():
    with pytest.raises(IncompatibleSpecError, match="stateless encoder"):
        PPOAlgorithm(TensorSpec((3,)), ACTIONS, context=RunContext(),
                     encoding_network_ctor=LSTMEncodingNetwork)
    with pytest.raises(IncompatibleSpecError, match=r"\[C, H, W\] image"):
        PPOAlgorithm(TensorSpec((3,)), ACTIONS, context=RunContext(),
                     encoding_network_ctor=NatureCnnEncoder)


def test_without_encoder_parameters_and_their_order_are_unchanged():
    obs = TensorSpec((4,))
    actor_ctor = functools.partial(ActorDistributionNetwork, fc_layer_params=(8,))
    value_ctor = functools.partial(ValueNetwork, fc_layer_params=(8,))
    torch.manual_seed(3)
    alg = PPOAlgorithm(obs, ACTIONS, context=RunContext(), actor_network_ctor=actor_ctor,
                       value_network_ctor=value_ctor)
    torch.manual_seed(3)
    actor = actor_ctor(input_spec=obs, action_spec=ACTIONS)
    value = value_ctor(input_spec=obs)
    expected = ([("_actor_network." + n, p) for n, p in actor.named_parameters()]
                + [("_value_network." + n, p) for n, p in value.named_parameters()])
    got = list(alg.named_parameters())
    assert [n for n, _ in got] == [n for n, _ in expected]
    assert all(torch.equal(a, b) for (_, a), (_, b) in zip(got, expected))
    assert alg._encoder is None


def test_gin_binding_of_the_shared_encoder(clean_gin):
    gin.parse_config("""
        PPOAlgorithm.encoding_network_ctor = @NatureCnnEncoder
        ActorDistributionNetwork.fc_layer_params = ()
        ValueNetwork.fc_layer_params = ()
    """)
    alg = PPOAlgorithm(IMAGE, ACTIONS, context=RunContext())
    assert isinstance(alg._encoder, NatureCnnEncoder)
    assert _count(alg) == NATURE_PARAMS + HEAD_PARAMS
    out = alg.rollout_step(_time_step(2), alg.get_initial_rollout_state(2))
    assert out.output.shape == (2,) and isinstance(out.info, PPORolloutInfo)
