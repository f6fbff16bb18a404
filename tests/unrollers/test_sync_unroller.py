"""SyncUnroller on real CartPole envs: layout, env fidelity, continuity, state resets, metrics."""
import pytest
import torch

from alf import nest
from alf.data_structures import AlgStep, StepType
from alf.environments.factory import create_environment
from alf.metrics import EpisodeMetrics
from alf.unrollers.sync_unroller import SyncUnroller

F, M, L = StepType.FIRST, StepType.MID, StepType.LAST


class RecordingEnv:
    """Wraps a batched env; keeps a copy of every TimeStep it hands out and counts resets."""

    def __init__(self, env):
        self._env = env
        self.produced = []
        self.actions = []
        self.num_resets = 0

    def __getattr__(self, name):
        return getattr(self._env, name)

    def _record(self, ts):
        self.produced.append(nest.map_structure(lambda x: x.clone(), ts))
        return ts

    def reset(self):
        self.num_resets += 1
        return self._record(self._env.reset())

    def step(self, action):
        self.actions.append(action.clone())
        return self._record(self._env.step(action))


class Identity:
    state_spec = ()

    def transform_timestep(self, time_step, state):
        return time_step, state


class CountingPolicy:
    """Random actions; the state counts steps since the episode started (reset at FIRST)."""

    def __init__(self, seed=0):
        self.gen = torch.Generator().manual_seed(seed)
        self.calls = []  # (step_type, state passed in)

    def initial_state(self, batch_size):
        return torch.zeros(batch_size)

    def __call__(self, time_step, state):
        self.calls.append((time_step.step_type.clone(), state.clone()))
        action = torch.randint(0, 2, time_step.step_type.shape, generator=self.gen)
        return AlgStep(output=action, state=state + 1, info={"obs": time_step.observation})


@pytest.fixture
def setup():
    env = RecordingEnv(create_environment("CartPole-v1", 2, backend="vector", seed=0,
                                          max_episode_steps=3))
    policy = CountingPolicy()
    unroller = SyncUnroller(env, Identity(), EpisodeMetrics(2), policy.initial_state)
    yield env, policy, unroller
    env.close()


def _cat(a, b):
    return nest.map_structure(lambda x, y: torch.cat([x, y]), a, b)


def test_experience_is_time_major_and_holds_what_the_env_produced(setup):
    env, policy, unroller = setup
    exp = unroller.unroll(policy, 5)
    for path, x in nest.flatten_with_paths(exp):
        assert x.shape[:2] == (5, 2), path
    assert exp.time_step.observation.shape == (5, 2, 4)
    assert len(env.produced) == 6  # reset + 5 steps; the 6th is carried into the next unroll
    for t in range(5):
        for mine, theirs in zip(nest.flatten(exp.time_step), nest.flatten(env.produced[t])):
            assert torch.equal(mine[t], theirs)
        assert torch.equal(exp.action[t], env.actions[t])  # what the env was given
        assert torch.equal(exp.rollout_info["obs"][t], env.produced[t].observation)
    assert torch.equal(exp.time_step.env_id, torch.tensor([[0, 1]] * 5))
    # max_episode_steps=3: F M M L F (a random CartPole cannot fall within 3 steps)
    assert exp.time_step.step_type[:, 0].tolist() == [F, M, M, L, F]
    assert exp.time_step.discount[3].tolist() == [1.0, 1.0]  # truncation keeps discount 1


def test_consecutive_unrolls_continue_without_reset(setup):
    env, policy, unroller = setup
    first = unroller.unroll(policy, 4)
    second = unroller.unroll(policy, 4)
    assert env.num_resets == 1
    for mine, theirs in zip(nest.flatten(second.time_step), nest.flatten(env.produced[4])):
        assert torch.equal(mine[0], theirs)  # what the env returned for first's last action
    both = _cat(first, second)
    ts = both.time_step
    # the action at t is the prev_action at t+1, except when t+1 starts a new episode
    firsts = 0
    for t in range(7):
        for b in range(2):
            if ts.step_type[t + 1, b] == F:
                firsts += 1
                assert ts.prev_action[t + 1, b] == 0 and ts.reward[t + 1, b] == 0
            else:
                assert ts.prev_action[t + 1, b] == both.action[t, b]
    assert firsts == 2 * 1  # F at t=4 in both envs
    unroller.reset()
    unroller.unroll(policy, 1)
    assert env.num_resets == 2


def test_policy_state_is_reset_at_first_and_carried_across_unrolls(setup):
    env, policy, unroller = setup
    exp = _cat(unroller.unroll(policy, 3), unroller.unroll(policy, 5))
    step_types = torch.stack([c[0] for c in policy.calls])
    states = torch.stack([c[1] for c in policy.calls])
    assert torch.equal(exp.state, states)  # Experience.state is the state before the step
    # F M M L F M M L: the count restarts at every FIRST, also across the unroll boundary
    assert step_types[:, 0].tolist() == [F, M, M, L, F, M, M, L]
    assert states[:, 0].tolist() == [0, 1, 2, 3, 0, 1, 2, 3]
    assert not states[step_types == F].any()


def test_metrics_and_action_override(setup):
    env, policy, unroller = setup
    ones = lambda alg_step: torch.ones_like(alg_step.output)  # noqa: E731
    exp = unroller.unroll(policy, 9, action_override=ones)
    assert bool((exp.action == 1).all()) and all(bool((a == 1).all()) for a in env.actions)
    m = unroller.metrics
    assert m.num_env_steps == 18
    assert m.num_episodes == 4  # two episodes per env ended (LAST at t=3 and t=7)
    assert m.average_length() == 3.0 and m.average_return() == 3.0  # CartPole: +1 per step
