"""HER through the real loop (issue 42 item 4): DQN on BitFlipping (its example gin) and
DDPG, SAC and TD3 on a small continuous goal env take the goal-dict observation through
their default networks, train from gin with ``HindsightRelabeler``, and the Learner's
mini-batches come relabeled (about k / (k + 1) of the rows, goals from stored steps,
rewards from the env's ``compute_reward``). The learning itself is
bench/her_bit_flipping.py's (docs/benchmarks.md)."""
import gin
import gymnasium as gym
import numpy as np
import pytest
import torch

from alf import config as alf_config
from alf.data_structures import StepType

POINT = "HerPointGoalTest-v0"


class PointGoal(gym.Env):
    """A point in [-1, 1]^2 moved by actions in [-1, 1]^2 (scaled 0.2) towards a random goal;
    reward 0 within 0.1 of it, else -1; 10 steps."""

    def __init__(self):
        box = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = gym.spaces.Dict(
            {"observation": box, "achieved_goal": box, "desired_goal": box})
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

    def _obs(self):
        return {"observation": self._pos.copy(), "achieved_goal": self._pos.copy(),
                "desired_goal": self._goal.copy()}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self._pos = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        self._goal = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        self._pos = np.clip(self._pos + 0.2 * np.asarray(action, np.float32), -1, 1)
        self._t += 1
        reward = float(self.compute_reward(self._pos, self._goal, {}))
        return self._obs(), reward, False, self._t >= 10, {}

    @staticmethod
    def compute_reward(achieved, desired, info):
        return -(np.linalg.norm(np.asarray(achieved) - desired, axis=-1) > 0.1).astype(np.float32)


gym.register(POINT, entry_point=PointGoal, disable_env_checker=True)

COMMON = ["TrainerConfig.num_env_steps = 160", "TrainerConfig.initial_collect_steps = 64",
          "TrainerConfig.unroll_length = 16", "TrainerConfig.num_updates_per_train_iter = 2",
          "TrainerConfig.mini_batch_size = 32", "TrainerConfig.replay_buffer_length = 1000",
          "TrainerConfig.data_transformer_ctor = [@HindsightRelabeler]",
          "TrainerConfig.random_seed = 0"]
CONTINUOUS = [f'create_environment.env_name = "{POINT}"', 'create_environment.backend = "sync"',
              "create_environment.num_parallel_environments = 2",
              "TrainerConfig.num_threads = 1"]
CASES = {
    "dqn": ("dqn_her_bit_flipping.gin", ['create_environment.env_kwargs = {"n_bits": 6}']),
    # envs in subprocesses: the reward comes from the learner's own copy of the env
    "dqn_subprocess_envs": ("dqn_her_bit_flipping.gin", [
        'create_environment.env_kwargs = {"n_bits": 6}', 'create_environment.backend = "async"',
        "create_environment.num_parallel_environments = 2"]),
    "ddpg": (None, CONTINUOUS + ["TrainerConfig.algorithm_ctor = @DdpgAlgorithm"]),
    "sac": (None, CONTINUOUS + ["TrainerConfig.algorithm_ctor = @SacAlgorithm"]),
    "td3": (None, CONTINUOUS + ["TrainerConfig.algorithm_ctor = @Td3Algorithm"]),
}


@pytest.fixture
def fresh_gin():
    gin.clear_config()
    yield
    gin.clear_config()


@pytest.mark.parametrize("name", sorted(CASES))
def test_her_trains_from_gin_and_the_learner_samples_relabeled_batches(fresh_gin, tmp_path, name):
    from alf.trainers.trainer import Trainer
    from alf.trainers.trainer_config import TrainerConfig
    conf, params = CASES[name]
    alf_config.parse_config(conf_file=conf, conf_params=params + COMMON)
    trainer = Trainer(TrainerConfig(), str(tmp_path / "run"),
                      config_text=alf_config.config_text(), quiet=True)
    trainer.run()
    assert trainer.context.num_updates > 0
    torch.manual_seed(1)
    batch = trainer.learner.sample(batch_size=400)
    info = batch.batch_info
    stored = info.replay_buffer.get_by_position(info.env_ids, info.positions, 2)
    dg_stored = stored.time_step.observation["desired_goal"][:, 0]
    dg, ag = (batch.time_step.observation[k][:, 0] for k in ("desired_goal", "achieved_goal"))
    changed = (dg != dg_stored).any(-1)
    at_last = stored.time_step.step_type[:, 0] == StepType.LAST
    share = float(changed[~at_last].float().mean())
    assert 0.7 < share < 0.9, share  # k = 4: 0.8, minus the rare goal equal to the stored one
    # a relabeled goal is a stored achieved goal of the same env (here: of a later step)
    rows = changed.nonzero(as_tuple=True)[0][:20]
    all_ag = info.replay_buffer.get_by_position(
        info.env_ids[rows], info.positions[rows], 11,
        select=lambda s: s.time_step.observation["achieved_goal"])
    assert bool((all_ag == dg[rows, None]).all(-1).any(-1).all())
    # rewards recomputed by the env's compute_reward for the new goals
    env = gym.make(conf and "alf.examples.bit_flipping_env:BitFlipping-v0" or POINT,
                   **({"n_bits": 6} if conf else {}))
    ag1, dg1 = (batch.time_step.observation[k][:, 1] for k in ("achieved_goal", "desired_goal"))
    in_episode = stored.time_step.step_type[:, 0] != StepType.LAST
    expected = torch.as_tensor(env.unwrapped.compute_reward(ag1.numpy(), dg1.numpy(), {}))
    assert torch.equal(batch.time_step.reward[in_episode, 1], expected[in_episode])
    assert ag.shape == dg.shape
