"""Asynchronous unrolling: env worker processes act while the learner trains.

Process model (``docs/design/async_unroll.md``; user guide ``docs/async.md``)::

    learner process (Trainer)                      env worker w (spawned, one per
    ------------------------                       TrainerConfig.num_env_workers)
    collect(): wait on the workers' pipes   <----  ("traj", group, slot, seq, version, episodes)
               copy slot -> [T+1, B] batch          groups 0..G-1 stepped double-buffered,
               ("free", group, slot)  -------->     rollout copy of the algorithm
    train on the batch (replay / whole)             writes steps into shared-memory slots
    after_train_iter(): publish weights  ---shm-->  reads the newest (or the exact) version
                                                    at each trajectory boundary

Modes (``TrainerConfig.async_mode``):
    ``"processes"``: the learner takes whatever trajectories are ready (arrival
        order); lag is measured per trajectory and ``max_policy_lag`` discards stale ones.
    ``"deterministic"``: the same processes, but trajectory ``k`` of every group is
        collected with exactly the weights published after iteration ``k - 1`` (one
        version behind the learner that trains on it) and the learner consumes them in
        a fixed order: two runs with one seed give bit-identical parameters.
    ``"serial"``: the same :class:`ActorWorker` in the learner's process (no
        processes, no shared memory): for tests and debuggers (breakpoints work).

Faults: a worker that raises, exits (e.g. SIGKILL) or stops beating its heart
for ``env_worker_timeout_s`` is named in the log, stopped and restarted with
fresh envs (its partial trajectory is discarded), up to
``max_env_worker_restarts`` restarts in all; past that, :class:`RunFailedError`.
"""
import math
import os
import sys
import time
from collections import deque
from typing import Any, Deque, Dict, List, Optional, Tuple

import gin
import torch

from alf import nest as alf_nest
from alf.environments import create_environment
from alf.errors import RunFailedError
from alf.experiment import EnvSpecs, build_algorithm
from alf.metrics import EpisodeMetrics
from alf.unrollers.act_inbox import ActInbox
from alf.unrollers.actor_worker import Trajectory
from alf.unrollers.env_groups import split_envs
from alf.unrollers.async_settings import AsyncSettings
from alf.unrollers.env_worker import WorkerSpec, build_actor, build_stepper
from alf.unrollers.policy_server import PolicyServer
from alf.unrollers.policy_worker import PolicyWorkerSpec
from alf.unrollers.policy_workers import (PolicyWorkerHandle, PolicyWorkers,
                                          resolve_num_policy_workers)
from alf.unrollers.serial_policy import DirectPolicyLink, SerialLink
from alf.unrollers.trajectory_slots import TrajectorySlots
from alf.unrollers.unroll_result import UnrollResult
from alf.unrollers.weight_channel import WeightChannel
from alf.unrollers.worker_pool import WorkerHandle, WorkerPool, raise_if_fatal
from alf.utils.process_signals import sigint_ignored_in_children
from alf.utils.run_context import RunContext

MODES = ("processes", "deterministic", "serial")
SLOT_MEMORY_BUDGET = 1 << 30  # bytes of trajectory slots at most (unroll_queue_size is capped)
RESTART_SEED_STRIDE = 1_000_003


def configured_num_envs() -> int:
    """``create_environment.num_parallel_environments`` as configured (default 1)."""
    try:
        return int(gin.query_parameter("create_environment.num_parallel_environments"))
    except ValueError:
        return 1


def _bound(selector: str) -> bool:
    """Whether the parsed config binds ``selector`` (else its default applies)."""
    try:
        gin.query_parameter(selector)
        return True
    except ValueError:
        return False


def probe_env_specs() -> EnvSpecs:
    """The configured env's specs, from a one-env copy built and closed at once (the
    learner of an async run steps no env itself)."""
    with sigint_ignored_in_children():
        env = create_environment(num_parallel_environments=1)
    try:
        return EnvSpecs.of(env)
    finally:
        env.close()



class AsyncUnroller:
    """The Trainer's unroller when ``TrainerConfig.async_unroll=True`` (module docstring).

    Args:
        settings: the :class:`AsyncSettings` (``AsyncSettings.from_config(trainer_config)``).
        config_text: the run's full gin text (resolved seed included); workers parse it.
        specs: the raw env specs (from :func:`probe_env_specs`).
        context: the learner's run context (counters shipped with the weights;
            summaries written to it).
        run_config: the parsed TrainerConfig, from which serial mode builds its in-process
            actor's algorithm (the process modes re-parse ``config_text`` in the workers).
    """

    def __init__(self, settings: AsyncSettings, config_text: str, specs: EnvSpecs, context: Any,
                 run_config: Any = None):
        config = self._config = settings
        if settings.async_mode == "serial" and run_config is None:
            raise ValueError("AsyncUnroller in serial mode needs run_config (the parsed "
                             "TrainerConfig its in-process actor is built from)")
        self._run_config = run_config  # serial mode builds its actor from the parsed config
        self._config_text = config_text
        self._specs = specs
        self._context = context
        self._mode = config.async_mode
        self._num_envs = configured_num_envs()
        workers = 1 if self._mode == "serial" else int(config.num_env_workers)
        split = split_envs(self._num_envs, workers, int(config.env_groups_per_worker),
                           groups_set=_bound("TrainerConfig.env_groups_per_worker"))
        self._split_note = split.note  # printed when the workers start
        self._num_workers, self._groups, self._per_group = workers, split.groups, split.per_group
        self._num_policy, self._policy_why = resolve_num_policy_workers(
            config.num_policy_workers, config.device)
        self._num_policy = min(self._num_policy, workers)  # each serves at least one
        self._policy: Optional[PolicyWorkers] = None
        self._policy_heartbeat: Optional[torch.Tensor] = None
        length = int(config.unroll_length) if config.unroll_length else int(config.max_unroll_length)
        self._take_all_ready = not config.unroll_length
        self._T = length
        self._seed = int(config.random_seed or 0)
        # a data-parallel rank's envs: ids (and so seeds) after the lower ranks' envs
        self._env_id_base = 0
        self._rank_seed_offset = 0
        self._stash_statistics = False  # data-parallel: merged over ranks, not here
        self._statistics: List[Any] = []
        self._metrics = EpisodeMetrics(self._num_envs, config.metric_buffer_size)
        self._version = self._base_version = 0  # finished train iterations (+ restored)
        self._workers: List[WorkerHandle] = []
        self._pool: Optional[WorkerPool] = None
        self._weights: Optional[WeightChannel] = None
        self._algorithm = None
        self._heartbeat: Optional[torch.Tensor] = None
        self._serial_actor = None
        self._started = False
        self._closed = False
        self._discarded = 0
        self._lags: List[int] = []
        self._pending: Dict[Tuple[int, int, int], Tuple[Any, Trajectory]] = {}
        self._backlog: Deque[Tuple[WorkerHandle, int, Trajectory]] = deque()

    # ----------------------------------------------------------- unroller API
    @property
    def metrics(self) -> EpisodeMetrics:
        return self._metrics

    @property
    def batch_size(self) -> int:
        return self._num_envs

    @property
    def env_name(self) -> str:
        return self._specs.env_name

    def time_step_spec(self) -> Any:
        return self._specs.time_step_spec

    def observation_spec(self) -> Any:
        return self._specs.observation_spec

    def action_spec(self) -> Any:
        return self._specs.action_spec

    def worker_pids(self) -> List[int]:
        """Process ids of the live env and policy worker processes (none in serial mode)."""
        pids = [w.process.pid for w in self._workers
                if w.process is not None and w.process.pid is not None]
        return pids + (self._policy.pids() if self._policy is not None else [])

    @property
    def num_policy_workers(self) -> int:
        """Policy workers acting for the env workers (0: in-worker inference)."""
        return self._num_policy

    @property
    def restarts(self) -> int:
        """Env and policy worker restarts so far (all workers)."""
        env = self._pool.restarts if self._pool is not None else 0
        return env + (self._policy.pool.restarts if self._policy is not None else 0)

    @property
    def discarded_trajectories(self) -> int:
        """Trajectories dropped for exceeding ``max_policy_lag``."""
        return self._discarded

    @property
    def env_id_base(self) -> int:
        """``TimeStep.env_id`` of this unroller's first env (a rank's share of the run's envs)."""
        return self._env_id_base

    def set_rank(self, rank: int, seed_stride: int) -> None:
        """Data-parallel rank ``rank``: env ids start at ``rank x num_envs``, worker seeds
        are offset by ``rank x seed_stride`` and the statistics the workers ship are kept
        for :meth:`pop_statistics` (the ranks merge them together). Before the first
        :meth:`collect`."""
        self._env_id_base = rank * self._num_envs
        self._rank_seed_offset = rank * seed_stride
        self._seed += self._rank_seed_offset
        self._stash_statistics = True

    def pop_statistics(self) -> List[Any]:
        """Normaliser statistics the workers shipped since the last call, in the order
        they were used (data-parallel runs only; otherwise they are merged at once)."""
        out, self._statistics = self._statistics, []
        return out

    def seed(self, seed: int) -> None:
        """Seed the workers' envs (before they start: used on resume)."""
        self._seed = int(seed) + self._rank_seed_offset

    def connect(self, algorithm: Any, spec: Any) -> None:
        """Allocate slots and the weight channel for ``algorithm`` (the learner's,
        prepared) whose :class:`Experience` step spec is ``spec`` (no batch dim); workers
        start at the first :meth:`collect`."""
        self._algorithm = algorithm
        shared = self._mode != "serial"
        probe = TrajectorySlots(spec, 1, self._T + 1, self._per_group, shared=False)
        wanted = max(2, math.ceil(self._config.unroll_queue_size / (self._num_workers * self._groups)))
        affordable = max(2, SLOT_MEMORY_BUDGET // max(1, probe.nbytes * self._num_workers * self._groups))
        self._slots_per_group = min(wanted, affordable)
        for w in range(self._num_workers):
            offsets = [self._env_id_base + (w * self._groups + g) * self._per_group
                       for g in range(self._groups)]
            slots = [TrajectorySlots(spec, self._slots_per_group, self._T + 1, self._per_group,
                                     shared=shared) for _ in range(self._groups)]
            handle = WorkerHandle(w, offsets, slots)
            if self._num_policy:
                handle.inboxes = [ActInbox(self._specs.time_step_spec,
                                           algorithm.rollout_state_spec,
                                           algorithm.data_transformer.state_spec,
                                           self._per_group, shared=shared)
                                  for _ in range(self._groups)]
            self._workers.append(handle)
        self._weights = WeightChannel(algorithm.rollout_state_dict(), shared=shared)
        self._heartbeat = torch.zeros(self._num_workers, dtype=torch.float64)
        self._policy_heartbeat = torch.zeros(max(1, self._num_policy), dtype=torch.float64)
        if shared:
            self._heartbeat.share_memory_()
            self._policy_heartbeat.share_memory_()

    def _publish(self) -> None:
        ctx = self._context
        self._weights.publish(self._algorithm.rollout_state_dict(), self._version,
                              (ctx.iteration, ctx.env_steps, ctx.num_updates))

    def _start(self) -> None:
        # the Trainer counts the iteration in progress: versions count finished ones
        self._version = self._base_version = max(0, int(self._context.iteration) - 1)
        self._publish()
        mb = sum(s.nbytes for w in self._workers for s in w.slots) / 2 ** 20
        if self._split_note and self._env_id_base == 0:  # rank 0 alone under torchrun
            print(self._split_note, file=sys.stderr, flush=True)
        print(f"[alf] async unroll ({self._mode}): {self._num_workers} env worker(s) x "
              f"{self._groups} group(s) x {self._per_group} envs, {self._T}-step trajectories, "
              f"{self._slots_per_group} slots per group ({mb:,.0f} MiB)",
              file=sys.stderr, flush=True)
        if ((self._num_policy or self._config.num_policy_workers is None)
                and self._env_id_base == 0):  # rank 0 alone under torchrun
            print(self._policy_why, file=sys.stderr, flush=True)
        self._started = True
        if self._mode == "serial":
            self._start_serial()
            return
        extra_args = lambda w: ()  # noqa: E731 - in-worker inference: no pipe to a policy worker
        if self._num_policy:
            self._policy = PolicyWorkers(self._num_policy, self._workers, self._policy_spec,
                                         self._policy_heartbeat, self._per_group,
                                         self._config.env_worker_timeout_s,
                                         self._config.max_env_worker_restarts)
            self._policy.pool.start()
            extra_args = self._policy.env_args
        self._pool = WorkerPool(self._workers, self._spec, self._heartbeat, self._per_group,
                                self._config.env_worker_timeout_s,
                                self._config.max_env_worker_restarts, self._forget,
                                extra_args=extra_args)
        self._pool.start()
        self._last_trajectory = time.monotonic()

    def _forget(self, w: WorkerHandle) -> None:
        """A worker is being restarted: drop what its old incarnation reported (its slots
        are reset for the new one)."""
        self._pending = {k: v for k, v in self._pending.items() if k[0] != w.worker_id}

    def _spec(self, w: WorkerHandle) -> WorkerSpec:
        return WorkerSpec(
            worker_id=w.worker_id, incarnation=w.incarnation, config_text=self._config_text,
            seed=self._seed + w.incarnation * RESTART_SEED_STRIDE,
            envs_per_group=self._per_group, env_id_offsets=w.offsets, slots=w.slots,
            weights=self._weights, heartbeat=self._heartbeat, first_seq=w.next_seq,
            base_version=self._base_version, learner_pid=os.getpid(),
            settings=self._config.actor_settings(),
            inboxes=w.inboxes if self._num_policy else None)

    def _policy_spec(self, p: PolicyWorkerHandle) -> PolicyWorkerSpec:
        served = [self._workers[w] for w in p.env_workers]
        settings = self._config.actor_settings()
        return PolicyWorkerSpec(
            worker_id=p.worker_id, incarnation=p.incarnation, config_text=self._config_text,
            seed=self._seed + p.incarnation * RESTART_SEED_STRIDE, specs=self._specs,
            env_workers=list(p.env_workers), groups_per_worker=self._groups,
            inboxes={(w.worker_id, g): w.inboxes[g] for w in served for g in range(self._groups)},
            slots={(w.worker_id, g): w.slots[g] for w in served for g in range(self._groups)},
            weights=self._weights, heartbeat=self._policy_heartbeat, learner_pid=os.getpid(),
            deterministic=settings.deterministic, num_threads=settings.num_threads,
            initial_collect_steps=settings.initial_collect_steps, device=self._config.device)

    def _update_period(self) -> int:
        return self._config.update_period

    # ---------------------------------------------------------------- workers
    def collect(self, policy_step: Any, unroll_length: int,
                action_override: Any = None) -> UnrollResult:
        """The next batch of trajectories ``[T + 1, B']`` (``bootstrap_last``).

        ``policy_step``/``unroll_length``/``action_override`` of the sync interface
        are not used: the workers act with their own copy, for ``T`` steps each,
        and act randomly themselves during ``initial_collect_steps``."""
        if self._closed:
            raise RuntimeError("AsyncUnroller is closed")
        if not self._started:
            self._start()
        if self._mode == "serial":
            received = self._collect_serial()
        elif self._mode == "deterministic":
            received = self._collect_ordered()
        else:
            received = self._collect_ready()
        experiences = [e for e, _ in received]
        versions = torch.cat([torch.full((self._per_group,), t.policy_version, dtype=torch.int64)
                              for _, t in received])
        experience = alf_nest.map_structure(lambda *xs: torch.cat(xs, dim=1), *experiences)
        env_steps = self._T * self._per_group * len(received)
        self._metrics.num_env_steps += env_steps
        return UnrollResult(experience, env_steps, bootstrap_last=True,
                            policy_versions=versions)

    def _take(self, w: WorkerHandle, traj: Trajectory) -> Any:
        """Copy a reported trajectory out of its slot and give the slot back."""
        data = w.slots[traj.group].read(traj.slot)
        self._free(w, traj)
        return data

    def _free(self, w: WorkerHandle, traj: Trajectory) -> None:
        """Give a trajectory's slot back to its worker (unread, when dropped as stale)."""
        if self._mode == "serial":
            self._serial_link.free(traj.group, traj.slot)
        else:
            self._pool.send(w, ("free", traj.group, traj.slot))

    def _account(self, traj: Trajectory) -> None:
        """Fold a used trajectory's finished episodes and normaliser statistics in (the
        deterministic mode calls this in its fixed order: merges are order-sensitive)."""
        self._metrics.add_finished(traj.episodes, 0)
        if traj.statistics:
            stats = alf_nest.map_structure(torch.as_tensor, traj.statistics)
            if self._stash_statistics:
                self._statistics.append(stats)
            else:
                self._algorithm.data_transformer.merge_statistics(stats)

    def _check_stall(self) -> None:
        """Workers alive (heartbeats fresh) but no trajectory for ``env_worker_timeout_s``:
        say so instead of waiting forever (e.g. a worker waiting for weights that will
        never be published)."""
        ready_at = self._pool.last_ready_at
        if self._policy is not None:
            ready_at = max(ready_at, self._policy.pool.last_ready_at)
        quiet = time.monotonic() - max(self._last_trajectory, ready_at)
        limit = float(self._config.env_worker_timeout_s)
        if quiet > limit and not self._a_worker_goes_quiet(limit / 2):
            raise RunFailedError(
                f"no trajectory from any env worker for {quiet:.0f} s although they are alive "
                f"(TrainerConfig.env_worker_timeout_s={limit:g}; async_mode="
                f"'{self._mode}', learner version {self._version}): the workers are stuck "
                "waiting, e.g. for weights; please report this with the config")

    def _a_worker_goes_quiet(self, age_s: float) -> bool:
        """Whether some worker's last heartbeat is older than ``age_s``: it may be hanging
        (e.g. a stopped policy worker that every env worker waits on), and the health check
        names and restarts it once its silence reaches the timeout; only live, beating
        workers without trajectories are a stall."""
        now = time.time()
        beats = self._heartbeat.tolist()
        if self._policy is not None:
            beats += self._policy_heartbeat[:self._num_policy].tolist()
        return any(now - beat > age_s for beat in beats)

    def _handle_error(self, w: WorkerHandle, msg: Any) -> None:
        """An env worker's report: ``fatal`` stops the run, ``error`` restarts it."""
        raise_if_fatal(msg)
        self._pool.restart(w, f"raised {msg[1]}")

    def _messages(self) -> List[Tuple[WorkerHandle, Any]]:
        """The env workers' messages (waiting up to 0.5 s for one); a policy worker's error
        report restarts it."""
        if self._policy is not None:
            for p, msg in self._policy.pool.messages(0):
                if msg[0] == "error":
                    self._policy.pool.restart(p, f"raised {msg[1]}")
        return self._pool.messages(0.5)

    def _check_workers(self) -> None:
        """Exit codes and heartbeats of every worker process, then the stall check."""
        if self._policy is not None:
            self._policy.pool.check_health()
        self._pool.check_health()
        self._check_stall()

    def _collect_ready(self) -> List[Tuple[Any, Trajectory]]:
        """Arrival order: the oldest reported trajectories first, until the batch holds
        every env's rows (or, with ``unroll_length=0``, all that are ready, at least one).
        Reported but unused trajectories stay in their slots (the slots are the bounded
        queue: a worker with none free waits), stale ones (``max_policy_lag``) are dropped."""
        need = self._num_workers * self._groups
        max_lag = self._config.max_policy_lag
        received: List[Tuple[Any, Trajectory]] = []
        while True:
            while self._backlog and (self._take_all_ready or len(received) < need):
                w, incarnation, traj = self._backlog.popleft()
                if incarnation != w.incarnation:
                    continue  # reported by a worker since restarted: its slots were reset
                lag = self._version - traj.policy_version
                if max_lag is not None and lag > max_lag:
                    self._discarded += 1
                    self._free(w, traj)
                    self._account(traj._replace(episodes=[]))  # the statistics still count
                    continue
                self._lags.append(lag)
                received.append((self._take(w, traj), traj))
                self._account(traj)
            if len(received) >= need or (self._take_all_ready and received):
                return received
            for w, msg in self._messages():
                if msg[0] in ("error", "fatal"):
                    self._handle_error(w, msg)
                elif msg[0] == "traj":
                    self._backlog.append((w, w.incarnation, msg[1]))
                    self._last_trajectory = time.monotonic()
            self._check_workers()

    def _collect_ordered(self) -> List[Tuple[Any, Trajectory]]:
        """Deterministic: trajectory ``next_seq`` of every group, in (worker, group) order."""
        while True:
            missing = [(w.worker_id, g, w.next_seq) for w in self._workers
                       for g in range(self._groups)
                       if (w.worker_id, g, w.next_seq) not in self._pending]
            if not missing:
                break
            for w, msg in self._messages():
                if msg[0] in ("error", "fatal"):
                    self._handle_error(w, msg)
                elif msg[0] == "traj":
                    traj = msg[1]
                    self._pending[(w.worker_id, traj.group, traj.seq)] = (
                        self._take(w, traj), traj)
                    self._last_trajectory = time.monotonic()
            self._check_workers()
        received = []
        for w in self._workers:
            for g in range(self._groups):
                data, traj = self._pending.pop((w.worker_id, g, w.next_seq))
                self._account(traj)
                self._lags.append(self._version - traj.policy_version)
                received.append((data, traj))
            w.next_seq += 1
        return received

    # ----------------------------------------------------------------- serial
    def _start_serial(self) -> None:
        w = self._workers[0]
        w.incarnation = 0
        self._serial_link = SerialLink(w.slots)
        spec = self._spec(w)
        if self._num_policy:  # the policy worker's server, called directly
            server = PolicyServer(
                build_algorithm(self._run_config, self._specs, "policy", RunContext()),
                self._weights, {(0, g): w.inboxes[g] for g in range(self._groups)},
                {(0, g): w.slots[g] for g in range(self._groups)},
                spec.settings.initial_collect_steps, wait=self._serial_link.wait,
                device=self._config.device)
        with sigint_ignored_in_children():  # env subprocesses: the Trainer handles Ctrl-C
            if self._num_policy:
                self._serial_actor = build_stepper(spec, self._serial_link,
                                                   DirectPolicyLink(server), pin_newest=True)
            else:
                self._serial_actor = build_actor(spec, self._serial_link,
                                                 serial_config=self._run_config)

    def _collect_serial(self) -> List[Tuple[Any, Trajectory]]:
        w = self._workers[0]
        received = []
        for traj in self._serial_actor.run_round():
            self._lags.append(self._version - traj.policy_version)
            received.append((self._take(w, traj), traj))
            self._account(traj)
        return received

    # ---------------------------------------------------------------- weights
    def after_train_iter(self, algorithm: Any) -> None:
        """One learner version more; publish the weights when due; write lag summaries."""
        self._version += 1
        # relative to the start (or resume) version: what version_for_seq expects
        if (self._version - self._base_version) % self._update_period() == 0:
            self._publish()
        ctx = self._context
        if ctx.should_summarize() and self._lags:
            ctx.add_scalar("Async/policy_lag_min", min(self._lags))
            ctx.add_scalar("Async/policy_lag_avg", sum(self._lags) / len(self._lags))
            ctx.add_scalar("Async/policy_lag_max", max(self._lags))
            ctx.add_scalar("Async/discarded_trajectories", self._discarded)
            ctx.add_scalar("Async/env_worker_restarts", self.restarts)
        self._last_lags, self._lags = self._lags, []

    def progress_text(self) -> str:
        """`` | lag min/avg/max`` of the last iteration (and restarts, if any)."""
        lags = getattr(self, "_last_lags", None)
        text = ""
        if lags:
            text = f" | lag {min(lags)}/{sum(lags) / len(lags):.1f}/{max(lags)}"
        if self._discarded:
            text += f" | stale dropped {self._discarded:,}"
        if self.restarts:
            text += f" | worker restarts {self.restarts}"
        return text

    # ------------------------------------------------------------------ close
    def close(self) -> None:
        """Stop every worker (5 s each, then terminate/kill) and release the slots."""
        if self._closed:
            return
        self._closed = True
        if self._serial_actor is not None:
            self._serial_actor.close()
        if self._policy is not None:
            self._policy.pool.request_stop()  # both kinds stop together (Ctrl-C within 10 s)
        if self._pool is not None:
            self._pool.close()
        if self._policy is not None:
            self._policy.close()
