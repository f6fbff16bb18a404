"""What a study optimises: a named score of a run's learning curve.

``--objective`` names it, over the curve of ``--metric`` (``eval_return``: the greedy
policy's evaluations in ``eval.csv``; ``train_return``: the training episodes'
average in ``progress.csv``):

- ``final``: the last value (the policy the run ends with);
- ``mean``: the mean over all points (rewards learning early and staying good);
- ``auc``: area under the curve over env steps, divided by the span (the mean height
  of the curve, in return units; trapezoids, so uneven point spacing is weighted right);
- ``steps_to:X``: env steps until the metric first reaches ``X`` (minimised; a run that
  never does scores its last env steps times 2, so it ranks behind every run that did).
"""
from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np

from alf.errors import ConfigError
from alf.studies.run_data import METRICS, Curve, read_curve

OBJECTIVES = ("final", "mean", "auc", "steps_to:X")
NEVER_REACHED_FACTOR = 2.0


@dataclass(frozen=True)
class Objective:
    """A score of a run (see the module docstring).

    Attributes:
        kind: ``final``, ``mean``, ``auc`` or ``steps_to``.
        metric: ``eval_return`` or ``train_return``.
        target: the ``steps_to`` threshold.
    """
    kind: str
    metric: str = "eval_return"
    target: Optional[float] = None

    @classmethod
    def parse(cls, text: str, metric: str = "eval_return") -> "Objective":
        """``final`` / ``mean`` / ``auc`` / ``steps_to:475``.

        Raises:
            ConfigError: an unknown objective or metric, or a bad target.
        """
        if metric not in METRICS:
            raise ConfigError(f"--metric {metric!r}: choose one of {', '.join(METRICS)}")
        kind, _, target = text.partition(":")
        if kind in ("final", "mean", "auc") and not target:
            return cls(kind, metric)
        if kind == "steps_to":
            try:
                return cls(kind, metric, float(target))
            except ValueError:
                pass
            raise ConfigError(f"--objective {text!r}: steps_to needs a target return, "
                              "e.g. steps_to:475")
        raise ConfigError(f"--objective {text!r}: choose one of {', '.join(OBJECTIVES)}")

    @property
    def direction(self) -> str:
        """Optuna's direction: env steps are minimised, returns maximised."""
        return "minimize" if self.kind == "steps_to" else "maximize"

    @property
    def name(self) -> str:
        suffix = f":{self.target:g}" if self.kind == "steps_to" else ""
        return f"{self.kind}{suffix} {self.metric}"

    def score(self, curve: Curve) -> Optional[float]:
        """The run's score, or None when its curve has no point yet."""
        if len(curve) == 0:
            return None
        values, steps = curve.values, curve.env_steps.astype(np.float64)
        if self.kind == "final":
            return float(values[-1])
        if self.kind == "mean":
            return float(values.mean())
        if self.kind == "auc":
            if len(values) == 1 or steps[-1] == steps[0]:
                return float(values.mean())
            area = np.sum((values[1:] + values[:-1]) * np.diff(steps)) / 2.0
            return float(area / (steps[-1] - steps[0]))
        reached = np.flatnonzero(values >= self.target)
        if len(reached):
            return float(steps[reached[0]])
        return float(steps[-1] * NEVER_REACHED_FACTOR)

    def score_run(self, run_dir: str) -> Optional[float]:
        """:meth:`score` of the run in ``run_dir``."""
        return self.score(read_curve(run_dir, self.metric))

    def intermediate(self, run_dir: str) -> List[Tuple[int, float]]:
        """``[(env steps, value)]`` so far: what a pruner compares between runs at equal env
        steps: the metric itself, negated for ``steps_to`` (a minimised study prunes high
        values, and a run whose return lags is the one far from its target)."""
        curve = read_curve(run_dir, self.metric)
        sign = -1.0 if self.kind == "steps_to" else 1.0
        return [(int(s), sign * float(v)) for s, v in zip(curve.env_steps, curve.values)]
