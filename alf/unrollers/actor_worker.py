"""The actor side of async unrolling: env groups stepped double-buffered by one policy copy.

An :class:`ActorWorker` owns ``G`` env groups of ``B`` envs each and a rollout
copy of the algorithm, built by :func:`alf.experiment.build_algorithm` from the
run's config (role ``"actor"``). One :meth:`ActorWorker.run_round` produces one
trajectory ``[T + 1, B]`` per group, written step by step into that group's
:class:`~alf.unrollers.trajectory_slots.TrajectorySlots`.

Double buffering (rlplay, Sample Factory): the groups are stepped in turn with
``step_async``/``step_wait``, so while group A's envs step (ale-py's C++
threads, or env subprocesses) the policy runs for group B. All groups are at
the same step ``t`` of their trajectories, so the weights change for all of
them at the same boundary and every trajectory has one policy version.

The same class runs inside an env worker process (:mod:`alf.unrollers.env_worker`)
and in the learner's own process (serial mode, for tests and debuggers).

Trajectory layout: steps ``0..T-1`` are new, step ``T`` is the bootstrap step;
its action is the one executed next, so it is carried over as step 0 of the
group's next trajectory. Weights are refreshed just before the policy acts at
step ``T``, so steps ``0..T-1`` of a trajectory all come from one version.
"""
import time
from typing import Any, Callable, List, NamedTuple, Optional, Sequence, Tuple

import torch

from alf import nest as alf_nest
from alf.data_structures import Experience
from alf.metrics import EpisodeMetrics
from alf.tensor_specs import zeros_from_spec
from alf.utils.act_step import ActStep, random_actions
from alf.unrollers.trajectory_slots import TrajectorySlots
from alf.unrollers.weight_channel import WeightChannel
from alf.utils import precision


class Trajectory(NamedTuple):
    """What a worker reports for one finished trajectory (a small, picklable message)."""
    group: int
    slot: int
    seq: int  # 0, 1, 2, ... per group
    policy_version: int
    episodes: List[Tuple[float, int]]  # (return, length) of episodes finished in it
    statistics: Any  # pending data-transformer statistics (moments) or None


class _Group:
    """One env group's carried stepping state."""

    def __init__(self, index: int, env: Any, slots: TrajectorySlots, metrics: EpisodeMetrics):
        self.index = index
        self.env = env
        self.slots = slots
        self.metrics = metrics
        self.time_step = None  # raw TimeStep [B]
        self.policy_state: Any = None
        self.transformer_state: Any = None
        self.slot = -1
        self.seq = 0
        self.carried: Optional[Experience] = None  # step T of the last trajectory
        self.stepping = False  # step_async issued, step_wait pending


class ActorWorker:
    """``G`` env groups + one rollout copy of the algorithm (see the module docstring).

    Args:
        algorithm: the actor's algorithm copy (role ``"actor"``), CPU.
        envs: the ``G`` group envs (``AlfEnvironment``, ``batch_size == B`` each,
            env ids already offset per group).
        slots: per group, its trajectory slots (``length == T + 1``).
        weights: where the learner publishes weights.
        acquire_slot: ``fn(group) -> slot`` (blocks until one is free).
        version_for_seq: ``fn(seq) -> version`` the weights for trajectory ``seq`` must
            have (deterministic mode), or None: the newest.
        wait: ``fn()`` called while waiting for weights (heartbeat, stop checks).
        initial_collect_steps: act randomly while the learner's env steps are below it.
        metric_buffer_size: episodes kept by the per-group metrics.
        overwrite_policy_output: once a step's envs answer, its stored action becomes
            the one they executed (``TrainerConfig.overwrite_policy_output``; the envs
            report it).
    """

    def __init__(self, algorithm: Any, envs: Sequence[Any], slots: Sequence[TrajectorySlots],
                 weights: WeightChannel, acquire_slot: Callable[[int], int],
                 version_for_seq: Optional[Callable[[int], int]] = None,
                 wait: Callable[[], None] = lambda: time.sleep(0.001),
                 initial_collect_steps: int = 0, heartbeat: Callable[[], None] = lambda: None,
                 overwrite_policy_output: bool = False):
        self._algorithm = algorithm
        self._overwrite_policy_output = bool(overwrite_policy_output)
        self._transformer = algorithm.data_transformer
        self._groups = [_Group(i, env, s, EpisodeMetrics(env.batch_size, 1, track_finished=True))
                        for i, (env, s) in enumerate(zip(envs, slots))]
        self._weights = weights
        self._acquire_slot = acquire_slot
        self._version_for_seq = version_for_seq
        self._wait = wait
        self._heartbeat = heartbeat
        self._initial_collect_steps = int(initial_collect_steps)
        self._length = slots[0].length  # T + 1
        self._version = -1
        self._counters: Tuple[int, ...] = (0, 0, 0)
        self._started = False
        self._act_step: Optional[ActStep] = None  # built by _start (needs the batch size)
        self._random_actions = random_actions(algorithm.action_spec)
        if hasattr(self._transformer, "freeze_statistics"):
            self._transformer.freeze_statistics(True)  # the learner owns the statistics

    @property
    def version(self) -> int:
        return self._version

    # --------------------------------------------------------------- weights
    def _refresh_weights(self, seq: int) -> None:
        """Load the weights trajectory ``seq`` must use (deterministic) or the newest."""
        wanted = None if self._version_for_seq is None else self._version_for_seq(seq)
        if wanted is None:
            newest = self._weights.latest_version()
            if newest <= self._version:
                return
        elif wanted == self._version:
            return
        while True:
            got = self._weights.read(self._algorithm.load_rollout_state_dict, wanted)
            if got is not None:
                self._version, self._counters = got[0], got[1]
                precision.drop_weight_casts()  # the bf16 copies of the old weights
                self._apply_counters()
                return
            if wanted is not None and self._weights.latest_version() > wanted + 1:
                raise RuntimeError(f"weights version {wanted} was overwritten before this "
                                   "worker could read it (deterministic async mode)")
            self._wait()

    def _apply_counters(self) -> None:
        ctx = self._algorithm.context
        ctx.load_state_dict(dict(zip(("iteration", "env_steps", "num_updates"), self._counters)))

    # ---------------------------------------------------------------- acting
    def _act(self, group: _Group, raw_time_step: Any) -> Experience:
        """One :class:`~alf.utils.act_step.ActStep` (``rollout_step``) for ``group``,
        with random actions while the learner's env steps are below
        ``initial_collect_steps``; the step to store."""
        override = (self._random_actions if self._counters[1] < self._initial_collect_steps
                    else None)
        acted = self._act_step(raw_time_step, group.policy_state, group.transformer_state,
                               override)
        group.transformer_state = acted.transformer_state
        group.policy_state = acted.alg_step.state
        return acted.experience()

    def _start(self) -> None:
        self._refresh_weights(0)
        for g in self._groups:
            batch = g.env.batch_size
            g.time_step = g.env.reset()
            g.metrics.update(g.time_step)
            init_state = self._algorithm.get_initial_rollout_state(batch)
            g.policy_state = init_state
            g.transformer_state = zeros_from_spec(self._transformer.state_spec, batch)
        # every group has B envs: the last group's initial state serves them all
        self._act_step = ActStep(self._transformer, self._algorithm.rollout_step, init_state,
                                 precision.act_dtype_of(self._algorithm))
        with torch.no_grad(), precision.keep_weight_casts(self._act_step.act_dtype):
            for g in self._groups:
                g.carried = self._act(g, g.time_step)
                g.env.step_async(g.carried.action)
                g.stepping = True
        self._started = True

    def run_round(self) -> List[Trajectory]:
        """One trajectory per group: ``T`` new steps each (see the module docstring).

        Returns the finished trajectories' messages, in group order."""
        if not self._started:
            self._start()
        T = self._length - 1
        version = self._version
        for g in self._groups:
            g.slot = self._acquire_slot(g.index)
            g.slots.write_step(g.slot, 0, g.carried)
        # bf16 acting: each weight is cast once per round (and per new version), not per step
        with torch.no_grad(), precision.keep_weight_casts(self._act_step.act_dtype):
            for t in range(1, T + 1):
                if t == T:
                    # weights for the next trajectory: its step 0 is acted on now
                    self._refresh_weights(self._groups[0].seq + 1)
                for g in self._groups:
                    ts = g.env.step_wait()
                    g.stepping = False
                    if self._overwrite_policy_output:  # step t-1 (t=1: the carried step)
                        g.slots.overwrite_with_executed_action(g.slot, t - 1, ts)
                    self._heartbeat()
                    g.time_step = ts
                    g.metrics.update(ts)
                    step = self._act(g, ts)
                    g.slots.write_step(g.slot, t, step)
                    g.env.step_async(step.action)
                    g.stepping = True
                    if t == T:
                        g.carried = step
        out = []
        for g in self._groups:
            stats = (self._transformer.pop_statistics()
                     if hasattr(self._transformer, "pop_statistics") and g is self._groups[-1]
                     else None)
            if stats:  # by value: a tensor would be shared through a file descriptor
                stats = alf_nest.map_structure(lambda x: x.detach().cpu().numpy(), stats)
            out.append(Trajectory(g.index, g.slot, g.seq, version, g.metrics.pop_finished(),
                                  stats or None))
            g.seq += 1
        return out

    def close(self) -> None:
        for g in self._groups:
            try:
                g.env.close()
            except Exception:  # noqa: BLE001 - closing on the way out
                pass
