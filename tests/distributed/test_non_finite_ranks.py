"""Data-parallel ranks stop together when training goes non-finite: one line (rank 0's),
every rank exits 1, none waits for another (alf.utils.finite_guard)."""
import math
import re
import subprocess
import sys

import torch
import torch.nn as nn

from alf.algorithms.algorithm import Algorithm
from alf.data_structures import LossInfo
from alf.errors import NonFiniteError
from alf.utils.finite_guard import FiniteGuard
from alf.utils.optimizers import SGD
from alf.utils.run_context import RunContext
from ranks import REPO_ROOT, free_port

TINY_PPO = """
include 'ppo_cart_pole.gin'
create_environment.num_parallel_environments = 2
ActorDistributionNetwork.fc_layer_params = (8,)
ValueNetwork.fc_layer_params = (8,)
TrainerConfig.num_env_steps = 0
TrainerConfig.num_iterations = 4
TrainerConfig.unroll_length = 8
TrainerConfig.mini_batch_size = 8
TrainerConfig.num_updates_per_train_iter = 2
TrainerConfig.evaluate = False
TrainerConfig.checkpoint_interval = 1000
TrainerConfig.progress_interval_seconds = 0.0
"""


def test_two_ranks_stop_at_the_same_update_with_one_line(tmp_path):
    conf = tmp_path / "tiny.gin"
    conf.write_text(TINY_PPO)
    env = {"PYTHONPATH": REPO_ROOT, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1",
           "TMPDIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
           f"--master_port={free_port()}", "-m", "alf.bin.train", f"--conf={conf}",
           f"--root_dir={tmp_path / 'run'}", "--conf_param", "lr/LinearSchedule.start=1e30"]
    done = subprocess.run(cmd, cwd=str(tmp_path), env=env, capture_output=True, text=True,
                          timeout=180)
    lines = [l for l in done.stderr.splitlines() if "alf.bin.train: error:" in l]
    assert len(lines) == 1, done.stderr[-3000:]
    assert lines[0].startswith("alf.bin.train: error: training went non-finite at iteration 1 "
                               "(update 1): the parameter _actor_network."), lines[0]
    assert not re.search(r'File "[^"]*/alf/', done.stderr), done.stderr[-3000:]
    codes = re.findall(r"exitcode\s*:\s*(-?\d+)", done.stderr)
    assert set(codes) == {"1"} and len(codes) >= 2, done.stderr[-3000:]  # both ranks
    assert not (tmp_path / "run" / "train").exists()


class _Group:
    """Two ranks as rank 1 sees them: rank 0 found a bad gradient (after the all-reduce
    carried rank 1's poisoned one), rank 1 (this process) its loss term."""
    is_main = False

    def all_gather_object(self, obj, what):
        return ["the gradient of w (nan)", obj]


class _DataParallel:
    group = _Group()

    def average_gradients(self, params):  # the mean over ranks: rank 0's grads are finite,
        pass                              # so a NaN here stays NaN


class _W(Algorithm):
    def __init__(self):
        context = RunContext()
        context.finite_guard = FiniteGuard()
        context.data_parallel = _DataParallel()
        super().__init__(optimizer=SGD(lr=0.1), context=context, name="W")
        self.w = nn.Parameter(torch.ones(2))


def test_a_rank_local_bad_loss_reaches_every_rank_through_the_gradients():
    """A rank whose loss alone is non-finite must not stop by itself (the others would
    wait in the next all-reduce): it makes its gradients NaN, so the all-reduce gives
    every rank NaN gradients, and all stop at this update; rank 0 prints for all, naming
    the rank whose loss it was."""
    alg = _W()
    x = torch.tensor([1.0, 2.0])
    loss = LossInfo(loss=(alg.w * x).sum() * torch.tensor(math.inf),
                    extra={"td_loss": torch.tensor(math.inf)})
    try:
        alg.update_with_gradient(loss)
    except NonFiniteError as e:
        assert e.alf_silent  # rank 1: rank 0 says it
        assert "the loss term Loss/W/td_loss (inf) on rank 1" in str(e), str(e)
    else:
        raise AssertionError("no NonFiniteError")
    assert torch.isnan(alg.w.grad).all()  # what the all-reduce carries to the other ranks
    assert torch.equal(alg.w.detach(), torch.ones(2))  # no step taken
