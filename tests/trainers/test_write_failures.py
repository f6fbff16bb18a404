"""A full disk, simulated in-process (always runs; ``tests/bin/test_full_disk.py`` does it
for real on a tmpfs where mounting is allowed): every failed write is one
:class:`WriteFailedError` naming the file, and leaves no temporary file, no replay-buffer
file without its checkpoint, and the previous checkpoint and config files intact."""
import errno
import glob
import os

import pytest
import torch

from alf.errors import WriteFailedError
from alf.trainers.checkpointer import Checkpointer
from alf.utils import atomic_write


class _Disk:
    """Bytes left on a pretend disk shared by every file :mod:`atomic_write` opens."""

    def __init__(self, free: int):
        self.free = free


class _BudgetFile:
    """A file whose writes fail with ENOSPC once the disk's bytes run out (part of the
    write lands first, as on a real disk)."""

    def __init__(self, path: str, disk: _Disk):
        self._f = open(path, "wb")
        self._disk = disk

    def write(self, data) -> int:
        n = len(memoryview(data).cast("B"))
        if n > self._disk.free:
            self._f.write(bytes(memoryview(data).cast("B")[:self._disk.free]))
            self._disk.free = 0
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._disk.free -= n
        return self._f.write(data)

    def flush(self) -> None:
        self._f.flush()

    def fileno(self) -> int:
        return self._f.fileno()

    def close(self) -> None:
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@pytest.fixture
def disk(monkeypatch):
    """Limit what :func:`atomic_write.atomic_write` may write; set ``disk.free``."""
    state = _Disk(1 << 40)
    monkeypatch.setattr(atomic_write, "_open_tmp", lambda path: _BudgetFile(path, state))
    return state


def test_failed_checkpoint_write_leaves_nothing_of_its_iteration(tmp_path, disk):
    """torch reports the ENOSPC as a RuntimeError chained to it ("enforce fail at
    inline_container.cc"): still one error naming the file."""
    ckpt = Checkpointer(str(tmp_path / "train"), num_checkpoints=3)
    ckpt.save(2, {"w": torch.zeros(10)}, {"storage": [torch.arange(3)]})
    disk.free = 4000  # enough for the small replay-buffer file, not the checkpoint
    with pytest.raises(WriteFailedError) as info:
        ckpt.save(4, {"w": torch.zeros(100_000)}, {"storage": [torch.arange(5)]})
    message = str(info.value)
    path = str(tmp_path / "train" / "ckpt-0000000004.pt")
    assert message.startswith(f"could not write checkpoint {path}: No space left on device "
                              "(about 390.7 KiB needed, "), message
    assert message.endswith("Nothing was saved for iteration 4; the newest checkpoint, "
                            "ckpt-0000000002.pt, is intact: free space, then rerun the same "
                            "command to resume from it."), message
    assert "\n" not in message and "inline_container" not in message
    assert sorted(os.listdir(tmp_path / "train")) == ["ckpt-0000000002.pt",
                                                      "replay_buffer-0000000002.pt"]
    assert ckpt.load_latest()[0] == 2


def test_run_on_a_full_disk_is_one_error_and_keeps_the_configs(make_trainer, alf_cli,
                                                               tmp_path, disk):
    root = tmp_path / "run"
    params = ["TrainerConfig.checkpoint_interval=2", "TrainerConfig.num_iterations=4"]
    make_trainer(root, alf_cli.TINY_PPO, params).run()
    operative = (root / "operative_config.gin").read_bytes()
    assert operative

    resumed = make_trainer(root, alf_cli.TINY_PPO,
                           ["TrainerConfig.checkpoint_interval=2",
                            "TrainerConfig.num_iterations=8"])
    disk.free = 2 * len(resumed._config_text)  # the changed config.gin fits, nothing more
    with pytest.raises(WriteFailedError) as info:
        resumed.run()
    assert "ckpt-0000000006.pt: No space left on device" in str(info.value)
    assert "the newest checkpoint, ckpt-0000000004.pt, is intact" in str(info.value)
    assert (root / "operative_config.gin").read_bytes() == operative  # not truncated
    assert b"num_iterations = 8" in (root / "config.gin").read_bytes()
    assert not glob.glob(str(root / "**" / "*.tmp"), recursive=True)
    assert sorted(os.listdir(root / "train")) == ["ckpt-0000000002.pt", "ckpt-0000000004.pt"]
    assert resumed.env.closed


def test_config_write_failure_keeps_the_old_file(tmp_path, disk):
    path = tmp_path / "config.gin"
    path.write_text("old = 1\n")
    disk.free = 3
    with pytest.raises(WriteFailedError, match=rf"could not write {path}: No space left"):
        atomic_write.atomic_write_text(str(path), "new = 2\n" * 10)
    assert path.read_text() == "old = 1\n"
    assert os.listdir(tmp_path) == ["config.gin"]


def test_progress_log_write_failure_is_one_error(tmp_path):
    from alf.trainers.progress_log import ProgressLog

    class FullFile:
        def __init__(self, f):
            self._f = f

        def write(self, text):
            return self._f.write(text)

        def flush(self):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def close(self):
            self._f.close()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    log = ProgressLog(str(tmp_path / "progress.csv"), 0)
    log._file = FullFile(log._file)
    log._writer = __import__("csv").writer(log._file)
    with pytest.raises(WriteFailedError, match="could not write the progress log .*progress.csv: "
                                               "No space left on device"):
        log.write([1, 2, 3, 4, 5, 6, 7])
    log.close()  # the failure was reported: closing adds nothing


def test_tensorboard_thread_failure_is_one_error_in_the_loop(tmp_path, monkeypatch, capfd):
    """TensorBoard's writer thread printed its own traceback, and the loop then died with
    the same OSError; opening a writer on a full disk left a 0-byte events file."""
    from tensorboard.summary.writer import record_writer

    from alf.trainers.summary_writer import open_summary_writer
    writer = open_summary_writer(str(tmp_path))

    def full(self, data=None):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(record_writer.RecordWriter, "write", full)
    with pytest.raises(WriteFailedError, match="could not write the TensorBoard events file "
                                               ".*: No space left on device"):
        for step in range(100):
            writer.add_scalar("x", 1.0, step)
            writer.flush()
    writer.close()
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception in thread" not in err, err

    monkeypatch.setattr(record_writer.RecordWriter, "flush", full)
    empty = tmp_path / "empty"
    with pytest.raises(WriteFailedError, match="TensorBoard events file"):
        open_summary_writer(str(empty))
    assert os.listdir(empty) == []


def test_space_needed_and_free_never_print_alike(tmp_path, monkeypatch):
    """Reported with a dataset that did not fit a 5,500 KiB disk: "about 5.4 MiB needed,
    5.4 MiB free". Where one decimal prints both alike, more digits tell them apart."""
    monkeypatch.setattr(atomic_write, "free_space", lambda path: 5500 * 1024)
    assert atomic_write.space_left(str(tmp_path), 5512 * 1024).startswith(
        "about 5.38 MiB needed, 5.37 MiB free on ")
    assert atomic_write.space_left(str(tmp_path), 2 * 1024 * 1024).startswith(
        "about 2.0 MiB needed, 5.4 MiB free on ")
