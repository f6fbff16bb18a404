"""A real PBT population (4 shortened PPO CartPole members, learning rates over
1e-5..1e-2, 2 generations, 2 at once): exploit/explore events in the log and the lineage;
Ctrl-C after the first decision, then the same command continues the population."""
import csv
import glob
import os
import signal
import subprocess
import sys
import time

from shm_check import shm_entries, shm_left_since

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_population_exploits_explores_and_resumes_after_ctrl_c(tmp_path):
    study = tmp_path / "pbt"
    cmd = [sys.executable, "-m", "alf.bin.pbt", "--conf=ppo_cart_pole.gin",
           f"--study_dir={study}", "--param", "lr/LinearSchedule.start=loguniform(1e-5, 1e-2)",
           "--population=4", "--interval=2048", "--num_env_steps=4096", "--parallel=2",
           "--quantile=0.5", "--metric=train_return",
           "--conf_param", "TrainerConfig.num_eval_episodes=2"]
    shm_before = shm_entries()
    with open(tmp_path / "first.log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=log)
        deadline = time.time() + 300
        while time.time() < deadline and "gen 0 decided" not in \
                (tmp_path / "first.log").read_text():
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 130
    first = (tmp_path / "first.log").read_text()
    assert "gen 0 decided" in first and "<- m" in first  # an exploit, with its explore values
    assert not shm_left_since(shm_before)

    rerun = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    with open(study / "lineage.csv") as f:
        rows = list(csv.DictReader(f))
    assert sorted((int(r["gen"]), int(r["member"])) for r in rows) == \
        [(g, m) for g in range(2) for m in range(4)]
    exploits = [r for r in rows if r["event"].startswith("exploit")]
    assert len(exploits) == 2  # 2 of 4 members at the decision between the generations
    for r in exploits:  # it took another member's values, explored
        parent = next(p for p in rows if p["gen"] == str(int(r["gen"]) - 1) and
                      p["member"] == r["parent"])
        assert r["parent"] != r["member"]
        ratio = float(r["lr/LinearSchedule.start"]) / float(parent["lr/LinearSchedule.start"])
        assert (abs(ratio - 0.8) < 1e-4 or abs(ratio - 1.2) < 1e-4 or
                1e-5 <= float(r["lr/LinearSchedule.start"]) <= 1e-2)  # scaled, or resampled
    # gen 0 was never run again: each member's log shows at most one more start than
    # its 2 segments (a segment stopped by the Ctrl-C resumes once)
    for member in glob.glob(str(study / "members" / "m*")):
        with open(os.path.join(member, "progress.csv")) as f:
            assert int(list(csv.DictReader(f))[-1]["env_steps"]) >= 4096
        with open(os.path.join(member, "train.log")) as f:
            assert 2 <= f.read().count("[pbt] ") <= 3
    assert (study / "lineage.png").stat().st_size > 10_000
    assert "| member | final score |" in rerun.stdout
