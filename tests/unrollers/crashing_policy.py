"""A DQN whose policy raises once while acting, for the policy-worker fault test."""
import os

import alf
from alf.algorithms.dqn_algorithm import DqnAlgorithm


@alf.configurable
class CrashingPolicyDqn(DqnAlgorithm):
    """``DqnAlgorithm`` whose ``crash_at_step``-th ``rollout_step`` raises
    ``RuntimeError("policy crashed")``, once per test: the first process to do so
    creates ``marker``, so the restarted policy worker acts normally."""

    def __init__(self, *args, crash_at_step: int = 50, marker: str = "", **kwargs):
        super().__init__(*args, **kwargs)
        self._crash_at, self._marker = int(crash_at_step), marker
        self._steps = 0

    def rollout_step(self, time_step, state):
        self._steps += 1
        if self._steps == self._crash_at and self._marker and not os.path.exists(self._marker):
            with open(self._marker, "w") as f:
                f.write(str(os.getpid()))
            raise RuntimeError("policy crashed")
        return super().rollout_step(time_step, state)
