"""PPO: the clipped loss by hand, GAE preprocessing, whole-buffer mini-batching, training
through the Learner."""
import functools
import math

import pytest
import torch

from alf import nest
from alf.algorithms.ppo_algorithm import PPOAlgorithm, PPORolloutInfo, PPOTrainInfo
from alf.algorithms.ppo_loss import PPOLoss
from alf.algorithms.replay_training import whole_buffer_mini_batches
from alf.data_structures import Experience, StepType, TimeStep
from alf.environments.factory import create_environment
from alf.errors import ConfigError
from alf.networks import (ActorDistributionNetwork, ActorDistributionRNNNetwork, ValueNetwork,
                          ValueRNNNetwork)
from alf.tensor_specs import BoundedTensorSpec, TensorSpec
from alf.trainers.trainer_config import TrainerConfig
from alf.utils import value_ops
from alf.utils.optimizers import Adam
from alf.utils.run_context import RunContext
from alf.utils.schedules import LinearSchedule
from tests.learner_helpers import learner_for

F, M, L = StepType.FIRST, StepType.MID, StepType.LAST

# ------------------------------------------------------------------ PPOLoss by hand
# Four samples laid out [T=2, B=2] (row-major: k = 2 t + b); k = 2 is a LAST step (masked).
STEP = [M, M, L, F]
ADV = [4.0, 0.0, 9.0, -2.0]
LOGP = [0.5, -0.1, 0.0, -0.5]
OLD_LOGP = [0.0, 0.0, 0.0, 0.0]
VALUE = [2.0, 1.2, 5.0, 0.0]
OLD_VALUE = [1.0, 1.0, 0.0, 1.0]
RETURNS = [3.0, 0.0, -5.0, 0.2]
ENTROPY = [0.5, 0.7, 0.9, 1.1]
VALID = [0, 1, 3]


def _ppo_info(requires_grad=False):
    t = lambda xs, dt=torch.float32: torch.tensor(xs, dtype=dt).reshape(2, 2)  # noqa: E731
    return PPOTrainInfo(step_type=t(STEP, torch.int32),
                        log_prob=t(LOGP).requires_grad_(requires_grad), old_log_prob=t(OLD_LOGP),
                        value=t(VALUE).requires_grad_(requires_grad), old_value=t(OLD_VALUE),
                        advantages=t(ADV), returns=t(RETURNS), entropy=t(ENTROPY))


def _normalised_advantages():
    xs = [ADV[k] for k in VALID]
    mean = sum(xs) / len(xs)
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1))  # unbiased, as SB3
    return {k: (ADV[k] - mean) / (std + 1e-8) for k in VALID}


def _expected_ppo(eps, normalize=True, value_clip=None, ent_reg=0.01, td_weight=0.5):
    adv = _normalised_advantages() if normalize else {k: ADV[k] for k in VALID}
    total = 0.0
    for k in VALID:
        ratio = math.exp(LOGP[k] - OLD_LOGP[k])
        pg = -min(ratio * adv[k], min(max(ratio, 1 - eps), 1 + eps) * adv[k])
        td = (RETURNS[k] - VALUE[k]) ** 2
        if value_clip is not None:
            v = OLD_VALUE[k] + min(max(VALUE[k] - OLD_VALUE[k], -value_clip), value_clip)
            td = max(td, (RETURNS[k] - v) ** 2)
        total += pg + td_weight * td - ent_reg * ENTROPY[k]
    return total / len(VALID)


def test_ppo_loss_by_hand_with_clipping_schedule_value_clipping_and_masking():
    # eps from the schedule at progress 0.5: 0.3 -> 0.1 gives 0.2
    loss_fn = PPOLoss(importance_ratio_clipping=LinearSchedule(0.3, 0.1),
                      entropy_regularization=0.01, td_loss_weight=0.5, value_clipping=0.5)
    info = _ppo_info(requires_grad=True)
    out = loss_fn(info, progress=0.5)
    assert out.loss.shape == (2, 2)
    assert out.loss[1, 0].item() == 0.0  # the LAST sample contributes nothing
    expected = _expected_ppo(eps=0.2, value_clip=0.5)
    assert out.loss.mean().item() == pytest.approx(expected, rel=1e-5)
    # value clipping active on k=0 (2.25 > 1.0) and k=3 (0.09 > 0.04), not on k=1
    assert expected != pytest.approx(_expected_ppo(eps=0.2, value_clip=None), rel=1e-3)
    # a different progress gives a different clip range (0.3 at progress 0)
    assert loss_fn(_ppo_info(), progress=0.0).loss.mean().item() == pytest.approx(
        _expected_ppo(eps=0.3, value_clip=0.5), rel=1e-5)

    out.loss.mean().backward()
    adv = _normalised_advantages()
    grad = info.log_prob.grad.reshape(-1).tolist()
    # k=0: ratio 1.65 > 1.2 with A > 0 -> clipped, no gradient; k=3: ratio 0.61 < 0.8 with
    # A < 0 -> clipped, no gradient; k=1: ratio 0.905 inside -> d/dlogp = -ratio * A / 3
    assert adv[0] > 0 and adv[3] < 0 and adv[1] < 0
    assert grad == pytest.approx([0.0, -math.exp(-0.1) * adv[1] / 3, 0.0, 0.0], abs=1e-6)
    # value gradient: k=0 and k=3 go through the clipped value (constant) -> 0; k=1: 0.5*2*(V-R)/3
    assert info.value.grad.reshape(-1).tolist() == pytest.approx([0.0, 1.2 / 3, 0.0, 0.0], abs=1e-6)

    extra = out.extra
    ratios = [math.exp(LOGP[k]) for k in VALID]
    assert extra.clip_fraction.item() == pytest.approx(2 / 3)
    assert extra.importance_ratio.item() == pytest.approx(sum(ratios) / 3, rel=1e-5)
    assert extra.approx_kl.item() == pytest.approx(
        sum((r - 1) - math.log(r) for r in ratios) / 3, rel=1e-5)
    assert extra.neg_entropy.item() == pytest.approx(-(0.5 + 0.7 + 1.1) / 3, rel=1e-5)


def test_ppo_loss_without_normalisation_and_without_summaries():
    loss_fn = PPOLoss(importance_ratio_clipping=0.2, normalize_advantages=False,
                      entropy_regularization=0.0, td_loss_weight=1.0)
    out = loss_fn(_ppo_info(), progress=0.9, with_summaries=False)
    assert out.extra == ()
    assert out.loss.mean().item() == pytest.approx(
        _expected_ppo(eps=0.2, normalize=False, ent_reg=0.0, td_weight=1.0), rel=1e-5)


# ------------------------------------------------------------ preprocess_experience
def _ppo(env=None, context=None, rnn=False, **kwargs):
    obs_spec = env.observation_spec() if env is not None else TensorSpec((4,))
    act_spec = env.action_spec() if env is not None else BoundedTensorSpec((), torch.int64, 0, 1)
    if rnn:
        actor = functools.partial(ActorDistributionRNNNetwork, input_fc_layer_params=(8,),
                                  lstm_hidden_size=8)
        value = functools.partial(ValueRNNNetwork, input_fc_layer_params=(8,), lstm_hidden_size=8)
    else:
        actor = functools.partial(ActorDistributionNetwork, fc_layer_params=(8,))
        value = functools.partial(ValueNetwork, fc_layer_params=(8,))
    return PPOAlgorithm(obs_spec, act_spec,
                        context=context or RunContext(num_iterations=10),
                        actor_network_ctor=actor, value_network_ctor=value,
                        optimizer=Adam(lr=1e-3), **kwargs)


def _buffer_experience(B=2, T=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    step_type = torch.tensor([[F, M, L, F, M], [M, M, M, L, F]], dtype=torch.int32)[:B, :T]
    discount = torch.tensor([[1., 1., 0., 1., 1.], [1., 1., 1., 1., 1.]])[:B, :T]  # env1 truncated
    reward = torch.rand(B, T, generator=g) * (step_type != F)
    ts = TimeStep(step_type=step_type, reward=reward, discount=discount,
                  observation=torch.randn(B, T, 4, generator=g),
                  prev_action=torch.zeros(B, T, dtype=torch.int64),
                  env_id=torch.arange(B)[:, None].expand(B, T), env_info={})
    info = PPORolloutInfo(log_prob=-torch.rand(B, T, generator=g),
                          value=torch.randn(B, T, generator=g))  # as stored: no advantages
    return Experience(time_step=ts, action=torch.randint(0, 2, (B, T), generator=g),
                      rollout_info=info, state=())


def test_preprocess_experience_fills_gae_advantages_and_drops_the_bootstrap_step():
    alg = _ppo(gamma=0.9, gae_lambda=0.8)
    exp = _buffer_experience()
    out = alg.preprocess_experience(exp)
    for x in nest.flatten(out):
        assert x.shape[:2] == (2, 4)  # [B, T-1]
    ts = exp.time_step
    expected = value_ops.generalized_advantage_estimation(
        ts.reward.T, exp.rollout_info.value.T, ts.step_type.T, ts.discount.T, 0.9, 0.8).T
    torch.testing.assert_close(out.rollout_info.advantages, expected)
    torch.testing.assert_close(out.rollout_info.returns, expected + exp.rollout_info.value[:, :-1])
    assert out.rollout_info.advantages[0, 2] == 0.0  # LAST: nothing flows across the boundary
    torch.testing.assert_close(out.time_step.observation, ts.observation[:, :-1])
    torch.testing.assert_close(out.rollout_info.value, exp.rollout_info.value[:, :-1])
    assert torch.equal(out.action, exp.action[:, :-1])


def test_preprocess_experience_known_answer():
    # one env, T=4: F M L(terminated) F, rewards 0 1 2 0, values .5 1 1.5 2, gamma .9, lambda .8
    # -> advantages (2.12, 1.0, 0.0) as worked out in tests/algorithms/test_actor_critic.py
    alg = _ppo(gamma=0.9, gae_lambda=0.8)
    exp = _buffer_experience(B=1, T=4)
    ts = exp.time_step._replace(step_type=torch.tensor([[F, M, L, F]], dtype=torch.int32),
                                reward=torch.tensor([[0., 1., 2., 0.]]),
                                discount=torch.tensor([[1., 1., 0., 1.]]))
    exp = exp._replace(time_step=ts, rollout_info=exp.rollout_info._replace(
        value=torch.tensor([[0.5, 1.0, 1.5, 2.0]])))
    out = alg.preprocess_experience(exp)
    assert out.rollout_info.advantages.tolist()[0] == pytest.approx([2.12, 1.0, 0.0])
    assert out.rollout_info.returns.tolist()[0] == pytest.approx([2.62, 2.0, 1.5])


# ---------------------------------------------------------- whole-buffer mini-batches
def _indexed(B, T):
    idx = torch.arange(B * T).reshape(B, T)  # idx = b * T + t
    return {"idx": idx, "x": idx.float()[..., None].expand(B, T, 3)}


def test_whole_buffer_mini_batches_length_one_covers_every_step_once_per_epoch():
    exp = _indexed(3, 7)
    gen = torch.Generator().manual_seed(0)
    epochs = []
    for _ in range(2):
        batches = list(whole_buffer_mini_batches(exp, 4, 1, generator=gen))
        assert [b["idx"].shape for b in batches] == [(4, 1)] * 5 + [(1, 1)]  # 21 = 5 * 4 + 1
        assert all(torch.equal(b["x"][..., 0], b["idx"].float()) for b in batches)
        seen = torch.cat([b["idx"].reshape(-1) for b in batches])
        assert sorted(seen.tolist()) == list(range(21))
        epochs.append(seen.tolist())
    assert epochs[0] != epochs[1]  # reshuffled every epoch
    # mini_batch_size None: one batch holding everything
    (whole,) = list(whole_buffer_mini_batches(exp, None, 1))
    assert whole["idx"].shape == (21, 1)


def test_whole_buffer_mini_batches_segments_are_consecutive_steps_of_one_env():
    B, T, L = 3, 8, 4
    batches = list(whole_buffer_mini_batches(_indexed(B, T), 2, L,
                                             generator=torch.Generator().manual_seed(1)))
    assert [b["idx"].shape for b in batches] == [(2, L)] * 3
    segs = torch.cat([b["idx"] for b in batches])
    assert bool((segs[:, 1:] - segs[:, :-1] == 1).all())  # consecutive
    assert bool((segs // T == (segs[:, :1] // T)).all())  # within one env
    assert bool((segs[:, 0] % L == 0).all())  # aligned segments
    assert sorted(segs.reshape(-1).tolist()) == list(range(B * T))  # every step exactly once
    # T not a multiple of L: the tail (T % L steps per env) is dropped
    segs = torch.cat([b["idx"] for b in whole_buffer_mini_batches(_indexed(2, 7), None, 3)])
    assert sorted(segs.reshape(-1).tolist()) == [0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12]
    with pytest.raises(ValueError, match="mini_batch_length 8 exceeds the 7 steps"):
        list(whole_buffer_mini_batches(_indexed(2, 7), None, 8))


# ------------------------------------------------------------------------- train_iter
SMALL_NETS = dict(
    actor_network_ctor=functools.partial(ActorDistributionNetwork, fc_layer_params=(8,)),
    value_network_ctor=functools.partial(ValueNetwork, fc_layer_params=(8,)))


class RecordingPPO(PPOAlgorithm):
    """Records what whole-buffer training gathered (the input of preprocess_experience)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.gathered = []

    def preprocess_experience(self, experience):
        self.gathered.append(experience)
        return super().preprocess_experience(experience)


def _config(**kwargs):
    kwargs = dict(dict(algorithm_ctor=PPOAlgorithm, num_iterations=3, unroll_length=4,
                       mini_batch_size=4, num_updates_per_train_iter=2), **kwargs)
    return TrainerConfig(**kwargs)


def test_train_iter_keeps_the_last_step_for_the_next_iteration():
    env = create_environment("CartPole-v1", 2, backend="vector", seed=0)
    try:
        ctx = RunContext(num_iterations=3)
        alg = RecordingPPO(env.observation_spec(), env.action_spec(), context=ctx,
                           optimizer=Adam(lr=1e-3), **SMALL_NETS)
        learner = learner_for(alg, env, _config())
        before = [p.detach().clone() for p in alg.parameters()]
        assert learner.train_iter() == 8
        buf = learner.replay_buffer
        assert buf.max_length == 6  # unroll_length + 1 kept step + 1 slot for its predecessor
        assert torch.equal(buf.current_size(), torch.ones(2, dtype=torch.int64))
        first = alg.gathered[0]
        assert first.time_step.step_type.shape == (2, 4)  # nothing kept yet: 4 steps
        # 3 transitions x 2 envs = 6 samples, mini-batches of 4 -> 2 per epoch, 2 epochs
        assert ctx.num_updates == 4 and ctx.env_steps == 8
        assert all(not torch.equal(a, p) for a, p in zip(before, alg.parameters()))
        kept = learner.replay.gather()
        for k, g in zip(nest.flatten(kept), nest.flatten(first)):
            assert torch.equal(k[:, 0], g[:, -1])

        learner.train_iter()
        second = alg.gathered[1]
        assert second.time_step.step_type.shape == (2, 5)  # unroll_length + 1
        for a, b in zip(nest.flatten(second), nest.flatten(first)):
            assert torch.equal(a[:, 0], b[:, -1])  # continues exactly where the last one ended
        # env ids and consecutive observations: prev_action of step t+1 is the action of step t
        ts = second.time_step
        assert torch.equal(ts.env_id, torch.tensor([[0] * 5, [1] * 5]))
        not_first = ts.step_type[:, 1:] != F
        assert torch.equal(ts.prev_action[:, 1:][not_first], second.action[:, :-1][not_first])
        assert ctx.num_updates == 4 + 2 * 2 and ctx.env_steps == 16  # 8 samples -> 2 batches
    finally:
        env.close()


def test_sequences_as_long_as_the_unroll_train_from_the_first_iteration():
    env = create_environment("CartPole-v1", 2, backend="vector", seed=0)
    try:
        shapes = []

        class Recording(PPOAlgorithm):
            def calc_loss(self, info):
                shapes.append(tuple(info.step_type.shape))
                return super().calc_loss(info)

        cfg = _config(unroll_length=4, mini_batch_size=2, mini_batch_length=4,
                      num_updates_per_train_iter=1)
        alg = Recording(env.observation_spec(), env.action_spec(),
                        context=RunContext(num_iterations=3), optimizer=Adam(), **SMALL_NETS)
        learner = learner_for(alg, env, cfg)
        learner.train_iter()  # 4 stored steps -> 3 transitions per env: one [L=3, B=2] batch
        learner.train_iter()  # kept step + 4 -> 4 transitions per env: one [L=4, B=2] batch
        assert shapes == [(3, 2), (4, 2)]
        with pytest.raises(ConfigError,
                           match=r"mini_batch_length \(5\) exceeds unroll_length \(4\)"):
            learner_for(_ppo(env), env, _config(unroll_length=4, mini_batch_length=5))
    finally:
        env.close()


def test_ppo_rejects_non_whole_buffer_training():
    env = create_environment("CartPole-v1", 2, backend="vector", seed=0)
    try:
        with pytest.raises(ConfigError, match="whole_replay_buffer_training=True"):
            learner_for(_ppo(env), env, _config(whole_replay_buffer_training=False))
    finally:
        env.close()


def test_lstm_ppo_train_iter_restarts_states_from_the_stored_ones():
    env = create_environment("CartPole-v1", 2, backend="vector", seed=0, max_episode_steps=2)
    try:
        seen = []

        class Recording(PPOAlgorithm):
            def train_step(self, experience, state, rollout_info):
                seen.append((experience.time_step.step_type, experience.state, state))
                return super().train_step(experience, state, rollout_info)

        actor = functools.partial(ActorDistributionRNNNetwork, input_fc_layer_params=(8,),
                                  lstm_hidden_size=8)
        value = functools.partial(ValueRNNNetwork, input_fc_layer_params=(8,), lstm_hidden_size=8)
        ctx = RunContext(num_iterations=2)
        alg = Recording(env.observation_spec(), env.action_spec(), context=ctx,
                        actor_network_ctor=actor, value_network_ctor=value, optimizer=Adam())
        learner = learner_for(alg, env, _config(unroll_length=8, mini_batch_size=2,
                                                mini_batch_length=4, num_updates_per_train_iter=1))
        learner.train_iter()
        # 7 transitions per env -> one aligned segment of 4 per env -> 1 mini-batch of 2
        assert ctx.num_updates == 1 and len(seen) == 4
        step0_type, stored0, state0 = seen[0]
        for s, st in zip(nest.flatten(state0), nest.flatten(stored0)):
            assert torch.equal(s, st)  # the sequence restarts from the rollout-time state
        # episodes are F M L (time limit 2), so a FIRST falls at t = 3 inside each segment
        assert bool((seen[3][0] == F).all())
        for t, (step_type, _, state) in enumerate(seen):
            first = step_type == F
            for s in nest.flatten(state):
                assert not s[first].any()  # reset to zeros at episode starts
                if t > 0:
                    assert s[~first].abs().sum(-1).gt(0).all()  # carried LSTM state otherwise
    finally:
        env.close()
