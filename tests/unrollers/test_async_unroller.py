"""The async unroller in-process: serial mode, deterministic mode, layout and errors."""
import pytest
import torch

from alf.errors import ConfigError

# DQN CartPole, 4 envs in 1 worker x 2 groups of 2, 8-step trajectories.
ASYNC_DQN = """
create_environment.env_name = "CartPole-v1"
create_environment.num_parallel_environments = 4
create_environment.backend = "sync"
QNetwork.fc_layer_params = (16,)
DqnAlgorithm.optimizer = @alf.optimizers.Adam()
DqnAlgorithm.epsilon_greedy = 0.3
TrainerConfig.algorithm_ctor = @DqnAlgorithm
TrainerConfig.random_seed = 0
TrainerConfig.num_iterations = 6
TrainerConfig.unroll_length = 8
TrainerConfig.mini_batch_size = 16
TrainerConfig.num_updates_per_train_iter = 2
TrainerConfig.replay_buffer_length = 1000
TrainerConfig.num_threads = 1
TrainerConfig.evaluate = False
TrainerConfig.summary_interval = 1
TrainerConfig.checkpoint_interval = 1000000
TrainerConfig.async_unroll = True
TrainerConfig.env_groups_per_worker = 2
TrainerConfig.unroll_parameter_update_period = 1
"""


def _params(trainer):
    return {k: v.clone() for k, v in trainer.algorithm.state_dict().items()
            if isinstance(v, torch.Tensor)}


def _run(make_trainer, root, params=()):
    trainer = make_trainer(root, ASYNC_DQN, params)
    trainer.run()
    return trainer


def test_serial_mode_fills_every_env_row_and_counts_steps(make_trainer, tmp_path):
    trainer = _run(make_trainer, tmp_path / "serial", ['TrainerConfig.async_mode="serial"'])
    ctx, rb = trainer.context, trainer.learner.replay_buffer
    assert ctx.iteration == 6
    assert ctx.env_steps == 6 * 8 * 4  # T new steps per env per iteration
    # 2 groups with env-id offsets 0 and 2: all 4 replay rows written, 48 steps each
    assert rb.current_size().tolist() == [48, 48, 48, 48]
    assert trainer.unroller.metrics.num_env_steps == 6 * 8 * 4
    assert trainer.unroller.restarts == 0


def test_deterministic_mode_gives_bit_identical_parameters(make_trainer, tmp_path):
    mode = ['TrainerConfig.async_mode="deterministic"']
    a = _params(_run(make_trainer, tmp_path / "a", mode))
    b_trainer = _run(make_trainer, tmp_path / "b", mode)
    b = _params(b_trainer)
    c = _params(_run(make_trainer, tmp_path / "c", mode + ["TrainerConfig.random_seed=1"]))
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a), "same seed: bit-identical"
    assert any(not torch.equal(a[k], c[k]) for k in a), "another seed: different"
    # the actor acted with exactly the weights one version behind the learner
    assert b_trainer.unroller.progress_text().startswith(" | lag 1/1.0/1")


def test_processes_mode_trains_on_all_env_rows(make_trainer, tmp_path):
    trainer = _run(make_trainer, tmp_path / "p")
    assert trainer.context.env_steps == 6 * 8 * 4
    assert trainer.learner.replay_buffer.current_size().tolist() == [48] * 4


def test_env_count_must_split_into_groups(make_trainer, tmp_path):
    with pytest.raises(ConfigError, match=r"num_parallel_environments \(4\) must be a "
                                          r"multiple of TrainerConfig.num_env_workers x "
                                          r"env_groups_per_worker \(1 x 3\)"):
        make_trainer(tmp_path / "x", ASYNC_DQN, ["TrainerConfig.env_groups_per_worker=3"])


def test_on_policy_algorithm_cannot_unroll_async(make_trainer, tmp_path, alf_cli):
    with pytest.raises(ConfigError, match="ImpalaAlgorithm or APPOAlgorithm"):
        make_trainer(tmp_path / "a2c", alf_cli.TINY_A2C, ["TrainerConfig.async_unroll=True"])


def test_bad_async_mode_is_named(make_trainer, tmp_path):
    with pytest.raises(ConfigError, match="async_mode must be one of processes, deterministic, "
                                          "serial, got 'fast'"):
        make_trainer(tmp_path / "m", ASYNC_DQN, ['TrainerConfig.async_mode="fast"'])


def test_resume_of_an_async_run_continues(make_trainer, tmp_path):
    root = tmp_path / "resume"
    first = _run(make_trainer, root, ["TrainerConfig.num_iterations=3"])
    assert first.context.iteration == 3
    second = _run(make_trainer, root, ["TrainerConfig.num_iterations=6"])
    assert second.context.iteration == 6
    assert second.context.env_steps == 6 * 8 * 4
    # the restored learner starts at version 3: lags stay small, not ~3
    assert int(second.unroller.progress_text().split("lag ")[1].split("/")[2]) <= 4


TINY_APPO = """
include 'appo_cart_pole.gin'
create_environment.num_parallel_environments = 4
ActorDistributionNetwork.fc_layer_params = (8,)
ValueNetwork.fc_layer_params = (8,)
TrainerConfig.num_env_steps = 0
TrainerConfig.num_iterations = 8
TrainerConfig.unroll_length = 8
TrainerConfig.mini_batch_size = 16
TrainerConfig.num_updates_per_train_iter = 2
TrainerConfig.env_groups_per_worker = 2
TrainerConfig.evaluate = False
TrainerConfig.summary_interval = 1
TrainerConfig.checkpoint_interval = 1000000
"""


def test_max_policy_lag_drops_and_counts_stale_trajectories(make_trainer, tmp_path):
    trainer = make_trainer(tmp_path / "lag", TINY_APPO, ["TrainerConfig.max_policy_lag=0"])
    trainer.run()
    assert trainer.context.iteration == 8
    assert trainer.context.env_steps == 8 * 8 * 4  # dropped trajectories are not counted
    assert trainer.unroller.discarded_trajectories > 0
    assert trainer.unroller.progress_text().startswith(" | lag 0/0.0/0 | stale dropped ")


def test_max_policy_lag_is_refused_for_replay_algorithms(make_trainer, tmp_path):
    with pytest.raises(ConfigError, match="DqnAlgorithm learns from a replay buffer"):
        make_trainer(tmp_path / "dqn", ASYNC_DQN, ["TrainerConfig.max_policy_lag=2"])


def test_max_policy_lag_below_the_update_period_is_refused(make_trainer, tmp_path):
    with pytest.raises(ConfigError, match=r"max_policy_lag=2 is below "
                                          r"unroll_parameter_update_period - 1 \(10 - 1\)"):
        make_trainer(tmp_path / "p", TINY_APPO, ["TrainerConfig.max_policy_lag=2",
                                                 "TrainerConfig.unroll_parameter_update_period=10"])


def test_deterministic_resume_with_an_update_period_above_one(make_trainer, tmp_path):
    """Weights published every 3 iterations, resumed at iteration 4 (not a multiple of 3):
    the workers' version schedule follows the resume point instead of waiting forever."""
    params = ['TrainerConfig.async_mode="deterministic"',
              "TrainerConfig.unroll_parameter_update_period=3",
              "TrainerConfig.env_worker_timeout_s=20"]  # a stall fails in 20 s, not never
    root = tmp_path / "det_resume"
    _run(make_trainer, root, params + ["TrainerConfig.num_iterations=4"])
    second = _run(make_trainer, root, params + ["TrainerConfig.num_iterations=11"])
    assert second.context.iteration == 11


def test_unroll_length_zero_trains_on_whatever_is_ready(make_trainer, tmp_path):
    trainer = _run(make_trainer, tmp_path / "ready", ["TrainerConfig.unroll_length=0",
                                                      "TrainerConfig.max_unroll_length=4"])
    ctx = trainer.context
    assert ctx.iteration == 6
    # each iteration takes at least one 4-step trajectory of a 2-env group, maybe more
    assert ctx.env_steps % (4 * 2) == 0 and 6 * 4 * 2 <= ctx.env_steps
    assert trainer.learner.replay_buffer.total_size() == ctx.env_steps


def test_unroll_length_zero_needs_max_unroll_length(make_trainer, tmp_path):
    with pytest.raises(ConfigError, match="unroll_length=0 .* needs TrainerConfig."
                                          "max_unroll_length >= 1"):
        make_trainer(tmp_path / "z", ASYNC_DQN, ["TrainerConfig.unroll_length=0"])


def test_normaliser_statistics_are_the_learners_and_merged_from_the_actors(make_trainer,
                                                                         tmp_path):
    """The actor normalises with the learner's statistics (frozen) and ships the moments
    of what it saw; the learner's normaliser has counted every observation exactly once:
    the env steps plus the first observation of each of the 4 envs."""
    trainer = _run(make_trainer, tmp_path / "norm", [
        'TrainerConfig.async_mode="serial"',
        "TrainerConfig.data_transformer_ctor=@ObservationNormalizer"])
    stats = trainer.algorithm.data_transformer.normalizer.moments()
    (count,) = {float(m["count"]) for m in stats.values()}
    assert count == trainer.context.env_steps + 4
    actor = trainer.unroller._serial_actor._algorithm.data_transformer
    assert actor.statistics_frozen
    shipped = actor.normalizer.moments()
    # the actor holds the statistics published after the last-but-one iteration
    assert 0 < min(float(m["count"]) for m in shipped.values()) < count
