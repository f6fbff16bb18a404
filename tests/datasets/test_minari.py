"""Minari <-> alf datasets (alf.datasets.minari_io, alf.bin.minari_dataset).

Minari datasets are made here, under a temporary MINARI_DATASETS_PATH, with Minari's own
``DataCollector`` (needs jax: ``minari[create]``) or ``create_dataset_from_buffers``;
nothing is downloaded.
"""
import logging
import os
import sys

import numpy as np
import pytest
import torch

minari = pytest.importorskip("minari")
pytest.importorskip("h5py")

import gymnasium as gym  # noqa: E402

from alf.data_structures import StepType  # noqa: E402
from alf.datasets.format import DatasetSteps, open_dataset, write_dataset  # noqa: E402
from alf.datasets.minari_io import export_minari, import_minari  # noqa: E402
from alf.errors import UserError  # noqa: E402
from alf.tensor_specs import BoundedTensorSpec, TensorSpec  # noqa: E402

PROGRAM = "alf.bin.minari_dataset"
# Minari's advice on unset optional metadata (author, eval_env, ...) of the test datasets
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning:minari")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty Minari cache that Minari itself and alf both use."""
    root = tmp_path / "minari"
    root.mkdir()
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(root))
    return root


def collect(env_id: str, dataset_id: str, num_steps: int, seed: int = 0):
    """A Minari dataset of ``num_steps`` random-policy steps, recorded by Minari's
    DataCollector; the last episode is cut by the end of collection (truncated)."""
    pytest.importorskip("jax")  # DataCollector's episode buffer uses jax.tree_util
    env = minari.DataCollector(gym.make(env_id))
    try:
        env.reset(seed=seed)
        env.action_space.seed(seed)
        for _ in range(num_steps):
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                env.reset()
        return env.create_dataset(dataset_id, algorithm_name="random", description="test")
    finally:
        env.close()


def episode_slices(dataset):
    """Complete episodes of an alf dataset, in order, as dicts of numpy arrays."""
    steps = dataset.steps
    out = []
    for row, start, length, complete in dataset.episodes().tolist():
        if not complete:
            continue
        sl = slice(start, start + length)
        pick = lambda x: x[row, sl].numpy()  # noqa: E731
        out.append({
            "step_type": pick(steps.step_type), "reward": pick(steps.reward),
            "discount": pick(steps.discount),
            "observation": {k: pick(v) for k, v in steps.observation.items()}
            if isinstance(steps.observation, dict) else pick(steps.observation),
            "action": pick(steps.action)})
    return out


def assert_bitwise(a, b, what):
    if isinstance(a, dict):
        assert set(a) == set(b), what
        for k in a:
            assert_bitwise(a[k], b[k], f"{what}.{k}")
        return
    assert a.dtype == b.dtype, (what, a.dtype, b.dtype)
    assert a.shape == b.shape, (what, a.shape, b.shape)
    assert a.tobytes() == b.tobytes(), what


# ----------------------------------------------------------------------------- import


@pytest.mark.parametrize("env_id,num_steps", [("CartPole-v1", 300), ("Pendulum-v1", 450)])
def test_import_yields_the_transitions_minari_reports(cache, tmp_path, env_id, num_steps):
    mds = collect(env_id, f"test/{env_id.split('-')[0].lower()}-v0", num_steps)
    episodes = list(mds.iterate_episodes())
    assert sum(len(e) for e in episodes) == num_steps == mds.total_steps

    info = import_minari(mds.id, tmp_path / "alf")

    assert info.env_name == env_id
    assert info.num_rows == 1
    assert info.num_steps == num_steps + len(episodes)
    assert info.num_episodes == len(episodes)
    assert info.source["kind"] == "minari" and info.source["dataset_id"] == mds.id
    ds = open_dataset(tmp_path / "alf")
    table = ds.episodes()
    starts = np.cumsum([0] + [len(e) + 1 for e in episodes[:-1]])
    np.testing.assert_array_equal(table, np.stack(
        [np.zeros(len(episodes)), starts, [len(e) + 1 for e in episodes],
         np.ones(len(episodes))], 1).astype(np.int64))
    np.testing.assert_allclose(ds.episode_returns(),
                               [e.rewards.astype(np.float32).sum(dtype=np.float64)
                                for e in episodes])

    terminated = truncated = 0
    for ep, got in zip(episodes, episode_slices(ds)):
        n = len(ep)
        assert got["step_type"].tolist() == [StepType.FIRST] + [StepType.MID] * (n - 1) + [
            StepType.LAST]
        assert_bitwise(got["observation"], ep.observations, "observation")  # float32 already
        assert_bitwise(got["action"][:n], ep.actions.astype(got["action"].dtype), "action")
        assert not got["action"][n].any()  # LAST action: zeros
        assert got["reward"][0] == 0
        assert_bitwise(got["reward"][1:], ep.rewards.astype(np.float32), "reward")
        assert not ep.terminations[:-1].any() and not ep.truncations[:-1].any()
        assert got["discount"][:n].tolist() == [1.0] * n
        assert got["discount"][n] == (0.0 if ep.terminations[-1] else 1.0)
        assert ep.terminations[-1] or ep.truncations[-1]
        terminated += int(ep.terminations[-1])
        truncated += int(ep.truncations[-1])
    if env_id == "CartPole-v1":
        assert info.action_spec == BoundedTensorSpec((), torch.int64, 0, 1)
        assert info.observation_spec == TensorSpec((4,), torch.float32)  # inf velocity bounds
        # every episode but the last ended by termination; the last one is cut by the end
        # of collection (truncated) unless it happened to terminate on the last step (seen
        # once in CI, where the same seed gave 14 episodes instead of 16)
        last_cut = not episodes[-1].terminations[-1]
        assert terminated == len(episodes) - int(last_cut) and terminated >= 5, \
            [len(e) for e in episodes]
        assert truncated == int(last_cut)
    else:
        assert info.action_spec == BoundedTensorSpec((1,), torch.float32, -2.0, 2.0)
        assert [len(e) for e in episodes] == [200, 200, 50]  # TimeLimit, TimeLimit, cut
        assert truncated == 3 and terminated == 0


@pytest.mark.parametrize("env_id,num_steps", [("CartPole-v1", 200), ("Pendulum-v1", 250)])
def test_minari_to_alf_to_minari_reproduces_minari_episodes(cache, tmp_path, env_id,
                                                            num_steps):
    mds = collect(env_id, "orig/data-v0", num_steps, seed=3)
    import_minari("orig/data-v0", tmp_path / "alf")
    result = export_minari(tmp_path / "alf", "back/data-v1")

    assert result.dropped_steps == 0 and result.num_steps == num_steps
    back = minari.load_dataset("back/data-v1")
    assert back.total_episodes == mds.total_episodes and back.total_steps == num_steps
    assert back.observation_space == mds.observation_space
    assert back.action_space == mds.action_space
    assert back.env_spec == mds.env_spec
    for a, b in zip(mds.iterate_episodes(), back.iterate_episodes()):
        assert_bitwise(b.observations, a.observations, "observations")
        assert_bitwise(b.actions, a.actions, "actions")
        assert_bitwise(b.terminations, a.terminations, "terminations")
        assert_bitwise(b.truncations, a.truncations, "truncations")
        # alf keeps rewards as float32: Minari's float64 rewards come back float32-rounded
        assert_bitwise(b.rewards, a.rewards.astype(np.float32).astype(a.rewards.dtype),
                       "rewards")
        if env_id == "CartPole-v1":
            assert_bitwise(b.rewards, a.rewards, "rewards")  # 1.0 is exact


# ----------------------------------------------------------------------------- export


def make_alf_dataset(path, discrete: bool, seed: int = 0):
    """Two rows of random steps with dict observations (a raw 32x32 RGB image that Minari
    would JPEG-encode by default, a bounded vector, a Discrete scalar); row 0 starts
    mid-episode, row 1 ends mid-episode; episodes end terminated and truncated."""
    rng = np.random.default_rng(seed)
    obs_spec = {"image": BoundedTensorSpec((32, 32, 3), torch.uint8, 0, 255),
                "pos": BoundedTensorSpec((3,), torch.float32, -5.0, 5.0),
                "mode": BoundedTensorSpec((), torch.int64, 2, 6)}
    act_spec = (BoundedTensorSpec((), torch.int64, 0, 2) if discrete else
                BoundedTensorSpec((2,), torch.float32, [-1.0, -2.0], [1.0, 2.0]))
    rows = [
        # (step types, discount of each LAST)
        [StepType.MID] * 3 + [StepType.LAST] + _episode(5) + _episode(2) + _episode(7),
        _episode(4) + _episode(6) + [StepType.FIRST] + [StepType.MID] * 4,
    ]
    row_lengths = [len(r) for r in rows]
    T = max(row_lengths)
    step_type = np.zeros((2, T), np.int32)
    for i, r in enumerate(rows):
        step_type[i, :len(r)] = r
    discount = np.ones((2, T), np.float32)
    discount[step_type == StepType.LAST] = rng.integers(0, 2, (step_type == StepType.LAST).sum())
    reward = rng.normal(size=(2, T)).astype(np.float32)
    reward[step_type == StepType.FIRST] = 0
    obs = {"image": rng.integers(0, 256, (2, T, 32, 32, 3), dtype=np.uint8),
           "pos": rng.uniform(-5, 5, (2, T, 3)).astype(np.float32),
           "mode": rng.integers(2, 7, (2, T), dtype=np.int64)}
    action = (rng.integers(0, 3, (2, T), dtype=np.int64) if discrete else
              rng.uniform(-1, 1, (2, T, 2)).astype(np.float32))
    steps = DatasetSteps(step_type=step_type, reward=reward, discount=discount,
                         observation=obs, action=action)
    return write_dataset(path, steps, row_lengths, "Pendulum-v1", obs_spec, act_spec,
                         TensorSpec((), torch.float32), source={"kind": "test"})


def _episode(n_steps: int) -> list:
    return [StepType.FIRST] + [StepType.MID] * (n_steps - 1) + [StepType.LAST]


@pytest.mark.parametrize("discrete", [True, False], ids=["discrete", "continuous"])
def test_alf_to_minari_to_alf_is_bitwise(cache, tmp_path, caplog, discrete):
    info = make_alf_dataset(tmp_path / "orig", discrete)
    original = open_dataset(tmp_path / "orig")
    complete = original.episodes()[original.episodes()[:, 3] == 1]
    assert len(complete) == 5

    with caplog.at_level(logging.WARNING, logger="alf.datasets.minari_io"):
        result = export_minari(tmp_path / "orig", "alf/export-v0")
    # row 0's leading fragment (4 steps) and row 1's trailing one (5 steps) are dropped
    assert (result.dropped_fragments, result.dropped_steps) == (2, 9)
    assert result.num_episodes == 5 and result.num_steps == int((complete[:, 2] - 1).sum())
    assert any("dropped 9 step(s) of 2 unfinished" in r.getMessage() for r in caplog.records)
    assert result.path == os.path.join(str(cache), "alf/export-v0")

    mds = minari.load_dataset("alf/export-v0")  # Minari reads it with its own API
    assert mds.total_episodes == 5
    assert mds.env_spec.id == "Pendulum-v1"
    assert mds.observation_space["image"].dtype == np.uint8
    first = next(iter(mds.iterate_episodes()))
    assert first.observations["image"].dtype == np.uint8  # stored raw, not JPEG-encoded

    back_info = import_minari("alf/export-v0", tmp_path / "back")
    assert back_info.env_name == info.env_name
    assert back_info.observation_spec == info.observation_spec
    assert back_info.action_spec == info.action_spec
    assert back_info.reward_spec == info.reward_spec
    assert back_info.num_episodes == 5
    back = open_dataset(tmp_path / "back")
    got, want = episode_slices(back), episode_slices(original)
    assert len(got) == len(want) == 5
    assert [g["discount"][-1] for g in got] == [w["discount"][-1] for w in want]
    assert {float(w["discount"][-1]) for w in want} == {0.0, 1.0}  # both kinds of end
    for g, w in zip(got, want):
        for key in w:
            assert_bitwise(g[key], w[key], key)
    np.testing.assert_array_equal(back.episode_returns(),
                                  original.episode_returns()[original.episodes()[:, 3] == 1])


def test_export_refuses_an_existing_id_and_a_bad_id(cache, tmp_path):
    make_alf_dataset(tmp_path / "orig", discrete=True)
    export_minari(tmp_path / "orig", "dup/data-v0")
    with pytest.raises(UserError) as e:
        export_minari(tmp_path / "orig", "dup/data-v0")
    assert "'dup/data-v0' already exists" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(UserError, match="is not a Minari dataset id"):
        export_minari(tmp_path / "orig", "no_version")
    assert minari.load_dataset("dup/data-v0").total_episodes == 5  # untouched


# ----------------------------------------------------------------------------- errors


def test_missing_id_is_one_line_naming_id_directory_and_env_var(cache, tmp_path):
    with pytest.raises(UserError) as e:
        import_minari("nowhere/missing-v0", tmp_path / "out")
    msg = str(e.value)
    assert "\n" not in msg
    assert "'nowhere/missing-v0'" in msg
    assert os.path.join(str(cache), "nowhere/missing-v0", "data") in msg
    assert "MINARI_DATASETS_PATH" in msg and "minari download nowhere/missing-v0" in msg
    assert not (tmp_path / "out").exists()
    assert not (cache / "nowhere").exists()  # looking up creates nothing


def _buffers_dataset(dataset_id, observation_space, observations, truncations):
    from minari.data_collector import EpisodeBuffer
    n = len(truncations)
    buffer = EpisodeBuffer(observations=observations, actions=np.zeros(n, np.int64),
                           rewards=np.ones(n), terminations=np.zeros(n, bool),
                           truncations=np.asarray(truncations))
    return minari.create_dataset_from_buffers(
        dataset_id, [buffer], observation_space=observation_space,
        action_space=gym.spaces.Discrete(2), algorithm_name="test", description="test")


def test_unsupported_space_is_a_clear_error(cache, tmp_path):
    space = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Discrete(4)))
    _buffers_dataset("weird/tuple-v0", space, (np.zeros(4, np.int64), np.zeros(4, np.int64)),
                     [False, False, True])
    with pytest.raises(UserError) as e:
        import_minari("weird/tuple-v0", tmp_path / "out")
    msg = str(e.value)
    assert "weird/tuple-v0" in msg and "observation space Tuple(" in msg and "Dict" in msg
    assert not (tmp_path / "out").exists()


def test_episode_without_end_flag_is_imported_as_truncated(cache, tmp_path, caplog):
    _buffers_dataset("open/end-v0", gym.spaces.Box(-1, 1, (2,), np.float32),
                     np.zeros((4, 2), np.float32), [False, False, False])
    with caplog.at_level(logging.WARNING, logger="alf.datasets.minari_io"):
        info = import_minari(str(cache / "open/end-v0"), tmp_path / "out")  # by directory
    assert info.num_episodes == 1 and info.num_steps == 4 and info.env_name == ""
    ds = open_dataset(tmp_path / "out")
    assert ds.steps.step_type[0].tolist() == [0, 1, 1, 2]
    assert ds.steps.discount[0].tolist() == [1, 1, 1, 1]
    assert any("neither terminated nor truncated" in r.getMessage() for r in caplog.records)


# ----------------------------------------------------------------------------- CLI


def test_cli_import_export_round_trip(cache, tmp_path, alf_cli):
    make_alf_dataset(tmp_path / "orig", discrete=False)
    env = {"MINARI_DATASETS_PATH": str(cache)}
    done = alf_cli.run(PROGRAM, ["export", f"--dataset={tmp_path / 'orig'}", "--id=cli/x-v0"],
                       tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines() == [
        f"wrote Minari dataset cli/x-v0 ({cache / 'cli/x-v0'}): 5 episodes, 24 steps"]
    assert "dropped 9 step(s)" in done.stderr
    done = alf_cli.run(PROGRAM, ["import", "--id=cli/x-v0", f"--out={tmp_path / 'back'}"],
                       tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines() == [
        f"wrote alf dataset {tmp_path / 'back'}: 1 row, 29 steps, 5 episodes "
        "(Minari dataset cli/x-v0, env Pendulum-v1)"]
    want = episode_slices(open_dataset(tmp_path / "orig"))
    for g, w in zip(episode_slices(open_dataset(tmp_path / "back")), want):
        for key in w:
            assert_bitwise(g[key], w[key], key)


def test_cli_missing_id_exit_2_one_line(cache, tmp_path, alf_cli):
    done = alf_cli.run(PROGRAM, ["import", "--id=gone/data-v0", f"--out={tmp_path / 'o'}",
                                 f"--minari_root={tmp_path / 'elsewhere'}"], tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"{PROGRAM}: error: Minari dataset 'gone/data-v0' is not in the "
                               "local Minari cache")
    assert str(tmp_path / "elsewhere") in lines[0] and "from --minari_root" in lines[0]
    assert not (tmp_path / "o").exists()


def test_cli_needs_a_command(tmp_path, alf_cli):
    done = alf_cli.run(PROGRAM, ["--id=x-v0"], tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"{PROGRAM}: error: give a command first: import (Minari -> alf) or export "
        "(alf -> Minari); see --help"]


def test_missing_or_old_minari_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(minari, "__version__", "0.5.3")
    with pytest.raises(UserError, match=r"Minari 0\.5\.3 is installed; alf needs Minari >= "
                                        r"0\.5\.4 .*\.\[offline\]"):
        import_minari("any/data-v0", tmp_path / "out")
    monkeypatch.setitem(sys.modules, "minari", None)
    with pytest.raises(UserError) as e:
        export_minari(tmp_path / "x", "any/data-v0")
    assert str(e.value) == ("Minari datasets need the 'minari' package, which is not installed: "
                            "pip install -e \".[offline]\" (or pip install "
                            "\"minari[hdf5]>=0.5.4,<0.6\")")
