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
        # (5.34 MiB), in whole pages with the episode table and the manifest
        assert "about 5.4 MiB needed, 1.0 MiB free" in line, line
        assert list(fs.iterdir()) == []



_CART_POLE_6000 = ["--conf=ppo_cart_pole.gin", "--collect_steps=6000", "--policy=random",
                   "--num_envs=2"]


@pytest.mark.parametrize("size", ["216k", "220k", "228k"])
def test_collect_at_the_boundary_counts_the_episode_table(alf_cli, tmp_path, size):
    """6,000 random CartPole steps in 2 rows: the step files take 54 pages of tmpfs (216
    KiB), the episode table 2, its returns and the manifest 1 each (232 KiB in all).
    Reported: the space check counted only the step files, so on a disk just big enough
    for them the collection ran to the end and then died writing ``episodes.npy`` (at 220k:
    "OSError: 972 requested and 496 written", a 34-line traceback; at 216k and 228k one
    line with no space needed, saying 132 KiB were free on a 228 KiB disk). 216k, 220k:
    not even the smallest episode table and the manifest fit, refused before collecting;
    228k: the table outgrows the space held for it during the collection."""
    with small_fs(tmp_path / "fs", size) as fs:
        done = alf_cli.run("alf.bin.export_dataset", _CART_POLE_6000 + [f"--out={fs / 'ds'}"],
                           tmp_path, timeout=300)
        line = _one_error_line(done, "alf.bin.export_dataset", fs / "ds", fs)
        needed, free = map(float, re.search(r"about ([\d.]+) KiB needed, ([\d.]+) KiB free",
                                            line).groups())
        assert needed > max(free, 216.0), line  # the step files take 216 KiB in whole pages
        assert free == float(size[:-1]), line  # all of it again: nothing left behind
        assert list(fs.iterdir()) == []


def test_collect_that_just_fits_is_written(alf_cli, tmp_path):
    """The same 6,000 steps on 232 KiB, exactly their pages: the estimate refuses nothing
    that fits."""
    from alf.datasets.format import open_dataset
    with small_fs(tmp_path / "fs", "232k") as fs:
        done = alf_cli.run("alf.bin.export_dataset", _CART_POLE_6000 + [f"--out={fs / 'ds'}"],
                           tmp_path, timeout=300)
        assert done.returncode == 0, done.stderr
        dataset = open_dataset(fs / "ds")
        assert dataset.info.num_steps == 6000 and dataset.info.num_episodes == 241
        assert sorted(p.name for p in (fs / "ds").iterdir()) == [
            "action.npy", "alf_dataset.json", "discount.npy", "episode_returns.npy",
            "episodes.npy", "observation.npy", "reward.npy", "step_type.npy"]

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
