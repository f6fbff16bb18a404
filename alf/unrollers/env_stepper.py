"""The env side of an env worker served by a policy worker: envs only, no network.

With ``TrainerConfig.num_policy_workers > 0`` an env worker runs an
:class:`EnvStepper` instead of an :class:`~alf.unrollers.actor_worker.ActorWorker`.
It owns ``G`` env groups of ``B`` envs; for each step of each group it writes
the raw ``TimeStep [B]`` into the group's :class:`~alf.unrollers.act_inbox.ActInbox`,
sends an :class:`~alf.unrollers.policy_server.ActRequest` through its
:class:`PolicyLink` and, once the reply comes, reads the action from the
trajectory slot the policy worker wrote and steps the envs with it.

Double buffering (as in-worker inference does it): the groups are served in
turn; for group ``g`` the stepper waits for its envs' step, sends the request,
waits for the reply and starts ``g``'s envs again at once, so the other groups'
envs step while a policy worker acts for ``g``. (Holding a reply back until
another group's envs have stepped, to keep more requests in flight, was
measured: envs that wait rather than compute then idle a whole step, 35% of
the latency bound against 60-67%.) With one group there is nothing to overlap;
a policy worker still batches across the env workers it serves.

Trajectories have the :class:`ActorWorker` layout: ``T + 1`` steps, step ``T``
carried over as step 0 of the group's next trajectory. A step's weights version
comes with its reply; a trajectory reports the oldest version among its steps
``0..T-1`` (the policy lag that matters), and the normaliser statistics a reply
at ``t == T`` carried.
"""
import abc
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence

from alf import nest as alf_nest
from alf.data_structures import Experience
from alf.metrics import EpisodeMetrics
from alf.unrollers.act_inbox import ActInbox
from alf.unrollers.actor_worker import Trajectory
from alf.unrollers.policy_server import ActReply, ActRequest
from alf.unrollers.trajectory_slots import TrajectorySlots


class PolicyLink(abc.ABC):
    """How an :class:`EnvStepper` reaches its policy worker: an interface with two
    implementations, a pipe (``env_worker._PipePolicyLink``) and a direct call in serial
    mode (``serial_policy.DirectPolicyLink``)."""

    @abc.abstractmethod
    def request(self, request: ActRequest) -> None:
        """Send ``request`` (never blocks on the policy worker)."""

    @abc.abstractmethod
    def wait_reply(self, group: int) -> ActReply:
        """Block until the reply for ``group``'s pending request has come."""


class _Group:
    """One env group's carried stepping state."""

    def __init__(self, index: int, env: Any, slots: TrajectorySlots, inbox: ActInbox):
        self.index = index
        self.env = env
        self.slots = slots
        self.inbox = inbox
        self.metrics = EpisodeMetrics(env.batch_size, 1, track_finished=True)
        self.slot = -1
        self.seq = 0
        self.n = 0  # steps acted since the envs were built (selects state buffers)
        self.carried: Optional[Experience] = None  # step T of the last trajectory
        self.carried_version = -1
        self.versions: List[int] = []  # versions of the current trajectory's steps
        self.pinned = (-1, -1)  # (seq, version) asked of version_for_seq
        self.statistics: Any = None


class EnvStepper:
    """``G`` env groups stepped for a policy worker (see the module docstring).

    Args:
        worker_id: this env worker's id (requests name it).
        envs: the ``G`` group envs (``batch_size == B`` each, env ids offset per group).
        slots: per group, its trajectory slots (``length == T + 1``).
        inboxes: per group, its :class:`ActInbox`.
        link: the policy worker's end.
        acquire_slot: ``fn(group) -> slot`` (blocks until the learner frees one).
        version_for_seq: ``fn(seq) -> version``: the weights trajectory ``seq`` is acted
            with, asked once per trajectory, when its step 0 is acted on (the previous
            trajectory's step ``T``): deterministic mode's exact version, or serial mode's
            newest-at-the-boundary (in-worker inference's rule); -1 or None: whatever is
            newest at each step (``processes`` mode, Sample Factory's rule: fresher
            weights; the trajectory reports its oldest step's version).
        heartbeat: ``fn()`` called after every env step.
        first_seq: the sequence number of this incarnation's first trajectory (a restarted
            env worker continues the run's numbering): orders deterministic batches.
        overwrite_policy_output: once a step's envs answer, its stored action becomes
            the one they executed (``TrainerConfig.overwrite_policy_output``).
    """

    def __init__(self, worker_id: int, envs: Sequence[Any], slots: Sequence[TrajectorySlots],
                 inboxes: Sequence[ActInbox], link: PolicyLink,
                 acquire_slot: Callable[[int], int],
                 version_for_seq: Optional[Callable[[int], int]] = None,
                 heartbeat: Callable[[], None] = lambda: None, first_seq: int = 0,
                 overwrite_policy_output: bool = False):
        self._worker_id = worker_id
        self._overwrite_policy_output = bool(overwrite_policy_output)
        self._first_seq = int(first_seq)
        self._groups = [_Group(i, env, s, b)
                        for i, (env, s, b) in enumerate(zip(envs, slots, inboxes))]
        self._link = link
        self._acquire_slot = acquire_slot
        self._version_for_seq = version_for_seq
        self._heartbeat = heartbeat
        self._T = slots[0].length - 1
        self._pending: Deque[_Group] = deque()
        self._started = False

    # ---------------------------------------------------------------- acting
    def _request(self, g: _Group, t: int) -> None:
        """Ask for the action at step ``t`` of ``g``'s current trajectory."""
        version = -1
        if self._version_for_seq is not None:
            seq = g.n // self._T  # step T is acted on for the next trajectory
            if g.pinned[0] != seq:
                g.pinned = (seq, self._version_for_seq(seq))
            version = g.pinned[1]
        self._link.request(ActRequest(self._worker_id, g.index, g.slot, t, g.n, version,
                                      order=self._first_seq * self._T + g.n))
        self._pending.append(g)

    def _answer_oldest(self) -> None:
        """Wait for the oldest pending reply and start that group's envs stepping."""
        g = self._pending.popleft()
        reply = self._link.wait_reply(g.index)
        g.n += 1
        if reply.t == self._T:
            g.carried_version = reply.version
            g.statistics = reply.statistics
        else:
            g.versions.append(reply.version)
        action = alf_nest.map_structure(lambda buf: buf[g.slot, reply.t].clone(),
                                        g.slots.buffers.action)
        g.env.step_async(action)

    def _observe(self, g: _Group, time_step: Any, t: int) -> None:
        self._heartbeat()
        g.metrics.update(time_step)
        g.inbox.write_time_step(time_step)
        self._request(g, t)

    def run_round(self) -> List[Trajectory]:
        """One trajectory ``[T + 1, B]`` per group, in group order (module docstring)."""
        if not self._started:
            self._start_first_round()
        else:
            for g in self._groups:
                g.slot = self._acquire_slot(g.index)
                g.slots.write_step(g.slot, 0, g.carried)
                g.versions = [g.carried_version]
                g.statistics = None
        for t in range(1, self._T + 1):
            for g in self._groups:
                ts = g.env.step_wait()
                if self._overwrite_policy_output:  # step t-1 (t=1: the carried step)
                    g.slots.overwrite_with_executed_action(g.slot, t - 1, ts)
                self._observe(g, ts, t)
                self._answer_oldest()  # its envs step again while the others are served
        out = []
        for g in self._groups:
            g.carried = alf_nest.map_structure(lambda buf: buf[g.slot, self._T].clone(),
                                               g.slots.buffers)
            out.append(Trajectory(g.index, g.slot, g.seq, min(g.versions),
                                  g.metrics.pop_finished(), g.statistics))
            g.seq += 1
        return out

    def _start_first_round(self) -> None:
        """Reset the envs and act on their first step: step 0 of the first trajectories."""
        for g in self._groups:
            g.slot = self._acquire_slot(g.index)
            self._observe(g, g.env.reset(), 0)
        while self._pending:
            self._answer_oldest()  # t = 0: its version is the trajectory's first
        self._started = True

    def close(self) -> None:
        for g in self._groups:
            try:
                g.env.close()
            except Exception:  # noqa: BLE001 - closing on the way out
                pass

