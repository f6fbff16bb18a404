"""Serial async mode's stand-ins for pipes: everything in the learner's process.

``TrainerConfig.async_mode="serial"`` runs the env worker's loop (an
:class:`~alf.unrollers.actor_worker.ActorWorker`, or an
:class:`~alf.unrollers.env_stepper.EnvStepper` with its
:class:`~alf.unrollers.policy_server.PolicyServer`) in the learner's process,
so breakpoints work: slots are freed in-process (:class:`SerialLink`) and a
request is served at once by a direct call (:class:`DirectPolicyLink`), one
request per forward, in the order the groups step: the same forwards, in the
same order, as in-worker inference.
"""
from typing import Dict, List

from alf.unrollers.env_stepper import PolicyLink
from alf.unrollers.policy_server import ActReply, ActRequest, PolicyServer
from alf.unrollers.trajectory_slots import TrajectorySlots


class SerialLink:
    """Serial mode's stand-in for a worker's learner pipe: slots freed in-process."""

    def __init__(self, slots: List[TrajectorySlots]):
        self._free = [list(range(s.num_slots)) for s in slots]

    def free(self, group: int, slot: int) -> None:
        self._free[group].append(slot)

    def acquire_slot(self, group: int) -> int:
        if not self._free[group]:
            raise RuntimeError("serial async unroll: no free trajectory slot")
        return self._free[group].pop(0)

    def wait(self) -> None:
        raise RuntimeError("serial async unroll: the weights it waits for can never come "
                           "(deterministic waits need the process mode)")

    def poll(self) -> None:
        pass


class DirectPolicyLink(PolicyLink):
    """A policy worker in the same process: each request is served when it is made."""

    def __init__(self, server: PolicyServer):
        self._server = server
        self._replies: Dict[int, ActReply] = {}

    def request(self, request: ActRequest) -> None:
        self._replies[request.group] = self._server.act([request])[0]

    def wait_reply(self, group: int) -> ActReply:
        return self._replies.pop(group)
