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
        # 2 x 10,000 steps: 547 KiB, refused before any file is written through its map
        with pytest.raises(WriteFailedError) as e:
            _writer(fs / "big", 10_000)
        assert str(e.value).startswith(f"could not write dataset {fs / 'big'}: No space left "
                                       "on device (about 546.9 KiB needed, "), str(e.value)
        assert str(e.value).endswith(f" free on {fs})"), str(e.value)
        assert sorted(os.listdir(fs)) == ["fits"]
