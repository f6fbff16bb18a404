"""The Trainer runs one experiment in ``root_dir``; the :class:`~alf.trainers.learner.Learner`
it builds owns the training loop of the algorithm::

    Trainer (seeding, build, checkpoints, evaluation, summaries, progress,
             signals, torchrun)
      └── Learner (unroll/collect, store, train: on-policy / replay / whole buffer /
                   async batch / hybrid; priorities; rank agreement)
            ├── Unroller (sync: envs in this process; async: env worker processes)
            └── RLAlgorithm (specs, hooks, data transformer, declared regime)

Construction does no I/O in ``root_dir`` (so a bad config writes nothing);
:meth:`Trainer.run` first restores the newest valid checkpoint (refusing one of
another env or network shape before anything is written), then writes the
config, and trains until ``num_iterations`` / ``num_env_steps``. Ctrl-C or
SIGTERM (see :mod:`alf.trainers.interrupt_guard`) stops at an iteration
boundary, saves a checkpoint that a second Ctrl-C cannot cut short, closes every
env (reaping child processes) and raises :class:`TrainingInterrupted` naming the
file. A crash saves nothing: the newest checkpoint stays the last good state. A
file that cannot be written (full disk) is one :class:`~alf.errors.WriteFailedError`,
with every earlier file intact.
"""
import logging
import os
import random
import signal
import time
from typing import Any, Optional, Sequence

from alf.config import config_text as current_config_text
from alf.distributed import PeerLostError
from alf.environments import create_environment
from alf.experiment import EnvSpecs
from alf.metrics import EpisodeMetrics
from alf.trainers import callbacks, data_parallel_trainer as dp
from alf.trainers.interrupt_guard import (InterruptedBeforeTraining, InterruptGuard,
                                          StopAtBoundary, TrainingInterrupted, stop_signal,
                                          stop_words)
from alf.trainers.learner_builder import build_learner, eval_env_kwargs
from alf.trainers.learner_thread import make_iteration_runner
from alf.trainers.progress_log import PROGRESS_FILE, ProgressLog, RunLogs
from alf.trainers.run_checkpoints import RunCheckpoints, spec_source
from alf.trainers.run_files import CONFIG_FILE, write_operative_config, write_start_files
from alf.trainers.run_report import RunReport
from alf.trainers.summary_writer import open_summary_writer
from alf.trainers.thread_budget import run_thread_governor
from alf.trainers.trainer_config import TrainerConfig
from alf.utils.process_signals import sigint_ignored_in_children
from alf.utils.run_context import RunContext
from alf.utils.seeding import set_random_seed

__all__ = ["Trainer", "CONFIG_FILE", "PROGRESS_FILE"]


class Trainer:
    """Runs one experiment in ``root_dir``.

    Args:
        config: the :class:`TrainerConfig`.
        root_dir: where checkpoints (``train/``), summaries and ``config.gin`` go.
        config_text: gin text written to ``root_dir/config.gin`` (the full config).
        quiet: suppress the console progress, checkpoint and evaluation lines (warnings
            and resume notices are always shown).
        overrides: ``--conf_param`` bindings given for this resume; named in the log once
            the checkpoint is known to fit (they persist through ``config_text``).
        rank_group: this rank's place in a torchrun job (None in a single process).
    """

    def __init__(self, config: TrainerConfig, root_dir: str, config_text: str = "",
                 quiet: bool = False, overrides: Sequence[str] = (),
                 rank_group: Optional["dp.RankGroup"] = None):
        self._config = config
        self._root_dir = os.path.abspath(root_dir)
        self._config_text = config_text
        self._group = rank_group
        self._is_main = rank_group is None or rank_group.is_main  # writes files, prints
        self._overrides = list(overrides)
        if rank_group is not None:
            config.device = rank_group.device_for(config.device)
        if config.random_seed is None:
            config.random_seed = random.SystemRandom().randrange(2 ** 31)
            logging.info("TrainerConfig.random_seed not set; using %d", config.random_seed)
        set_random_seed(config.random_seed)
        self._context = RunContext(config.num_iterations, config.num_env_steps,
                                   summary_interval=config.summary_interval,
                                   summarize_first_interval=config.summarize_first_interval)
        self._context.cpu_governor = self._governor = run_thread_governor(
            config, rank_group, lambda: _worker_pids(self.unroller))
        self._report = RunReport(config, self._context, self._governor, self._is_main, quiet)
        self._env = self._learner = self._eval_env = None
        self._offline_specs: Optional[EnvSpecs] = None
        self._offline_metrics: Optional[EpisodeMetrics] = None
        self._build(config)
        self._checkpoints = RunCheckpoints(
            self._root_dir, config, self._learner, self._context, self._spec_source,
            lambda: self._metrics, self._report, rank_group)
        self._writer = None
        # a data-parallel rank's SIGTERM is its StopHandler's (it knows whether a peer died)
        self._interrupts = InterruptGuard(
            quiet=not self._is_main,
            signals=(signal.SIGINT,) if rank_group is not None else
            (signal.SIGINT, signal.SIGTERM))
        self._wall_time_offset = 0.0  # training seconds before this process (restored)
        self._loop_start: Optional[float] = None
        self._runner: Any = None  # runs iterations (in the loop; a learner thread maybe)

    def _build(self, config: TrainerConfig) -> None:
        """The Learner (:func:`build_learner`) and the evaluation env; on any failure
        everything built so far is closed (data-parallel: the other ranks are told)."""
        group = self._group
        try:
            built = build_learner(config, self._context,
                                  self._config_text or current_config_text(), group)
            self._learner, self._env, self._offline_specs = built
            if built.offline_specs is not None:
                # the window of AverageReturn is the newest evaluation's episodes
                self._offline_metrics = EpisodeMetrics(1, buffer_size=config.num_eval_episodes)
            if config.evaluate and self._is_main:  # rank 0 alone evaluates
                with sigint_ignored_in_children():
                    self._eval_env = create_environment(
                        num_parallel_environments=config.num_eval_environments,
                        seed=config.random_seed + 1_000_003,
                        **eval_env_kwargs(self._offline_specs))
        except BaseException as e:
            self.close()
            if group is not None and not isinstance(e, KeyboardInterrupt):
                # the other ranks must not wait for this one (a Ctrl-C reaches every rank
                # at its own moment: no collective then, each just stops)
                group.check_together(e, "building the experiment")
            if isinstance(e, KeyboardInterrupt) and not self._is_main:
                e.alf_silent = True
            raise
        if group is not None:
            try:
                group.check_together(None, "building the experiment")
                self._context.data_parallel = dp.join(group, self.algorithm, self.unroller,
                                                      config.random_seed)
            except BaseException:
                self.close()
                raise

    @property
    def _spec_source(self) -> Any:
        """What the experiment signature describes: the unroller, or the dataset specs."""
        return spec_source(self.unroller, self._offline_specs)

    @property
    def _metrics(self) -> EpisodeMetrics:
        return self.unroller.metrics if self.unroller is not None else self._offline_metrics

    @property
    def learner(self) -> Any:
        """The :class:`~alf.trainers.learner.Learner` training the algorithm."""
        return self._learner

    @property
    def algorithm(self) -> Any:
        return self._learner.algorithm

    @property
    def unroller(self) -> Any:
        """The source of experience (sync or async; None: pure offline); owned and closed
        by this Trainer."""
        learner = getattr(self, "_learner", None)
        return learner.unroller if learner is not None else None

    @property
    def env(self) -> Any:
        """The training env of a sync run (None when async or pure offline)."""
        return self._env

    @property
    def context(self) -> RunContext:
        return self._context

    @property
    def root_dir(self) -> str:
        return self._root_dir

    # ------------------------------------------------------------ checkpoint
    def save_checkpoint(self, milestone: bool = False) -> Optional[str]:
        """Write a checkpoint of the current iteration (Ctrl-C waits until it is complete),
        ``milestone``: kept as one too; see :meth:`RunCheckpoints.save`."""
        with self._interrupts.shielded():
            if self._runner is not None:  # a learner thread: every unroll trained first
                self._runner.drain()
            return self._checkpoints.save(self._wall_time(), milestone)

    def restore_checkpoint(self) -> bool:
        """Load the newest valid checkpoint (:meth:`RunCheckpoints.restore`); False if none."""
        wall_time = self._checkpoints.restore()
        self._wall_time_offset = wall_time or 0.0
        return wall_time is not None

    # ------------------------------------------------------------------- run
    def _done(self) -> bool:
        c, ctx = self._config, self._context
        return ((c.num_iterations > 0 and ctx.iteration >= c.num_iterations) or
                any(0 < limit <= ctx.env_steps for limit in (c.num_env_steps,
                                                             c.stop_at_env_steps)))

    def _wall_time(self) -> float:
        """Seconds of training in this run dir, across resumes."""
        start = self._loop_start
        return self._wall_time_offset + (time.perf_counter() - start if start else 0.0)

    def run(self) -> None:
        """Train to completion (or Ctrl-C); checkpoints and closes envs on every exit.

        Everything that can fail on bad input (an unreadable checkpoint, a checkpoint of
        another env) fails before anything is written into ``root_dir``.

        Raises:
            TrainingInterrupted: Ctrl-C or SIGTERM; its ``checkpoint`` names the file
                written.
            WriteFailedError: a file could not be written (full disk): one line naming it;
                the previous checkpoint and config files are intact.
        """
        if not self._prepare_run_dir():
            self.close()
            return
        if self._group is not None:  # torchrun's SIGTERM while all ranks live = Ctrl-C
            self._group.on_stop_request(self._interrupts.press)
        with self._interrupts:
            try:
                self._loop()
            except StopAtBoundary:
                self._leaving()
                reason = self._interrupts.reason
                self._report.notice(f"[alf] {stop_words(reason)}: saving a checkpoint and "
                                    "stopping ...")
                with self._interrupts.shielded():
                    saved = self._shutdown(save=True)
                interrupted = TrainingInterrupted(saved, self._context.iteration,
                                                  reason=reason)
                interrupted.alf_silent = not self._is_main  # rank 0 says where it saved
                raise interrupted from None
            except KeyboardInterrupt:
                # Abandoned mid-iteration (third Ctrl-C): like a crash, that state is not
                # trustworthy; the newest checkpoint stays the one to resume from.
                self._leaving()
                with self._interrupts.shielded():
                    self._shutdown(save=False)
                newest = self._checkpoints.checkpointer.list_checkpoints()
                abandoned = TrainingInterrupted(None, self._context.iteration, abandoned=True,
                                                newest=newest[0][1] if newest else None,
                                                reason=self._interrupts.reason)
                abandoned.alf_silent = not self._is_main  # rank 0 names the checkpoint
                raise abandoned from None
            except BaseException:
                # A crash mid-iteration leaves no trustworthy state to save: the newest
                # checkpoint on disk stays the one to resume from.
                self._leaving()
                with self._interrupts.shielded():
                    self._shutdown(save=False)
                raise
            self._leaving()
            with self._interrupts.shielded():
                self._shutdown(save=True)

    def _prepare_run_dir(self) -> bool:
        """Resume from the newest checkpoint, write ``config.gin``, open the summary
        writer; False when the run is already complete. A failure closes everything
        (data-parallel: every rank fails together)."""
        report = self._report
        try:
            resumed = self.restore_checkpoint()
            if resumed and self._is_main:  # not after training until the next save
                self._checkpoints.checkpointer.check_space_for_next(
                    self._checkpoints.saves_replay_buffer())
            if not resumed and os.path.isfile(os.path.join(self._root_dir, CONFIG_FILE)):
                report.notice(f"[alf] {self._root_dir} has a {CONFIG_FILE} but no checkpoint "
                              "(the previous run stopped before saving one): training starts "
                              "from iteration 0")
            if self._is_main:  # rank 0 alone writes files (config.gin, run_info/)
                write_start_files(self._root_dir, self._config_text, self.algorithm)
            if resumed and self._overrides:
                report.notice("[alf] applied to the saved config (kept for later resumes): "
                              + ", ".join(self._overrides))
            complete = resumed and self._done()
            if complete:
                paused = 0 < self._config.stop_at_env_steps <= self._context.env_steps
                report.notice(
                    f"[alf] {self._root_dir} is already complete (iteration "
                    f"{self._context.iteration:,}, {self._context.env_steps:,} env steps); "
                    "raise TrainerConfig." + ("stop_at_env_steps" if paused else
                                              "num_iterations / num_env_steps") + " to continue")
            # No purge_step: TensorBoard applies it to every tag, which would erase the
            # whole pre-resume `*_vs_EnvironmentSteps` series (env steps >> iterations).
            # Events a crashed run wrote past its checkpoint are dropped per tag by
            # TensorBoard when the resumed run's steps go back.
            if self._is_main and not complete:
                self._writer = open_summary_writer(self._root_dir, self._config, self._context)
                self._context.summary_writer = self._writer
        except KeyboardInterrupt as e:
            self.close()  # no collective: each rank gets its own Ctrl-C at its own moment
            interrupted = InterruptedBeforeTraining()
            interrupted.signum = stop_signal(e)
            interrupted.alf_silent = getattr(e, "alf_silent", False) or not self._is_main
            raise interrupted from None
        except BaseException as e:
            self.close()
            if self._group is not None and not isinstance(e, PeerLostError):
                # the other ranks fail too instead of waiting in the training loop
                self._group.check_together(e, "preparing the run directory")
            raise
        if self._group is not None:  # e.g. rank 0 could not write root_dir
            try:
                self._group.check_together(None, "preparing the run directory")
            except BaseException:
                self.close()
                raise
        return not complete

    def _leaving(self) -> None:
        """Data-parallel: from here this rank only stops (see :meth:`RankGroup.leaving`)."""
        if self._group is not None:
            self._group.leaving()

    def _shutdown(self, save: bool) -> Optional[str]:
        """Final save (unless the newest checkpoint is current), operative config, close.
        After a failure (``save=False``, or a save that failed) nothing here may raise a
        second error over the first."""
        path = None
        failed = not save
        try:
            self._runner_stop(drain=save)
            if save and self._context.iteration != self._checkpoints.saved_iteration:
                path = self.save_checkpoint()
            if save and self._group is not None:
                # the other ranks wait for rank 0's write: none exits early, so torchrun
                # has no reason to stop rank 0 in the middle of it
                self._group.check_together(None, "writing the final checkpoint")
        except BaseException:
            failed = True
            raise
        finally:
            try:
                if self._is_main:
                    write_operative_config(self._root_dir, self._report.notice,
                                           report=not failed)
            finally:
                self.close()
        return path

    def _runner_stop(self, drain: bool) -> None:
        """Stop the learner thread, if any (``drain``: train its queued unrolls first)."""
        runner, self._runner = getattr(self, "_runner", None), None
        if runner is not None:
            runner.close(drain=drain)

    def _loop(self) -> None:
        cfg, ctx = self._config, self._context
        log = RunLogs(self._root_dir, ctx.iteration) if self._is_main else None
        for name, dropped in (log.dropped_rows.items() if log is not None else ()):
            self._report.notice(f"[alf] {name}: dropped {dropped} row(s) past the restored "
                                f"iteration {ctx.iteration:,} (written after its checkpoint)")
        self._runner = make_iteration_runner(self._learner, cfg.learner_thread)
        self._loop_start = time.perf_counter()
        self._at_start = (ctx.env_steps, ctx.num_updates, ctx.iteration + 1)
        self._iter_seconds = 0.0
        ctx.unroll_seconds = 0.0
        try:
            while not self._done():
                ctx.begin_iteration()
                t0 = time.perf_counter()
                self._runner.run_iteration()
                self._iter_seconds += time.perf_counter() - t0
                self._governor.tick()
                if self._end_of_iteration(log):
                    raise StopAtBoundary
        finally:
            if log is not None:
                log.close()

    def _end_of_iteration(self, log: Optional[RunLogs]) -> bool:
        """Rank agreement, summaries, evaluation, checkpoint, progress row and line after
        one iteration; True when the run should stop at this boundary."""
        cfg, ctx, report = self._config, self._context, self._report
        metrics = self._metrics
        stop = self._interrupts.requested
        if self._group is not None:
            # all ranks stop at the same boundary; metrics pooled over ranks
            stop, merged = dp.sync_end_of_iteration(self._group, stop, metrics)
            if stop:  # every rank says the same why (a signal reaches only some)
                self._interrupts.reason = dp.agree_stop_reason(self._group,
                                                               self._interrupts.reason)
            if self.unroller is not None:  # pure offline: rank 0's evaluations
                metrics = merged
            if cfg.distributed_check_interval and \
                    ctx.iteration % cfg.distributed_check_interval == 0:
                dp.check_drift(self._group, self.algorithm, cfg.distributed_drift,
                               report.notice)
        steps0, updates0, first_iteration = self._at_start
        now = time.perf_counter()
        fps = (ctx.env_steps - steps0) / max(1e-9, now - self._loop_start)
        ups = (ctx.num_updates - updates0) / max(1e-9, now - self._loop_start)
        if ctx.should_summarize():
            report.summarize(metrics, fps, self._iter_seconds)
        callbacks.run_callbacks(cfg.callbacks, self.algorithm, ctx, metrics)
        # every eval_interval iterations, and the policy the run ends with (a sweep's score)
        if cfg.evaluate and self._is_main and (ctx.iteration % cfg.eval_interval == 0
                                               or self._done()):
            self._evaluate(log.eval)
        if ctx.iteration == first_iteration and self._is_main:
            report.warn_unused_bindings(not cfg.async_unroll and (
                self.unroller is not None or self._eval_env is not None))
        milestone = self._checkpoints.milestone_due(self._wall_time())
        if milestone or ctx.iteration % cfg.checkpoint_interval == 0:
            self.save_checkpoint(milestone)
        report.end_of_iteration(log and log.progress, self._learner, metrics, fps, ups, now - self._loop_start,
                                self._wall_time(), self._done(), first_iteration,
                                self._runner.progress_text())
        return stop

    def _evaluate(self, eval_log: ProgressLog) -> None:
        self._runner.drain()  # a learner thread: evaluate the policy of this iteration
        results = self._report.evaluate(self.algorithm, self._eval_env,
                                        self.algorithm.data_transformer, eval_log,
                                        self._wall_time())
        if results and self.unroller is None:  # pure offline: evaluation is the return
            self._offline_metrics.add_finished(results, 0)

    def close(self) -> None:
        """Close envs and the summary writer (idempotent; a learner thread is stopped
        without training what it has queued)."""
        try:
            self._runner_stop(drain=False)
        finally:
            self._close_envs()

    def _close_envs(self) -> None:
        for env in (self.unroller, getattr(self, "_env", None),
                    getattr(self, "_eval_env", None)):
            if env is not None:
                try:
                    env.close()
                except Exception:  # noqa: BLE001
                    pass
        if getattr(self, "_writer", None) is not None:
            self._writer.close()  # never raises (a failed events write was reported)
            self._writer = None
        if getattr(self, "_governor", None) is not None:
            self._governor.restore()  # torch's thread count as before this run


def _worker_pids(unroller: Any) -> Sequence[int]:
    """The env worker processes of an async unroller (their CPU is this run's own)."""
    pids = getattr(unroller, "worker_pids", None)
    return pids() if pids is not None else ()
