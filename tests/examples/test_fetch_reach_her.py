"""``sac_her_fetch_reach.gin`` builds and trains with HER on FetchReach-v4 (issue 42 item 4).

Needs gymnasium-robotics with a MuJoCo it works with (3.3.7-3.10; the main venv's
gymnasium[mujoco] brings 4.x, with which Fetch's reset fails): skipped otherwise, with
the reason. Its learning is docs/benchmarks.md's (bench/her_fetch_reach.py).
"""
import gin
import pytest
import torch

from alf import config as alf_config


def _fetch_reach_or_skip() -> None:
    robotics = pytest.importorskip(
        "gymnasium_robotics", reason="gymnasium-robotics is not installed (a venv of its own: "
        "docs/hindsight_goals.md, FetchReach)")
    import gymnasium as gym
    gym.register_envs(robotics)
    try:
        gym.make("FetchReach-v4").reset(seed=0)
    except AssertionError as e:  # mujoco >= 3.12: set_joint_qpos asserts
        import mujoco
        pytest.skip(f"FetchReach-v4 does not reset with mujoco {mujoco.__version__} ({e!r}): "
                    "gymnasium-robotics 1.4.2 needs mujoco 3.3.7-3.10")


@pytest.fixture
def fresh_gin():
    gin.clear_config()
    yield
    gin.clear_config()


def test_sac_her_fetch_reach_trains_on_relabeled_batches(fresh_gin, tmp_path):
    _fetch_reach_or_skip()
    from alf.trainers.trainer import Trainer
    from alf.trainers.trainer_config import TrainerConfig
    alf_config.parse_config(conf_file="sac_her_fetch_reach.gin", conf_params=[
        "TrainerConfig.num_env_steps = 200", "TrainerConfig.initial_collect_steps = 100"])
    trainer = Trainer(TrainerConfig(), str(tmp_path / "run"),
                      config_text=alf_config.config_text(), quiet=True)
    trainer.run()
    assert trainer.context.num_updates > 0
    torch.manual_seed(0)
    batch = trainer.learner.sample(batch_size=256)
    obs = batch.time_step.observation
    assert obs["observation"].shape[-1] == 10 and obs["desired_goal"].shape[-1] == 3
    info = batch.batch_info
    stored = info.replay_buffer.get_by_position(info.env_ids, info.positions, 2)
    changed = (obs["desired_goal"][:, 0] != stored.time_step.observation["desired_goal"][:, 0])
    assert 0.6 < float(changed.any(-1).float().mean()) < 0.95
    import gymnasium as gym
    env = gym.make("gymnasium_robotics:FetchReach-v4")
    expected = env.unwrapped.compute_reward(obs["achieved_goal"][:, 1].numpy(),
                                            obs["desired_goal"][:, 1].numpy(), {})
    mid = stored.time_step.step_type[:, 0] != 2  # the sequence is one episode's
    assert torch.allclose(batch.time_step.reward[mid, 1], torch.as_tensor(expected)[mid].float())
