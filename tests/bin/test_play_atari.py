"""``alf.bin.play`` on Atari ends in bounded time and always leaves a playable mp4.

A greedy Breakout agent that never presses FIRE after losing a life used to
play on to the 108k-frame limit (minutes with a video); play now defaults to
epsilon-greedy 0.05 on Atari, caps episodes at ``--max_episode_steps``, shows
a progress line, and finishes the video on Ctrl-C (exit status 130).
"""
import os
import re
import signal
import subprocess
import threading
import time

import pytest

pytest.importorskip("ale_py")
imageio = pytest.importorskip("imageio.v2")
pytest.importorskip("imageio_ffmpeg")

SHRINK = ["create_environment.num_parallel_environments=2", "TrainerConfig.unroll_length=8",
          "TrainerConfig.num_iterations=2", "TrainerConfig.num_env_steps=0",
          "TrainerConfig.mini_batch_size=8", "TrainerConfig.num_threads=1",
          "TrainerConfig.progress_interval_seconds=0.0"]
EPISODE = re.compile(r"^episode 1: return ([\d.]+), length (\d+)( \(cut at --max_episode_steps\))?$",
                     re.M)


@pytest.fixture(scope="module")
def breakout_run(alf_cli, tmp_path_factory):
    """A 2-iteration ppo_atari.gin run: an untrained greedy policy, the case that hung
    (trained in-process: play is the subject; tests/examples/test_atari_example.py trains
    ppo_atari.gin with the real command)."""
    cwd = tmp_path_factory.mktemp("play_atari")
    alf_cli.train_in_process(cwd / "runs" / "b", "include 'ppo_atari.gin'\n", SHRINK)
    return cwd


def _frames(path) -> list:
    return imageio.mimread(str(path), memtest=False)


def test_default_play_ends_with_epsilon_and_shows_progress(breakout_run, alf_cli):
    started = time.monotonic()
    play = alf_cli.run("alf.bin.play", ["--root_dir=runs/b", "--num_episodes", "1",
                                        "--record_video", "out/default.mp4",
                                        "--progress_interval_seconds", "0.5"],
                       breakout_run, timeout=170)
    seconds = time.monotonic() - started
    assert play.returncode == 0, play.stderr[-3000:]
    assert "ALE/Breakout-v5 is an Atari game: epsilon-greedy 0.05" in play.stderr
    m = EPISODE.search(play.stdout)
    assert m, play.stdout
    length = int(m.group(2))
    # epsilon 0.05 presses FIRE now and then: the game ends long before 27,000 steps
    assert not m.group(3) and length < 27_000, (length, seconds)
    progress = re.findall(r"^episode 1: step ([\d,]+), return ([\d.]+)$", play.stderr, re.M)
    assert progress, play.stderr[-2000:]
    steps = [int(s.replace(",", "")) for s, _ in progress]
    assert steps == sorted(steps) and steps[-1] <= length
    frames = _frames(breakout_run / "out" / "default.mp4")
    assert len(frames) == length + 1  # the reset frame and one per agent step
    assert f"wrote out/default.mp4 ({length + 1} frames)" in play.stderr


def test_max_episode_steps_cuts_the_episode(breakout_run, alf_cli):
    play = alf_cli.run("alf.bin.play", ["--root_dir=runs/b", "--num_episodes", "2",
                                        "--epsilon_greedy", "0", "--max_episode_steps", "60",
                                        "--progress_interval_seconds", "0"],
                       breakout_run, timeout=120)
    assert play.returncode == 0, play.stderr[-3000:]
    lines = re.findall(r"^episode (\d): return [\d.]+, length (\d+) \(cut at --max_episode_steps\)$",
                       play.stdout, re.M)
    assert lines == [("1", "60"), ("2", "60")], play.stdout
    assert "epsilon-greedy" not in play.stderr  # an explicit --epsilon_greedy is not overridden
    assert "step " not in play.stderr  # progress lines off


def test_bad_play_flags_are_usage_errors(breakout_run, alf_cli):
    cases = [(["--epsilon_greedy", "1.5"], "--epsilon_greedy must be in [0, 1]"),
             (["--max_episode_steps", "-1"], "--max_episode_steps must be >= 0"),
             (["--fps", "0"], "--fps must be >= 1"),
             (["--record_video", "."], "--record_video . is a directory: give a "
                                       "file name such as ./play.mp4")]
    # started together: the interpreter start-ups overlap
    plays = [(alf_cli.start("alf.bin.play", ["--root_dir=runs/b", *args], breakout_run), message)
             for args, message in cases]
    for play, message in plays:
        _, stderr = play.communicate(timeout=120)
        assert play.returncode == 2 and message in stderr, stderr
        assert "Traceback" not in stderr and len(stderr.strip().splitlines()) == 1


def test_ctrl_c_during_play_still_finishes_the_video(breakout_run, alf_cli):
    """SIGINT to the whole process group, as a terminal's Ctrl-C sends it."""
    proc = subprocess.Popen(
        alf_cli.command("alf.bin.play", ["--root_dir=runs/b", "--num_episodes", "1000000",
                                         "--epsilon_greedy", "0", "--max_episode_steps", "0",
                                         "--record_video", "out/int.mp4",
                                         "--progress_interval_seconds", "0.2"]),
        cwd=str(breakout_run), env=alf_cli.env(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True)
    err_lines = []

    def read_stderr():
        for line in proc.stderr:
            err_lines.append(line)

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 120
        while not any(re.match(r"episode 1: step [1-9]", l) for l in list(err_lines)):
            assert proc.poll() is None and time.monotonic() < deadline, "".join(err_lines)
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGINT)
        out = proc.stdout.read()
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    reader.join(timeout=10)
    err = "".join(err_lines)
    assert rc == 130, err[-3000:]
    assert "Traceback" not in err
    assert re.search(r"^alf.bin.play: interrupted in episode 1 at step [\d,]+", err, re.M), err
    m = re.search(r"^wrote out/int.mp4 \((\d+) frames\)$", err, re.M)
    assert m and int(m.group(1)) > 1, err[-2000:]
    assert "average return" not in out  # no finished episode
    frames = _frames(breakout_run / "out" / "int.mp4")
    assert len(frames) == int(m.group(1)) and frames[0].shape == (210, 160, 3)
