"""``CollectedTransitions``: each newly collected step of the unrolls a Learner collects,
once, with the step before it in the same env (what
:meth:`RewardModule.observe <alf.algorithms.reward_module.RewardModule.observe>` sees).

An unroll is time-major ``[T, B]`` (a sync unroller: every step new; the step before
step 0 of an env is the last step of its previous unroll, kept here) or ``[T + 1, B]``
with ``bootstrap_last`` (an async unroller: its last step is collected again as step 0
of the env's next unroll, so steps ``1..T`` are the new ones and each has its
predecessor in the same column; a batch may hold consecutive trajectories of one env).
The first step an env collects in a run or after a resume has no predecessor and is
not among them: every other collected step is, exactly once.
"""
from typing import Any, Optional, Tuple

import torch

from alf import nest as alf_nest
from alf.data_structures import StepType, TimeStep


class CollectedTransitions:
    """Turns collected unrolls into flattened transitions; keeps each env's last step of a
    sync unroll for the next one (not checkpointed: after a resume the first step of
    each env has no predecessor, as at the start of a run)."""

    def __init__(self):
        self._last: Optional[Tuple[torch.Tensor, Any]] = None  # (env_id [B], observation [B, ...])

    def __call__(self, ts: TimeStep, bootstrap_last: bool
                 ) -> Optional[Tuple[Any, Any, Any, torch.Tensor]]:
        """``(prev_observation, prev_action, observation, valid)``, each ``[N]`` (``N`` new
        steps with a known predecessor), from a time-major ``ts``; ``valid``: not an
        episode's first step. None when there is none."""
        def flat(x):
            return x.reshape((-1,) + tuple(x.shape[2:]))

        if bootstrap_last:
            prev_obs = alf_nest.map_structure(lambda x: x[:-1], ts.observation)
            arrived = alf_nest.map_structure(lambda x: x[1:], ts)
        else:
            env_id = ts.env_id[0]
            last, self._last = self._last, (
                env_id.clone(), alf_nest.map_structure(lambda x: x[-1].clone(), ts.observation))
            if last is not None and torch.equal(last[0], env_id):
                prev_obs = alf_nest.map_structure(lambda p, x: torch.cat([p[None], x[:-1]]),
                                                  last[1], ts.observation)
                arrived = ts
            else:  # the first unroll of these envs: step 0 has no predecessor here
                prev_obs = alf_nest.map_structure(lambda x: x[:-1], ts.observation)
                arrived = alf_nest.map_structure(lambda x: x[1:], ts)
        if arrived.step_type.shape[0] == 0:
            return None
        valid = flat(arrived.step_type != StepType.FIRST)
        return (alf_nest.map_structure(flat, prev_obs),
                alf_nest.map_structure(flat, arrived.prev_action),
                alf_nest.map_structure(flat, arrived.observation), valid)
