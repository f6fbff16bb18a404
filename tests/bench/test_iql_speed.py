"""bench/iql_speed.py hands d3rlpy the same transitions alf trains on: alf's step
convention (reward on arrival, final observation in the LAST step) converted to
d3rlpy's flat episode arrays (reward of the step's own action, terminal/timeout flags)."""
import importlib.util
import os

import numpy as np
import torch

from alf.data_structures import StepType
from alf.datasets.format import DatasetSteps, open_dataset, write_dataset
from alf.tensor_specs import BoundedTensorSpec, TensorSpec

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _bench():
    spec = importlib.util.spec_from_file_location(
        "iql_speed", os.path.join(REPO_ROOT, "bench", "iql_speed.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


F, M, L = int(StepType.FIRST), int(StepType.MID), int(StepType.LAST)


def test_read_transitions_shifts_rewards_and_flags_episode_ends(tmp_path):
    # row 0: a terminated episode (discount 0 at LAST), then an episode cut by the row's end;
    # row 1: a truncated episode (discount 1 at LAST), then zero padding
    step_type = np.array([[F, M, M, L, F, M], [F, M, L, 0, 0, 0]], np.int32)
    reward = np.array([[0, 1, 2, 3, 0, 5], [0, 11, 12, 0, 0, 0]], np.float32)
    discount = np.array([[1, 1, 1, 0, 1, 1], [1, 1, 1, 0, 0, 0]], np.float32)
    obs = np.arange(12, dtype=np.float32).reshape(2, 6, 1) * np.ones((1, 1, 2), np.float32)
    action = np.arange(12, dtype=np.float32).reshape(2, 6, 1) / 100
    path = str(tmp_path / "ds")
    write_dataset(path, DatasetSteps(step_type, reward, discount, obs, action), [6, 3], "X-v0",
                  TensorSpec((2,)), BoundedTensorSpec((1,), torch.float32, -1.0, 1.0),
                  TensorSpec(()))
    o, a, r, term, tout = _bench().read_transitions(path)
    # terminated: its LAST step is dropped (3 transitions); cut and truncated episodes keep
    # their last step as the next observation of a timeout (2 + 3 steps)
    np.testing.assert_array_equal(o[:, 0], [0, 1, 2, 4, 5, 6, 7, 8])
    np.testing.assert_array_equal(a[:, 0], np.array([0, 1, 2, 4, 5, 6, 7, 0], np.float32) / 100)
    np.testing.assert_array_equal(r[:, 0], [1, 2, 3, 5, 0, 11, 12, 0])
    np.testing.assert_array_equal(term, [0, 0, 1, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(tout, [0, 0, 0, 0, 1, 0, 0, 1])
    assert r.shape == (8, 1) and o.dtype == np.float32


def test_synthetic_dataset_is_halfcheetah_shaped(tmp_path):
    bench = _bench()
    path = str(tmp_path / "syn")
    bench.write_synthetic_dataset(path, 2500)
    ds = open_dataset(path)
    assert ds.info.num_rows == 3 and ds.info.row_length == 1001
    assert list(ds.steps.observation.shape) == [3, 1001, 17]
    assert list(ds.steps.action.shape) == [3, 1001, 6]
    o, a, r, term, tout = bench.read_transitions(path)
    # 3 truncated 1000-step episodes: 3 x 1001 steps, 3 x 1000 transitions
    assert o.shape == (3003, 17) and a.shape == (3003, 6)
    assert term.sum() == 0 and tout.sum() == 3 and np.all(tout[1000::1001] == 1)
