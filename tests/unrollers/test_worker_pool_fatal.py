"""A fatal report (e.g. a NaN observation) from a worker that is being restarted stops the
run with that report: it is not retried as "failed to restart" up to the restart limit
(alf.unrollers.worker_pool)."""
import types

import pytest

from alf.errors import RunFailedError
from alf.unrollers.worker_pool import FatalWorkerError, WorkerHandle, WorkerPool


def _pool(wait_ready_error: Exception) -> types.SimpleNamespace:
    """The state :meth:`WorkerPool.restart` reads, with the process calls stubbed."""
    launches = []

    def wait_ready():
        raise wait_ready_error

    pool = types.SimpleNamespace(
        restarts=0, _max_restarts=5, _per_group=1, _restart_note="fresh envs",
        _give_up_hint="", _on_restart=lambda w: None,
        _stop_process=lambda w, timeout: None, _launch=launches.append,
        _wait_ready=wait_ready, launches=launches)
    pool.restart = lambda w, reason: WorkerPool.restart(pool, w, reason)
    return pool


def test_a_fatal_report_during_a_restart_stops_at_once(capsys):
    pool = _pool(FatalWorkerError("Environment 'X' env 0 (of 1) returned a NaN observation"))
    with pytest.raises(FatalWorkerError, match="returned a NaN observation"):
        pool.restart(WorkerHandle(0, [0], []), "crashed")
    assert len(pool.launches) == 1 and pool.restarts == 1


def test_a_failed_relaunch_is_still_retried_up_to_the_limit(capsys):
    pool = _pool(RunFailedError("env worker 0 exited with status 1"))
    with pytest.raises(RunFailedError, match="restart 6 of at most 5") as info:
        pool.restart(WorkerHandle(0, [0], []), "crashed")
    assert not isinstance(info.value, FatalWorkerError)
    assert len(pool.launches) == 5
