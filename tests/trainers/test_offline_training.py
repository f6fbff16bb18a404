"""Offline and hybrid training: the offline buffer, mixing, schedules, pure offline runs."""
import os
import subprocess
import sys

import pytest
import torch

from alf import nest as alf_nest
from alf.trainers.hybrid_replay import MixedBatchSource, OfflineFraction
from alf.data_structures import StepType
from alf.datasets.format import DatasetSteps, DatasetWriter, open_dataset
from alf.datasets.offline_buffer import load_offline_buffer
from alf.environments import create_environment
from alf.errors import UserError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def make_random_dataset(path, env_name="Pendulum-v1", steps_per_row=300, num_rows=2, seed=0):
    """Random-policy dataset of ``num_rows`` envs x ``steps_per_row`` raw steps."""
    env = create_environment(env_name=env_name, num_parallel_environments=num_rows, seed=seed)
    torch.manual_seed(seed)
    try:
        with DatasetWriter(str(path), num_rows, steps_per_row, env_name, env.observation_spec(),
                           env.action_spec(), env.reward_spec()) as writer:
            ts = env.reset()
            for _ in range(steps_per_row):
                action = env.action_spec().sample((num_rows,))
                writer.append(DatasetSteps(
                    step_type=ts.step_type[None], reward=ts.reward[None],
                    discount=ts.discount[None], observation=ts.observation[None],
                    action=action[None]))
                ts = env.step(action)
    finally:
        env.close()
    return str(path)


@pytest.fixture(scope="module")
def pendulum_dataset(tmp_path_factory):
    return make_random_dataset(tmp_path_factory.mktemp("ds") / "pendulum")


def _pendulum_specs():
    env = create_environment(env_name="Pendulum-v1", num_parallel_environments=1)
    try:
        return env.observation_spec(), env.action_spec(), env.reward_spec()
    finally:
        env.close()


def test_offline_buffer_maps_the_dataset_without_copying(pendulum_dataset):
    obs, act, rew = _pendulum_specs()
    buffer = load_offline_buffer([pendulum_dataset], obs, act, rew, "Pendulum-v1")
    ds = open_dataset(pendulum_dataset)
    assert buffer.total_size() == 600 and buffer.num_envs == 2
    stored = buffer._storage.time_step.observation
    assert stored.data_ptr() == ds.steps.observation.data_ptr() or torch.equal(
        stored, ds.steps.observation)
    data, info = buffer.get_batch(64, 2)
    rows, pos = info.env_ids, info.positions
    assert torch.equal(data.action[:, 0], ds.steps.action[rows, pos])
    assert torch.equal(data.time_step.observation[:, 1], ds.steps.observation[rows, pos + 1])


def test_offline_buffer_at_another_capacity_keeps_the_newest_steps(pendulum_dataset, tmp_path):
    obs, act, rew = _pendulum_specs()
    other = make_random_dataset(tmp_path / "other", steps_per_row=100, num_rows=1, seed=3)
    buffer = load_offline_buffer([pendulum_dataset, other], obs, act, rew, capacity=120)
    assert buffer.num_envs == 3 and buffer.max_length == 120
    assert buffer.current_size().tolist() == [120, 120, 100]
    ds = open_dataset(pendulum_dataset)
    assert buffer.current_pos().tolist() == [300, 300, 100]  # absolute positions kept
    data = buffer.get_by_position(torch.tensor([0, 1]), torch.tensor([180, 180]), 120)
    assert torch.equal(data.time_step.observation[0], ds.steps.observation[0, 180:300])
    assert torch.equal(data.action[1], ds.steps.action[1, 180:300])
    small = open_dataset(other)
    data = buffer.get_by_position(torch.tensor([2]), torch.tensor([0]), 100)
    assert torch.equal(data.time_step.reward[0], small.steps.reward[0, :100])


def test_dataset_of_another_env_names_the_field_and_both_shapes(tmp_path):
    cart = make_random_dataset(tmp_path / "cart", env_name="CartPole-v1", steps_per_row=20,
                               num_rows=1)
    obs, act, rew = _pendulum_specs()
    with pytest.raises(UserError) as e:
        load_offline_buffer([cart], obs, act, rew, "Pendulum-v1")
    msg = str(e.value)
    assert "\n" not in msg
    assert "observation is (4,) float32 in the dataset but (3,) float32" in msg
    assert "CartPole-v1" in msg and cart in msg


class _Ctx:
    def __init__(self):
        self.num_updates = 0
        self._progress = 0.0

    def progress(self):
        return self._progress


class _Cfg:
    offline_fraction = 0.5
    rl_train_after_update_steps = 10
    rl_train_every_update_steps = 3


def test_offline_fraction_phases_every_k_and_schedule():
    ctx, cfg = _Ctx(), _Cfg()
    mix = OfflineFraction(cfg, ctx)
    assert mix.in_offline_phase() and mix.offline_rows(256, True) == 256
    ctx.num_updates = 12  # 2 updates after the phase, not a multiple of 3: offline only
    assert not mix.in_offline_phase() and mix.offline_rows(256, True) == 256
    ctx.num_updates = 13
    assert mix.offline_rows(256, True) == 256 - 128
    assert mix.offline_rows(256, False) == 256  # online buffer not ready yet
    assert mix.offline_rows(256, None) == 256  # no online buffer: pure offline
    cfg.offline_fraction = lambda progress: 1.0 - progress
    ctx._progress = 0.75
    assert mix.offline_rows(256, True) == 64


def _run(args, cwd, timeout=240):
    return subprocess.run([sys.executable, "-m", "alf.bin.train"] + args, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


SAC_OFFLINE = ["--conf=sac_pendulum.gin",
               "--conf_param", "TrainerConfig.unroll_length=0",
               "--conf_param", "TrainerConfig.num_env_steps=0",
               "--conf_param", "TrainerConfig.num_iterations=6",
               "--conf_param", "TrainerConfig.num_updates_per_train_iter=5",
               "--conf_param", "TrainerConfig.mini_batch_size=32",
               "--conf_param", "TrainerConfig.initial_collect_steps=0",
               "--conf_param", "TrainerConfig.summary_interval=2"]


def test_pure_offline_training_from_the_cli(pendulum_dataset, tmp_path):
    """Pure offline SAC: 30 updates from the dataset, zero env steps; progress shows updates."""
    root = tmp_path / "run"
    r = _run(SAC_OFFLINE + ["--root_dir", str(root), "--conf_param",
                            f"TrainerConfig.offline_buffer_dir='{pendulum_dataset}'"],
             cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    state = torch.load(sorted((root / "train").glob("ckpt-*"))[-1], weights_only=False)
    assert state["context"]["env_steps"] == 0
    assert state["context"]["num_updates"] == 30
    assert "updates 30 | updates/s" in r.stderr
    rows = (root / "progress.csv").read_text().strip().splitlines()
    assert rows[-1].split(",")[:2] == ["6", "0"]


def test_pure_offline_training_steps_no_env(pendulum_dataset, tmp_path, monkeypatch):
    from alf.environments.gym_environment import GymVectorEnvironment

    def refuse(*args, **kwargs):
        raise AssertionError("an env was stepped or reset in pure offline training")

    monkeypatch.setattr(GymVectorEnvironment, "step", refuse)
    monkeypatch.setattr(GymVectorEnvironment, "reset", refuse)
    trainer = _hybrid_trainer(tmp_path, pendulum_dataset, unroll_length=0, num_env_steps=0,
                              num_iterations=3, num_updates_per_train_iter=4,
                              mini_batch_size=32, initial_collect_steps=0)
    try:
        before = [p.detach().clone() for p in trainer.algorithm.parameters()]
        trainer.run()
        assert trainer.unroller is None and trainer.learner.replay_buffer is None
        assert trainer.context.env_steps == 0 and trainer.context.num_updates == 12
        after = list(trainer.algorithm.parameters())
        assert any(not torch.equal(a, b) for a, b in zip(after, before))
    finally:
        trainer.close()


def test_pure_offline_with_a_dataset_of_another_env_is_one_line_exit_2(tmp_path):
    cart = make_random_dataset(tmp_path / "cart", env_name="CartPole-v1", steps_per_row=20,
                               num_rows=1)
    r = _run(SAC_OFFLINE + ["--root_dir", str(tmp_path / "run"),
                            "--conf_param", f"TrainerConfig.offline_buffer_dir='{cart}'"],
             cwd=str(tmp_path))
    assert r.returncode == 2
    lines = [l for l in r.stderr.strip().splitlines() if l.strip()]
    assert len(lines) == 1, r.stderr
    assert "observation is (4,) float32 in the dataset but (3,) float32" in lines[0]
    assert "'Pendulum-v1'" in lines[0]
    assert not (tmp_path / "run" / "config.gin").exists()


def test_truncated_dataset_is_one_line_exit_2(pendulum_dataset, tmp_path):
    import shutil
    bad = tmp_path / "bad"
    shutil.copytree(pendulum_dataset, bad)
    f = bad / "observation.npy"
    f.write_bytes(f.read_bytes()[:-100])
    r = _run(SAC_OFFLINE + ["--root_dir", str(tmp_path / "run"),
                            "--conf_param", f"TrainerConfig.offline_buffer_dir='{bad}'"],
             cwd=str(tmp_path))
    assert r.returncode == 2
    lines = [l for l in r.stderr.strip().splitlines() if l.strip()]
    assert len(lines) == 1 and "observation" in lines[0] and "truncated" in lines[0], r.stderr


def _hybrid_trainer(tmp_path, dataset, extra=(), **overrides):
    import alf
    from alf.trainers.trainer import Trainer
    from alf.trainers.trainer_config import TrainerConfig
    alf.config.parse_config("sac_pendulum.gin", [
        "TrainerConfig.num_threads=1", f"TrainerConfig.offline_buffer_dir='{dataset}'"] +
        [f"TrainerConfig.{k}={v}" if isinstance(v, str) else f"TrainerConfig.{k}={v!r}"
         for k, v in overrides.items()] + list(extra))
    return Trainer(TrainerConfig(), str(tmp_path / "run"), quiet=True)


def test_hybrid_batches_mix_both_buffers_and_offline_phase_steps_no_env(pendulum_dataset,
                                                                        tmp_path):
    trainer = _hybrid_trainer(tmp_path, pendulum_dataset, initial_collect_steps=0,
                              mini_batch_size=64, rl_train_after_update_steps=4,
                              num_env_steps=1000)
    try:
        alg, ctx = trainer.learner, trainer.context
        for _ in range(4):
            assert alg.train_iter() == 0  # offline phase: updates, no env step
        assert ctx.num_updates == 4 and ctx.env_steps == 0
        assert alg.replay_buffer.total_size() == 0
        text = trainer._report.progress_text(trainer.learner, trainer.unroller.metrics, 0.0, 1.0)
        assert "| env steps 0/1,000 |" in text and "| updates 4 |" in text
        for _ in range(5):
            assert alg.train_iter() == 1
        assert ctx.env_steps == 5 and ctx.num_updates == 9
        batch = alg.replay.training_batch(64, 2)
        source = batch.batch_info.replay_buffer
        assert isinstance(source, MixedBatchSource)
        (b1, s1, e1), (b2, s2, e2) = source.parts
        assert b1 is alg.replay_buffer and (s1, e1) == (0, 32)
        assert b2 is alg.offline_buffer and (s2, e2) == (32, 64)
        online_obs = alg.replay_buffer.gather_all().time_step.observation[0, :5]
        rows_online = batch.time_step.observation[:32, 0]
        assert all(any(torch.equal(r, o) for o in online_obs) for r in rows_online)
    finally:
        trainer.close()


def test_priorities_go_back_to_the_buffer_each_row_came_from(pendulum_dataset, tmp_path):
    trainer = _hybrid_trainer(tmp_path, pendulum_dataset, initial_collect_steps=0,
                              mini_batch_size=16, priority_replay=True, num_env_steps=1000)
    try:
        alg = trainer.learner
        for _ in range(20):
            alg.train_iter()
        batch = alg.replay.training_batch(16, 2)
        info = batch.batch_info
        from alf.trainers.hybrid_replay import update_priorities
        update_priorities(info, torch.full((16,), 7.0))
        rb = alg.replay_buffer
        got = rb.get_priority(info.env_ids[:8], info.positions[:8])
        expect = (7.0 + rb.priority_eps) ** rb.priority_alpha
        assert torch.allclose(got, torch.full_like(got, expect))
    finally:
        trainer.close()


def test_offline_rows_go_through_the_data_transformer(pendulum_dataset, tmp_path):
    trainer = _hybrid_trainer(tmp_path, pendulum_dataset, initial_collect_steps=0,
                              mini_batch_size=64, num_env_steps=1000,
                              data_transformer_ctor="@RewardScaling",
                              extra=["RewardScaling.scale=0.25"])
    try:
        alg = trainer.learner
        ds = open_dataset(pendulum_dataset)
        batch = alg.replay.sample(64, 2, alg.offline_buffer)
        info = batch.batch_info
        raw = ds.steps.reward[info.env_ids, info.positions]
        assert alg.algorithm.data_transformer._scale == 0.25
        assert torch.allclose(batch.time_step.reward[:, 0], raw * 0.25)
    finally:
        trainer.close()


def test_hybrid_with_the_async_unroller_mixes_online_rows(pendulum_dataset, tmp_path):
    import alf
    from alf.trainers.trainer import Trainer
    from alf.trainers.trainer_config import TrainerConfig
    alf.config.parse_config("sac_pendulum_async.gin", [
        "TrainerConfig.num_threads=1", 'TrainerConfig.async_mode="serial"',
        f"TrainerConfig.offline_buffer_dir='{pendulum_dataset}'",
        "TrainerConfig.initial_collect_steps=0", "TrainerConfig.mini_batch_size=32",
        "TrainerConfig.num_updates_per_train_iter=2", "TrainerConfig.num_env_steps=1000"])
    trainer = Trainer(TrainerConfig(), str(tmp_path / "run"), quiet=True)
    try:
        alg, ctx = trainer.learner, trainer.context
        for _ in range(3):
            alg.train_iter()
        assert ctx.env_steps > 0 and ctx.num_updates == 6
        assert alg.replay_buffer.total_size() == ctx.env_steps
        parts = alg.replay.training_batch(32, 2).batch_info.replay_buffer.parts
        assert [(b is alg.replay_buffer, s, e) for b, s, e in parts] == [(True, 0, 16),
                                                                        (False, 16, 32)]
        assert parts[1][0] is alg.offline_buffer
    finally:
        trainer.close()


def test_the_custom_dataset_snippet_of_docs_offline_md_runs(tmp_path, monkeypatch):
    import re
    text = open(os.path.join(REPO, "docs", "offline.md")).read()
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "docs/offline.md", "exec"), {})
    ds = open_dataset(str(tmp_path / "data" / "mine"))
    assert ds.info.num_rows == 4 and ds.info.row_lengths == [1000] * 4
    assert ds.info.num_episodes == 4 * 4  # 201 steps per episode (FIRST + 200): 4 per row


def test_observation_normalizer_is_fitted_to_the_dataset(pendulum_dataset, tmp_path):
    """Pure offline runs step no env: the normaliser's statistics come from the dataset."""
    trainer = _hybrid_trainer(tmp_path, pendulum_dataset, unroll_length=0, num_env_steps=0,
                              num_iterations=1, mini_batch_size=32,
                              data_transformer_ctor="@ObservationNormalizer")
    try:
        obs = open_dataset(pendulum_dataset).steps.observation.reshape(-1, 3).double()
        stats = trainer.algorithm.data_transformer.normalizer.moments()[""]
        assert torch.allclose(stats["mean"].double(), obs.mean(0), atol=1e-5)
        assert torch.allclose(stats["var"].double(), obs.var(0, unbiased=False), rtol=1e-4)
        batch = trainer.learner.replay.sample(256, 1, trainer.learner.offline_buffer)
        normalised = batch.time_step.observation[:, 0]
        assert normalised.mean(0).abs().max() < 0.25  # normalised with the dataset's moments
    finally:
        trainer.close()


def test_offline_config_errors_name_the_fix(pendulum_dataset):
    from alf.algorithms.sac_algorithm import SacAlgorithm
    from alf.errors import ConfigError
    from alf.trainers.trainer_config import TrainerConfig
    with pytest.raises(ConfigError, match="set TrainerConfig.num_env_steps=0 and "
                                          "TrainerConfig.num_iterations"):
        TrainerConfig(algorithm_ctor=SacAlgorithm, offline_buffer_dir=pendulum_dataset,
                      unroll_length=0, num_env_steps=1000)
    with pytest.raises(ConfigError, match="needs no async unroller"):
        TrainerConfig(algorithm_ctor=SacAlgorithm, offline_buffer_dir=pendulum_dataset,
                      unroll_length=0, num_iterations=5, async_unroll=True,
                      max_unroll_length=8)


def test_dataset_shorter_than_a_sampled_sequence_is_one_line(tmp_path):
    short = make_random_dataset(tmp_path / "short", steps_per_row=3, num_rows=1)
    with pytest.raises(UserError) as e:
        _hybrid_trainer(tmp_path, short, unroll_length=0, num_env_steps=0, num_iterations=1,
                        extra=["SacAlgorithm.n_step=3"])
    assert "no row of 4 steps (longest: 3)" in str(e.value) and "\n" not in str(e.value)


def test_a_transformer_without_transform_replay_is_refused_before_training(pendulum_dataset,
                                                                          tmp_path):
    import alf
    from alf.algorithms.data_transformers import DataTransformer
    from alf.errors import ConfigError

    @alf.configurable
    class ShiftObservation(DataTransformer):  # a user's transformer, live steps only
        def transform_timestep(self, time_step, state):
            return time_step._replace(observation=time_step.observation + 1), state

    with pytest.raises(ConfigError, match="ShiftObservation does not define transform_replay"):
        _hybrid_trainer(tmp_path, pendulum_dataset, unroll_length=0, num_env_steps=0,
                        num_iterations=1, data_transformer_ctor="@ShiftObservation")
