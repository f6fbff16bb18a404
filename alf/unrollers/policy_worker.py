"""A policy worker process: batched inference for the env groups of several env workers.

Started (``spawn``) by :class:`alf.unrollers.async_unroller.AsyncUnroller` when
``TrainerConfig.num_policy_workers > 0`` (Sample Factory's policy workers).
Policy worker ``p`` serves env workers ``w`` with ``w % P == p``. It rebuilds
the algorithm from the run's config text for the ``"policy"`` role (on
``TrainerConfig.device``), then loops:

1. wait on its pipes (the learner's and one per env worker served);
2. take every request that has arrived and act for all of them with one forward
   (:class:`~alf.unrollers.policy_server.PolicyServer`): in ``processes`` mode
   whatever is ready, at most one request per env group (a group has one in
   flight); in ``deterministic`` mode in a fixed order, one batch per
   ``(step n, group g)`` holding that step of every env worker served, so two
   runs form the same batches and draw the same random numbers;
3. reply to each env worker (its action is in its trajectory slot already).

Deterministic order: once every env worker served has a request queued, the batch is
every queued request with the smallest ``(order, group)`` key (``order``: the step's
run-wide index). Each env worker sends its requests in increasing key order, so no
request with that key can still come: the batches do not depend on arrival times.
No env worker is served a step beyond another's pending one, so none can run ahead
and wait on the learner for slots the others need; a restarted env worker (which
resumes at its first unconsumed trajectory) is served first until it catches up.

Messages:

- learner -> policy worker: ``("stop",)``; ``("env_worker", w)`` followed by a
  file descriptor (``multiprocessing.reduction.send_handle``): env worker ``w``
  was restarted, this is the pipe to its new incarnation.
- policy worker -> learner: ``("ready", pid)``, ``("error", text)``.
- env worker <-> policy worker: :class:`ActRequest` / :class:`ActReply`.

Faults: the learner watches the exit code and the heartbeat (a hung or killed
policy worker is named and restarted; the env workers it served get new pipes
and re-send the requests still in flight). Exit paths are the env worker's:
SIGINT/SIGTERM ignored, a watchdog ends the process once the learner is gone,
an exception is one ``error`` line and exit status 1.
"""
import dataclasses
import os
import signal
import time
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_connections
from multiprocessing.reduction import recv_handle
from typing import Any, Dict, List

import gin
import torch

from alf import config as alf_config
from alf.environments.env_specs import EnvSpecs
from alf.experiment import build_algorithm
from alf.unrollers.act_inbox import ActInbox
from alf.unrollers.env_worker import RUN_CONFIG, describe_exception
from alf.unrollers.policy_server import ActRequest, GroupKey, PolicyServer
from alf.unrollers.trajectory_slots import TrajectorySlots
from alf.unrollers.weight_channel import WeightChannel
from alf.utils.parent_watchdog import start_parent_watchdog
from alf.utils import precision
from alf.utils.process_name import set_process_name
from alf.utils.run_context import RunContext
from alf.utils.seeding import set_random_seed

WATCHDOG_PERIOD_S = 0.5
"""How often a policy worker checks that its learner is still alive (seconds)."""


@dataclasses.dataclass
class PolicyWorkerSpec:
    """Everything a policy worker needs (picklable; tensors travel as shared memory)."""
    worker_id: int
    incarnation: int
    config_text: str
    seed: int
    specs: EnvSpecs  # the raw env's specs (the algorithm is built from them)
    env_workers: List[int]  # the env workers served, in the deterministic order
    groups_per_worker: int
    inboxes: Dict[GroupKey, ActInbox]
    slots: Dict[GroupKey, TrajectorySlots]
    weights: WeightChannel
    heartbeat: torch.Tensor  # shared float64 [num_policy_workers]
    learner_pid: int
    deterministic: bool
    num_threads: int
    initial_collect_steps: int
    device: str = "cpu"  # where the forward runs (the learner's device, per rank)


class _Stop(BaseException):
    """The learner asked this policy worker to stop."""


class _Pipes:
    """The policy worker's pipes: the learner's and one per env worker served."""

    def __init__(self, spec: PolicyWorkerSpec, learner: Connection,
                 env_conns: Dict[int, Connection]):
        self._spec = spec
        self.learner = learner
        self.envs: Dict[int, Connection] = dict(env_conns)
        self.on_replaced = lambda worker: None  # a restarted env worker's old requests

    def beat(self) -> None:
        self._spec.heartbeat[self._spec.worker_id] = time.time()

    def _learner_message(self) -> None:
        msg = self.learner.recv()
        if msg[0] == "stop":
            raise _Stop()
        if msg[0] == "env_worker":  # a restarted env worker's new pipe
            old = self.envs.get(msg[1])
            self.envs[msg[1]] = Connection(recv_handle(self.learner))
            if old is not None:
                old.close()
            self.on_replaced(msg[1])  # its old incarnation's requests are void

    def wait_learner(self) -> None:
        """Idle while waiting for weights: beat, obey the learner."""
        self.beat()
        if self.learner.poll(0.005):
            self._learner_message()

    def requests(self, timeout: float) -> List[ActRequest]:
        """Every request that has arrived (waits up to ``timeout`` for the first)."""
        self.beat()
        ready = wait_connections([self.learner] + list(self.envs.values()), timeout)
        if self.learner in ready:
            while self.learner.poll():
                self._learner_message()
        out = []
        for w, conn in list(self.envs.items()):
            if conn not in ready:
                continue
            try:
                while conn.poll():
                    out.append(conn.recv())
            except (EOFError, OSError):
                # the env worker is gone: the learner restarts it and sends its new pipe
                conn.close()
                del self.envs[w]
        return out

    def reply(self, worker: int, reply: Any) -> None:
        conn = self.envs.get(worker)
        if conn is None:
            return
        try:
            conn.send(reply)
        except (OSError, ValueError):
            pass  # restarted: it re-sends what it still needs


class _Batcher:
    """Which queued requests to serve next (see the module docstring)."""

    def __init__(self, spec: PolicyWorkerSpec):
        self._deterministic = spec.deterministic
        self._workers = list(spec.env_workers)
        self._queued: Dict[GroupKey, ActRequest] = {}

    def add(self, requests: List[ActRequest]) -> None:
        for r in requests:
            self._queued[(r.worker, r.group)] = r  # a group has one request in flight

    def forget(self, worker: int) -> None:
        """Drop the requests of an env worker that was restarted."""
        self._queued = {k: r for k, r in self._queued.items() if k[0] != worker}

    def take(self) -> List[ActRequest]:
        """The next batch (empty: nothing to serve yet); see the module docstring."""
        if not self._deterministic:
            batch = sorted(self._queued.values(), key=lambda r: (r.worker, r.group))
            self._queued.clear()
            return batch
        waiting = {w for w, _ in self._queued}
        if not self._queued or any(w not in waiting for w in self._workers):
            return []
        key = min((r.order, r.group) for r in self._queued.values())
        batch = sorted((r for r in self._queued.values() if (r.order, r.group) == key),
                       key=lambda r: r.worker)
        for r in batch:
            del self._queued[(r.worker, r.group)]
        return batch


def policy_worker_main(spec: PolicyWorkerSpec, learner: Connection,
                       env_conns: Dict[int, Connection]) -> None:
    """Process entry point (module level: ``spawn`` pickles it by reference)."""
    for stop in (signal.SIGINT, signal.SIGTERM):  # the learner decides how to stop
        signal.signal(stop, signal.SIG_IGN)
    set_process_name(f"alf-policy-{spec.worker_id}")
    start_parent_watchdog(parent_pid=spec.learner_pid, period_s=WATCHDOG_PERIOD_S,
                          name="alf-learner-watchdog")
    torch.set_num_threads(max(1, spec.num_threads))
    set_random_seed((spec.seed + 104_729 * (spec.worker_id + 1)) % (2 ** 31))
    pipes = _Pipes(spec, learner, env_conns)
    failed = False
    try:
        alf_config.parse_config(config_text=spec.config_text, config_name="<run config>")
        config = gin.get_configurable(RUN_CONFIG)()
        config.device = spec.device  # a data-parallel rank's own device (cuda:<local rank>)
        algorithm = build_algorithm(config, spec.specs, "policy", RunContext())
        server = PolicyServer(algorithm, spec.weights, dict(spec.inboxes), dict(spec.slots),
                              spec.initial_collect_steps, wait=pipes.wait_learner,
                              device=config.device)
        batcher = _Batcher(spec)
        pipes.on_replaced = batcher.forget
        learner.send(("ready", os.getpid()))
        # bf16 acting: each weight is cast once per version (the server drops the casts
        # when it loads new weights), not once per batch
        with precision.keep_weight_casts(precision.act_dtype_of(algorithm)):
            while True:
                batcher.add(pipes.requests(0.05))
                batch = batcher.take()
                while batch:
                    for request, reply in zip(batch, server.act(batch)):
                        pipes.reply(request.worker, reply)
                    batch = batcher.take()
    except _Stop:
        pass
    except BaseException as e:  # noqa: BLE001 - reported to the learner, which decides
        failed = True
        try:
            learner.send(("error", describe_exception(e)))
        except (OSError, EOFError):
            pass
    if failed:
        os._exit(1)  # no traceback on stderr: the learner logs the one line above
