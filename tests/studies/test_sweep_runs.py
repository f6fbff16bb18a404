"""Real sweeps of a shortened ppo_cart_pole.gin: a 2 x 2 grid x 2 seeds with --parallel 2,
Ctrl-C'd mid-way (no orphan, nothing left in /dev/shm) and rerun (finished runs are not
run again, stopped ones resume from their checkpoints); two sweep processes on one study
share its runs."""
import csv
import glob
import os
import signal
import subprocess
import sys
import time

from shm_check import shm_entries, shm_left_since

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHORT = ["--conf_param", "TrainerConfig.eval_interval=8",
         "--conf_param", "TrainerConfig.checkpoint_interval=4",
         "--conf_param", "TrainerConfig.num_eval_episodes=2"]


def _sweep_cmd(study_dir, *args):
    return [sys.executable, "-m", "alf.bin.sweep", "--conf=ppo_cart_pole.gin",
            f"--study_dir={study_dir}", *SHORT, *args]


def _starts(run_dir):
    with open(os.path.join(run_dir, "train.log")) as f:
        text = f.read()
    return text.count("[sweep] "), "resuming" in text


def _alf_processes_under(path):
    """pids of live processes whose command line mentions ``path``."""
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if str(path).encode() in f.read():
                    found.append(int(pid))
        except (OSError, ValueError):
            continue
    return found


def _complete_rows(study_dir):
    with open(os.path.join(study_dir, "results.csv")) as f:
        return [r for r in csv.DictReader(f) if r["state"] == "complete"]


def test_grid_sweep_ctrl_c_then_rerun_resumes_and_skips_finished(tmp_path):
    study = tmp_path / "study"
    shm_before = shm_entries()
    args = ["--param", "lr/LinearSchedule.start=[1e-3, 3e-4]",
            "--param", "PPOLoss.entropy_regularization=[0.0, 0.01]", "--seeds=0,1",
            "--parallel=2", "--conf_param", "TrainerConfig.num_env_steps=16384"]
    log = open(tmp_path / "sweep1.log", "w")
    proc = subprocess.Popen(_sweep_cmd(study, *args), cwd=REPO, stdout=log, stderr=log)
    deadline = time.time() + 300
    while time.time() < deadline:  # Ctrl-C once 2 runs are done and a running one saved
        text = (tmp_path / "sweep1.log").read_text()
        done = text.count(" done: ")
        saved = [d for d in glob.glob(str(study / "runs/*/seed_*"))
                 if glob.glob(os.path.join(d, "train", "ckpt-*.pt")) and
                 f"{os.path.relpath(d, study / 'runs')} done" not in text]
        if done >= 2 and saved:
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=120) == 130
    log.close()
    text = (tmp_path / "sweep1.log").read_text()
    assert "stopped with its checkpoint" in text, text
    assert _alf_processes_under(study) == []  # no orphan run or env worker
    assert not shm_left_since(shm_before)
    names = {os.path.relpath(d, study / "runs"): d for d in glob.glob(str(study / "runs/*/seed_*"))}
    finished_before = {n for n in names if f"{n} done" in text}
    saved_before = {n for n, d in names.items() if n not in finished_before and
                    glob.glob(os.path.join(d, "train", "ckpt-*.pt"))}

    rerun = subprocess.run(_sweep_cmd(study, *args), cwd=REPO, capture_output=True, text=True,
                           timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    rows = _complete_rows(study)
    assert len(rows) == 8 and len({(r["config"], r["seed"]) for r in rows}) == 8
    assert "| 1 | " in rerun.stdout and "final eval_return (mean ± std)" in rerun.stdout
    resumed = 0
    for run_dir in glob.glob(str(study / "runs/*/seed_*")):
        starts, resuming = _starts(run_dir)
        name = os.path.relpath(run_dir, study / "runs")
        if name in finished_before:
            assert starts == 1, name  # a finished run is never run again
        else:  # stopped by the Ctrl-C: resumed if it had saved a checkpoint
            assert starts <= 2 and resuming == (name in saved_before), name
            resumed += resuming
    assert len(finished_before) >= 2 and resumed == len(saved_before) >= 1


def test_two_sweep_processes_share_one_study(tmp_path):
    study = tmp_path / "study"
    args = ["--param", "PPOLoss.entropy_regularization=[0.0, 0.01]", "--seeds=0,1",
            "--conf_param", "TrainerConfig.num_env_steps=2048"]
    logs = [open(tmp_path / f"worker{i}.log", "w") for i in range(2)]
    procs = [subprocess.Popen(_sweep_cmd(study, *args), cwd=REPO, stdout=log, stderr=log)
             for log in logs]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    for log in logs:
        log.close()
    started = [(tmp_path / f"worker{i}.log").read_text().count(": started ") for i in range(2)]
    assert sum(started) == 4 and min(started) >= 1, started  # both worked, 4 runs in all
    for run_dir in glob.glob(str(study / "runs/*/seed_*")):
        assert _starts(run_dir)[0] == 1  # none ran twice
    assert len(_complete_rows(study)) == 4
