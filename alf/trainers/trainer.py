"""The Trainer: builds env(s) and algorithm, loops ``train_iter``, evaluates,
summarises, checkpoints and resumes.

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
import math
import os
import random
import signal
import sys
import time
from typing import Optional, Sequence

import torch

from alf import config as alf_config
from alf.errors import ConfigError, UserError, WriteFailedError
from alf.environments import create_environment
from alf.experiment import EnvSpecs, build_algorithm
from alf.metrics import EpisodeMetrics
from alf.unrollers.sync_unroller import SyncUnroller
from alf.trainers.checkpointer import Checkpointer
from alf.trainers.evaluator import evaluate
from alf.trainers.experiment_signature import (check_compatible, experiment_signature,
                                               load_algorithm_state)
from alf.trainers.interrupt_guard import (InterruptedBeforeTraining, InterruptGuard,
                                          StopAtBoundary, TrainingInterrupted,
                                          sigint_ignored_in_children, stop_signal,
                                          stop_words)
from alf.trainers.progress_log import ProgressLog
from alf.trainers.summary_writer import open_summary_writer
from alf.trainers.trainer_config import TrainerConfig
from alf.utils.run_context import RunContext
from alf.utils.cpu_budget import ThreadGovernor, usable_cpus
from alf.trainers import data_parallel_trainer as dp
from alf.utils.atomic_write import atomic_write_text
from alf.utils.seeding import get_rng_state, set_random_seed, set_rng_state

CONFIG_FILE = "config.gin"
PROGRESS_FILE = "progress.csv"


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
    """

    def __init__(self, config: TrainerConfig, root_dir: str, config_text: str = "",
                 quiet: bool = False, overrides: Sequence[str] = (),
                 rank_group: Optional["dp.RankGroup"] = None):
        self._config = config
        self._root_dir = os.path.abspath(root_dir)
        self._config_text = config_text
        self._group = rank_group  # torchrun: this rank's place; None in a single process
        self._is_main = rank_group is None or rank_group.is_main  # writes files, prints
        self._quiet = quiet or not self._is_main
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
        self._context.cpu_governor = self._governor = _thread_governor(
            config, rank_group, lambda: self._child_pids())
        self._env = None  # the sync unroller's training env (None when async)
        self._unroller = None  # None: pure offline training (no training env)
        self._offline_specs: Optional[EnvSpecs] = None  # pure offline: from the dataset
        self._eval_env = None
        try:
            self._algorithm = self._build_learner(config)
            self._transformer = self._algorithm.data_transformer
            if config.evaluate and self._is_main:  # rank 0 alone evaluates
                with sigint_ignored_in_children():
                    self._eval_env = create_environment(
                        num_parallel_environments=config.num_eval_environments,
                        seed=config.random_seed + 1_000_003, **self._offline_env_kwargs())
        except BaseException as e:
            self.close()
            if rank_group is not None and not isinstance(e, KeyboardInterrupt):
                # the other ranks must not wait for this one (a Ctrl-C reaches every rank
                # at its own moment: no collective then, each just stops)
                rank_group.check_together(e, "building the experiment")
            if isinstance(e, KeyboardInterrupt) and not self._is_main:
                e.alf_silent = True
            raise
        if rank_group is not None:
            try:
                rank_group.check_together(None, "building the experiment")
                self._context.data_parallel = dp.join(rank_group, self._algorithm,
                                                      self._unroller, config.random_seed)
            except BaseException:
                self.close()
                raise
        self._checkpointer = Checkpointer(os.path.join(self._root_dir, "train"),
                                          config.num_checkpoints)
        self._writer = None
        self._saved_iteration: Optional[int] = None  # iteration of the newest checkpoint
        # a data-parallel rank's SIGTERM is its StopHandler's (it knows whether a peer died)
        self._interrupts = InterruptGuard(
            quiet=not self._is_main,
            signals=(signal.SIGINT,) if rank_group is not None else
            (signal.SIGINT, signal.SIGTERM))
        self._wall_time_offset = 0.0  # training seconds before this process (restored)
        self._loop_start: Optional[float] = None

    def _build_learner(self, config: TrainerConfig):
        """The algorithm (:func:`alf.experiment.build_algorithm`) and the unroller this
        Trainer owns: in-process envs (sync) or env worker processes (async)."""
        if config.offline_only:
            # the configured env's specs (the datasets are checked against them; the env
            # is built and closed at once, never stepped), or the first dataset's
            from alf.datasets.offline_buffer import dataset_paths, dataset_env_specs
            from alf.unrollers.async_unroller import probe_env_specs
            specs = (probe_env_specs() if _env_name_bound() else
                     dataset_env_specs(dataset_paths(config.offline_buffer_dir)[0]))
            self._offline_specs = specs
            algorithm = build_algorithm(config, specs, "learner", self._context)
            algorithm.set_time_step_spec(specs.time_step_spec, specs.env_name)
            algorithm.prepare()
            # the window of AverageReturn is the newest evaluation's episodes
            self._offline_metrics = EpisodeMetrics(1, buffer_size=config.num_eval_episodes)
            return algorithm
        rank = self._group.rank if self._group is not None else 0
        if config.async_unroll and self._group is not None and not config.unroll_length \
                and config.async_mode == "processes":
            raise ConfigError(
                "torchrun with TrainerConfig.async_unroll=True and unroll_length=0 (each "
                "iteration takes whatever trajectories are ready): the ranks would train on "
                "batches of different sizes and their updates would not pair up. Set "
                "TrainerConfig.unroll_length to the trajectory length (e.g. 32), or "
                "async_mode='deterministic'")
        if config.async_unroll:
            from alf.unrollers.async_unroller import AsyncUnroller, probe_env_specs
            specs = probe_env_specs()
            algorithm = build_algorithm(config, specs, "learner", self._context)
            self._unroller = AsyncUnroller(config, self._config_text or alf_config.config_text(),
                                           specs, self._context)
            if self._group is not None:
                self._unroller.set_rank(rank, dp.RANK_SEED_STRIDE)
            algorithm.attach_unroller(self._unroller)
            algorithm.prepare()
            self._unroller.connect(algorithm)
            return algorithm
        with sigint_ignored_in_children():
            # a rank's envs get the ids (and so the seeds) after the lower ranks' envs
            self._env = create_environment(seed=config.random_seed,
                                           env_id_offset=rank * dp.configured_num_envs())
        algorithm = build_algorithm(config, EnvSpecs.of(self._env), "learner", self._context,
                                    env=self._env)
        self._unroller = SyncUnroller.for_algorithm(self._env, algorithm,
                                                    config.metric_buffer_size)
        algorithm.attach_unroller(self._unroller)
        algorithm.prepare()
        return algorithm

    def _offline_env_kwargs(self) -> dict:
        """Pure offline: the evaluation env is the dataset's unless the config names one."""
        if self._offline_specs is None or _env_name_bound():
            return {}
        return {"env_name": self._offline_specs.env_name}

    @property
    def _spec_source(self):
        """What the experiment signature describes: the unroller, or the dataset specs."""
        return self._unroller if self._unroller is not None else _SpecView(self._offline_specs)

    @property
    def _metrics(self) -> EpisodeMetrics:
        return (self._unroller.metrics if self._unroller is not None
                else self._offline_metrics)

    @property
    def algorithm(self):
        return self._algorithm

    @property
    def unroller(self):
        """The source of experience (sync or async); owned and closed by this Trainer."""
        return self._unroller

    @property
    def context(self) -> RunContext:
        return self._context

    @property
    def root_dir(self) -> str:
        return self._root_dir

    # ------------------------------------------------------------ checkpoint
    def _training_state(self) -> dict:
        metrics = self._metrics
        return {"algorithm": self._algorithm.state_dict(), "context": self._context.state_dict(),
                "rng": get_rng_state(), "random_seed": self._config.random_seed,
                "metrics": metrics.state_dict() if metrics is not None else {},
                "experiment": experiment_signature(self._spec_source, self._algorithm),
                "wall_time_s": self._wall_time()}

    def save_checkpoint(self) -> Optional[str]:
        """Write a checkpoint of the current iteration (Ctrl-C waits until it is complete).
        In a data-parallel run every rank calls this together and rank 0 alone writes
        (the other ranks return None).

        Raises:
            WriteFailedError: the checkpoint could not be written (e.g. the disk is full);
                nothing of this iteration is left on disk, the previous checkpoint is intact.
                In a data-parallel run every rank raises (rank 0's error is the one shown).
        """
        rb = self._algorithm.replay_buffer
        rb_state = rb.state_dict() if self._saves_replay_buffer() else None
        with self._interrupts.shielded():
            state = self._training_state()
            if self._group is None:
                path = self._checkpointer.save(self._context.iteration, state, rb_state)
            else:  # every rank's own part goes to rank 0, which writes
                gathered = dp.gather_checkpoint(self._group, state, rb_state)
                path, error = None, None
                if gathered is not None:
                    try:
                        path = self._checkpointer.save(self._context.iteration, *gathered)
                    except WriteFailedError as e:
                        error = e
                # a failed write stops every rank (rank 0 says why), not only rank 0
                self._group.check_together(error, "writing a checkpoint")
            self._saved_iteration = self._context.iteration
            if path is not None:
                self._print_line(
                    f"[alf] saved checkpoint {os.path.relpath(path, self._root_dir)}")
        return path

    def _saves_replay_buffer(self) -> bool:
        rb = self._algorithm.replay_buffer
        return rb is not None and (self._config.save_replay_buffer or rb.enable_checkpoint)

    def restore_checkpoint(self) -> bool:
        """Load the newest valid checkpoint; False if there is none.

        Raises:
            IncompatibleSpecError: the checkpoint is of an experiment with other env specs
                or network shapes (e.g. resuming a CartPole run with another env).
        """
        signature = experiment_signature(self._spec_source, self._algorithm)

        def load():
            found = self._checkpointer.load_latest()
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
            return False
        load_algorithm_state(self._algorithm, state["algorithm"], self._root_dir)
        self._context.load_state_dict(state["context"])
        if own_part:
            set_rng_state(state["rng"])
        self._wall_time_offset = float(state.get("wall_time_s", 0.0))
        # New episodes after a resume come from a fresh, deterministic seed instead of
        # replaying the run's first episodes (env RNG states are not checkpointable).
        if self._unroller is not None:
            self._unroller.seed((self._config.random_seed * 1_000_003 + iteration) % (2 ** 31))
        if self._metrics is not None and own_part and state.get("metrics"):
            self._metrics.load_state_dict(state["metrics"])
        self._saved_iteration = iteration
        self._notice(f"[alf] resumed from iteration {iteration:,} "
                     f"({self._context.env_steps:,} env steps)")
        if self._is_main:  # the resume is accepted: bad newer files no longer count
            self._set_aside_unreadable()
        saved_world = int(state.get("world_size", 1))
        world = self._group.world_size if self._group is not None else 1
        if saved_world != world:
            self._notice(f"[alf] the checkpoint was saved by {saved_world} rank(s), this run has "
                         f"{world}: ranks without a saved part start their own random streams, "
                         "episode metrics and replay buffers afresh")
        self._restore_replay_buffer(rb_state)
        return True

    def _set_aside_unreadable(self) -> None:
        """Move the checkpoints skipped as unreadable to ``*.corrupt``: left under their
        names they would count toward ``num_checkpoints``, and pruning would delete the
        oldest good checkpoint in their place."""
        for old, new in self._checkpointer.set_aside_unreadable():
            self._notice(f"[alf] moved the unreadable checkpoint {os.path.basename(old)} aside "
                         f"to {os.path.basename(new)}: it is not counted among the "
                         f"TrainerConfig.num_checkpoints={self._config.num_checkpoints} kept "
                         "(delete it when you no longer need it)")

    def _restore_replay_buffer(self, rb_state: Optional[dict]) -> None:
        """Load the saved buffer, or say in one line that it starts empty and why."""
        rb = self._algorithm.replay_buffer
        if rb is None:
            return
        if rb_state is not None:
            rb.load_state_dict(rb_state)
            self._notice(f"[alf] restored the replay buffer: {rb.total_size():,} steps")
            return
        if self._algorithm.clears_replay_buffer:
            return  # nothing in it outlives an iteration: nothing lost
        self._notice(
            "[alf] warning: no replay buffer was saved with this checkpoint, so training resumes "
            "with an empty buffer (as if from scratch for the replay data; updates wait for "
            "it to refill). Set TrainerConfig.save_replay_buffer=True to save it with each "
            "checkpoint.")

    # ------------------------------------------------------------------- run
    def _done(self) -> bool:
        c, ctx = self._config, self._context
        return ((c.num_iterations > 0 and ctx.iteration >= c.num_iterations) or
                (c.num_env_steps > 0 and ctx.env_steps >= c.num_env_steps))

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
        config_path = os.path.join(self._root_dir, CONFIG_FILE)
        try:
            resumed = self.restore_checkpoint()
            if resumed and self._is_main:  # not after training until the next save
                self._checkpointer.check_space_for_next(self._saves_replay_buffer())
            if not resumed and os.path.isfile(config_path):
                self._notice(f"[alf] {self._root_dir} has a {CONFIG_FILE} but no checkpoint "
                             "(the previous run stopped before saving one): training starts "
                             "from iteration 0")
            if self._is_main:  # rank 0 alone writes files
                self._write_config(config_path)
            if resumed and self._overrides:
                self._notice("[alf] applied to the saved config (kept for later resumes): "
                             + ", ".join(self._overrides))
            complete = resumed and self._done()
            if complete:
                self._notice(
                    f"[alf] {self._root_dir} is already complete (iteration "
                    f"{self._context.iteration:,}, {self._context.env_steps:,} env steps); "
                    "raise TrainerConfig.num_iterations / num_env_steps to continue")
            # No purge_step: TensorBoard applies it to every tag, which would erase the
            # whole pre-resume `*_vs_EnvironmentSteps` series (env steps >> iterations).
            # Events a crashed run wrote past its checkpoint are dropped per tag by
            # TensorBoard when the resumed run's steps go back.
            if self._is_main and not complete:
                self._writer = open_summary_writer(self._root_dir)
                self._context.summary_writer = self._writer
        except KeyboardInterrupt as e:
            self.close()  # no collective: each rank gets its own Ctrl-C at its own moment
            interrupted = InterruptedBeforeTraining()
            interrupted.signum = stop_signal(e)
            interrupted.alf_silent = getattr(e, "alf_silent", False) or not self._is_main
            raise interrupted from None
        except BaseException as e:
            self.close()
            self._agree_on_failure(e)
            raise
        if self._group is not None:  # e.g. rank 0 could not write root_dir
            try:
                self._group.check_together(None, "preparing the run directory")
            except BaseException:
                self.close()
                raise
        if complete:
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
                self._notice(f"[alf] {stop_words(reason)}: saving a checkpoint and "
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
                newest = self._checkpointer.list_checkpoints()
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

    def _leaving(self) -> None:
        """Data-parallel: from here this rank only stops (see :meth:`RankGroup.leaving`)."""
        if self._group is not None:
            self._group.leaving()

    def _agree_on_failure(self, error: BaseException) -> None:
        """Data-parallel: tell the other ranks that preparing the run failed here (they
        fail too instead of waiting in the training loop; one rank prints it)."""
        from alf.distributed import PeerLostError
        if self._group is not None and not isinstance(error, PeerLostError):
            self._group.check_together(error, "preparing the run directory")

    def _shutdown(self, save: bool) -> Optional[str]:
        """Final save (unless the newest checkpoint is current), operative config, close.
        After a failure (``save=False``, or a save that failed) nothing here may raise a
        second error over the first."""
        path = None
        failed = not save
        try:
            if save and self._context.iteration != self._saved_iteration:
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
                    self._write_operative_config(report=not failed)
            finally:
                self.close()
        return path

    def _write_config(self, config_path: str) -> None:
        """Write ``config.gin`` (atomically) if it is new or the text changed, e.g. by
        ``--conf_param`` overrides given when resuming, so the next resume keeps them."""
        try:
            os.makedirs(self._root_dir, exist_ok=True)
        except OSError as e:
            raise UserError(f"cannot create the run directory {self._root_dir}: "
                            f"{e.strerror or e}") from None
        if not self._config_text:
            return
        if os.path.exists(config_path):
            with open(config_path) as f:
                if f.read() == self._config_text:
                    return
        atomic_write_text(config_path, self._config_text, "the run's config")

    def _write_operative_config(self, report: bool = True) -> None:
        """``operative_config.gin`` (atomically; informational). A failed write keeps the
        previous file and is one warning line, or nothing when ``report`` is False (the
        run is already failing, and its first error is the one to show)."""
        try:
            text = alf_config.operative_config_text()
        except Exception:  # noqa: BLE001 - informational file only
            return
        if not text:
            return
        try:
            atomic_write_text(os.path.join(self._root_dir, "operative_config.gin"), text)
        except WriteFailedError as e:
            if report:
                self._notice(f"[alf] warning: {e}; the previous operative_config.gin (if "
                             "any) is kept")

    def _loop(self) -> None:
        cfg, ctx, alg = self._config, self._context, self._algorithm
        log = (ProgressLog(os.path.join(self._root_dir, PROGRESS_FILE), ctx.iteration)
               if self._is_main else None)
        if log is not None and log.dropped_rows:
            self._notice(f"[alf] {PROGRESS_FILE}: dropped {log.dropped_rows} row(s) past the "
                         f"restored iteration {ctx.iteration:,} (written after its checkpoint)")
        self._loop_start = start = time.perf_counter()
        last_print = start
        steps_at_start = ctx.env_steps
        updates_at_start = ctx.num_updates
        first_iteration = ctx.iteration + 1
        iter_seconds = 0.0
        ctx.unroll_seconds = 0.0
        try:
            while not self._done():
                ctx.begin_iteration()
                t0 = time.perf_counter()
                alg.train_iter()
                if self._unroller is not None:
                    self._unroller.after_train_iter(alg)
                iter_seconds += time.perf_counter() - t0
                self._governor.tick()
                metrics = self._metrics
                stop = self._interrupts.requested
                if self._group is not None:
                    # all ranks stop at the same boundary; metrics pooled over ranks
                    stop, merged = dp.sync_end_of_iteration(self._group, stop, metrics)
                    if stop:  # every rank says the same why (a signal reaches only some)
                        self._interrupts.reason = dp.agree_stop_reason(
                            self._group, self._interrupts.reason)
                    if self._unroller is not None:  # pure offline: rank 0's evaluations
                        metrics = merged
                    if cfg.distributed_check_interval and \
                            ctx.iteration % cfg.distributed_check_interval == 0:
                        dp.check_drift(self._group, alg, cfg.distributed_drift, self._notice)
                now = time.perf_counter()
                fps = (ctx.env_steps - steps_at_start) / max(1e-9, now - start)
                ups = (ctx.num_updates - updates_at_start) / max(1e-9, now - start)
                if ctx.should_summarize():
                    self._summarize(metrics, fps, iter_seconds)
                if cfg.evaluate and self._is_main and ctx.iteration % cfg.eval_interval == 0:
                    self._evaluate()
                if ctx.iteration == first_iteration and self._is_main:
                    self._warn_unused_bindings()
                if ctx.iteration % cfg.checkpoint_interval == 0:
                    self.save_checkpoint()
                done = self._done()
                # rows at summary intervals (not wall-clock ones) so that the file is
                # identical between two runs with the same seed
                if log is not None and (ctx.iteration % cfg.summary_interval == 0 or done or
                                        (cfg.summarize_first_interval and ctx.iteration == 1)):
                    log.write([ctx.iteration, ctx.env_steps, f"{self._wall_time():.3f}",
                               _fmt(metrics.average_return()), _fmt(metrics.average_length()),
                               metrics.num_episodes, f"{fps:.1f}"])
                if not self._quiet and (now - last_print >= cfg.progress_interval_seconds or done
                                            or ctx.iteration == first_iteration):
                    last_print = now
                    self._print_progress(metrics, fps, now - start, ups)
                if stop:
                    raise StopAtBoundary
        finally:
            if log is not None:
                log.close()

    def _warn_unused_bindings(self) -> None:
        """After the first iteration every configurable has been built: name the bindings
        nothing used (usually a typo'd or wrong class name, which gin cannot catch)."""
        unused = alf_config.unused_bindings()
        if self._config.async_unroll or (self._unroller is None and self._eval_env is None):
            # the env workers build the envs, not this process / pure offline: no env at all
            unused = [b for b in unused if not b.startswith("create_environment.")]
        if unused:
            self._notice("[alf] warning: gin bindings never used (typo, or a class this "
                         f"experiment does not build?): {', '.join(unused)}")

    def _progress_text(self, metrics, fps: float, elapsed: float, ups: float = 0.0) -> str:
        ctx, cfg = self._context, self._config
        if self._unroller is None:  # pure offline: no env steps, the return is evaluation's
            iters = (f"/{cfg.num_iterations:,}" if cfg.num_iterations else "")
            ret = metrics.average_return()
            return (f"[alf] iter {ctx.iteration:,}{iters} | updates {ctx.num_updates:,} | "
                    f"updates/s {ups:,.0f} | eval return {ret:.1f}"
                    f"{self._governor.progress_note()} | {elapsed:.1f}s")
        target = (f"/{cfg.num_env_steps:,}" if cfg.num_env_steps else "")
        iters = (f"/{cfg.num_iterations:,}" if cfg.num_iterations else "")
        ret = metrics.average_return()
        hybrid = ""
        if self._algorithm.offline_buffer is not None:  # hybrid: updates count too (the
            hybrid = f" | updates {ctx.num_updates:,}"  # offline phase steps no env)
        return (f"[alf] iter {ctx.iteration:,}{iters} | env steps {ctx.env_steps:,}{target} | "
                f"FPS {fps:,.0f} | return {ret:.1f} | episodes {metrics.num_episodes:,}"
                f"{hybrid}{self._unroller_progress()}{self._governor.progress_note()} | "
                f"{elapsed:.1f}s")

    def _unroller_progress(self) -> str:
        text = getattr(self._unroller, "progress_text", None)
        return text() if text is not None else ""

    def _child_pids(self):
        """The env worker processes of an async unroller (their CPU is this run's own)."""
        pids = getattr(self._unroller, "worker_pids", None)
        return pids() if pids is not None else ()

    def _print_progress(self, metrics, fps: float, elapsed: float, ups: float = 0.0) -> None:
        self._print_line(self._progress_text(metrics, fps, elapsed, ups))

    def _notice(self, text: str) -> None:
        """Warnings and what a resume did: shown even with ``quiet`` (which only silences
        the progress, checkpoint and evaluation lines); by rank 0 alone in a data-parallel
        run (the other ranks would repeat it)."""
        if self._is_main:
            print(text, file=sys.stderr, flush=True)

    def _print_line(self, text: str) -> None:
        if not self._quiet:
            print(text, file=sys.stderr, flush=True)

    def _summarize(self, metrics, fps: float, iter_seconds: float) -> None:
        ctx = self._context
        ret, length = metrics.average_return(), metrics.average_length()
        if not math.isnan(ret):
            ctx.add_scalar("Metrics/AverageReturn", ret)
            ctx.add_scalar("Metrics/AverageEpisodeLength", length)
        ctx.add_scalar("Metrics/NumEpisodes", metrics.num_episodes)
        ctx.add_scalar("Speed/FPS", fps)
        ctx.add_scalar("Speed/torch_threads", self._governor.threads)
        if self._governor.load.wait_share is not None:  # share of time waiting for a CPU
            ctx.add_scalar("Speed/cpu_wait_share", self._governor.load.wait_share)
        if iter_seconds > 0:
            unroll_share = min(1.0, ctx.unroll_seconds / iter_seconds)
            ctx.add_scalar("Time/unroll_fraction", unroll_share)
            ctx.add_scalar("Time/train_fraction", 1.0 - unroll_share)

    def _evaluate(self) -> None:
        results = evaluate(self._algorithm, self._eval_env, self._transformer,
                           self._config.num_eval_episodes, self._config.epsilon_greedy)
        if not results:
            return
        avg_ret = sum(r for r, _ in results) / len(results)
        avg_len = sum(l for _, l in results) / len(results)
        if self._unroller is None:  # pure offline: evaluation is the return to report
            self._offline_metrics.add_finished(results, 0)
        self._context.add_scalar("Eval/AverageReturn", avg_ret)
        self._context.add_scalar("Eval/AverageEpisodeLength", avg_len)
        self._print_line(f"[alf] eval at iter {self._context.iteration:,}: return {avg_ret:.1f} "
                         f"over {len(results)} episodes")

    def close(self) -> None:
        """Close envs and the summary writer (idempotent)."""
        for env in (getattr(self, "_unroller", None), getattr(self, "_env", None),
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


def _env_name_bound() -> bool:
    """Whether the config names the env (``create_environment.env_name``)."""
    import gin
    try:
        gin.query_parameter("create_environment.env_name")
        return True
    except ValueError:
        return False


class _SpecView:
    """The env-spec methods :func:`experiment_signature` reads, over dataset specs."""

    def __init__(self, specs: EnvSpecs):
        self._specs = specs
        self.env_name = specs.env_name

    def observation_spec(self):
        return self._specs.observation_spec

    def action_spec(self):
        return self._specs.action_spec


def _fmt(x: float) -> str:
    return "" if math.isnan(x) else f"{x:.3f}"


def _thread_governor(config: TrainerConfig, rank_group, child_pids) -> ThreadGovernor:
    """The :class:`ThreadGovernor` of this run's torch threads.

    Under torchrun the ranks of one host split its CPUs evenly and pin their share
    (ranks that picked different thread counts could round differently and drift
    apart); the async deterministic mode pins too (bit-identical reruns)."""
    maximum = config.num_threads
    adaptive = config.adapt_threads and not (config.async_unroll and
                                             config.async_mode == "deterministic")
    if rank_group is not None:
        share = max(1, usable_cpus() // max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1"))))
        maximum = min(int(maximum), share) if maximum else share
        adaptive = False
    return ThreadGovernor(maximum, adaptive=adaptive, child_pids=child_pids)
