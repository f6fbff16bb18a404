"""One explicit run context owned by the Trainer (instead of module globals).

It carries the counters every component may need (train iterations, env
steps, training progress for schedules), the summary writer, and whether this
iteration should write summaries. Algorithms receive it at construction; an
algorithm built outside a Trainer (tests, notebooks) gets a fresh standalone
context of its own (:func:`default_run_context`); there is no module-level
context. Its counters are checkpointed.
"""
import contextlib
import threading
from typing import Any, ContextManager, Dict, Iterator, Optional, Tuple

from alf.utils.finite_guard import FiniteGuard


class RunContext:
    """Counters, progress and summary writer for one training run.

    Args:
        num_iterations: total train iterations planned (0 = unbounded).
        num_env_steps: total env steps planned (0 = unbounded).
        summary_writer: a ``torch.utils.tensorboard.SummaryWriter`` or None.
        summary_interval: write summaries every this many iterations.
        summarize_first_interval: also at iteration 1 (and after the first gradient step),
            so a run shorter than ``summary_interval`` still shows every tag.
    """

    def __init__(self, num_iterations: int = 0, num_env_steps: int = 0,
                 summary_writer: Any = None, summary_interval: int = 50,
                 summarize_first_interval: bool = True):
        self.num_iterations = int(num_iterations or 0)
        self.num_env_steps = int(num_env_steps or 0)
        self.summary_writer = summary_writer
        self.summary_interval = max(1, int(summary_interval))
        self.summarize_first_interval = bool(summarize_first_interval)
        self.iteration = 0
        self.env_steps = 0
        self.num_updates = 0
        self._updates_before_iteration = 0  # num_updates when the current iteration began
        self.unroll_seconds = 0.0  # wall time spent unrolling (not checkpointed)
        # data-parallel runs (torchrun): an alf.distributed.DataParallel that averages
        # gradients and sums env steps over ranks; None in a single process
        self.data_parallel: Any = None
        # an alf.utils.cpu_budget.ThreadGovernor sizing torch's threads to the CPUs other
        # processes leave free; ticked after every gradient step (cheap unless due)
        self.cpu_governor: Any = None
        # held while an optimizer writes the weights in place, and while the policy acts,
        # when a learner thread trains beside the acting thread (a lock then; else a no-op)
        self.weights_lock: ContextManager = contextlib.nullcontext()
        # mixed precision: the autocast dtype (None: fp32) networks compute in while the
        # Learner trains / while the policy acts (alf.utils.precision; build_algorithm sets
        # them from TrainerConfig.train_precision / act_precision)
        self.train_dtype: Any = None
        self.act_dtype: Any = None
        # stops the run when a loss, gradient or parameter goes non-finite (None: off,
        # TrainerConfig.check_finite=False); alf.utils.finite_guard
        self.finite_guard: Optional[FiniteGuard] = FiniteGuard()
        self._pinned = threading.local()  # see pinned_iteration
        # add_iteration_scalar: {(tag, iteration): [reduce, values, env_steps]}, written by
        # flush_iteration_scalars (the Learner's, once an iteration's training is done)
        self._iteration_scalars: Dict[Tuple[str, int], list] = {}
        self._iteration_scalars_lock = threading.Lock()

    def tick_cpu_governor(self) -> None:
        """Let the thread governor measure and resize if its period has passed."""
        if self.cpu_governor is not None:
            self.cpu_governor.tick()

    def count_env_steps(self, local_steps: int) -> int:
        """Add an unroll's env steps to ``env_steps``; in a data-parallel run every rank's
        (so the stop condition and schedules see the whole run's steps, identically on
        every rank). Returns the steps added."""
        steps = (self.data_parallel.after_unroll(local_steps) if self.data_parallel is not None
                 else int(local_steps))
        self.env_steps += steps
        return steps

    def progress(self) -> float:
        """Fraction of the run completed, in [0, 1] (max over the configured limits)."""
        fractions = []
        if self.num_iterations > 0:
            fractions.append(self.iteration / self.num_iterations)
        if self.num_env_steps > 0:
            fractions.append(self.env_steps / self.num_env_steps)
        return min(1.0, max(fractions)) if fractions else 0.0

    def begin_iteration(self) -> None:
        """Count a new training iteration (called by the Trainer before ``train_iter``)."""
        self.iteration += 1
        self._updates_before_iteration = self.num_updates

    @contextlib.contextmanager
    def pinned_iteration(self, iteration: int, due: bool) -> Iterator[None]:
        """In the calling thread (a learner thread training an unroll the main thread
        collected earlier): summaries belong to ``iteration``, and are due if ``due`` (the
        main thread's :meth:`should_summarize` then) or at the run's first gradient steps,
        whatever iteration the main thread has reached meanwhile."""
        self._pinned.value = (int(iteration), bool(due), self.num_updates)
        try:
            yield
        finally:
            self._pinned.value = None

    def should_summarize(self) -> bool:
        """Whether summaries are due in the current iteration: every ``summary_interval``
        iterations and, with ``summarize_first_interval``, iteration 1 and the first
        iteration that trains (off-policy runs collect random steps first: their first
        losses come later), once its first gradient step is taken.

        It stays true for the whole iteration: code that runs once per mini-batch
        (``train_step``, ``calc_loss``) sees it true for every mini-batch of a summarised
        iteration; :meth:`add_iteration_scalar` writes one point per iteration instead."""
        if self.summary_writer is None:
            return False
        pinned = getattr(self._pinned, "value", None)
        if pinned is not None:
            _, due, updates_before = pinned
            return due or (self.summarize_first_interval and updates_before == 0
                           and self.num_updates > 0)
        if self.iteration % self.summary_interval == 0:
            return True
        return self.summarize_first_interval and (
            self.iteration == 1 or (self._updates_before_iteration == 0 and self.num_updates > 0))

    def should_summarize_update(self) -> bool:
        """``TrainerConfig.update_counter_every_mini_batch``: whether the gradient step just
        taken (``num_updates``) is due for loss summaries (the first one too with
        ``summarize_first_interval``)."""
        return self.summary_writer is not None and (
            self.num_updates % self.summary_interval == 0
            or (self.summarize_first_interval and self.num_updates == 1))

    def summary_iteration(self) -> int:
        """The iteration a summary written now belongs to: the current one, or in a learner
        thread the one that collected the unroll it trains (:meth:`pinned_iteration`)."""
        pinned = getattr(self._pinned, "value", None)
        return self.iteration if pinned is None else pinned[0]

    def add_scalar(self, tag: str, value: Any, step: Optional[int] = None) -> None:
        """Write ``value`` under ``tag`` against ``step`` (default: iterations), and ``tag`` in
        ``<group>_vs_EnvironmentSteps`` against env steps (ALF's convention).

        Every call writes a point. Called from ``calc_loss`` / ``train_step`` (once per
        mini-batch) while :meth:`should_summarize`, that is one point per mini-batch, all at
        the same iteration (TensorBoard draws them as a vertical zig-zag): use
        :meth:`add_iteration_scalar` for one point per iteration."""
        if self.summary_writer is None:
            return
        self._write(tag, _to_float(value), self.summary_iteration() if step is None else step,
                    self.env_steps)

    def _write(self, tag: str, value: float, step: int, env_steps: int) -> None:
        self.summary_writer.add_scalar(tag, value, int(step))
        group, _, name = tag.rpartition("/")
        self.summary_writer.add_scalar(f"{group or 'Metrics'}_vs_EnvironmentSteps/{name}", value,
                                       int(env_steps))

    def add_iteration_scalar(self, tag: str, value: Any, reduce: str = "mean") -> None:
        """One point per summarised iteration for ``tag``, however many times this is called
        in it (e.g. from ``calc_loss``, once per mini-batch): the ``reduce`` (``"mean"`` or
        ``"last"``) of the iteration's values, written when the Learner finishes the
        iteration's training (:meth:`flush_iteration_scalars`), against the iteration (and
        the env steps of the last call).

        A no-op unless :meth:`should_summarize` (so no check is needed around it, and
        ``value``, a Python number or a one-element tensor, is not read otherwise).
        """
        if reduce not in ("mean", "last"):
            raise ValueError(f"RunContext.add_iteration_scalar({tag!r}): reduce must be "
                             f"'mean' or 'last', got {reduce!r}")
        if not self.should_summarize():
            return
        v = _to_float(value)
        key = (tag, self.summary_iteration())
        with self._iteration_scalars_lock:
            stale = [k for k in self._iteration_scalars if k[1] != key[1]]
            if stale:  # an iteration nothing flushed (a loop driven by hand): write it now
                self._flush_locked(stale)
            entry = self._iteration_scalars.setdefault(key, [reduce, [], 0])
            entry[1].append(v)
            entry[2] = self.env_steps

    def flush_iteration_scalars(self) -> None:
        """Write what :meth:`add_iteration_scalar` gathered (one point per tag and
        iteration) and forget it. The Learner calls it after each iteration's training; a
        loop driven by hand calls it when its iteration is done."""
        with self._iteration_scalars_lock:
            self._flush_locked(list(self._iteration_scalars))

    def _flush_locked(self, keys: Any) -> None:
        for key in keys:
            reduce, values, env_steps = self._iteration_scalars.pop(key)
            if self.summary_writer is not None and values:
                v = values[-1] if reduce == "last" else sum(values) / len(values)
                self._write(key[0], v, key[1], env_steps)

    def state_dict(self) -> Dict[str, int]:
        return {"iteration": self.iteration, "env_steps": self.env_steps,
                "num_updates": self.num_updates}

    def load_state_dict(self, state: Dict[str, int]) -> None:
        self.iteration = int(state["iteration"])
        self.env_steps = int(state["env_steps"])
        self.num_updates = int(state.get("num_updates", 0))


def _to_float(value: Any) -> float:
    """A number or a one-element tensor (detached first: a loss term keeps its graph)."""
    detach = getattr(value, "detach", None)
    return float(detach() if callable(detach) else value)


def default_run_context() -> RunContext:
    """A fresh standalone :class:`RunContext` for an algorithm built outside a Trainer.

    Each call returns a new context (there is no shared module-level one), so
    two algorithms built standalone (tests, notebooks, a subprocess) never
    share counters; a Trainer passes its own context to the algorithm instead.
    """
    return RunContext()
