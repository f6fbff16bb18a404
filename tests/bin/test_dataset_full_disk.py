"""Writing a dataset onto a filesystem too small for it (a real tmpfs, tests/small_fs.py).

Reported: ``alf.bin.export_dataset --collect_steps=200000`` into a 1 MB filesystem, and
``alf.bin.minari_dataset import`` into a 64 KB one, died with "Bus error" (SIGBUS, exit
135), printed nothing and left ``<out>.tmp-<pid>/`` filling the disk: the dataset's
memory-mapped files were sparse, and a write into a block the disk could not allocate
killed the process. Wanted: one line naming the dataset, the space needed and free,
exit 1, nothing left on the filesystem.
"""
import re

import numpy as np
import pytest
import torch

from tests.small_fs import small_fs


def _one_error_line(done, program, out, fs):
    assert done.returncode == 1, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert re.fullmatch(
        rf"{program}: error: could not write dataset {re.escape(str(out))}: No space left on "
        rf"device \(about [\d.]+ [KM]iB needed, [\d.]+ [KM]?i?B free on {re.escape(str(fs))}\)",
        lines[0]), lines[0]
    return lines[0]


def test_collect_into_a_full_disk_is_one_line_and_leaves_nothing(alf_cli, tmp_path):
    with small_fs(tmp_path / "fs", "1m") as fs:
        done = alf_cli.run("alf.bin.export_dataset", [
            "--conf=sac_pendulum.gin", f"--out={fs / 'ds'}", "--collect_steps=200000",
            "--policy=random", "--num_envs=2"], tmp_path, timeout=300)
        line = _one_error_line(done, "alf.bin.export_dataset", fs / "ds", fs)
        # 200,000 steps of Pendulum: 3 + 1 float32s, a reward, a discount, a step type
        assert "about 5.3 MiB needed, 1.0 MiB free" in line, line
        assert list(fs.iterdir()) == []


def test_minari_import_into_a_full_disk_is_one_line_and_leaves_nothing(alf_cli, tmp_path,
                                                                       monkeypatch):
    pytest.importorskip("minari")
    pytest.importorskip("h5py")
    from alf.data_structures import StepType
    from alf.datasets.format import DatasetSteps, write_dataset
    from alf.datasets.minari_io import export_minari
    from alf.tensor_specs import BoundedTensorSpec, TensorSpec

    cache = tmp_path / "minari"
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(cache))
    # one 40-step episode of 32x32 RGB images: about 120 KB as an alf dataset
    t = 40
    step_type = np.full((1, t), StepType.MID, np.int32)
    step_type[0, 0], step_type[0, -1] = StepType.FIRST, StepType.LAST
    rng = np.random.default_rng(0)
    steps = DatasetSteps(step_type=step_type, reward=np.ones((1, t), np.float32),
                         discount=np.ones((1, t), np.float32),
                         observation=rng.integers(0, 256, (1, t, 32, 32, 3), dtype=np.uint8),
                         action=np.zeros((1, t, 1), np.float32))
    write_dataset(tmp_path / "orig", steps, [t], "Pendulum-v1",
                  BoundedTensorSpec((32, 32, 3), torch.uint8, 0, 255),
                  BoundedTensorSpec((1,), torch.float32, -2.0, 2.0), TensorSpec((), torch.float32))
    export_minari(tmp_path / "orig", "full/disk-v0")

    with small_fs(tmp_path / "fs", "64k") as fs:
        done = alf_cli.run("alf.bin.minari_dataset", ["import", "--id=full/disk-v0",
                                                      f"--out={fs / 'imp'}"], tmp_path,
                           env={"MINARI_DATASETS_PATH": str(cache)})
        _one_error_line(done, "alf.bin.minari_dataset", fs / "imp", fs)
        assert list(fs.iterdir()) == []
