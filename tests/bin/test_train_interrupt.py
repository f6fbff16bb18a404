"""Ctrl-C during ``python -m alf.bin.train`` with subprocess (async) envs: exit 130,
a checkpoint is saved, and no process of the run survives."""
import contextlib
import csv
import glob
import os
import signal
import subprocess
import time

import pytest
import torch

ASYNC_TINY = """
create_environment.backend = 'async'
TrainerConfig.num_iterations = 1000000
TrainerConfig.progress_interval_seconds = 0.5
"""


def _children(pid):
    out = subprocess.run(["ps", "--ppid", str(pid), "-o", "pid="], capture_output=True,
                         text=True).stdout
    return [int(x) for x in out.split()]


def _alive(pid):
    """True if ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def _processes_mentioning(token):
    """pids whose command line contains ``token`` (forked workers inherit the parent's)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if token.encode() in f.read() and _alive(int(entry)):
                        found.append(int(entry))
            except OSError:
                pass
    return found


@contextlib.contextmanager
def _killed_on_exit(proc):
    """Whatever the test asserts, no process group of the run outlives it."""
    try:
        yield
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _wait_for_progress(proc, root, rows: int = 2):
    """Wait until ``root/progress.csv`` has ``rows`` rows (training is under way)."""
    deadline = time.monotonic() + 120
    progress = root / "progress.csv"
    while not (progress.exists() and len(progress.read_text().splitlines()) >= rows + 1):
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "no training progress within 120 s"
        time.sleep(0.1)
    return progress


@pytest.mark.parametrize("target", [
    "process",  # `kill -INT <pid>`
    "group",    # terminal Ctrl-C: every process of the foreground group gets SIGINT
])
def test_sigint_saves_checkpoint_and_reaps_workers(alf_cli, tmp_path, target):
    if not os.path.isdir("/proc"):
        pytest.skip("needs /proc")
    alf_cli.write_gin(tmp_path, alf_cli.TINY_PPO + ASYNC_TINY, "async.gin")
    root = tmp_path / f"run_{target}"
    # absolute root_dir: unique on this machine, so the /proc scan below cannot match the
    # processes of another test session running this same test at the same time
    proc = alf_cli.start("alf.bin.train", ["--conf", "async.gin", "--root_dir", str(root)],
                         tmp_path, stdout=subprocess.DEVNULL, start_new_session=True)
    with _killed_on_exit(proc):
        progress = _wait_for_progress(proc, root)
        workers = _children(proc.pid)
        assert len(workers) >= 2, "the async backend should run one process per env"
        if target == "group":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=90)

    assert proc.returncode == 130, stderr
    ckpts = glob.glob(str(root / "train" / "ckpt-*.pt"))
    assert len(ckpts) == 1, ckpts
    assert f"state saved in {ckpts[0]}" in stderr, stderr
    state = torch.load(ckpts[0], weights_only=True)
    assert state["context"]["iteration"] >= 2
    # the interrupted iteration was completed: the checkpoint is at its boundary (env
    # workers ignore SIGINT, so a group Ctrl-C does not break the step in progress)
    with open(progress) as f:
        last = list(csv.DictReader(f))[-1]
    assert int(last["iteration"]) == state["context"]["iteration"], stderr
    assert int(last["env_steps"]) == state["context"]["env_steps"], stderr
    assert "Traceback" not in stderr, stderr
    assert "finishing the current iteration" in stderr, stderr
    # every env worker is gone (not even a zombie), and nothing of this run survives
    deadline = time.monotonic() + 10
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [w for w in workers if _alive(w)], stderr
    assert not _processes_mentioning(str(root) + "\0"), stderr


def test_two_quick_sigints_still_leave_a_complete_checkpoint(alf_cli, tmp_path):
    """The reported failure: two Ctrl-C 0.1 s apart with the async backend left only a
    0-byte ``ckpt-*.pt.tmp``, printed "state saved", and the rerun restarted from 0."""
    alf_cli.write_gin(tmp_path, alf_cli.TINY_PPO + ASYNC_TINY, "async.gin")
    root = tmp_path / "run_twice"
    args = ["--conf", "async.gin", "--root_dir", str(root)]
    proc = alf_cli.start("alf.bin.train", args, tmp_path, stdout=subprocess.DEVNULL,
                         start_new_session=True)
    with _killed_on_exit(proc):
        _wait_for_progress(proc, root)
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGINT)
        _, stderr = proc.communicate(timeout=90)
    assert proc.returncode == 130, stderr
    assert not glob.glob(str(root / "train" / "*.tmp")), stderr
    ckpts = glob.glob(str(root / "train" / "ckpt-*.pt"))
    assert len(ckpts) == 1, (ckpts, stderr)
    iteration = torch.load(ckpts[0], weights_only=True)["context"]["iteration"]
    assert f"state saved in {ckpts[0]}" in stderr, stderr
    assert "Traceback" not in stderr, stderr
    again = alf_cli.run("alf.bin.train", args + ["--conf_param",
                                                 f"TrainerConfig.num_iterations={iteration + 1}"],
                        tmp_path)
    assert again.returncode == 0, again.stderr
    assert f"resumed from iteration {iteration:,}" in again.stderr, again.stderr


def test_sigint_while_building_says_nothing_was_saved(tmp_path, monkeypatch, capsys, alf_cli):
    """A Ctrl-C before training starts (imports, env creation) used to print "state saved"."""
    from absl import flags

    from alf.bin import train
    from alf.trainers import trainer as trainer_module
    flags.FLAGS.unparse_flags()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    alf_cli.write_gin(tmp_path, alf_cli.TINY_PPO, "tiny.gin")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(trainer_module.Trainer, "__init__", interrupted)
    handler = signal.getsignal(signal.SIGINT)
    try:
        code = train.main(["alf.bin.train", "--conf", "tiny.gin", "--root_dir",
                           str(tmp_path / "r")])
    finally:
        signal.signal(signal.SIGINT, handler)  # the command ignores Ctrl-C once stopping
    err = capsys.readouterr().err
    assert code == 130
    assert "interrupted before training started; nothing was saved" in err
    assert "state saved" not in err
    assert not (tmp_path / "r").exists()
