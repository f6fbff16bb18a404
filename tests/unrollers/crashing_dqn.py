"""A DQN whose learner raises after a few updates, for the async learner-crash test."""
import alf
from alf.algorithms.dqn_algorithm import DqnAlgorithm


@alf.configurable
class CrashingDqn(DqnAlgorithm):
    """``DqnAlgorithm`` that raises ``RuntimeError("learner crashed")`` in its
    ``crash_at_update``-th ``calc_loss``."""

    def __init__(self, *args, crash_at_update: int = 20, **kwargs):
        super().__init__(*args, **kwargs)
        self._crash_at = int(crash_at_update)
        self._calls = 0

    def calc_loss(self, info):
        self._calls += 1
        if self._calls == self._crash_at:
            raise RuntimeError("learner crashed")
        return super().calc_loss(info)
