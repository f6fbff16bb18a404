"""A reward module's loss is summarised however the mini-batches are shaped: with
``TrainerConfig.mini_batch_length = 1`` (the shipped ppo_rnd_cart_pole.gin) the Agent
trains the module on single steps, and ``Loss/<module>/loss`` used to be missing."""
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from conftest import train_run

TINY_PPO_RND = """
include 'ppo_rnd_cart_pole.gin'
create_environment.num_parallel_environments = 2
ActorDistributionNetwork.fc_layer_params = (8,)
ValueNetwork.fc_layer_params = (8,)
RNDRewardModule.fc_layer_params = (8,)
RNDRewardModule.feature_size = 4
TrainerConfig.num_env_steps = 0
TrainerConfig.num_iterations = 3
TrainerConfig.unroll_length = 8
TrainerConfig.mini_batch_size = 8
TrainerConfig.num_updates_per_train_iter = 2
TrainerConfig.evaluate = False
TrainerConfig.summary_interval = 1
TrainerConfig.checkpoint_interval = 1000
"""


def _scalars(root) -> dict:
    acc = EventAccumulator(str(root), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)]
            for tag in acc.Tags()["scalars"]}


def test_module_loss_is_summarised_at_mini_batch_length_1(tmp_path):
    root = train_run(tmp_path / "run", TINY_PPO_RND,
                     ["TrainerConfig.mini_batch_length=1"])
    scalars = _scalars(root)
    points = scalars.get("Loss/RNDRewardModule/loss")
    assert points is not None, sorted(scalars)
    # one point per iteration (the mean of its 2 updates), a positive prediction error
    assert [s for s, _ in points] == [1, 2, 3]
    assert all(v > 0 for _, v in points), points
    assert "Loss/RNDRewardModule_vs_EnvironmentSteps/loss" in scalars


def test_module_loss_is_summarised_at_mini_batch_length_2(tmp_path):
    root = train_run(tmp_path / "run", TINY_PPO_RND,
                     ["TrainerConfig.mini_batch_length=2"])
    points = _scalars(root).get("Loss/RNDRewardModule/loss")
    assert points is not None and [s for s, _ in points] == [1, 2, 3]
