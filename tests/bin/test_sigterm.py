"""SIGTERM (``kill``, ``docker stop``, Slurm, Kubernetes) stops every command like Ctrl-C:
training saves a checkpoint at the iteration boundary and reaps its env workers, collect
mode leaves no dataset, play finishes its video; the exit status is 143 (128 + 15).

The reported failure: a single-process run exited at once with status 143 and saved
nothing, so a run stopped before its first periodic checkpoint lost everything."""
import glob
import os
import re
import signal
import subprocess
import threading
import time

import pytest
import torch

ASYNC_LONG = """
create_environment.backend = 'async'
TrainerConfig.num_iterations = 1000000
TrainerConfig.progress_interval_seconds = 0.5
"""


def _alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _children(pid: int):
    out = subprocess.run(["ps", "--ppid", str(pid), "-o", "pid="], capture_output=True,
                         text=True).stdout
    return [int(x) for x in out.split()]


def _stop(proc: subprocess.Popen) -> None:
    """Whatever the test asserts, nothing of the command outlives it."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.mark.parametrize("target", [
    "process",  # `kill <pid>`, `docker stop`, Kubernetes: the main process only
    "group",    # Slurm: every process of the job step, env workers included
])
def test_sigterm_before_the_first_checkpoint_saves_one_and_reaps_workers(alf_cli, tmp_path,
                                                                           target):
    if not os.path.isdir("/proc"):
        pytest.skip("needs /proc")
    alf_cli.write_gin(tmp_path, alf_cli.TINY_PPO + ASYNC_LONG, "async.gin")
    root = tmp_path / f"run_{target}"
    proc = alf_cli.start("alf.bin.train", ["--conf", "async.gin", "--root_dir", str(root)],
                         tmp_path, stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        progress = root / "progress.csv"
        deadline = time.monotonic() + 120
        while not (progress.exists() and len(progress.read_text().splitlines()) >= 3):
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "no training progress within 120 s"
            time.sleep(0.1)
        workers = _children(proc.pid)
        assert len(workers) >= 2, "the async backend runs one process per env"
        if target == "group":
            os.killpg(proc.pid, signal.SIGTERM)
        else:
            proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=90)
    finally:
        _stop(proc)

    assert proc.returncode == 143, stderr
    assert "Traceback" not in stderr, stderr
    # checkpoint_interval is 1000: this file exists only because SIGTERM saved it
    ckpts = glob.glob(str(root / "train" / "ckpt-*.pt"))
    assert len(ckpts) == 1, (ckpts, stderr)
    iteration = torch.load(ckpts[0], weights_only=True)["context"]["iteration"]
    assert iteration >= 2
    assert "SIGTERM: finishing the current iteration, then saving a checkpoint" in stderr
    last = stderr.strip().splitlines()[-1]
    assert last == (f"alf.bin.train: stopped by SIGTERM at iteration {iteration:,}; state saved "
                    f"in {ckpts[0]}, all workers stopped. Rerun the same command to resume."), \
        stderr
    deadline = time.monotonic() + 10
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [w for w in workers if _alive(w)], stderr


def test_sigterm_during_collection_leaves_nothing(tmp_path, alf_cli):
    program = "alf.bin.export_dataset"
    out = tmp_path / "big"
    proc = alf_cli.start(program, ["--conf=sac_pendulum.gin", "--policy=random", f"--out={out}",
                                   "--collect_steps=5000000",
                                   "--progress_interval_seconds=0.2"], tmp_path,
                         start_new_session=True)
    try:
        line = proc.stderr.readline()
        while line and not line.startswith("[collect] steps "):
            line = proc.stderr.readline()
        assert line.startswith("[collect] steps "), "no progress line"
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=60)
    finally:
        _stop(proc)
    assert proc.returncode == 143, rest
    assert rest.strip().splitlines()[-1] == f"{program}: stopped by SIGTERM.", rest
    assert "Traceback" not in rest
    assert os.listdir(tmp_path) == []  # the staged dataset was removed


@pytest.fixture(scope="module")
def cart_pole_run(alf_cli, tmp_path_factory):
    cwd = tmp_path_factory.mktemp("sigterm_play")
    alf_cli.train_in_process(cwd / "run")  # play is the subject
    return cwd


def test_sigterm_during_play_still_finishes_the_video(cart_pole_run, alf_cli):
    pytest.importorskip("imageio_ffmpeg")
    imageio = pytest.importorskip("imageio.v2")
    proc = subprocess.Popen(
        alf_cli.command("alf.bin.play", ["--root_dir=run", "--num_episodes", "1000000",
                                         "--record_video", "out/term.mp4",
                                         "--progress_interval_seconds", "0.2"]),
        cwd=str(cart_pole_run), env=alf_cli.env(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True)
    out_lines, err_lines = [], []
    readers = [threading.Thread(target=lambda: out_lines.extend(proc.stdout), daemon=True),
               threading.Thread(target=lambda: err_lines.extend(proc.stderr), daemon=True)]
    for reader in readers:
        reader.start()
    try:
        deadline = time.monotonic() + 120
        while not any(l.startswith("episode 2: return") for l in list(out_lines)):
            assert proc.poll() is None and time.monotonic() < deadline, "".join(err_lines)
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            rc = None  # SIGTERM was swallowed (SDL's own handler did that)
    finally:
        _stop(proc)
    for reader in readers:
        reader.join(timeout=10)
    err = "".join(err_lines)
    assert rc == 143, err[-3000:]
    assert "Traceback" not in err
    assert re.search(r"^alf.bin.play: stopped by SIGTERM in episode \d+ at step [\d,]+", err,
                     re.M), err
    m = re.search(r"^wrote out/term.mp4 \((\d+) frames\)$", err, re.M)
    assert m and int(m.group(1)) > 1, err[-2000:]
    frames = imageio.mimread(str(cart_pole_run / "out" / "term.mp4"), memtest=False)
    assert len(frames) == int(m.group(1))
