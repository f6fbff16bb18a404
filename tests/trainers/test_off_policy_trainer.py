"""Off-policy training end to end (DQN, SAC, DDPG, TD3 through gin and the Trainer):
step/replay accounting, initial random collection, fractional unrolls, prioritized replay,
replay-buffer checkpoints, regime errors, per-mini-batch summaries, a learning smoke test."""
import glob
import os

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from alf import nest
from alf.errors import ConfigError

NUM_ENVS = 2
UNROLL = 4
COLLECT = 40          # initial_collect_steps: 5 iterations of 2 envs x 4 steps
UPDATES = 2           # num_updates_per_train_iter
BUFFER = 64           # replay_buffer_length per env

_COMMON = f"""
create_environment.num_parallel_environments = {NUM_ENVS}
TrainerConfig.random_seed = 1
TrainerConfig.num_env_steps = 0
TrainerConfig.unroll_length = {UNROLL}
TrainerConfig.initial_collect_steps = {COLLECT}
TrainerConfig.num_updates_per_train_iter = {UPDATES}
TrainerConfig.mini_batch_size = 32
TrainerConfig.replay_buffer_length = {BUFFER}
TrainerConfig.evaluate = False
TrainerConfig.summary_interval = 5
TrainerConfig.checkpoint_interval = 1000
TrainerConfig.progress_interval_seconds = 0.0
TrainerConfig.num_threads = 1
"""

DQN = """
create_environment.env_name = "CartPole-v1"
QNetwork.fc_layer_params = (16, 16)
DqnAlgorithm.target_update_period = 10
TrainerConfig.algorithm_ctor = @DqnAlgorithm
""" + _COMMON

SAC_DISCRETE = """
create_environment.env_name = "CartPole-v1"
SacAlgorithm.actor_network_ctor = @ActorDistributionNetwork
ActorDistributionNetwork.fc_layer_params = (16, 16)
QNetwork.fc_layer_params = (16, 16)
TrainerConfig.algorithm_ctor = @SacAlgorithm
""" + _COMMON

SAC = """
include 'sac_actor.gin'
create_environment.env_name = "Pendulum-v1"
ActorDistributionNetwork.fc_layer_params = (16, 16)
CriticNetwork.fc_layer_params = (16, 16)
TrainerConfig.algorithm_ctor = @SacAlgorithm
""" + _COMMON

_DETERMINISTIC = """
create_environment.env_name = "Pendulum-v1"
ActorNetwork.fc_layer_params = (16, 16)
CriticNetwork.fc_layer_params = (16, 16)
"""
DDPG = _DETERMINISTIC + "TrainerConfig.algorithm_ctor = @DdpgAlgorithm\n" + _COMMON
TD3 = _DETERMINISTIC + "TrainerConfig.algorithm_ctor = @Td3Algorithm\n" + _COMMON

CONFIGS = {"dqn": DQN, "sac_discrete": SAC_DISCRETE, "sac": SAC, "ddpg": DDPG, "td3": TD3}


def _params(trainer):
    return {k: v.detach().clone() for k, v in trainer.algorithm.state_dict().items()
            if isinstance(v, torch.Tensor)}


def _buffer_tensors(rb):
    return {k: v.clone() for k, v in nest.flatten_with_paths(rb.state_dict())
            if isinstance(v, torch.Tensor)}


def _scalars(root, tag):
    acc = EventAccumulator(str(root), size_guidance={"scalars": 0})
    acc.Reload()
    if tag not in acc.Tags()["scalars"]:
        return []
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def _scalar_steps(root, tag):
    return [step for step, _ in _scalars(root, tag)]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_runs_end_to_end_with_configured_steps_and_replay_sizes(make_trainer, tmp_path, name):
    iterations = 25  # 200 env steps, 100 per env: the 64-step buffers wrap
    params = [f"TrainerConfig.num_iterations={iterations}", "TrainerConfig.evaluate=True",
              f"TrainerConfig.eval_interval={iterations}", "TrainerConfig.num_eval_episodes=1"]
    trainer = make_trainer(tmp_path / name, CONFIGS[name], params)
    alg = trainer.algorithm
    before = _params(trainer)
    trainer.run()
    ctx = trainer.context
    per_env = iterations * UNROLL
    assert ctx.iteration == iterations
    assert ctx.env_steps == iterations * UNROLL * NUM_ENVS
    rb = trainer.learner.replay_buffer
    assert rb.current_pos().tolist() == [per_env] * NUM_ENVS
    assert rb.current_size().tolist() == [BUFFER] * NUM_ENVS
    # updates start with the iteration that reaches initial_collect_steps
    assert ctx.num_updates == (iterations - COLLECT // (UNROLL * NUM_ENVS) + 1) * UPDATES
    after = _params(trainer)
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert changed, "no parameter changed"
    for k, v in after.items():
        assert torch.isfinite(v.float()).all(), k
    assert os.path.exists(tmp_path / name / "train" / f"ckpt-{iterations:010d}.pt")
    assert not glob.glob(str(tmp_path / name / "train" / "replay_buffer-*"))  # not enabled
    assert _scalar_steps(tmp_path / name, f"Loss/{alg.name}/loss")
    assert _scalar_steps(tmp_path / name, "Eval/AverageReturn") == [iterations]


@pytest.mark.parametrize("name", ["dqn", "ddpg"])
def test_initial_collect_steps_uses_random_actions_and_no_updates(make_trainer, tmp_path, name):
    # 4 iterations = 32 env steps < 40: collection only. A deterministic policy (greedy DQN,
    # noise-free DDPG) would give actions that are a function of the observation.
    policy = ["DqnAlgorithm.epsilon_greedy=0.0"] if name == "dqn" else [
        "DdpgAlgorithm.exploration_noise=0.0"]
    trainer = make_trainer(tmp_path / name, CONFIGS[name],
                           ["TrainerConfig.num_iterations=4"] + policy)
    before = _params(trainer)
    trainer.run()
    alg = trainer.algorithm
    assert trainer.context.num_updates == 0
    assert trainer.context.env_steps == 32
    after = _params(trainer)
    assert all(torch.equal(before[k], after[k]) for k in before)
    exp = trainer.learner.replay.gather()  # [num_envs, 16]
    assert tuple(exp.time_step.step_type.shape) == (NUM_ENVS, 16)
    obs = exp.time_step.observation.reshape(-1, exp.time_step.observation.shape[-1])
    stored = exp.action.reshape((obs.shape[0],) + tuple(exp.action.shape[2:]))
    with torch.no_grad():
        if name == "dqn":
            policy_action = alg._q_network(obs)[0].argmax(-1)
            assert set(stored.tolist()) == {0, 1}
            assert (stored != policy_action).float().mean() > 0.2
        else:
            policy_action = alg._actor(obs)[0]
            assert (stored - policy_action).abs().max() > 0.5
            assert stored.min() >= -2.0 and stored.max() <= 2.0
            assert stored.min() < -1.0 and stored.max() > 1.0  # spread over the whole box

    # one more iteration reaches 40 env steps: training starts right away
    again = make_trainer(tmp_path / name, CONFIGS[name],
                         ["TrainerConfig.num_iterations=5"] + policy)
    again.run()
    assert again.context.env_steps == 40
    assert again.context.num_updates == UPDATES


def test_fractional_unroll_length(make_trainer, tmp_path):
    iterations, collect = 40, 4
    trainer = make_trainer(tmp_path / "run", SAC, [
        f"TrainerConfig.num_iterations={iterations}", "TrainerConfig.unroll_length=0.5",
        "TrainerConfig.num_updates_per_train_iter=3",
        f"TrainerConfig.initial_collect_steps={collect}",
        "create_environment.num_parallel_environments=1"])
    trainer.run()
    ctx = trainer.context
    # one env step every 2nd iteration
    assert ctx.env_steps == iterations // 2
    assert trainer.learner.replay_buffer.current_size().tolist() == [iterations // 2]
    # training (3 updates) every iteration from the one whose unroll reaches 4 env steps
    # (iteration 8) on, including the iterations that step no env
    assert ctx.num_updates == (iterations - 2 * collect + 1) * 3


def test_priority_replay_updates_priorities(make_trainer, tmp_path):
    alpha, eps = 0.6, 1e-6
    trainer = make_trainer(tmp_path / "run", DQN, [
        "TrainerConfig.num_iterations=10", "TrainerConfig.priority_replay=True",
        f"TrainerConfig.priority_replay_alpha={alpha}", "TrainerConfig.priority_replay_beta=0.5"])
    rb = trainer.learner.replay_buffer
    assert rb.prioritized and rb.priority_alpha == alpha
    trainer.run()
    alg = trainer.algorithm
    n = rb.total_size()
    assert n == 80
    env_ids = torch.arange(NUM_ENVS).repeat_interleave(40)
    positions = torch.arange(40).repeat(NUM_ENVS)
    prio = rb.get_priority(env_ids, positions)
    # new items get the max priority so far; sampled ones got (|td| + eps) ** alpha
    assert len(set(prio.tolist())) > 10
    assert float(rb._tree.total()) == pytest.approx(float(prio.sum()))
    assert float(rb._tree.total()) != pytest.approx(float(n))
    _, info = rb.get_batch(64, 2, beta=0.5)
    assert not torch.allclose(info.importance_weights, torch.ones(64))
    assert info.importance_weights.max() == pytest.approx(1.0)

    # the algorithm's priorities: one sampled batch, by hand
    exp = trainer.learner.replay.sample(32, 2)
    loss_info = alg.calc_loss(alg.train_step(alg.make_transitions(exp)).info)
    trainer.learner.replay.update_priority(exp, loss_info)
    got = rb.get_priority(exp.batch_info.env_ids, exp.batch_info.positions)
    want = (loss_info.priority.double().abs() + eps) ** alpha
    # duplicates in the batch: last write wins, equal values anyway for identical rows
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("prioritized", [False, True])
def test_replay_buffer_checkpoint_and_resume(make_trainer, tmp_path, prioritized):
    root = tmp_path / "run"
    params = ["ReplayBuffer.enable_checkpoint=True",
              f"TrainerConfig.priority_replay={prioritized}"]
    first = make_trainer(root, DQN, ["TrainerConfig.num_iterations=10"] + params)
    first.run()
    assert os.path.exists(root / "train" / "replay_buffer-0000000010.pt")
    saved = _buffer_tensors(first.learner.replay_buffer)
    assert any("priority_tree" in k for k in saved) == prioritized
    saved_ctx = first.context.state_dict()
    saved_params = _params(first)

    second = make_trainer(root, DQN, ["TrainerConfig.num_iterations=20",
                                      "TrainerConfig.random_seed=7"] + params)
    rb = second.learner.replay_buffer
    assert rb.total_size() == 0
    assert second.restore_checkpoint()
    restored = _buffer_tensors(rb)
    assert restored.keys() == saved.keys()
    for k, v in saved.items():
        assert torch.equal(restored[k], v), k
    assert rb.current_size().tolist() == [40, 40]
    assert second.context.state_dict() == saved_ctx
    second.run()  # restores again (idempotent) and continues
    ctx = second.context
    assert ctx.iteration == 20 and ctx.env_steps == 160
    assert ctx.num_updates == saved_ctx["num_updates"] + 10 * UPDATES
    assert rb.current_pos().tolist() == [80, 80]
    assert any(not torch.equal(v, _params(second)[k]) for k, v in saved_params.items())


@pytest.mark.parametrize("name", ["dqn", "sac"])
def test_mini_batch_length_conflicting_with_n_step_is_a_config_error(make_trainer, tmp_path, name):
    with pytest.raises(ConfigError, match="n_step"):
        make_trainer(tmp_path / "run", CONFIGS[name], ["TrainerConfig.num_iterations=2",
                                                      "TrainerConfig.mini_batch_length=3"])
    assert not os.path.exists(tmp_path / "run")
    # n_step = 2 samples 3 steps: mini_batch_length = 3 is then consistent
    algo = "DqnAlgorithm" if name == "dqn" else "SacAlgorithm"
    trainer = make_trainer(tmp_path / "ok", CONFIGS[name], [
        "TrainerConfig.num_iterations=6", "TrainerConfig.mini_batch_length=3", f"{algo}.n_step=2"])
    trainer.run()
    assert trainer.context.num_updates == 2 * UPDATES


@pytest.mark.parametrize("param", ["whole_replay_buffer_training", "clear_replay_buffer"])
def test_whole_buffer_regimes_are_config_errors_for_sac(make_trainer, tmp_path, param):
    with pytest.raises(ConfigError, match=param):
        make_trainer(tmp_path / "run", SAC, ["TrainerConfig.num_iterations=2",
                                             f"TrainerConfig.{param}=True"])


@pytest.mark.parametrize("per_mini_batch", [False, True])
def test_update_counter_every_mini_batch_writes_loss_summaries(make_trainer, tmp_path,
                                                               per_mini_batch):
    root = tmp_path / "run"
    trainer = make_trainer(root, DQN, [
        "TrainerConfig.num_iterations=12", "TrainerConfig.initial_collect_steps=16",
        "TrainerConfig.num_updates_per_train_iter=4", "TrainerConfig.summary_interval=3",
        f"TrainerConfig.update_counter_every_mini_batch={per_mini_batch}"])
    trainer.run()
    # training from iteration 2 on: 11 iterations x 4 updates
    assert trainer.context.num_updates == 44
    steps = _scalar_steps(root, "Loss/DqnAlgorithm/loss")
    if per_mini_batch:
        # the first and every 3rd gradient step, written against the gradient-step counter
        assert steps == [1] + list(range(3, 45, 3))
    else:
        assert steps == [2, 3, 6, 9, 12]  # the first iteration that trains, every 3rd


def test_dqn_learns_cart_pole(make_trainer, tmp_path):
    """DQN with dqn_cart_pole.gin's rl-zoo settings (64x64 nets instead of 256x256) clearly
    beats a random policy (~22) within 6k env steps (deterministic for the fixed seed)."""
    root = tmp_path / "run"
    trainer = make_trainer(root, "include 'dqn_cart_pole.gin'\n", [
        "TrainerConfig.random_seed=0", "TrainerConfig.num_env_steps=6000",
        "QNetwork.fc_layer_params=(64, 64)",
        "epsilon/LinearSchedule.end_progress=0.16",  # epsilon reaches 0.04 at ~1k env steps
        "TrainerConfig.summary_interval=1", "TrainerConfig.progress_interval_seconds=1000.0",
        "TrainerConfig.checkpoint_interval=1000"])
    trainer.run()
    returns = [v for _, v in _scalars(root, "Metrics/AverageReturn")]
    assert returns[0] < 40  # random at first
    assert max(returns) > 150
    assert trainer.learner.metrics.average_return() > 100
    q = [v for _, v in _scalars(root, "Loss/DqnAlgorithm/q_value")]
    assert 0 < q[-1] < 100  # bounded by 1 / (1 - gamma): no divergence
