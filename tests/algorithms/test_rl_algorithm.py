"""Learner.collect / train_iter on CartPole: layout, storage, counters, RNN resets, regimes."""
import functools

import pytest
import torch

from alf import nest
from alf.algorithms.actor_critic_algorithm import ActorCriticAlgorithm
from alf.algorithms.ppo_algorithm import PPOAlgorithm
from alf.algorithms.rl_algorithm import RLAlgorithm
from alf.data_structures import AlgStep, LossInfo, StepType
from alf.environments.factory import create_environment
from alf.networks import (ActorDistributionNetwork, ActorDistributionRNNNetwork, ValueNetwork,
                          ValueRNNNetwork)
from alf.trainers.trainer_config import TrainerConfig
from alf.utils.optimizers import Adam
from alf.utils.run_context import RunContext
from tests.learner_helpers import learner_for

F, M, L = StepType.FIRST, StepType.MID, StepType.LAST

SMALL = dict(actor_network_ctor=functools.partial(ActorDistributionNetwork, fc_layer_params=(8,)),
             value_network_ctor=functools.partial(ValueNetwork, fc_layer_params=(8,)))
LSTM = dict(actor_network_ctor=functools.partial(ActorDistributionRNNNetwork,
                                                 input_fc_layer_params=(8,), lstm_hidden_size=8),
            value_network_ctor=functools.partial(ValueRNNNetwork, input_fc_layer_params=(8,),
                                                 lstm_hidden_size=8))


class RecordingEnv:
    """Delegates to a batched env and keeps a copy of every TimeStep it returns."""

    def __init__(self, env):
        self._env = env
        self.produced = []
        self.num_resets = 0

    def __getattr__(self, name):
        return getattr(self._env, name)

    def reset(self):
        self.num_resets += 1
        ts = self._env.reset()
        self.produced.append(nest.map_structure(torch.clone, ts))
        return ts

    def step(self, action):
        ts = self._env.step(action)
        self.produced.append(nest.map_structure(torch.clone, ts))
        return ts


@pytest.fixture
def env():
    e = RecordingEnv(create_environment("CartPole-v1", 2, backend="vector", seed=0,
                                        max_episode_steps=4))
    yield e
    e.close()


def _make(cls, env, config=None, ctx=None, nets=SMALL):
    """A prepared Learner training ``cls`` on ``env`` (``learner.algorithm``)."""
    alg = cls(env.observation_spec(), env.action_spec(),
              context=ctx or RunContext(num_iterations=10), optimizer=Adam(lr=1e-3), **nets)
    return learner_for(alg, env, config)


def _config(ctor, **kwargs):
    return TrainerConfig(**dict(dict(algorithm_ctor=ctor, num_iterations=10, unroll_length=4,
                                     mini_batch_size=4, num_updates_per_train_iter=1), **kwargs))


def test_on_policy_unroll_returns_time_major_experience_with_gradients(env):
    ctx = RunContext(num_iterations=10)
    learner = _make(ActorCriticAlgorithm, env, ctx=ctx)
    exp = learner.collect(6)
    for path, x in nest.flatten_with_paths(exp):
        assert x.shape[:2] == (6, 2), path
    assert exp.rollout_info.log_prob.requires_grad and exp.rollout_info.value.requires_grad
    assert ctx.env_steps == 12
    for t in range(6):
        for mine, theirs in zip(nest.flatten(exp.time_step), nest.flatten(env.produced[t])):
            assert torch.equal(mine[t], theirs)
    ts = exp.time_step
    nf = ts.step_type[1:] != F
    assert torch.equal(ts.prev_action[1:][nf], exp.action[:-1][nf])
    assert not ts.prev_action[1:][~nf].any()
    learner.collect(3)
    assert ctx.env_steps == 18 and env.num_resets == 1


def test_off_policy_unroll_stores_what_the_env_produced(env):
    ctx = RunContext(num_iterations=10)
    learner = _make(PPOAlgorithm, env, config=_config(PPOAlgorithm), ctx=ctx)
    # returns what it stored (time-major), without autograd
    assert learner.collect(4).step_type.shape == (4, 2) and learner.last_collected_steps == 8
    assert learner.collect(3).step_type.shape == (3, 2)  # continues the episode: no reset
    assert env.num_resets == 1 and ctx.env_steps == 14
    buf = learner.replay_buffer
    # unroll_length + 1 kept step + 1 slot for the kept step's predecessor
    assert buf.max_length == 6 and torch.equal(buf.current_size(), torch.tensor([6, 6]))
    stored = learner.replay.gather()  # [B, T]: newest 6 of the 7 steps (derived fields restored)
    for t in range(6):
        produced = env.produced[t + 1]
        if t == 0:  # prev_action is not stored; the oldest step's predecessor was overwritten
            stored_t0 = nest.map_structure(lambda x: x[:, 0], stored.time_step)
            assert torch.equal(stored_t0.prev_action, torch.zeros_like(produced.prev_action))
            produced = produced._replace(prev_action=stored_t0.prev_action)
        for mine, theirs in zip(nest.flatten(stored.time_step), nest.flatten(produced)):
            assert torch.equal(mine[:, t], theirs)
    ts = stored.time_step
    nf = ts.step_type[:, 1:] != F
    assert torch.equal(ts.prev_action[:, 1:][nf], stored.action[:, :-1][nf])
    assert bool((ts.step_type[:, 4] == F).all())  # time limit 4: (F) M M M L F M, oldest step dropped
    assert not ts.prev_action[:, 4].any()
    assert stored.state == ()  # feed-forward policy: no state stored


class StateRecordingPPO(PPOAlgorithm):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.rollout_calls = []

    def rollout_step(self, time_step, state):
        self.rollout_calls.append((time_step.step_type.clone(),
                                   nest.map_structure(torch.clone, state)))
        return super().rollout_step(time_step, state)


def test_lstm_policy_state_is_zero_at_first_steps(env):
    learner = _make(StateRecordingPPO, env, config=_config(PPOAlgorithm, unroll_length=6),
                    nets=LSTM)
    alg = learner.algorithm
    learner.collect(6)
    learner.collect(6)
    calls = alg.rollout_calls[1:]  # [0] is the spec dry run when the Learner builds the buffer
    assert len(calls) == 12
    step_types = torch.stack([c[0] for c in calls])
    assert step_types[:, 0].tolist() == [F, M, M, M, L, F, M, M, M, L, F, M]
    for t, (st, state) in enumerate(calls):
        first = st == F
        for leaf in nest.flatten(state):
            assert not leaf[first].any(), t  # reset at FIRST (t = 0, 5, 10)
            if not first.all():
                assert leaf[~first].abs().sum(-1).gt(0).all(), t  # carried otherwise
    # the buffer stores the state *before* each step (the one rollout_step received)
    stored = learner.replay.gather()
    for t in range(8):  # the newest 8 (unroll_length + 2) of 12 steps
        _, state = calls[4 + t]
        for s, leaf in zip(nest.flatten(stored.state), nest.flatten(state)):
            assert torch.equal(s[:, t], leaf)


def test_fractional_unroll_length_unrolls_every_other_iteration(env):
    ctx = RunContext(num_iterations=10)
    learner = _make(PPOAlgorithm, env, config=_config(PPOAlgorithm, unroll_length=0.5), ctx=ctx)
    steps, updates = [], []
    for _ in range(6):
        steps.append(learner.train_iter())
        updates.append(ctx.num_updates)
    assert steps == [0, 2, 0, 2, 0, 2]
    assert ctx.env_steps == 6
    # whole-buffer training needs a transition (2 steps): the first one is complete at iteration 4
    assert updates == [0, 0, 0, 1, 1, 2]


class ZeroActionPPO(PPOAlgorithm):
    def rollout_step(self, time_step, state):
        step = super().rollout_step(time_step, state)
        return step._replace(output=torch.zeros_like(step.output))


def test_initial_collect_steps_use_random_actions_and_skip_training(env):
    torch.manual_seed(0)  # the random actions come from action_spec.sample()
    ctx = RunContext(num_iterations=10)
    cfg = _config(PPOAlgorithm, unroll_length=4, initial_collect_steps=12)
    learner = _make(ZeroActionPPO, env, config=cfg, ctx=ctx)
    assert learner.train_iter() == 8
    assert ctx.num_updates == 0  # 8 < 12 collected: no training, nothing cleared
    collected = learner.replay.gather()
    assert collected.action.shape == (2, 4) and bool((collected.action == 1).any())
    learner.train_iter()  # started at 8 < 12: random actions again; 16 >= 12 afterwards: trains
    assert ctx.env_steps == 16 and ctx.num_updates > 0
    assert torch.equal(learner.replay_buffer.current_size(), torch.tensor([1, 1]))
    learner.train_iter()  # the policy (always 0 here) acts from now on
    actions = torch.stack([ts.prev_action for ts in env.produced[9:]])  # iteration 3's actions
    first = torch.stack([ts.step_type for ts in env.produced[9:]]) == F
    assert actions.shape == (4, 2) and not actions[~first].any()


class ValueRegression(RLAlgorithm):
    """Minimal off-policy algorithm: random actions, regress V(obs) on the reward."""

    def __init__(self, observation_spec, action_spec, **kwargs):
        super().__init__(observation_spec, action_spec, **kwargs)
        self.v = torch.nn.Linear(4, 1)
        self.loss_shapes = []
        self.seen_batch_info = []

    def rollout_step(self, time_step, state):
        action = self.action_spec.sample(time_step.step_type.shape)
        return AlgStep(output=action, state=state, info=())

    def train_step(self, experience, state, rollout_info):
        self.seen_batch_info.append(experience.batch_info)
        return AlgStep(output=(), state=state,
                       info={"v": self.v(experience.observation).squeeze(-1),
                             "r": experience.reward})

    def calc_loss(self, info):
        self.loss_shapes.append(tuple(info["v"].shape))
        return LossInfo(loss=(info["v"] - info["r"]) ** 2)


@pytest.mark.parametrize("mini_batch_length", [1, 3])
def test_sampled_replay_training_path(env, mini_batch_length):
    ctx = RunContext(num_iterations=10)
    cfg = _config(ValueRegression, unroll_length=4, replay_buffer_length=16,
                  mini_batch_length=mini_batch_length, num_updates_per_train_iter=2)
    alg = ValueRegression(env.observation_spec(), env.action_spec(), context=ctx,
                          optimizer=Adam())
    learner = learner_for(alg, env, cfg)
    learner.train_iter()
    learner.train_iter()
    assert ctx.num_updates == 4 and ctx.env_steps == 16
    assert torch.equal(learner.replay_buffer.current_size(), torch.tensor([8, 8]))  # not cleared
    assert alg.loss_shapes == [(mini_batch_length, 4)] * 4  # time-major [L, mini_batch_size]
    assert all(b == () for b in alg.seen_batch_info)  # per-sequence info stays out of [B, L]
