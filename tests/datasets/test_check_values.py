"""The values of a dataset are checked before training (issue 18, item 5: a dataset with a
NaN observation and every ``step_type`` = 7 trained to NaN parameters, exit 0).

Each bad value is one :class:`DatasetError` line naming the file, the field and the first
bad row and step; LAST-step actions (never executed, stored as zeros) and the padding after
a row's end are not judged; ``TrainerConfig.offline_buffer_check_values=False`` skips the
check. The real command is run once, on the issue's dataset.
"""
import os

import numpy as np
import pytest
import torch

from alf.data_structures import StepType
from alf.datasets import DatasetError, DatasetSteps, open_dataset, write_dataset
from alf.datasets.check_values import check_dataset_values
from alf.datasets.offline_buffer import load_offline_buffer
from alf.tensor_specs import BoundedTensorSpec, TensorSpec

F, M, L = StepType.FIRST, StepType.MID, StepType.LAST
OBS = BoundedTensorSpec((3,), torch.float32, [-1.0, -1.0, -8.0], [1.0, 1.0, 8.0])  # Pendulum's
ACT = BoundedTensorSpec((1,), torch.float32, -2.0, 2.0)
DISCRETE = BoundedTensorSpec((), torch.int64, 0, 1)
REW = TensorSpec(())
LENGTHS = [30, 25]  # row 1 is padded after step 25
T = 30


def _arrays(action_spec=ACT, seed=0):
    """Clean ``[2, 30, ...]`` arrays: 10-step episodes (FIRST, 8 MID, LAST), row 1 starts
    mid-episode; in-bounds actions, discount 0 at each LAST."""
    g = np.random.default_rng(seed)
    st = np.tile(np.array([F] + [M] * 8 + [L], np.int32), 3)
    st = np.stack([st, np.roll(st, -3)])
    valid = np.arange(T)[None] < np.asarray(LENGTHS)[:, None]
    st = np.where(valid, st, 0).astype(np.int32)
    if action_spec.is_discrete():
        action = g.integers(0, 2, (2, T)).astype(np.int64)
    else:
        action = g.uniform(-2, 2, (2, T, 1)).astype(np.float32)
    return dict(step_type=st,
                reward=(g.standard_normal((2, T)) * (st != F)).astype(np.float32),
                discount=np.where(st == L, 0.0, 1.0).astype(np.float32),
                observation=g.uniform(-1, 1, (2, T, 3)).astype(np.float32), action=action)


def _write(path, arrays, action_spec=ACT):
    write_dataset(str(path), DatasetSteps(**{k: torch.from_numpy(v) for k, v in arrays.items()}),
                  LENGTHS, "Pendulum-v1", OBS, action_spec, REW)
    return str(path)


def _bad(tmp_path, field, index, value, action_spec=ACT):
    arrays = _arrays(action_spec)
    arrays[field][index] = value
    return open_dataset(_write(tmp_path / "data", arrays, action_spec))


CASES = [
    # (field, index, value, words of the message)
    ("observation", (0, 3, 1), np.nan, ["observation.npy (field 'observation')",
                                         "non-finite value (nan)", "row 0, step 3"]),
    ("reward", (1, 7), np.inf, ["reward.npy (field 'reward')", "(inf)", "row 1, step 7"]),
    ("step_type", (1, 4), 7, ["step_type.npy (field 'step_type')", "step type 7",
                              "row 1, step 4", "FIRST 0, MID 1, LAST 2"]),
    ("step_type", (0, 5), F, ["step_type.npy", "FIRST step after a MID step",
                              "row 0, step 5"]),
    ("step_type", (0, 10), M, ["step_type.npy", "MID step after a LAST step",
                               "row 0, step 10"]),
    ("discount", (1, 2), 1.5, ["discount.npy (field 'discount')", "discount 1.5",
                               "row 1, step 2", "[0, 1]"]),
    ("action", (1, 3, 0), 2.5, ["action.npy (field 'action')", "action 2.5",
                                "row 1, step 3", "[-2, 2]"]),
    ("action", (0, 1, 0), np.nan, ["action.npy", "non-finite value (nan)", "row 0, step 1"]),
]


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # inf - inf
@pytest.mark.parametrize("field, index, value, words", CASES)
def test_bad_value_is_one_line_naming_file_field_and_row(tmp_path, field, index, value, words):
    ds = _bad(tmp_path, field, index, value)
    with pytest.raises(DatasetError) as e:
        check_dataset_values(ds, ACT)
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith(f"dataset file {os.path.join(ds.path, field)}.npy "), message
    for word in words:
        assert word in message, (word, message)


def test_discrete_action_outside_the_spec(tmp_path):
    ds = _bad(tmp_path, "action", (0, 12), 3, DISCRETE)
    with pytest.raises(DatasetError, match=r"action 3 at row 0, step 12.*\[0, 1\]"):
        check_dataset_values(ds, DISCRETE)


def test_clean_data_last_actions_and_padding_are_accepted(tmp_path):
    arrays = _arrays()
    arrays["discount"][0, 4] = 0.0  # a MID step may have discount 0 (Atari's lost life)
    ds = open_dataset(_write(tmp_path / "clean", arrays))
    check_dataset_values(ds, ACT)
    # LAST actions are stored as zeros and never executed: not judged against [1, 5]
    arrays["action"] = np.where(arrays["step_type"][..., None] == L, 0, 3).astype(np.float32)
    ds = open_dataset(_write(tmp_path / "shifted", arrays))
    check_dataset_values(ds, BoundedTensorSpec((1,), torch.float32, 1.0, 5.0))


def test_first_bad_step_found_across_chunks(tmp_path):
    """A small chunk makes the scan cross row and chunk boundaries: still the first one."""
    arrays = _arrays()
    arrays["observation"][1, 20, 2] = np.nan
    arrays["observation"][1, 22, 0] = np.inf
    ds = open_dataset(_write(tmp_path / "data", arrays))
    with pytest.raises(DatasetError, match=r"\(nan\) at row 1, step 20"):
        check_dataset_values(ds, ACT, chunk_elements=7)


def test_offline_buffer_checks_unless_told_not_to(tmp_path):
    path = _write(tmp_path / "data", {**_arrays(), "step_type": np.full((2, T), 7, np.int32)})
    with pytest.raises(DatasetError, match="step type 7 at row 0, step 0"):
        load_offline_buffer([path], OBS, ACT, REW)
    buffer = load_offline_buffer([path], OBS, ACT, REW, check_values=False)
    assert buffer.total_size() == sum(LENGTHS)


def test_trainer_config_skip_option(clean_gin):
    from alf import config as alf_config
    from alf.trainers.trainer_config import TrainerConfig
    alf_config.parse_config(conf_file="bc_pendulum.gin",
                            conf_params=["TrainerConfig.offline_buffer_check_values=False"])
    assert TrainerConfig().offline_buffer_check_values is False


def test_nan_and_bad_step_types_stop_the_real_command(tmp_path, alf_cli):
    """The issue's dataset: a NaN observation and every step_type 7, pure offline BC."""
    arrays = _arrays()
    arrays["observation"][0, 5, 0] = np.nan
    arrays["step_type"][:] = 7
    _write(tmp_path / "data", arrays)
    proc = alf_cli.run("alf.bin.train", [
        "--conf", "bc_pendulum.gin", "--root_dir", "run",
        "--conf_param", "TrainerConfig.offline_buffer_dir='data'",
        "--conf_param", "TrainerConfig.num_iterations=2",
        "--conf_param", "TrainerConfig.num_updates_per_train_iter=2",
        "--conf_param", "TrainerConfig.mini_batch_size=8",
        "--conf_param", "TrainerConfig.evaluate=False"], tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines() == [
        f"alf.bin.train: error: dataset file {tmp_path / 'data' / 'step_type.npy'} (field "
        "'step_type') has step type 7 at row 0, step 0; step types are FIRST 0, MID 1, LAST 2"
    ], proc.stderr
    assert not (tmp_path / "run").exists()
    assert proc.stdout == ""
