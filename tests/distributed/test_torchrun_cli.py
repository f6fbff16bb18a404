"""The real launcher: ``torchrun ... -m alf.bin.train`` across two "nodes" on this
machine, and a rank killed mid-run."""
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from ranks import REPO_ROOT, free_port
from shm_check import shm_entries, shm_left_since

TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]

TINY_PPO = """
include 'ppo_cart_pole.gin'
create_environment.num_parallel_environments = 2
ActorDistributionNetwork.fc_layer_params = (8,)
ValueNetwork.fc_layer_params = (8,)
TrainerConfig.num_env_steps = 0
TrainerConfig.unroll_length = 8
TrainerConfig.mini_batch_size = 8
TrainerConfig.num_updates_per_train_iter = 2
TrainerConfig.evaluate = False
TrainerConfig.summary_interval = 5
TrainerConfig.checkpoint_interval = 1000
TrainerConfig.progress_interval_seconds = 0.0
"""


def _env(tmp_path):
    """The launcher's environment. TMPDIR is the test's own directory: torchrun writes
    its per-launch log folders (``torchelastic_*``) under it and never removes them."""
    env = dict(os.environ, TMPDIR=str(tmp_path))
    env["PYTHONPATH"] = REPO_ROOT + (os.pathsep + env["PYTHONPATH"]
                                     if env.get("PYTHONPATH") else "")
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    return env


def _conf(tmp_path, extra=""):
    path = tmp_path / "tiny.gin"
    path.write_text(TINY_PPO + extra)
    return str(path)


def _children(pid):
    """Every live descendant of ``pid``."""
    out = subprocess.run(["ps", "-eo", "pid=,ppid="], capture_output=True, text=True).stdout
    kids = {}
    for line in out.splitlines():
        p, pp = map(int, line.split())
        kids.setdefault(pp, []).append(p)
    found, todo = [], [pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            found.append(c)
            todo.append(c)
    return found


def _rank_pid(launcher_pid, rank, deadline):
    """The pid of the process torchrun started as ``rank``."""
    while time.monotonic() < deadline:
        for pid in _children(launcher_pid):
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    env = f.read().split(b"\0")
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if f"RANK={rank}".encode() in env and b"alf.bin.train" in cmd:
                return pid
        time.sleep(0.2)
    raise AssertionError(f"rank {rank} did not start")


def _stop_with_stacks(procs, logs, seconds):
    """The launches did not finish: every rank prints its threads' stacks (SIGABRT with
    ``PYTHONFAULTHANDLER``), everything is killed, and the test fails with the tails of
    the logs (a hang shows where it is, instead of a bare TimeoutExpired)."""
    for p in procs:
        for pid in _children(p.pid):
            try:
                os.kill(pid, signal.SIGABRT)
            except ProcessLookupError:
                pass
    time.sleep(3)
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    tails = "\n".join(f"--- {log.name}:\n{log.read_text()[-6000:]}" for log in logs)
    pytest.fail(f"the 2-node run did not finish in {seconds} s:\n{tails}")


def test_two_node_launch_on_localhost_completes_ppo(tmp_path):
    """``--nnodes=2 --node_rank=0|1`` with the rendezvous on 127.0.0.1: node 1 has its
    own root dir (as on a host without rank 0's disk), which stays absent.

    Each node writes to a file, not a pipe (a pipe nobody reads while the test waits for
    the other node would stop its writer, and with it the run); a collective stuck for
    100 s is a named error (ALF_DIST_TIMEOUT_S), and a run still going at 180 s fails
    the test with every rank's stacks."""
    conf = _conf(tmp_path, "TrainerConfig.num_iterations = 10\n")
    port = free_port()
    env = dict(_env(tmp_path), ALF_DIST_TIMEOUT_S="100", PYTHONFAULTHANDLER="1")
    procs, logs = [], []
    for node in (0, 1):
        cmd = TORCHRUN + ["--nnodes=2", f"--node_rank={node}", "--nproc_per_node=1",
                          "--master_addr=127.0.0.1", f"--master_port={port}",
                          "-m", "alf.bin.train", f"--conf={conf}",
                          f"--root_dir={tmp_path / f'node{node}'}"]
        logs += [tmp_path / f"node{node}.out", tmp_path / f"node{node}.err"]
        with open(logs[-2], "w") as out, open(logs[-1], "w") as err:
            procs.append(subprocess.Popen(cmd, cwd=str(tmp_path), env=env, stdout=out,
                                          stderr=err))
    try:
        deadline = time.monotonic() + 180
        for p in procs:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        _stop_with_stacks(procs, logs, 180)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    outs = [(logs[2 * n].read_text(), logs[2 * n + 1].read_text()) for n in (0, 1)]
    for node, (p, (_, err)) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, f"node {node}:\n{err[-3000:]}"
    root = tmp_path / "node0"
    assert (root / "config.gin").is_file() and (root / "train" / "ckpt-0000000010.pt").is_file()
    rows = (root / "progress.csv").read_text().splitlines()
    # env steps are the run's: 10 iterations x 2 ranks x 2 envs x 8 steps
    assert rows[-1].split(",")[:2] == ["10", str(10 * 2 * 2 * 8)]
    assert not (tmp_path / "node1").exists()
    # rank 0 alone prints progress
    assert "[alf] iter 10" in outs[0][1] and "[alf] iter" not in outs[1][1]


@pytest.mark.parametrize("async_unroll", [False, True], ids=["sync", "async"])
def test_killed_rank_stops_the_other_naming_it(tmp_path, async_unroll):
    """SIGKILL of rank 1 mid-run: rank 0 exits within 60 s with one line naming rank 1,
    and nothing alf started is left running (env worker processes included)."""
    extra = "TrainerConfig.num_iterations = 1000000\n"
    if async_unroll:  # APPO: each rank has its own env worker process
        extra += ("TrainerConfig.algorithm_ctor = @APPOAlgorithm\n"
                  "APPOAlgorithm.optimizer = @alf.optimizers.Adam()\n"
                  "APPOAlgorithm.gamma = 0.98\n"  # TINY_PPO binds PPOAlgorithm.gamma
                  "TrainerConfig.async_unroll = True\nTrainerConfig.num_env_workers = 1\n"
                  "TrainerConfig.env_groups_per_worker = 1\n")
    conf = _conf(tmp_path, extra)
    cmd = TORCHRUN + ["--nproc_per_node=2", f"--master_port={free_port()}", "-m",
                      "alf.bin.train", f"--conf={conf}", f"--root_dir={tmp_path / 'run'}"]
    shm_before = shm_entries()
    launcher = subprocess.Popen(cmd, cwd=str(tmp_path), env=_env(tmp_path), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        victim = _rank_pid(launcher.pid, 1, deadline)
        survivor = _rank_pid(launcher.pid, 0, deadline)
        # wait until training runs (rank 0 wrote its first progress row)
        progress = tmp_path / "run" / "progress.csv"
        while time.monotonic() < deadline and not (
                progress.exists() and len(progress.read_text().splitlines()) > 2):
            assert launcher.poll() is None, launcher.communicate()[1][-3000:]
            time.sleep(0.2)
        alf_procs = [survivor] + _children(survivor)
        if async_unroll:  # rank 0's env worker is among what must be gone afterwards
            assert len(alf_procs) >= 2, alf_procs
        os.kill(victim, signal.SIGKILL)
        killed_at = time.monotonic()
        _, err = launcher.communicate(timeout=90)
        took = time.monotonic() - killed_at
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    assert took < 60, f"the launcher took {took:.0f} s to exit"
    assert launcher.returncode != 0
    lines = [l for l in err.splitlines() if l.startswith("alf.bin.train: error:")]
    assert len(lines) == 1, err[-3000:]
    assert re.search(rf"rank 1 \(pid {victim}\) (has )?exited", lines[0]), lines[0]
    time.sleep(1.0)
    left = [p for p in alf_procs if os.path.exists(f"/proc/{p}")
            and open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"]
    assert not left, f"still running: {left}"
    assert not shm_left_since(shm_before)


def test_a_stuck_rank_is_named_after_the_timeout(tmp_path):
    """A rank that stays alive but stops taking part (SIGSTOP: what a hang, or a rank
    starved of CPU, looks like to the others) is not waited on in silence: after
    ALF_DIST_TIMEOUT_S rank 0 stops with one line naming it as stuck, not exited, and stops
    it (SIGTERM, then SIGKILL)."""
    conf = _conf(tmp_path, "TrainerConfig.num_iterations = 1000000\n")
    cmd = TORCHRUN + ["--nproc_per_node=2", f"--master_port={free_port()}", "-m",
                      "alf.bin.train", f"--conf={conf}", f"--root_dir={tmp_path / 'run'}"]
    env = dict(_env(tmp_path), ALF_DIST_TIMEOUT_S="15")
    launcher = subprocess.Popen(cmd, cwd=str(tmp_path), env=env, text=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    victim = None
    try:
        deadline = time.monotonic() + 120
        victim = _rank_pid(launcher.pid, 1, deadline)
        progress = tmp_path / "run" / "progress.csv"
        while time.monotonic() < deadline and not (
                progress.exists() and len(progress.read_text().splitlines()) > 2):
            assert launcher.poll() is None, launcher.communicate()[1][-3000:]
            time.sleep(0.2)
        os.kill(victim, signal.SIGSTOP)
        stopped_at = time.monotonic()
        _, err = launcher.communicate(timeout=150)
        took = time.monotonic() - stopped_at
    finally:
        if victim is not None:
            try:
                os.kill(victim, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    assert launcher.returncode != 0
    lines = [l for l in err.splitlines() if l.startswith("alf.bin.train: error:")]
    assert len(lines) == 1, err[-3000:]
    assert f"rank 1 (pid {victim}) was still running but did not join within 15 s: " \
        "stuck (hung, or starved of CPU), not exited; stopped it" in lines[0], lines[0]
    assert "ALF_DIST_TIMEOUT_S sets the wait" in lines[0], lines[0]
    # the timeout, then at once: rank 0 stops the stuck rank instead of torchrun waiting
    # its 30 s grace for a process that cannot answer SIGTERM
    assert took < 45, f"the launcher took {took:.0f} s to exit"


@pytest.mark.parametrize("extra,named", [
    ("PPOAlgorithm.gamam = 0.9\n", "gamam"),  # typo: found by rank 0 parsing the config
    ("TrainerConfig.num_iterations = 'many'\n", "many"),  # a bad value inside TrainerConfig
    ("TrainerConfig.algorithm_ctor = @APPOAlgorithm\nAPPOAlgorithm.optimizer = "
     "@alf.optimizers.Adam()\nAPPOAlgorithm.gamma = 0.98\nTrainerConfig.async_unroll = True\n"
     "TrainerConfig.unroll_length = 0\nTrainerConfig.max_unroll_length = 8\n",
     "unroll_length"),  # found by every rank building: ranks would not pair up
    ("create_environment.env_name = 'CartPol-v1'\n", "CartPol-v1"),  # gin appends the
    # function's address, which differs between ranks: it was printed once per rank
], ids=["typo", "bad_value", "async_take_ready", "unknown_env"])
def test_bad_config_is_reported_once_with_status_2(tmp_path, extra, named):
    """A mistake is one line (not one per rank), every rank exits 2 and nothing is
    written."""
    conf = _conf(tmp_path, "TrainerConfig.num_iterations = 2\n" + extra)
    cmd = TORCHRUN + ["--nproc_per_node=2", f"--master_port={free_port()}", "-m",
                      "alf.bin.train", f"--conf={conf}", f"--root_dir={tmp_path / 'run'}"]
    done = subprocess.run(cmd, cwd=str(tmp_path), env=_env(tmp_path), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0
    lines = [l for l in done.stderr.splitlines() if l.startswith("alf.bin.train: error:")]
    assert len(lines) == 1 and named in lines[0], done.stderr[-3000:]
    # (two ranks' lines can land on one line: each print is two writes, text and newline)
    assert done.stderr.count("alf.bin.train: error:") == 1, done.stderr[-3000:]
    # no rank printed a traceback (torchrun's own, about ChildFailedError, is its business)
    assert not re.search(r'File "[^"]*/alf/', done.stderr), done.stderr[-3000:]
    # torchrun's failure table: both ranks exited with status 2
    codes = re.findall(r"exitcode\s*:\s*(-?\d+)", done.stderr)
    assert set(codes) == {"2"} and len(codes) >= 2, done.stderr[-3000:]
    assert not (tmp_path / "run").exists()


def test_ctrl_c_on_torchrun_saves_one_checkpoint_and_a_single_process_resumes(tmp_path):
    """SIGINT to the launcher: every rank stops at the same iteration, rank 0 writes one
    checkpoint with every rank's part and says so once; the run then resumes (here in
    a single process, which says that the checkpoint came from 2 ranks)."""
    conf = _conf(tmp_path, "TrainerConfig.num_iterations = 1000000\n")
    root = tmp_path / "run"
    cmd = TORCHRUN + ["--nproc_per_node=2", f"--master_port={free_port()}", "-m",
                      "alf.bin.train", f"--conf={conf}", f"--root_dir={root}"]
    launcher = subprocess.Popen(cmd, cwd=str(tmp_path), env=_env(tmp_path), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        progress = root / "progress.csv"
        while time.monotonic() < deadline and not (
                progress.exists() and len(progress.read_text().splitlines()) > 3):
            assert launcher.poll() is None, launcher.communicate()[1][-3000:]
            time.sleep(0.2)
        launcher.send_signal(signal.SIGINT)
        _, err = launcher.communicate(timeout=60)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    # (torchrun itself reports the SIGINT it got with a traceback of its own)
    assert not re.search(r'File "[^"]*/alf/', err), err[-3000:]
    lines = [l for l in err.splitlines() if l.startswith("alf.bin.train: interrupted")]
    assert len(lines) == 1 and "state saved in" in lines[0], err[-3000:]
    ckpts = sorted((root / "train").glob("ckpt-*.pt"))
    assert len(ckpts) == 1
    saved_iteration = int(ckpts[0].stem.split("-")[1])
    import torch
    state = torch.load(ckpts[0], weights_only=True)
    assert state["world_size"] == 2 and len(state["ranks"]) == 2
    assert state["context"]["env_steps"] == saved_iteration * 2 * 2 * 8

    more = saved_iteration + 3
    done = subprocess.run([sys.executable, "-m", "alf.bin.train", f"--root_dir={root}",
                           "--conf_param", f"TrainerConfig.num_iterations={more}"],
                          cwd=str(tmp_path), env=_env(tmp_path), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"resumed from iteration {saved_iteration:,}" in done.stderr
    assert "saved by 2 rank(s), this run has 1" in done.stderr
    rows = (root / "progress.csv").read_text().splitlines()
    assert rows[-1].split(",")[:2] == [str(more), str(saved_iteration * 32 + 3 * 16)]


def test_killed_launcher_stops_the_ranks_saying_why(tmp_path):
    """SIGKILL of torchrun itself: its ranks (in their own session) notice, save one
    checkpoint at the same boundary and exit, and say that the launcher exited (they
    used to print "Ctrl-C: finishing the current iteration" and "interrupted")."""
    import threading
    conf = _conf(tmp_path, "TrainerConfig.num_iterations = 1000000\n")
    root = tmp_path / "run"
    cmd = TORCHRUN + ["--nproc_per_node=2", f"--master_port={free_port()}", "-m",
                      "alf.bin.train", f"--conf={conf}", f"--root_dir={root}"]
    launcher = subprocess.Popen(cmd, cwd=str(tmp_path), env=_env(tmp_path), text=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(launcher.stderr), daemon=True)
    reader.start()
    ranks = []
    try:
        deadline = time.monotonic() + 120
        ranks = [_rank_pid(launcher.pid, r, deadline) for r in (0, 1)]
        progress = root / "progress.csv"
        while time.monotonic() < deadline and not (
                progress.exists() and len(progress.read_text().splitlines()) > 3):
            assert launcher.poll() is None, "".join(lines)[-3000:]
            time.sleep(0.2)
        os.kill(launcher.pid, signal.SIGKILL)
        launcher.wait()
        reader.join(timeout=60)  # the ranks hold the pipe until they exit
        assert not reader.is_alive(), "the ranks did not exit within 60 s"
    finally:
        for pid in ranks:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    err = "".join(lines)
    after_kill = err[err.find("[alf] iter"):]
    assert "Ctrl-C" not in after_kill and "interrupted" not in after_kill, after_kill[-3000:]
    ckpts = sorted((root / "train").glob("ckpt-*.pt"))
    assert len(ckpts) == 1, err[-3000:]
    iteration = int(ckpts[0].stem.split("-")[1])
    final = [l.rstrip("\n") for l in lines if l.startswith("alf.bin.train:")]
    assert final == [f"alf.bin.train: stopped at iteration {iteration:,} because the launcher "
                     f"(pid {launcher.pid}) exited; state saved in {ckpts[0]}, all workers "
                     "stopped. Rerun the same command to resume."], err[-3000:]
    assert not re.search(r'File "[^"]*/alf/', err), err[-3000:]
