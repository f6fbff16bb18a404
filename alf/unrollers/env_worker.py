"""An env worker process: rebuild the experiment from the config text, then produce trajectories.

Started (``spawn``) by :class:`alf.unrollers.async_unroller.AsyncUnroller`. The
process has no state of its own beyond what :class:`WorkerSpec` carries: the
run's config text (gin, with the resolved seed), its env groups' env-id
offsets and seed, and the shared-memory trajectory slots, weight channel and
heartbeat array. It talks to the learner over one duplex pipe (one per
worker, so a worker killed mid-message breaks only its own pipe):

- worker -> learner: ``("ready", pid)``, ``("traj", Trajectory)``, ``("error", text)``,
  ``("fatal", text)`` (an error a restart cannot fix: the run stops with ``text``)
- learner -> worker: ``("free", group, slot)`` when a trajectory has been read,
  ``("stop",)``.

Exit paths: ``stop`` ends the loop and closes the envs; an exception is
reported as one ``error`` line (``fatal`` for :data:`FATAL_ERRORS`: an env's NaN/inf
value, which the learner does not restart the worker for) and the process exits 1; SIGINT is ignored
(the learner handles Ctrl-C and stops its workers); a watchdog thread ends the
process within a second once the learner is gone (even by SIGKILL), so no
orphan outlives it.

Configuration: the worker reads its own settings from :class:`ActorSettings`
(built by the learner from its TrainerConfig). The algorithm it builds needs the
whole config, which the worker rebuilds from the config text: it parses the
text with gin and instantiates the configurable the text binds,
:data:`RUN_CONFIG` (``TrainerConfig``), by name, as every gin consumer does. So
this module needs nothing from :mod:`alf.trainers` (the trainers sit above the
unrollers); ``alf/_registry.py`` registers the configurable before any parse.
"""
import dataclasses
import os
import signal
import time
import traceback
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_connections
from multiprocessing.reduction import recv_handle
from typing import Any, Dict, List, Optional

import gin
import torch

from alf import config as alf_config
from alf.environments import create_environment
from alf.errors import EnvRaisedError, NonFiniteEnvValueError
from alf.experiment import EnvSpecs, build_algorithm
from alf.unrollers.act_inbox import ActInbox
from alf.unrollers.actor_worker import ActorWorker
from alf.unrollers.env_stepper import EnvStepper, PolicyLink
from alf.unrollers.policy_server import ActReply, ActRequest
from alf.unrollers.trajectory_slots import TrajectorySlots
from alf.unrollers.weight_channel import WeightChannel
from alf.utils.parent_watchdog import start_parent_watchdog
from alf.utils.process_name import set_process_name
from alf.utils.run_context import RunContext
from alf.utils.seeding import set_random_seed

WATCHDOG_PERIOD_S = 0.5
"""How often a worker checks that its learner is still alive (seconds)."""

#: the gin configurable a worker instantiates, after parsing the run's config text, to get
#: the run's full config (the algorithm is built from it)
RUN_CONFIG = "TrainerConfig"


@dataclasses.dataclass(frozen=True)
class ActorSettings:
    """The slice of the run's config an env worker reads itself (picklable, immutable).

    Attributes:
        deterministic: ``TrainerConfig.async_mode == "deterministic"``: trajectory ``seq``
            is collected with the weights :func:`version_for_seq` names.
        update_period: ``TrainerConfig.unroll_parameter_update_period`` (at least 1):
            iterations between weight publications.
        num_threads: ``TrainerConfig.env_worker_threads``: torch intra-op threads and
            env-engine threads per group.
        initial_collect_steps: ``TrainerConfig.initial_collect_steps``: act randomly while
            the learner's env steps are below it.
        overwrite_policy_output: ``TrainerConfig.overwrite_policy_output``: the envs report
            the action they executed, and it replaces the stored one.
    """
    deterministic: bool = False
    update_period: int = 1
    num_threads: int = 1
    initial_collect_steps: int = 0
    overwrite_policy_output: bool = False


@dataclasses.dataclass
class WorkerSpec:
    """Everything an env worker needs (picklable; tensors travel as shared memory);
    ``settings`` is the slice of the run's config it reads."""
    worker_id: int
    incarnation: int  # 0, then +1 per restart
    config_text: str
    seed: int  # sub-env i of a group with offset o is seeded seed + o + i
    envs_per_group: int
    env_id_offsets: List[int]
    slots: List[TrajectorySlots]
    weights: WeightChannel
    heartbeat: torch.Tensor  # shared float64 [num_workers]: time.time() of the last step
    first_seq: int  # sequence number of this incarnation's first trajectory
    learner_pid: int
    settings: ActorSettings  # the config slice the worker reads
    base_version: int = 0  # the learner's version when the run (or resume) started
    # policy workers act for this worker: per group, its inbox (None: in-worker inference)
    inboxes: Optional[List[ActInbox]] = None


class _Stop(BaseException):
    """The learner asked this worker to stop."""


def version_for_seq(seq: int, update_period: int, base_version: int = 0) -> int:
    """Deterministic mode: the weights trajectory ``seq`` is collected with: the newest
    version published once the learner has trained on trajectory ``seq - 2``, i.e. one
    version behind the learner that will train on it (versions are published every
    ``update_period`` iterations; ``base_version`` is the learner's at the start)."""
    return base_version + max(0, ((seq - 1) // update_period) * update_period)


class _LearnerLink:
    """The worker's end of its pipe: free slots, stop requests, heartbeat."""

    def __init__(self, spec: WorkerSpec, conn: Connection):
        self._spec = spec
        self._conn = conn
        self._free: List[List[int]] = [list(range(s.num_slots)) for s in spec.slots]
        self._last_poll = 0.0
        self.on_policy_pipe = lambda conn: None  # a restarted policy worker's new pipe

    @property
    def conn(self) -> Connection:
        return self._conn

    def _handle(self, msg: Any) -> None:
        if msg[0] == "stop":
            raise _Stop()
        if msg[0] == "free":
            self._free[msg[1]].append(msg[2])
        elif msg[0] == "policy":  # followed by the pipe's file descriptor
            self.on_policy_pipe(Connection(recv_handle(self._conn)))

    def take_messages(self) -> None:
        """Handle every learner message waiting now."""
        while self._conn.poll():
            self._handle(self._conn.recv())

    def poll(self) -> None:
        """Beat the heart and take any learner messages (cheap; at most every 20 ms)."""
        now = time.time()
        self._spec.heartbeat[self._spec.worker_id] = now
        if now - self._last_poll < 0.02:
            return
        self._last_poll = now
        while self._conn.poll():
            self._handle(self._conn.recv())

    def wait(self) -> None:
        """Wait briefly for a learner message (the worker is idle, not hung)."""
        self._spec.heartbeat[self._spec.worker_id] = time.time()
        if self._conn.poll(0.005):
            self._handle(self._conn.recv())

    def acquire_slot(self, group: int) -> int:
        while not self._free[group]:
            self.wait()
        return self._free[group].pop(0)

    def send(self, msg: Any) -> None:
        self._conn.send(msg)


class _PipePolicyLink(PolicyLink):
    """An env worker's pipe to its policy worker. Requests in flight are kept until
    answered, and re-sent when a restarted policy worker's new pipe arrives (through the
    learner link); while waiting, the worker beats its heart and obeys the learner."""

    def __init__(self, conn: Connection, learner: _LearnerLink, heartbeat: Any):
        self._conn: Optional[Connection] = conn
        self._learner = learner
        self._heartbeat = heartbeat
        self._in_flight: Dict[int, ActRequest] = {}
        self._replies: Dict[int, ActReply] = {}
        learner.on_policy_pipe = self._replace

    def _replace(self, conn: Connection) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = conn
        for request in self._in_flight.values():  # the dead worker's work, again
            self._send(request)

    def _send(self, request: ActRequest) -> None:
        try:
            self._conn.send(request)
        except (OSError, ValueError):  # the policy worker is gone: re-sent on its restart
            pass

    def request(self, request: ActRequest) -> None:
        self._in_flight[request.group] = request
        if self._conn is not None:
            self._send(request)

    def wait_reply(self, group: int) -> ActReply:
        while group not in self._replies:
            self._heartbeat()
            conns = [self._learner.conn] + ([self._conn] if self._conn is not None else [])
            ready = wait_connections(conns, 0.05)
            if self._learner.conn in ready:
                self._learner.take_messages()
            if self._conn is not None and self._conn in ready:
                try:
                    while self._conn.poll():
                        reply = self._conn.recv()
                        if reply.group in self._in_flight and \
                                self._in_flight[reply.group].n == reply.n:
                            del self._in_flight[reply.group]
                            self._replies[reply.group] = reply
                except (EOFError, OSError):  # the policy worker died: wait for its successor
                    self._conn.close()
                    self._conn = None
        return self._replies.pop(group)


def build_actor(spec: WorkerSpec, link: Any, serial_config: Any = None) -> ActorWorker:
    """The :class:`ActorWorker` of ``spec``: env groups and a rollout copy of the algorithm.

    ``serial_config``: the parsed TrainerConfig when running in the learner's process
    (serial mode: gin is already parsed); None in a worker process (parse the text)."""
    if serial_config is None:
        alf_config.parse_config(config_text=spec.config_text, config_name="<run config>")
        config = gin.get_configurable(RUN_CONFIG)()  # TrainerConfig() (module docstring)
    else:
        config = serial_config
    settings = spec.settings
    envs = _build_envs(spec)
    try:
        algorithm = build_algorithm(config, EnvSpecs.of(envs[0]), "actor", RunContext())
        return ActorWorker(algorithm, envs, spec.slots, spec.weights, link.acquire_slot,
                           version_for_seq=_deterministic_versions(spec), wait=link.wait,
                           heartbeat=link.poll,
                           initial_collect_steps=settings.initial_collect_steps,
                           overwrite_policy_output=settings.overwrite_policy_output)
    except BaseException:
        for env in envs:
            env.close()
        raise


def _build_envs(spec: WorkerSpec) -> List[Any]:
    """The worker's env groups (closed again if one of them fails to build)."""
    envs: List[Any] = []
    try:
        for offset in spec.env_id_offsets:
            envs.append(create_environment(num_parallel_environments=spec.envs_per_group,
                                           seed=spec.seed, env_id_offset=offset,
                                           num_threads=spec.settings.num_threads,
                                           report_executed_action=(
                                               spec.settings.overwrite_policy_output)))
        return envs
    except BaseException:
        for env in envs:
            env.close()
        raise


def _deterministic_versions(spec: WorkerSpec) -> Optional[Any]:
    """Deterministic mode: ``fn(seq) -> version`` of trajectory ``seq``; else None."""
    settings = spec.settings
    if not settings.deterministic:
        return None
    return lambda seq: version_for_seq(seq + spec.first_seq, settings.update_period,
                                       spec.base_version)


def build_stepper(spec: WorkerSpec, learner: Any, policy: PolicyLink,
                  pin_newest: bool = False) -> EnvStepper:
    """The :class:`EnvStepper` of ``spec`` (policy workers act for it): env groups only.
    The config is parsed already (``create_environment`` reads it). ``pin_newest``
    (serial mode): each trajectory is acted with the newest weights at its start, as an
    :class:`ActorWorker` does; otherwise the newest at each step (or, deterministic, the
    exact version)."""
    wanted = _deterministic_versions(spec)
    if pin_newest and wanted is None:
        wanted = lambda seq: spec.weights.latest_version()  # noqa: E731
    return EnvStepper(spec.worker_id, _build_envs(spec), spec.slots, spec.inboxes, policy,
                      learner.acquire_slot, version_for_seq=wanted, heartbeat=learner.poll,
                      first_seq=spec.first_seq,
                      overwrite_policy_output=spec.settings.overwrite_policy_output)


# errors a worker restarted with fresh envs would meet again, or that the run's contract
# says stop it: the learner raises RunFailedError with the message (one line, exit 1)
FATAL_ERRORS = (NonFiniteEnvValueError,)


def describe_exception(e: BaseException) -> str:
    """``"Type: message (at file.py:line)"``: the one line a worker reports (for an env's
    own exception named by EnvRaisedError, the line of the env's code that raised)."""
    origin = e.__cause__ if isinstance(e, EnvRaisedError) and e.__cause__ is not None else e
    where = traceback.extract_tb(origin.__traceback__)
    frame = where[-1] if where else None
    text = f"{type(e).__name__}: {e}"
    if frame is not None:
        text += f" (at {os.path.basename(frame.filename)}:{frame.lineno})"
    return text


def _build(spec: WorkerSpec, link: _LearnerLink, policy_conn: Optional[Connection]) -> Any:
    if spec.inboxes is None:
        return build_actor(spec, link)
    alf_config.parse_config(config_text=spec.config_text, config_name="<run config>")
    return build_stepper(spec, link, _PipePolicyLink(policy_conn, link, link.poll))


def worker_main(spec: WorkerSpec, conn: Connection,
                policy_conn: Optional[Connection] = None) -> None:
    """Process entry point (module level: ``spawn`` pickles it by reference)."""
    for stop in (signal.SIGINT, signal.SIGTERM):  # the learner decides how to stop
        signal.signal(stop, signal.SIG_IGN)
    set_process_name(f"alf-env-{spec.worker_id}")
    # the learner gone (even by SIGKILL): so are we, at once (no orphans)
    start_parent_watchdog(parent_pid=spec.learner_pid, period_s=WATCHDOG_PERIOD_S,
                          name="alf-learner-watchdog")
    torch.set_num_threads(max(1, spec.settings.num_threads))
    # the actor's own sampling stream (exploration): per worker and incarnation
    set_random_seed((spec.seed + 7919 * (spec.worker_id + 1)) % (2 ** 31))
    link = _LearnerLink(spec, conn)
    worker = None
    failed = False
    try:
        worker = _build(spec, link, policy_conn)
        link.send(("ready", os.getpid()))
        seq_offset = spec.first_seq
        while True:
            for traj in worker.run_round():
                link.send(("traj", traj._replace(seq=traj.seq + seq_offset)))
    except _Stop:
        pass
    except BaseException as e:  # noqa: BLE001 - reported to the learner, which decides
        failed = True
        try:
            link.send(("fatal", str(e)) if isinstance(e, FATAL_ERRORS) else
                      ("error", describe_exception(e)))
        except (OSError, EOFError):
            pass
    finally:
        if worker is not None:
            worker.close()
    if failed:
        os._exit(1)  # no traceback on stderr: the learner logs the one line above
