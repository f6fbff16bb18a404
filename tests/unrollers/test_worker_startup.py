"""``WorkerPool`` start-up limit (alf/unrollers/worker_pool.py): a worker that is still
busy starting when ``env_worker_timeout_s`` runs out (a busy machine) gets more time; one
that does not use the CPU (hung) is named at the limit."""
import time

import pytest
import torch

from alf.errors import RunFailedError
from alf.unrollers.worker_pool import WorkerHandle, WorkerPool

import startup_targets


def _pool(target, seconds, timeout_s=1.0):
    handle = WorkerHandle(0, [0], [])
    return WorkerPool([handle], make_spec=lambda w: None,
                      heartbeat=torch.zeros(1, dtype=torch.float64), envs_per_group=1,
                      timeout_s=timeout_s, max_restarts=0,
                      target=target, extra_args=lambda w: (seconds,))


def test_a_busy_slow_start_is_given_more_time():
    pool = _pool(startup_targets.slow_but_busy, 2.5)
    try:
        t0 = time.monotonic()
        pool.start()  # 2.5 s of CPU against a 1 s limit: extended, not named
        assert pool.workers[0].ready and time.monotonic() - t0 >= 2.0
    finally:
        pool.close(timeout=1.0)


def test_a_hung_start_is_named_at_the_limit():
    pool = _pool(startup_targets.hung, 0)
    try:
        t0 = time.monotonic()
        # the interpreter's own start-up uses the CPU (an extension or a few on a busy
        # machine); then the worker is idle and named
        with pytest.raises(RunFailedError, match=r"env worker 0 \(envs 0-0, pid \d+\) did not "
                                                 r"start within \d+ s \(TrainerConfig.env_worker"
                                                 r"_timeout_s = 1; not using the CPU: hung"):
            pool.start()
        assert time.monotonic() - t0 < 15
    finally:
        pool.close(timeout=1.0)
