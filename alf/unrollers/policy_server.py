"""Batched inference for many env groups: the work of one policy worker.

A :class:`PolicyServer` holds one rollout copy of the algorithm (built for the
``"policy"`` role: on the learner's device) and acts for the env groups of the
env workers assigned to it. One :meth:`PolicyServer.act` call serves a batch
of :class:`ActRequest` s with **one** :class:`~alf.utils.act_step.ActStep`
(one ``rollout_step`` forward) over all their envs:

1. read each group's raw ``TimeStep [B]`` and states from its
   :class:`~alf.unrollers.act_inbox.ActInbox` and concatenate them to
   ``[k B, ...]`` (``k`` requests);
2. transform, reset states at ``FIRST``, act (random actions while the
   learner's env steps are below ``initial_collect_steps``);
3. split the result back per group: the stored step ``Experience [B]`` goes to
   the group's trajectory slot at ``(slot, t)`` (the env worker reads the action
   from there), the next states to the inbox's other parity buffer.

Weights come through the run's :class:`~alf.unrollers.weight_channel.WeightChannel`:
the newest version before each batch (``processes`` mode) or exactly the
version a request names (``deterministic`` mode). The version used is returned
per request, so the env worker knows each step's behaviour-policy version.

The server is used by the policy worker process (:mod:`alf.unrollers.policy_worker`)
and, in serial mode, directly in the learner's process.
"""
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

import torch

from alf import nest as alf_nest
from alf.unrollers.act_inbox import ActInbox
from alf.unrollers.trajectory_slots import TrajectorySlots
from alf.unrollers.weight_channel import WeightChannel
from alf.utils.act_step import ActStep, random_actions
from alf.utils import precision

#: (env worker id, group index) of an env group
GroupKey = Tuple[int, int]


class ActRequest(NamedTuple):
    """An env worker's request: act for ``group`` at step ``t`` of trajectory ``slot``.

    Attributes:
        worker: env worker id.
        group: group index within the worker.
        slot: trajectory slot the step is written to.
        t: step within the trajectory (``0..T``).
        n: the group's step count since its envs were (re)built: selects the state
            buffers (``n % 2``).
        version: weights version to act with (deterministic mode), or -1: the newest.
        order: the step's run-wide index (``first_seq x T + n``; the same for every env
            worker at the same step, also across restarts): orders deterministic batches.
    """
    worker: int
    group: int
    slot: int
    t: int
    n: int
    version: int = -1
    order: int = 0


class ActReply(NamedTuple):
    """The answer to one :class:`ActRequest` (the step is in the slot already).

    Attributes:
        group: the request's group.
        t: the request's step.
        n: the request's step count.
        version: the weights version the step was acted with.
        statistics: data-transformer statistics (moments, numpy) gathered since the last
            ones were handed out, or None; handed out with replies at ``t == T``.
    """
    group: int
    t: int
    n: int
    version: int
    statistics: Any = None


class PolicyServer:
    """One rollout copy of the algorithm acting for many env groups (module docstring).

    Args:
        algorithm: built for the ``"policy"`` role (on ``device``); never trains.
        weights: where the learner publishes weights.
        inboxes: per ``(worker, group)``, the group's :class:`ActInbox`.
        slots: per ``(worker, group)``, the group's trajectory slots (``T + 1`` steps).
        initial_collect_steps: act randomly while the learner's env steps are below it.
        wait: ``fn()`` called while waiting for a weights version (heartbeat, messages).
        device: where the forward runs (the algorithm's device).
    """

    def __init__(self, algorithm: Any, weights: WeightChannel,
                 inboxes: Dict[GroupKey, ActInbox], slots: Dict[GroupKey, TrajectorySlots],
                 initial_collect_steps: int = 0, wait: Callable[[], None] = lambda: None,
                 device: Any = "cpu"):
        self._algorithm = algorithm
        self._transformer = algorithm.data_transformer
        self._weights = weights
        self._inboxes = inboxes
        self._slots = slots
        self._initial_collect_steps = int(initial_collect_steps)
        self._wait = wait
        self._device = torch.device(device)
        self._on_cpu = self._device.type == "cpu"
        self._random_actions = random_actions(algorithm.action_spec,
                                              None if self._on_cpu else self._device)
        self._act_steps: Dict[int, ActStep] = {}  # per total batch size
        self._version = -1
        self._counters: Tuple[int, ...] = (0, 0, 0)
        if hasattr(self._transformer, "freeze_statistics"):
            self._transformer.freeze_statistics(True)  # the learner owns the statistics

    @property
    def version(self) -> int:
        """The weights version loaded now (-1 before the first)."""
        return self._version

    # --------------------------------------------------------------- weights
    def refresh_weights(self, wanted: int = -1) -> None:
        """Load the newest weights (``wanted=-1``) if newer than the loaded ones, or
        exactly version ``wanted`` (waiting until it is published)."""
        if wanted < 0:
            if self._weights.latest_version() <= self._version:
                return
        elif wanted == self._version:
            return
        while True:
            got = self._weights.read(self._algorithm.load_rollout_state_dict,
                                     None if wanted < 0 else wanted)
            if got is not None:
                self._version, self._counters = got[0], got[1]
                precision.drop_weight_casts()  # the bf16 copies of the old weights
                ctx = self._algorithm.context
                ctx.load_state_dict(dict(zip(("iteration", "env_steps", "num_updates"),
                                             self._counters)))
                return
            if wanted >= 0 and self._weights.latest_version() > wanted + 1:
                raise RuntimeError(f"weights version {wanted} was overwritten before a policy "
                                   "worker could read it (deterministic async mode)")
            self._wait()

    # ---------------------------------------------------------------- acting
    def _act_step(self, batch: int) -> ActStep:
        step = self._act_steps.get(batch)
        if step is None:
            init = self._algorithm.get_initial_rollout_state(batch)
            step = ActStep(self._transformer, self._algorithm.rollout_step, init,
                           precision.act_dtype_of(self._algorithm))
            self._act_steps[batch] = step
        return step

    def _gather(self, requests: List[ActRequest]) -> Tuple[Any, Any, Any]:
        """The requests' raw time steps and states concatenated to ``[k B, ...]``."""
        parts = []
        for r in requests:
            inbox = self._inboxes[(r.worker, r.group)]
            parts.append((inbox.time_step(),) + inbox.states(r.n % 2))
        if len(parts) == 1:
            joined = parts[0]
        else:
            joined = tuple(alf_nest.map_structure(lambda *xs: torch.cat(xs, dim=0), *column)
                           for column in zip(*parts))
        if not self._on_cpu:
            joined = alf_nest.map_structure(lambda x: x.to(self._device, non_blocking=True),
                                            joined)
        return joined

    def act(self, requests: List[ActRequest]) -> List[ActReply]:
        """Act for every request with one batched forward (see the module docstring).

        All requests must name the same ``version`` (deterministic mode groups them so);
        returns one reply per request, in order."""
        self.refresh_weights(requests[0].version)
        time_step, policy_state, transformer_state = self._gather(requests)
        override = (self._random_actions if self._counters[1] < self._initial_collect_steps
                    else None)
        batch = alf_nest.flatten(time_step.step_type)[0].shape[0]
        with torch.no_grad():
            acted = self._act_step(batch)(time_step, policy_state, transformer_state, override)
        outputs = (acted.experience(), acted.alg_step.state, acted.transformer_state)
        if not self._on_cpu:
            outputs = alf_nest.map_structure(lambda x: x.cpu(), outputs)
        statistics = self._pop_statistics() if any(self._ends_trajectory(r)
                                                   for r in requests) else None
        replies = []
        offset = 0
        for r in requests:
            key = (r.worker, r.group)
            inbox = self._inboxes[key]
            rows = slice(offset, offset + inbox.batch_size)
            offset += inbox.batch_size
            step, next_state, next_tr_state = alf_nest.map_structure(lambda x: x[rows], outputs)
            self._slots[key].write_step(r.slot, r.t, step)
            inbox.write_states((r.n + 1) % 2, next_state, next_tr_state)
            stats = statistics if self._ends_trajectory(r) else None
            if stats is not None:
                statistics = None  # handed out once
            replies.append(ActReply(r.group, r.t, r.n, self._version, stats))
        return replies

    def _ends_trajectory(self, request: ActRequest) -> bool:
        return request.t == self._slots[(request.worker, request.group)].length - 1

    def _pop_statistics(self) -> Optional[Any]:
        """Pending normaliser statistics as numpy (a tensor would travel as shared memory)."""
        if not hasattr(self._transformer, "pop_statistics"):
            return None
        stats = self._transformer.pop_statistics()
        if not stats:
            return None
        return alf_nest.map_structure(lambda x: x.detach().cpu().numpy(), stats)
