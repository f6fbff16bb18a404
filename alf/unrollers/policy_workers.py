"""The learner's side of policy workers: their processes and the pipes to env workers.

Policy worker ``p`` serves env workers ``w`` with ``w % P == p``; each such pair
has one duplex pipe (requests and replies only: observations, actions and
states stay in shared memory). The learner creates the pipes and owns the
restarts, so a restart on either side gets a fresh pipe:

- an env worker restarted: its new process gets its end at spawn; the policy
  worker gets the other end through its learner pipe (``("env_worker", w)``,
  then the descriptor, ``multiprocessing.reduction.send_handle``);
- a policy worker restarted: its new process gets its ends at spawn; each env
  worker it serves gets the other end through its learner pipe (``("policy",)``,
  then the descriptor) and re-sends the requests the dead worker left unanswered.

:func:`resolve_num_policy_workers` picks the default (``num_policy_workers=None``).
"""
import sys
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from multiprocessing.reduction import send_handle
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from alf.unrollers.policy_worker import PolicyWorkerSpec, policy_worker_main
from alf.unrollers.worker_pool import WorkerHandle, WorkerPool

def resolve_num_policy_workers(requested: Optional[int], device: str) -> Tuple[int, str]:
    """The policy worker count to use, and the log line that says so.

    ``requested`` None means in-worker inference (0), on every machine, which also keeps a
    run's results independent of the machine's size. Measured on 16 CPUs with an H100
    (Breakout, 96 envs in 12 env workers, Nature CNN): in-worker inference pushed 1.41x
    the frames/s of one policy worker and 1.13x of two; a policy worker is one process
    doing every env worker's round trip and batch assembly, and it caps the run. On a CPU
    learner the learner's threads cap the run first, so policy workers add a process and
    a round trip per step for nothing (docs/async.md, "Past this machine"). They pay when
    a network's CPU inference in every env worker costs more than that round trip (a
    large encoder with the learner on a GPU): then set the count."""
    if requested is not None:
        count, why = int(requested), f"num_policy_workers={requested}"
    else:
        where = ("the learner is on " + str(device) if str(device).startswith("cuda")
                 else "a CPU learner")
        count, why = 0, (f"num_policy_workers=None: {where}; in-worker inference measured "
                         "fastest, docs/async.md")
    if count == 0:
        return 0, f"[alf] async unroll: each env worker acts with its own policy copy ({why})"
    return count, (f"[alf] async unroll: {count} policy worker(s) act for the env workers "
                   f"({why})")


class PolicyWorkerHandle:
    """Learner-side record of one policy worker (process, pipe, restarts)."""

    def __init__(self, worker_id: int, env_workers: List[int]):
        self.worker_id = worker_id
        self.env_workers = env_workers
        self.process: Any = None
        self.conn: Any = None
        self.incarnation = -1
        self.ready = False

    @property
    def process_name(self) -> str:
        return f"alf-policy-worker-{self.worker_id}"

    def describe(self, envs_per_group: int = 0) -> str:
        served = ", ".join(str(w) for w in self.env_workers)
        pid = f", pid {self.process.pid}" if self.process is not None else ""
        return f"policy worker {self.worker_id} (serves env worker(s) {served}{pid})"


class PolicyWorkers:
    """Policy worker processes and their pipes to the env workers (module docstring).

    Args:
        count: policy workers ``P`` (at least 1, at most the env worker count).
        env_workers: the env workers' handles (their learner pipes carry new pipes).
        make_spec: ``fn(handle) -> PolicyWorkerSpec`` for a policy worker's next launch.
        heartbeat: shared float64 ``[P]``.
        envs_per_group: for messages.
        timeout_s: start-up limit and hang limit (``env_worker_timeout_s``).
        max_restarts: policy worker restarts before the run fails.
    """

    def __init__(self, count: int, env_workers: List[WorkerHandle],
                 make_spec: Callable[[PolicyWorkerHandle], PolicyWorkerSpec],
                 heartbeat: torch.Tensor, envs_per_group: int, timeout_s: float,
                 max_restarts: int):
        self._env_workers = env_workers
        self.handles = [PolicyWorkerHandle(p, [w.worker_id for w in env_workers
                                               if w.worker_id % count == p])
                        for p in range(count)]
        # the first launch's pipes: (env end, policy end) per env worker
        self._initial: Dict[int, Tuple[Connection, Connection]] = {
            w.worker_id: Pipe(duplex=True) for w in env_workers}
        self.pool = WorkerPool(self.handles, make_spec, heartbeat, envs_per_group, timeout_s,
                               max_restarts, target=policy_worker_main,
                               extra_args=self._policy_args,
                               restart_note="restarting it (the env workers it serves re-send "
                                            "the requests it left unanswered",
                               give_up_hint="Look for the cause in the policy's rollout_step "
                                            "(or its device), or raise the limit (counted "
                                            "separately for env and policy workers)")

    def serving(self, env_worker: int) -> PolicyWorkerHandle:
        """The policy worker that acts for ``env_worker``."""
        return self.handles[env_worker % len(self.handles)]

    def env_args(self, w: WorkerHandle) -> Tuple[Connection]:
        """The spawn argument of env worker ``w``'s next launch: its pipe end to its policy
        worker (a relaunch gets a fresh pipe, whose other end goes to the policy worker)."""
        if w.incarnation == 0:
            return (self._initial[w.worker_id][0],)
        env_end, policy_end = Pipe(duplex=True)
        policy = self.serving(w.worker_id)
        self._pass(policy.conn, ("env_worker", w.worker_id), policy_end, policy.process)
        return (env_end,)

    def _policy_args(self, p: PolicyWorkerHandle) -> Tuple[Dict[int, Connection]]:
        if p.incarnation == 0:
            return ({w: self._initial[w][1] for w in p.env_workers},)
        ends = {}
        for w in p.env_workers:
            env_end, ends[w] = Pipe(duplex=True)
            handle = self._env_workers[w]
            self._pass(handle.conn, ("policy",), env_end, handle.process)
        return (ends,)

    @staticmethod
    def _pass(learner_conn: Any, message: tuple, end: Connection, process: Any) -> None:
        """Hand the pipe end ``end`` to a running worker over its learner pipe (a dead
        worker gets a fresh pipe when it is restarted)."""
        try:
            if learner_conn is not None and process is not None and process.exitcode is None:
                learner_conn.send(message)
                send_handle(learner_conn, end.fileno(), process.pid)
        except (OSError, ValueError):
            pass
        finally:
            end.close()

    def pids(self) -> List[int]:
        return [h.process.pid for h in self.handles
                if h.process is not None and h.process.pid is not None]

    def close(self) -> None:
        self.pool.close()
        for env_end, policy_end in self._initial.values():
            for end in (env_end, policy_end):
                if not end.closed:
                    end.close()
