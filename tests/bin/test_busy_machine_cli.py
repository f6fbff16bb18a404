"""A run next to CPU-bound processes gives their CPUs back and says it is starved (issue 18,
item 1): the real ``alf.bin.train`` command with every usable CPU kept busy by a hog."""
import os
import subprocess
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def test_progress_line_says_cpu_starved_and_cpus_narrow(alf_cli, tmp_path):
    """Before issue 18 a run here kept 2 spinning torch threads and said nothing; until
    issue 29 it dropped to 1 torch thread, which changed its results: now it keeps its
    2 threads (the same results) and runs them on 1 CPU."""
    gin_file = alf_cli.write_gin(tmp_path, alf_cli.TINY_PPO + """
TrainerConfig.num_iterations = 200
TrainerConfig.num_threads = 2
TrainerConfig.summary_interval = 20
TrainerConfig.progress_interval_seconds = 0.5
""")
    # the run and the hogs share the same (at most 2) CPUs: the same figures on any machine
    cpus = sorted(os.sched_getaffinity(0))[:2]
    pin = lambda: os.sched_setaffinity(0, cpus)  # noqa: E731
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=pin)
            for _ in cpus]
    try:
        out = subprocess.run(alf_cli.command("alf.bin.train", [f"--conf={gin_file}",
                                                               "--root_dir=run"]),
                             cwd=str(tmp_path), env=alf_cli.env(), capture_output=True,
                             text=True, timeout=300, preexec_fn=pin)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert out.returncode == 0, out.stderr
    starved = [line for line in out.stderr.splitlines() if "CPU-starved" in line]
    assert starved, out.stderr
    assert "other processes busy on" in starved[-1], starved[-1]
    assert "running on 1 of them, 2 torch threads" in starved[-1], starved[-1]
    events = EventAccumulator(os.path.join(tmp_path, "run"))
    events.Reload()
    threads = [e.value for e in events.Scalars("Speed/torch_threads")]
    assert set(threads) == {2}  # fixed for the run: results do not depend on the load
    cpus = [e.value for e in events.Scalars("Speed/cpus_in_use")]
    assert cpus[-1] == 1  # the CPUs are busy: the run's threads share one
