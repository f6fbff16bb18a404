"""DatasetWriter on a filesystem too small for the dataset (a real tmpfs,
tests/small_fs.py), where the space cannot be allocated ahead with ``posix_fallocate``
(a filesystem that refuses it, or a platform without it): the free space is checked
instead, before anything is written through the memory maps (which would be SIGBUS)."""
import errno
import os

import pytest
import torch

from alf.datasets.format import DatasetSteps, DatasetWriter
from alf.errors import WriteFailedError
from alf.tensor_specs import BoundedTensorSpec, TensorSpec
from tests.small_fs import small_fs


def _writer(path, row_length):
    return DatasetWriter(path, 2, row_length, "Pendulum-v1",
                         BoundedTensorSpec((3,), torch.float32, -8.0, 8.0),
                         BoundedTensorSpec((1,), torch.float32, -2.0, 2.0),
                         TensorSpec((), torch.float32))


def _unsupported(fd, offset, length):
    raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))


@pytest.mark.parametrize("how", ["refused", "missing"])
def test_without_fallocate_the_free_space_is_checked(tmp_path, monkeypatch, how):
    if how == "refused":
        monkeypatch.setattr(os, "posix_fallocate", _unsupported)
    else:
        monkeypatch.delattr(os, "posix_fallocate", raising=False)
    with small_fs(tmp_path / "fs", "64k") as fs:
        # 2 rows x 500 steps x 28 bytes = 27 KiB (56 KiB in whole pages): fits, written as usual
        with _writer(fs / "fits", 500) as writer:
            writer.append(DatasetSteps(step_type=torch.ones(500, 2, dtype=torch.int32),
                                       reward=torch.ones(500, 2), discount=torch.ones(500, 2),
                                       observation=torch.ones(500, 2, 3),
                                       action=torch.ones(500, 2, 1)))
            info = writer.close()
        assert info.num_steps == 1000 and sorted(os.listdir(fs)) == ["fits"]
        # 2 x 10,000 steps: 546.9 KiB of steps; in whole 4 KiB pages with the smallest
        # episode table, its returns and the manifest, 568 KiB: refused before any file is
        # written through its map
        with pytest.raises(WriteFailedError) as e:
            _writer(fs / "big", 10_000)
        assert str(e.value).startswith(f"could not write dataset {fs / 'big'}: No space left "
                                       "on device (about 568.0 KiB needed, "), str(e.value)
        assert str(e.value).endswith(f" free on {fs})"), str(e.value)
        assert sorted(os.listdir(fs)) == ["fits"]


def _short_episodes(t):
    """``t`` steps in 2 rows, an episode every 2 steps: ``t`` fragments, 40 bytes of episode
    table and returns each."""
    step_type = torch.tensor([0, 2], dtype=torch.int32).repeat(t // 2)[:, None].expand(t, 2)
    return DatasetSteps(step_type=step_type.contiguous(), reward=torch.ones(t, 2),
                        discount=torch.ones(t, 2), observation=torch.ones(t, 2, 3),
                        action=torch.ones(t, 2, 1))


def _fill(fs, leave):
    """Another writer takes all the free space of ``fs`` but ``leave`` bytes."""
    free = os.statvfs(fs).f_bavail * os.statvfs(fs).f_frsize
    with open(fs / "other", "wb") as f:
        f.write(b"x" * (free - leave))


@pytest.mark.parametrize("fallocate", ["supported", "refused"])
def test_a_disk_that_fills_during_the_write_is_one_line(tmp_path, monkeypatch, fallocate):
    """Reported: the episode table (``episodes.npy``, ``episode_returns.npy``) was written
    at ``close`` outside the space check, and a write cut short by a full disk escaped as
    numpy's "OSError: 12800 requested and 3968 written" with a traceback. Here another
    writer fills the disk after the writer is made, leaving one page: where the space is
    allocated ahead, the episode table's growing reservation fails in ``append``;
    where it is not, the short write in ``close`` fails. Either way: one
    WriteFailedError line naming the dataset and the space, nothing of it left."""
    if fallocate == "refused":
        monkeypatch.setattr(os, "posix_fallocate", _unsupported)
    with small_fs(tmp_path / "fs", "64k") as fs:
        writer = _writer(fs / "ds", 400)
        _fill(fs, 4096)
        with pytest.raises(WriteFailedError) as e:
            with writer:
                writer.append(_short_episodes(400))
                writer.close()
        message = str(e.value)
        assert len(message.splitlines()) == 1, message
        assert message.startswith(f"could not write dataset {fs / 'ds'}: No space left on "
                                  "device (about "), message
        assert message.endswith(f" free on {fs})"), message
        assert sorted(os.listdir(fs)) == ["other"]
