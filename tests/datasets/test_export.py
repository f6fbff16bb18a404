"""Exporting a run's saved replay buffer as a dataset: the rows are the buffer's stored steps
in time order (rings unwrapped), exactly; runs whose buffer cannot hold raw data are refused
with one line."""
import os
import shutil

import numpy as np
import pytest
import torch

from alf.data_structures import StepType
from alf.datasets import open_dataset
from alf.dataset_tools.export import (describe_transformers, export_replay_buffer,
                                      raw_data_blocker, write_buffer_state)
from alf.errors import CheckpointError, ConfigError, UserError
from alf.replay_buffers.replay_buffer import ReplayBuffer
from alf.tensor_specs import BoundedTensorSpec, TensorSpec
from tests.conftest import TINY_SAC, build_trainer


FIELDS = {"step_type": "time_step.step_type", "reward": "time_step.reward",
          "discount": "time_step.discount", "observation": "time_step.observation",
          "action": "action"}


@pytest.fixture(scope="module")
def sac_run(tmp_path_factory):
    """A finished tiny SAC Pendulum run with its replay buffer saved."""
    import gin
    root = tmp_path_factory.mktemp("runs") / "sac"
    gin.clear_config()
    try:
        build_trainer(root, TINY_SAC).run()
    finally:
        gin.clear_config()
    return str(root)


def _saved_buffer(root):
    files = sorted(f for f in os.listdir(os.path.join(root, "train"))
                   if f.startswith("replay_buffer-"))
    state = torch.load(os.path.join(root, "train", files[-1]), weights_only=True)
    return state["replay_buffer"]


def test_export_equals_the_saved_buffer_exactly(sac_run, tmp_path, clean_gin):
    state = _saved_buffer(sac_run)
    pos, size, cap = state["current_pos"], state["current_size"], state["capacity"]
    assert pos.tolist() == [150, 150] and size.tolist() == [64, 64] and cap == 64  # wrapped
    info = export_replay_buffer(sac_run, str(tmp_path / "ds"))
    ds = open_dataset(str(tmp_path / "ds"))
    assert ds.info.env_name == "Pendulum-v1"
    assert ds.info.row_lengths == [64, 64] and ds.info.num_steps == 128 == info.num_steps
    assert ds.info.observation_spec == BoundedTensorSpec((3,), torch.float32, [-1, -1, -8],
                                                         [1, 1, 8])
    assert isinstance(ds.info.action_spec, BoundedTensorSpec)
    assert ds.info.source["kind"] == "replay_buffer"
    assert ds.info.source["current_pos"] == [150, 150]
    assert ds.info.data_transformers == [] and ds.info.frame_stack == 1
    storage = dict(zip(state["fields"], state["storage"]))
    for e in range(2):
        # oldest stored step is absolute position 86, in slot 86 % 64 = 22
        order = [(p % cap) for p in range(int(pos[e] - size[e]), int(pos[e]))]
        last = storage["time_step.step_type"][e, order] == StepType.LAST
        for name, stored in FIELDS.items():
            want = storage[stored][e, order]
            if name == "action":
                want = torch.where(last[:, None], torch.zeros_like(want), want)
            got = getattr(ds.steps, name)[e]
            assert got.dtype == want.dtype and torch.equal(got, want), (name, e)
    # episodes were recomputed from the unwrapped rows: a 20-step limit gives 21-step
    # episodes, LAST at positions 20, 41, ..., 146; the window [86, 150) holds two whole ones
    ep = ds.episodes()
    assert ep.tolist() == [[0, 0, 19, 0], [0, 19, 21, 1], [0, 40, 21, 1], [0, 61, 3, 0],
                           [1, 0, 19, 0], [1, 19, 21, 1], [1, 40, 21, 1], [1, 61, 3, 0]]
    complete = ep[ep[:, 3] == 1]
    assert ds.info.num_episodes == 4
    st = ds.steps.step_type
    for row, start, length, _ in complete:
        assert st[row, start] == StepType.FIRST and st[row, start + length - 1] == StepType.LAST
    # the rows are the transitions in time order: a FIRST follows every LAST
    for e in range(2):
        for t in torch.nonzero(st[e, :-1] == StepType.LAST).flatten().tolist():
            assert st[e, t + 1] == StepType.FIRST


def test_rings_of_different_fill_are_unwrapped_in_time_order(tmp_path):
    """Buffer rows hold their absolute positions: exported rows must be arange(pos-size, pos)."""
    spec = _storage_spec()
    rb = ReplayBuffer(spec, num_envs=3, max_length=5)

    def steps(positions):
        n = len(positions)
        p = torch.tensor(positions, dtype=torch.float32)
        from alf.data_structures import Experience, TimeStep
        return Experience(time_step=TimeStep(step_type=torch.ones(n, dtype=torch.int32),
                                             reward=p, discount=torch.ones(n),
                                             observation=p[:, None].repeat(1, 2)),
                          action=p[:, None])

    counts = [0, 0, 0]
    for t, rows in enumerate([[0, 1, 2]] * 3 + [[0, 1]] * 4 + [[0]] * 5):
        rb.add_batch(steps([counts[r] for r in rows]), torch.tensor(rows))
        for r in rows:
            counts[r] += 1
    state = rb.state_dict()
    assert state["current_pos"].tolist() == [12, 7, 3]
    write_buffer_state(str(tmp_path / "ds"), state, "test buffer", "Toy-v0",
                       TensorSpec((2,)), TensorSpec((1,)), TensorSpec(()))
    ds = open_dataset(str(tmp_path / "ds"))
    assert ds.info.row_lengths == [5, 5, 3] and ds.info.row_length == 5
    assert ds.steps.reward[0].tolist() == [7, 8, 9, 10, 11]  # wrapped twice
    assert ds.steps.reward[1].tolist() == [2, 3, 4, 5, 6]  # wrapped once
    assert ds.steps.reward[2].tolist() == [0, 1, 2, 0, 0]  # not full: zero padding
    assert torch.equal(ds.steps.observation[..., 0], ds.steps.reward)
    assert torch.equal(ds.steps.action[..., 0], ds.steps.reward)
    assert ds.episodes().tolist() == [[0, 0, 5, 0], [1, 0, 5, 0], [2, 0, 3, 0]]


def _storage_spec(obs=TensorSpec((2,))):
    from alf.data_structures import Experience, TimeStep
    return Experience(time_step=TimeStep(step_type=TensorSpec((), torch.int32),
                                         reward=TensorSpec(()), discount=TensorSpec(()),
                                         observation=obs),
                      action=TensorSpec((1,)))


def test_buffer_that_does_not_fit_the_env_is_named(tmp_path):
    rb = ReplayBuffer(_storage_spec(TensorSpec((4,))), num_envs=1, max_length=3)
    with pytest.raises(UserError, match=r"^buf: field 'time_step\.observation' holds \(4,\) "
                                        r"torch\.float32 items but the env's spec is \(2,\)"):
        write_buffer_state(str(tmp_path / "ds"), rb.state_dict(), "buf", "Toy-v0",
                           TensorSpec((2,)), TensorSpec((1,)), TensorSpec(()))
    assert not os.path.exists(tmp_path / "ds")
    assert os.listdir(tmp_path) == []  # nothing staged either


def _run_dir_with_config(tmp_path, extra):
    """A run dir whose config.gin is the tiny SAC plus ``extra`` (no checkpoint)."""
    root = tmp_path / "run"
    root.mkdir()
    (root / "config.gin").write_text(TINY_SAC + extra)
    return str(root)


@pytest.mark.parametrize("ctor, what", [
    ("[@ObservationNormalizer]", "ObservationNormalizer changes the observations"),
    ("[@RewardNormalizer]", "RewardNormalizer changes the rewards"),
    ("[@FrameStacker, @RewardClipping]", "RewardClipping changes the rewards"),
])
def test_refuses_runs_whose_transformer_changed_the_data(tmp_path, clean_gin, ctor, what):
    root = _run_dir_with_config(tmp_path, f"TrainerConfig.data_transformer_ctor = {ctor}\n")
    with pytest.raises(UserError) as e:
        export_replay_buffer(root, str(tmp_path / "ds"))
    message = str(e.value)
    assert "\n" not in message
    assert message == (
        f"cannot export raw data from the replay buffer of {root}: its data transformer {what} "
        "before they are stored (TrainerConfig.data_transformer_ctor), so the raw env data "
        "cannot be recovered; make a dataset by running the trained policy instead: python -m "
        f"alf.bin.export_dataset --root_dir={root} --out=PATH --collect_steps=N")
    assert not os.path.exists(tmp_path / "ds")


def test_frame_stacker_alone_keeps_raw_frames(clean_gin):
    from alf.algorithms.data_transformers import create_data_transformer
    from alf.algorithms.frame_stacker import FrameStacker
    import functools
    tf = create_data_transformer([functools.partial(FrameStacker, stack_size=3)],
                                 TensorSpec((3,)))
    assert raw_data_blocker(tf) is None
    described, k = describe_transformers(tf)
    assert k == 3 and described == [{"class": "FrameStacker", "stack_size": 3, "stack_axis": 0,
                                     "fields": None}]


def test_run_without_saved_buffer_says_how_to_get_one(sac_run, tmp_path, clean_gin):
    root = str(tmp_path / "nobuf")
    shutil.copytree(sac_run, root)
    for f in os.listdir(os.path.join(root, "train")):
        if f.startswith("replay_buffer-"):
            os.remove(os.path.join(root, "train", f))
    with pytest.raises(UserError) as e:
        export_replay_buffer(root, str(tmp_path / "ds"))
    assert str(e.value) == (
        f"{root}/train has no saved replay buffer (the run did not set "
        "TrainerConfig.save_replay_buffer); train or resume it with --conf_param "
        "TrainerConfig.save_replay_buffer=True to save one, or make a dataset by running the "
        f"trained policy instead: python -m alf.bin.export_dataset --root_dir={root} "
        "--out=PATH --collect_steps=N")


def test_bad_root_dirs(tmp_path, clean_gin):
    with pytest.raises(ConfigError, match=r"--root_dir .*nope does not exist: give the "
                                          r"directory of a run written by alf\.bin\.train"):
        export_replay_buffer(str(tmp_path / "nope"), str(tmp_path / "ds"))
    root = _run_dir_with_config(tmp_path, "")
    with pytest.raises(CheckpointError, match=r"^no checkpoint in .*run/train: train first"):
        export_replay_buffer(root, str(tmp_path / "ds"))


def test_collect_errors(tmp_path, clean_gin):
    from alf.dataset_tools.collect import collect_dataset
    root = _run_dir_with_config(tmp_path, "")
    out = str(tmp_path / "ds")
    with pytest.raises(CheckpointError) as e:
        collect_dataset(out, 10, root_dir=root)
    assert str(e.value) == (f"no checkpoint in {root}/train: train first (python -m "
                            f"alf.bin.train --root_dir={root} ...), or use --policy=random")
    for kwargs, message in [
        (dict(root_dir=root, collect_steps=0), "--collect_steps must be >= 1, got 0"),
        (dict(root_dir=root, epsilon=1.5), "--epsilon must be in [0, 1], got 1.5"),
        (dict(conf="sac_pendulum.gin"), "--policy=greedy needs a trained policy: give "
                                        "--root_dir of a run (--conf works only with "
                                        "--policy=random)"),
        (dict(root_dir=root, conf="sac_pendulum.gin", policy="random"),
         "give either --root_dir (a trained run) or --conf (a gin file, --policy=random only), "
         "not both"),
        (dict(conf="dqn_cart_pole.gin", policy="random", noise_std=0.1),
         "--noise_std applies to continuous actions, but CartPole-v1's actions are all "
         "discrete (use --epsilon)"),
    ]:
        kwargs.setdefault("collect_steps", 10)
        with pytest.raises(ConfigError) as e:
            collect_dataset(out, **kwargs)
        assert str(e.value) == message
    assert sorted(os.listdir(tmp_path)) == ["run"]  # nothing written, nothing staged


def test_random_collection_is_seeded_and_exact(tmp_path, clean_gin):
    """Random collection through the library call: exact counts over 3 envs (7 = 3 + 2 + 2),
    seeded (two runs are identical), actions within the bounds."""
    import io
    from alf.dataset_tools.collect import collect_dataset
    infos = []
    for name in ("a", "b"):
        log = io.StringIO()
        infos.append(collect_dataset(str(tmp_path / name), 7, conf="sac_pendulum.gin",
                                     policy="random", num_envs=3, seed=5, stream=log))
        assert log.getvalue().startswith("[collect] done: steps 7/7 | ")
    assert infos[0].row_lengths == [3, 2, 2] and infos[0].num_steps == 7
    a, b = open_dataset(str(tmp_path / "a")), open_dataset(str(tmp_path / "b"))
    assert torch.equal(a.steps.action, b.steps.action)
    assert torch.equal(a.steps.observation, b.steps.observation)
    assert torch.all(a.steps.step_type[:, 0] == StepType.FIRST)
    assert torch.all(a.steps.action.abs() <= 2.0)


def test_collect_noise_is_clipped_and_epsilon_replaces_actions(sac_run, tmp_path, clean_gin):
    import io
    from alf.dataset_tools.collect import collect_dataset
    collect_dataset(str(tmp_path / "noisy"), 30, root_dir=sac_run, num_envs=1, noise_std=100.0,
                    stream=io.StringIO())
    collect_dataset(str(tmp_path / "eps"), 30, root_dir=sac_run, num_envs=1, epsilon=1.0,
                    stream=io.StringIO())
    noisy = open_dataset(str(tmp_path / "noisy")).steps.action[0, :, 0]
    assert torch.all(noisy.abs() <= 2.0)
    assert int((noisy.abs() == 2.0).sum()) >= 25  # N(0, 100) noise: almost always clipped
    ds = open_dataset(str(tmp_path / "eps"))
    assert ds.info.source["epsilon"] == 1.0
    from alf.data_structures import TimeStep
    from alf.dataset_tools.collect import _load_policy
    from alf.experiment import EnvSpecs
    from alf.environments import create_environment
    from alf.trainers.trainer_config import TrainerConfig
    env = create_environment(num_parallel_environments=1, backend="sync")
    try:
        algorithm, _, _ = _load_policy(sac_run, TrainerConfig(), EnvSpecs.of(env))
    finally:
        env.close()
    with torch.no_grad():
        greedy = algorithm.predict_step(TimeStep(observation=ds.steps.observation[0])).output
    assert not torch.any(torch.isclose(greedy[:, 0], ds.steps.action[0, :, 0]))


def test_frame_stacked_run_exports_and_collects_raw_frames(tmp_path_factory, tmp_path, clean_gin):
    """The buffer of a FrameStacker run stores the newest frame of each step: the export is
    those raw frames; collect mode stacks only for acting and records raw frames too."""
    import io
    import gin
    from alf.dataset_tools.collect import collect_dataset
    root = tmp_path_factory.mktemp("runs") / "stacked"
    build_trainer(root, TINY_SAC + "FrameStacker.stack_size = 4\n"
                  "TrainerConfig.data_transformer_ctor = [@FrameStacker]\n").run()
    gin.clear_config()
    state = _saved_buffer(str(root))
    frames = state["storage"][state["fields"].index("time_step.observation")]
    assert tuple(frames.shape[2:]) == (3,)  # one frame per step, not four
    export_replay_buffer(str(root), str(tmp_path / "ds"))
    ds = open_dataset(str(tmp_path / "ds"))
    assert ds.info.frame_stack == 4
    assert ds.info.data_transformers == [{"class": "FrameStacker", "stack_size": 4,
                                          "stack_axis": 0, "fields": None}]
    order = [p % 64 for p in range(86, 150)]
    assert torch.equal(ds.steps.observation, frames[:, order])
    gin.clear_config()
    collect_dataset(str(tmp_path / "c"), 30, root_dir=str(root), num_envs=1,
                    stream=io.StringIO())
    c = open_dataset(str(tmp_path / "c"))
    assert c.steps.observation.shape == (1, 30, 3) and c.info.frame_stack == 4
    assert torch.all(c.steps.observation[0, :, :2].abs() <= 1.0)  # (cos, sin): raw frames


def test_collect_sample_policy_is_stochastic_and_seeded(sac_run, tmp_path, clean_gin):
    import io
    from alf.dataset_tools.collect import collect_dataset
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        collect_dataset(str(tmp_path / name), 20, root_dir=sac_run, num_envs=1, policy="sample",
                        seed=seed, stream=io.StringIO())
    a, b, c = (open_dataset(str(tmp_path / n)).steps.action for n in "abc")
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert torch.all(a.abs() <= 2.0)
