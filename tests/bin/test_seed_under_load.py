"""A seed names a run on a busy machine too (issue 29, item 1): the real ``alf.bin.train``
command next to busy loops gives the same final checkpoint, tensor by tensor, as the same
command whose thread governor never acts (``adapt_threads=False``).

Before the fix the governor dropped torch to 1 thread next to the loops, and torch splits
reductions and convolution gradients into one part per thread: the busy run's checkpoint
differed. Now the thread count is fixed for the run and the governor narrows the CPUs
its threads run on instead, which changes no result.
"""
import glob
import os
import subprocess
import sys

import pytest
import torch

# a small ppo_atari.gin: the Nature CNN's weight gradients are split into one part per
# torch thread, so 1 and 2 threads give different checkpoints (28 of 50 tensors here)
ATARI = """
include 'ppo_atari.gin'
create_environment.num_parallel_environments = 2
TrainerConfig.random_seed = 3
TrainerConfig.num_iterations = 4
TrainerConfig.unroll_length = 16
TrainerConfig.mini_batch_size = 32
TrainerConfig.num_updates_per_train_iter = 2
TrainerConfig.evaluate = False
TrainerConfig.summary_interval = 1
TrainerConfig.checkpoint_interval = 100000
TrainerConfig.progress_interval_seconds = 0.0
"""


def _flat(value, prefix="", out=None):
    out = {} if out is None else out
    if isinstance(value, dict):
        for k, v in value.items():
            _flat(v, f"{prefix}/{k}", out)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _flat(v, f"{prefix}/{i}", out)
    elif "wall_time" not in prefix:
        out[prefix] = value
    return out


def _final_checkpoint(root):
    found = sorted(glob.glob(os.path.join(root, "train", "ckpt-*.pt")))
    assert found, f"no checkpoint in {root}"
    return _flat(torch.load(found[-1], map_location="cpu", weights_only=False))


def _differing(a, b):
    assert set(a) == set(b)
    out = []
    for name in a:
        x, y = a[name], b[name]
        if isinstance(x, torch.Tensor):
            same = x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y)
        else:
            same = x == y
        if not same:
            out.append(name)
    return out


def test_same_seed_same_checkpoint_next_to_busy_loops(alf_cli, tmp_path):
    gin_file = alf_cli.write_gin(tmp_path, ATARI)
    # the run and the loops share the same 2 CPUs: the same contention on any machine
    cpus = sorted(os.sched_getaffinity(0))[:2]
    if len(cpus) < 2:
        pytest.skip("needs 2 CPUs")
    pin = lambda: os.sched_setaffinity(0, cpus)  # noqa: E731

    def train(root, params=(), hogs=0):
        loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=pin)
                 for _ in range(hogs)]
        try:
            args = [f"--conf={gin_file}", f"--root_dir={root}"]
            for p in params:
                args += ["--conf_param", p]
            # a user's shell: no OMP_NUM_THREADS / MKL_NUM_THREADS (the test helpers'
            # environment sets them to 1)
            env = {k: v for k, v in alf_cli.env().items()
                   if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
            out = subprocess.run(alf_cli.command("alf.bin.train", args), cwd=str(tmp_path),
                                 env=env, capture_output=True, text=True,
                                 timeout=600, preexec_fn=pin)
        finally:
            for h in loops:
                h.kill()
                h.wait()
        assert out.returncode == 0, out.stderr[-3000:]
        return out.stderr

    two = ["TrainerConfig.num_threads=2"]
    busy_log = train("busy", two, hogs=2)
    train("pinned", two + ["TrainerConfig.adapt_threads=False"])
    train("one_thread", ["TrainerConfig.num_threads=1", "TrainerConfig.adapt_threads=False"])
    busy, pinned, one = (_final_checkpoint(os.path.join(tmp_path, name))
                         for name in ("busy", "pinned", "one_thread"))
    if not _differing(pinned, one):
        pytest.skip("on this CPU the thread count does not change this run's results")
    # the governor did act in the busy run: it narrowed its CPUs, with 2 torch threads
    assert "running on 1 of them, 2 torch threads" in busy_log, busy_log[-3000:]
    tensors = [n for n, v in busy.items() if isinstance(v, torch.Tensor)]
    assert len(tensors) > 20
    assert _differing(busy, pinned) == []
