"""Saving and restoring a run: the algorithm, counters, RNG, episode metrics, the
experiment's signature and (if asked) the replay buffer, through
:class:`~alf.trainers.checkpointer.Checkpointer` in ``root_dir/train``.

A save is shielded from Ctrl-C. In a data-parallel run every rank saves and
restores together: each rank's own part (RNG, metrics, buffer) travels to rank 0,
which alone writes; on restore rank 0 reads and every rank gets the shared state
and its own part. A checkpoint of another env or network shape is refused
before anything is written (:func:`~alf.trainers.experiment_signature.check_compatible`).
"""
import os
from typing import Any, Callable, Optional

from alf.errors import NonFiniteError, WriteFailedError
from alf.trainers import data_parallel_trainer as dp
from alf.trainers.checkpointer import Checkpointer
from alf.trainers.experiment_signature import (check_compatible, experiment_signature,
                                               load_algorithm_state)
from alf.trainers.milestones import MilestoneClock, keep_milestone
from alf.trainers.run_report import RunReport
from alf.utils.run_context import RunContext
from alf.utils.seeding import get_rng_state, set_rng_state


class RunCheckpoints:
    """The checkpoints of one run.

    Args:
        root_dir: the run directory (checkpoints go to ``root_dir/train``).
        config: the TrainerConfig (``num_checkpoints``, ``save_replay_buffer``, seed,
            ``milestone_env_steps``/``milestone_seconds``: see :mod:`alf.trainers.milestones`).
        learner: the :class:`~alf.trainers.learner.Learner` (algorithm, replay buffer).
        context: the run context (counters).
        spec_source: what the experiment signature describes (the unroller, or the
            dataset's specs).
        metrics: returns the run's episode metrics (or None).
        report: where notices and the "saved checkpoint" line go.
        rank_group: the data-parallel rank group (None in a single process).
    """

    def __init__(self, root_dir: str, config: Any, learner: Any, context: RunContext,
                 spec_source: Any, metrics: Callable[[], Any], report: RunReport,
                 rank_group: Any = None):
        self._root_dir = root_dir
        self._config = config
        self._learner = learner
        self._context = context
        self._spec_source = spec_source
        self._metrics = metrics
        self._report = report
        self._group = rank_group
        self.checkpointer = Checkpointer(os.path.join(root_dir, "train"), config.num_checkpoints)
        self.saved_iteration: Optional[int] = None  # iteration of the newest checkpoint
        self._milestones = MilestoneClock(config.milestone_env_steps, config.milestone_seconds)

    def _state(self, wall_time_s: float) -> dict:
        metrics = self._metrics()
        algorithm = self._learner.algorithm
        return {"algorithm": algorithm.state_dict(), "context": self._context.state_dict(),
                "rng": get_rng_state(), "random_seed": self._config.random_seed,
                "metrics": metrics.state_dict() if metrics is not None else {},
                "experiment": experiment_signature(self._spec_source, algorithm),
                "wall_time_s": wall_time_s}

    def saves_replay_buffer(self) -> bool:
        rb = self._learner.replay_buffer
        return rb is not None and (self._config.save_replay_buffer or rb.enable_checkpoint)

    def milestone_due(self, wall_time_s: float) -> bool:
        """Whether this iteration reached a milestone (:mod:`alf.trainers.milestones`),
        after ``wall_time_s`` seconds of training. Data-parallel: every rank calls this at
        every iteration boundary and gets rank 0's answer (their clocks differ)."""
        clock = self._milestones
        if not clock.enabled:
            return False
        due = clock.due(self._context.env_steps, wall_time_s)
        if self._group is not None and clock.every_seconds > 0:
            due = bool(self._group.broadcast_object(due, "agreeing on a milestone"))
        return due

    def save(self, wall_time_s: float, milestone: bool = False) -> Optional[str]:
        """Write a checkpoint of the current iteration (the caller shields it from
        Ctrl-C); ``milestone``: also keep it as a milestone. Data-parallel: every rank
        calls this together; rank 0 alone writes (the others return None).

        Raises:
            WriteFailedError: the checkpoint could not be written (e.g. the disk is full);
                nothing of this iteration is left on disk, the previous one is intact. In
                a data-parallel run every rank raises (rank 0's error is the one shown).
            NonFiniteError: the run's guard is on (``TrainerConfig.check_finite``) and the
                state holds a non-finite tensor (e.g. a normaliser's buffer, which the
                update's checks do not watch): not written, the previous one is intact.
        """
        rb = self._learner.replay_buffer
        rb_state = rb.state_dict() if self.saves_replay_buffer() else None
        state = self._state(wall_time_s)
        iteration = self._context.iteration

        guard = self._context.finite_guard  # on: a non-finite tensor stops the run
        refuse = None if guard is None else (
            lambda name, kind: guard.checkpoint_error(self._learner.algorithm, name, kind))

        def write(state: dict, rb_state: Optional[dict]) -> Optional[str]:
            path = self.checkpointer.save(iteration, state, rb_state, refuse)
            if path is None:  # check_finite=False: not written (the checkpointer warned)
                return None
            kept = ""
            if milestone:
                kept = os.path.relpath(keep_milestone(path, iteration, self._context.env_steps),
                                       self._root_dir)
                kept = f" (milestone {kept})"
            self._report.line(f"[alf] saved checkpoint {os.path.relpath(path, self._root_dir)}"
                              + kept)
            return path

        if self._group is None:
            path = write(state, rb_state)
        else:  # every rank's own part goes to rank 0, which writes
            gathered = dp.gather_checkpoint(self._group, state, rb_state)
            path, error = None, None
            if gathered is not None:
                try:
                    path = write(*gathered)
                except (WriteFailedError, NonFiniteError) as e:
                    error = e
            # a failed write (or a non-finite state) stops every rank (rank 0 says why)
            self._group.check_together(error, "writing a checkpoint")
        self.saved_iteration = iteration
        return path

    def restore(self) -> Optional[float]:
        """Load the newest valid checkpoint; returns its training seconds, or None if
        there is none.

        Raises:
            IncompatibleSpecError: the checkpoint is of an experiment with other env specs
                or network shapes (e.g. resuming a CartPole run with another env).
        """
        algorithm = self._learner.algorithm
        signature = experiment_signature(self._spec_source, algorithm)

        def load():
            found = self.checkpointer.load_latest()
            if found is not None:
                check_compatible(found[1].get("experiment"), signature, self._root_dir)
            return found

        own_part = True
        if self._group is None:
            found = load()
            if found is not None:
                iteration, state, rb_state = found
                rb_state, _ = dp.split_rank_buffers(rb_state)
        else:  # rank 0 reads; every rank gets the shared state and its own part
            found = dp.restore_on_ranks(self._group, load)
            if found is not None:
                iteration, state, rb_state, own_part = found
        if found is None:
            return None
        load_algorithm_state(algorithm, state["algorithm"], self._root_dir)
        self._context.load_state_dict(state["context"])
        if own_part:
            set_rng_state(state["rng"])
        # New episodes after a resume come from a fresh, deterministic seed instead of
        # replaying the run's first episodes (env RNG states are not checkpointable).
        unroller = self._learner.unroller
        if unroller is not None:
            unroller.seed((self._config.random_seed * 1_000_003 + iteration) % (2 ** 31))
        metrics = self._metrics()
        if metrics is not None and own_part and state.get("metrics"):
            metrics.load_state_dict(state["metrics"])
        self.saved_iteration = iteration
        self._milestones.start(self._context.env_steps, float(state.get("wall_time_s", 0.0)))
        self._report.notice(f"[alf] resumed from iteration {iteration:,} "
                            f"({self._context.env_steps:,} env steps)")
        for note in getattr(algorithm, "restore_notes", ()):  # e.g. an Agent's weights
            self._report.notice(note)
        if self._group is None or self._group.is_main:  # bad newer files no longer count
            self._set_aside_unreadable()
        saved_world = int(state.get("world_size", 1))
        world = self._group.world_size if self._group is not None else 1
        if saved_world != world:
            self._report.notice(
                f"[alf] the checkpoint was saved by {saved_world} rank(s), this run has "
                f"{world}: ranks without a saved part start their own random streams, "
                "episode metrics and replay buffers afresh")
        self._restore_replay_buffer(rb_state)
        return float(state.get("wall_time_s", 0.0))

    def _set_aside_unreadable(self) -> None:
        """Move the checkpoints skipped as unreadable to ``*.corrupt``: left under their
        names they would count toward ``num_checkpoints``, and pruning would delete the
        oldest good checkpoint in their place."""
        for old, new in self.checkpointer.set_aside_unreadable():
            self._report.notice(
                f"[alf] moved the unreadable checkpoint {os.path.basename(old)} aside to "
                f"{os.path.basename(new)}: it is not counted among the TrainerConfig."
                f"num_checkpoints={self._config.num_checkpoints} kept (delete it when you "
                "no longer need it)")

    def _restore_replay_buffer(self, rb_state: Optional[dict]) -> None:
        """Load the saved buffer, or say in one line that it starts empty and why."""
        rb = self._learner.replay_buffer
        if rb is None:
            return
        if rb_state is not None:
            rb.load_state_dict(rb_state)
            self._report.notice(f"[alf] restored the replay buffer: {rb.total_size():,} steps")
            return
        if self._learner.clears_replay_buffer:
            return  # nothing in it outlives an iteration: nothing lost
        self._report.notice(
            "[alf] warning: no replay buffer was saved with this checkpoint, so training resumes "
            "with an empty buffer (as if from scratch for the replay data; updates wait for "
            "it to refill). Set TrainerConfig.save_replay_buffer=True to save it with each "
            "checkpoint.")


def spec_source(unroller: Any, offline_specs: Any) -> Any:
    """What the experiment signature describes: the unroller, or (pure offline) the
    dataset's specs."""
    return unroller if unroller is not None else _SpecView(offline_specs)


class _SpecView:
    """The env-spec methods :func:`experiment_signature` reads, over dataset specs."""

    def __init__(self, specs: Any):
        self._specs = specs
        self.env_name = specs.env_name

    def observation_spec(self):
        return self._specs.observation_spec

    def action_spec(self):
        return self._specs.action_spec
