"""A run next to CPU-bound processes gives their CPUs back and says it is starved (issue 18,
item 1): the real ``alf.bin.train`` command with every usable CPU kept busy by a hog."""
import os
import subprocess
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from alf.utils.cpu_budget import usable_cpus


def test_progress_line_says_cpu_starved_and_threads_shrink(alf_cli, tmp_path):
    gin_file = alf_cli.write_gin(tmp_path, alf_cli.TINY_PPO + """
TrainerConfig.num_iterations = 200
TrainerConfig.num_threads = 2
TrainerConfig.summary_interval = 20
TrainerConfig.progress_interval_seconds = 0.5
""")
    usable = usable_cpus()
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(usable)]
    try:
        out = alf_cli.run("alf.bin.train", [f"--conf={gin_file}", "--root_dir=run"], tmp_path,
                          timeout=300, env={"OMP_NUM_THREADS": ""})
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert out.returncode == 0, out.stderr
    starved = [line for line in out.stderr.splitlines() if "CPU-starved" in line]
    assert starved, out.stderr
    assert "other processes busy on" in starved[-1] and "1 torch thread" in starved[-1]
    events = EventAccumulator(os.path.join(tmp_path, "run"))
    events.Reload()
    threads = [e.value for e in events.Scalars("Speed/torch_threads")]
    assert threads[-1] == 1  # the CPUs are busy: one torch thread
