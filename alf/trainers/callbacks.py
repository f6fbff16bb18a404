"""Trainer callbacks: code of yours that the Trainer runs at every iteration boundary,
configured in gin (``TrainerConfig.callbacks = [@MyCallback()]``).

The documented way to change an experiment from code during a run, e.g. an
:class:`~alf.algorithms.agent.Agent`'s reward weights by
:meth:`~alf.algorithms.agent.Agent.set_reward_weights` once the training return passes a
threshold (docs/writing_an_algorithm.md, "Changing reward weights from code"). A
callback runs after the iteration's training and summaries and before its evaluation
and checkpoint (so the checkpoint holds what it changed), in the Trainer's main thread
and on every rank of a data-parallel run (each with the metrics pooled over ranks),
with ``RunContext.weights_lock`` held (a learner thread is not in the middle of an
optimizer step). What it changes in the algorithm's state is checkpointed like the rest
of it (a weight fixed by ``set_reward_weights`` persists across a resume:
docs/design/config_on_resume.md); a callback's own attributes are not: keep anything a
resume needs in the algorithm, or derive it from ``context`` (iteration, env steps).
"""
from typing import Any, Sequence, Tuple

from alf.errors import ConfigError
from alf.utils.run_context import RunContext


class TrainerCallback:
    """Base class of a Trainer callback (any object with ``on_iteration_end`` works)."""

    def on_iteration_end(self, algorithm: Any, context: RunContext, metrics: Any) -> None:
        """After each training iteration.

        Args:
            algorithm: the algorithm being trained (e.g. an ``Agent``).
            context: the run's counters: ``context.iteration``, ``context.env_steps``,
                ``context.progress()`` (0 to 1), ``context.add_scalar(tag, value)``.
            metrics: the training episodes' :class:`~alf.metrics.EpisodeMetrics`
                (``average_return()``, ``has_episodes()``); None when training offline.
        """


def check_callbacks(callbacks: Any) -> Tuple[Any, ...]:
    """``TrainerConfig.callbacks`` as a tuple, each with an ``on_iteration_end`` method.

    Raises:
        ConfigError: one line naming the entry that is not a callback and the fix.
    """
    if callbacks is None:
        return ()
    if not isinstance(callbacks, (list, tuple)):
        callbacks = [callbacks]
    for c in callbacks:
        if not callable(getattr(c, "on_iteration_end", None)):
            what = getattr(c, "__name__", None) or type(c).__name__
            hint = (f" (a class: write @{what}() in gin, with the parentheses, to pass an "
                    "instance)") if isinstance(c, type) else ""
            raise ConfigError(f"TrainerConfig.callbacks: {what} has no on_iteration_end"
                              f"(algorithm, context, metrics) method{hint}; subclass "
                              "alf.trainers.callbacks.TrainerCallback")
    return tuple(callbacks)


def run_callbacks(callbacks: Sequence[Any], algorithm: Any, context: RunContext,
                  metrics: Any) -> None:
    """Each callback's ``on_iteration_end``, in order, under ``context.weights_lock``."""
    if not callbacks:
        return
    with context.weights_lock:
        for callback in callbacks:
            callback.on_iteration_end(algorithm, context, metrics)
