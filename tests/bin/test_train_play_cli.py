"""The real commands on a tiny run: artifacts, resume, play, video."""
import csv
import glob
import importlib.util
import os
import re
import shutil
import subprocess

import pytest

ROOT = "runs/ppo"


@pytest.fixture(scope="module")
def trained(tmp_path_factory, alf_cli):
    """A 4-iteration run, then the same command again with more iterations (resume)."""
    cwd = tmp_path_factory.mktemp("train")
    alf_cli.write_gin(cwd, alf_cli.TINY_PPO, "tiny.gin")
    args = ["--conf", "tiny.gin", "--root_dir", ROOT]
    first = alf_cli.run("alf.bin.train", args, cwd)
    second = alf_cli.run("alf.bin.train", args + ["--conf_param", "TrainerConfig.num_iterations=6"],
                         cwd)
    return cwd, first, second


def _csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_train_writes_artifacts_and_progress(trained):
    cwd, first, _ = trained
    assert first.returncode == 0, first.stderr
    root = cwd / ROOT
    for name in ("config.gin", "progress.csv", "operative_config.gin"):
        assert (root / name).is_file(), name
    assert glob.glob(str(root / "events.out.tfevents.*"))
    # the resume's override (num_iterations 4 -> 6) persisted in the run's config
    assert "TrainerConfig.num_iterations = 6" in (root / "config.gin").read_text()
    progress = first.stderr
    assert re.search(r"iter 4/4 \| env steps 64 \|", progress), progress
    assert "FPS" in progress
    assert "Traceback" not in progress
    # gin's include probing is not shown to the user
    assert "Path not found" not in progress


def test_rerun_resumes_instead_of_restarting(trained):
    cwd, _, second = trained
    assert second.returncode == 0, second.stderr
    assert "resuming" in second.stderr and "resumed from iteration 4 (64 env steps)" in second.stderr
    assert re.search(r"iter 6/6 \| env steps 96 \|", second.stderr), second.stderr
    rows = _csv(cwd / ROOT / "progress.csv")
    assert [int(r["iteration"]) for r in rows] == [1, 2, 3, 4, 5, 6]
    assert [int(r["env_steps"]) for r in rows] == [16 * i for i in range(1, 7)]
    ckpts = sorted(os.path.basename(p) for p in glob.glob(str(cwd / ROOT / "train" / "ckpt-*.pt")))
    assert ckpts == ["ckpt-0000000004.pt", "ckpt-0000000006.pt"]


HAVE_VIDEO = all(importlib.util.find_spec(m) for m in ("imageio", "imageio_ffmpeg"))


@pytest.fixture(scope="module")
def played(trained, alf_cli):
    """play runs started together: normal, without checkpoints, bad flag, video."""
    cwd, _, _ = trained
    no_ckpt = cwd / "runs" / "no_ckpt"
    no_ckpt.mkdir(parents=True)
    shutil.copy(cwd / ROOT / "config.gin", no_ckpt / "config.gin")
    cases = {
        "play": ["--root_dir", ROOT, "--num_episodes", "2"],
        "no_ckpt": ["--root_dir", "runs/no_ckpt"],
        "zero_episodes": ["--root_dir", ROOT, "--num_episodes", "0"],
        "video": ["--root_dir", ROOT, "--num_episodes", "1", "--record_video", "out/cp.mp4"],
    }
    procs = {k: alf_cli.start("alf.bin.play", a, cwd) for k, a in cases.items() if k != "video"}
    # as on a headless machine: no XDG_RUNTIME_DIR, no SDL driver chosen by the user
    headless = {k: v for k, v in alf_cli.env().items()
                if k not in ("XDG_RUNTIME_DIR", "SDL_VIDEODRIVER", "SDL_AUDIODRIVER", "DISPLAY",
                             "WAYLAND_DISPLAY")}
    procs["video"] = subprocess.Popen(alf_cli.command("alf.bin.play", cases["video"]),
                                      cwd=str(cwd), env=headless, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)
    results = {}
    for k, p in procs.items():
        out, err = p.communicate(timeout=180)
        results[k] = (p.returncode, out, err)
    return cwd, results


def test_play_prints_episode_returns_and_average(played):
    _, results = played
    rc, out, err = results["play"]
    assert rc == 0, err
    episodes = re.findall(r"^episode (\d+): return ([\d.]+), length (\d+)$", out, re.M)
    assert [e[0] for e in episodes] == ["1", "2"], out
    returns = [float(e[1]) for e in episodes]
    assert all(float(e[1]) == float(e[2]) for e in episodes)  # CartPole: +1 per step
    m = re.search(r"^average return over 2 episodes: ([\d.]+)$", out, re.M)
    assert m and float(m.group(1)) == pytest.approx(sum(returns) / 2, abs=0.01), out
    assert "Loaded checkpoint at iteration 6" in err


def test_play_without_checkpoints_is_a_usage_error(played):
    _, results = played
    rc, out, err = results["no_ckpt"]
    assert rc == 2, err
    assert "Traceback" not in err and "No readable checkpoint" in err
    assert len(err.strip().splitlines()) == 1, err
    assert "episode" not in out


def test_play_zero_episodes_is_a_usage_error(played):
    _, results = played
    rc, _, err = results["zero_episodes"]
    assert rc == 2 and "--num_episodes must be >= 1" in err and "Traceback" not in err


@pytest.mark.skipif(not HAVE_VIDEO, reason="needs imageio + imageio_ffmpeg (the [video] extra)")
def test_record_video_writes_mp4(played):
    cwd, results = played
    rc, out, err = results["video"]
    assert rc == 0, err
    assert os.path.getsize(cwd / "out" / "cp.mp4") > 1000
    # pygame (CartPole's renderer) must not probe Wayland: libwayland's complaint is noise
    assert "XDG_RUNTIME_DIR" not in err, err
    m = re.search(r"^episode 1: return [\d.]+, length (\d+)$", out, re.M)
    assert m and f"({int(m.group(1)) + 1} frames)" in err, (out, err)


@pytest.mark.skipif(HAVE_VIDEO, reason="the [video] extra is installed")
def test_record_video_without_extra_names_the_install_command(played):
    cwd, results = played
    rc, out, err = results["video"]
    assert rc == 2, err
    assert 'pip install -e ".[video]"' in err and "Traceback" not in err
    assert not (cwd / "out" / "cp.mp4").exists()
    assert "episode 1" not in out  # fails before playing
