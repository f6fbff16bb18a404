"""The ``Learner``: the training loop of one algorithm, as an object the Trainer owns.

One iteration (:meth:`Learner.run_iteration`) is :meth:`Learner.train_iter` (the
hook an algorithm with a loop of its own overrides) followed by handing the new
weights to the unroller. The standard ``train_iter`` picks the regime the
algorithm declares (:class:`~alf.algorithms.rl_algorithm.RLAlgorithm`) and the
settings allow:

- **on-policy** (A2C, REINFORCE): unroll ``[T, B]`` with gradients, then
  ``algorithm.train_from_unroll``.
- **replay** (DQN, SAC, ...): unroll without gradients into the replay buffer,
  then ``num_updates_per_train_iter`` sampled mini-batches ``[B, L]``, each
  ``preprocess_experience -> train_on_batch`` with priorities sent back.
- **whole buffer** (PPO the ALF way): epochs of shuffled mini-batches over
  everything in the buffer, then (usually) clear it.
- **async batch** (APPO, IMPALA with ``async_unroll``): train on each batch of
  ``[B, T+1]`` trajectories as it arrives (no buffer).
- **offline / hybrid**: the datasets' buffer alone (no unroller), or mixed into
  every mini-batch (:mod:`alf.trainers.hybrid_replay`), after an offline phase
  that steps no env.

Random initial collection (``initial_collect_steps``) acts with the action
spec's sampler; fractional ``unroll_length`` accumulates across iterations;
data-parallel ranks agree on whether their buffers are ready to train.

With ``TrainerConfig.learner_thread`` the same iteration is split across two
threads (:mod:`alf.trainers.learner_thread`).
"""
import contextlib
import time
from typing import Any, ContextManager, Optional, Tuple

import torch

from alf import nest as alf_nest
from alf.algorithms.replay_training import preprocess_sampled, whole_buffer_mini_batches
from alf.data_structures import Experience, LossInfo, TimeStep
from alf.errors import ConfigError
from alf.metrics import EpisodeMetrics
from alf.replay_buffers import ReplayBuffer
from alf.trainers.replay_source import ReplaySource
from alf.trainers.training_settings import TrainingSettings
from alf.unrollers.sync_unroller import SyncUnroller
from alf.unrollers.unroll_result import UnrollResult
from alf.utils import precision
from alf.utils.act_step import random_actions
from alf.utils.run_context import RunContext


#: ``(loss of the last update, the experience it trained on, its train info)``, all None
#: when there was too little data to train
_Trained = Tuple[Optional[LossInfo], Optional[Experience], Any]


class Learner:
    """Trains one algorithm from one source of experience.

    Args:
        algorithm: the :class:`~alf.algorithms.rl_algorithm.RLAlgorithm`.
        settings: the :class:`TrainingSettings` (``TrainingSettings.from_config(cfg)``).
        context: the run context (counters, progress, summaries, ranks).
        unroller: a sync or async unroller (owned and closed by the caller); None for
            pure offline training, which then needs ``time_step_spec``.
        time_step_spec: the raw env's time step spec when there is no unroller (pure
            offline training: from the dataset).
        env_name: the env's name (messages about datasets), when there is no unroller.
    """

    def __init__(self, algorithm: Any, settings: TrainingSettings, context: RunContext,
                 unroller: Any = None, time_step_spec: Optional[TimeStep] = None,
                 env_name: str = ""):
        self._algorithm = algorithm
        self._settings = settings
        self._context = context
        self._unroller = unroller
        self._time_step_spec = time_step_spec
        self._env_name = env_name
        self.replay = ReplaySource(algorithm, settings, context, unroller)
        self._unroll_accumulator = 0.0
        self._prepared = False
        self._pending_batch: Optional[Experience] = None  # async whole-buffer batch [B, T+1]
        self._last_unroll_steps = 0
        # a learner thread (alf.trainers.learner_thread) sets these: stores and reads of
        # the buffers then take the lock, and each policy step RunContext.weights_lock
        self.buffer_lock: ContextManager = contextlib.nullcontext()
        self.threaded = False

    @classmethod
    def for_env(cls, algorithm: Any, env: Any, settings: Optional[TrainingSettings] = None,
                context: Optional[RunContext] = None) -> "Learner":
        """A prepared Learner stepping ``env`` in this process (tests, notebooks); the
        caller closes ``env``."""
        settings = settings if settings is not None else TrainingSettings()
        if settings.overwrite_policy_output:
            env.report_executed_action()  # the stored action is the one the env executed
        unroller = SyncUnroller.for_algorithm(env, algorithm, settings.metric_buffer_size,
                                              settings.overwrite_policy_output)
        learner = cls(algorithm, settings,
                      context if context is not None else algorithm.context, unroller)
        learner.prepare()
        return learner

    # ------------------------------------------------------------ properties
    @property
    def algorithm(self) -> Any:
        return self._algorithm

    @property
    def settings(self) -> TrainingSettings:
        return self._settings

    @property
    def context(self) -> RunContext:
        return self._context

    @property
    def unroller(self) -> Any:
        """The source of experience (None: pure offline training)."""
        return self._unroller

    @property
    def replay_buffer(self) -> Optional[ReplayBuffer]:
        return self.replay.replay_buffer

    @property
    def offline_buffer(self) -> Optional[ReplayBuffer]:
        """The read-only buffer of ``offline_buffer_dir`` datasets (or None)."""
        return self.replay.offline_buffer

    @property
    def metrics(self) -> Optional[EpisodeMetrics]:
        return self._unroller.metrics if self._unroller is not None else None

    @property
    def clears_replay_buffer(self) -> bool:
        """Whether the replay buffer is emptied after every iteration (e.g. PPO's), so
        nothing in it outlives an iteration or needs checkpointing."""
        return self._uses("clear_replay_buffer")

    def _uses(self, regime: str) -> bool:
        return self._algorithm.uses_regime(regime, self._settings)

    def time_step_spec(self) -> TimeStep:
        """The raw env's time step spec (from the unroller, or the dataset's)."""
        if self._unroller is not None:
            return self._unroller.time_step_spec()
        if self._time_step_spec is None:
            raise RuntimeError("a Learner without an unroller needs time_step_spec")
        return self._time_step_spec

    def experience_spec(self) -> Experience:
        """One step of the algorithm's :class:`Experience` in this env (a dry run)."""
        return self._algorithm.experience_spec(self.time_step_spec())

    # ----------------------------------------------------------------- build
    def prepare(self) -> None:
        """Check the settings against the algorithm, build its optimizers and buffers
        (idempotent)."""
        if self._prepared:
            return
        alg, cfg = self._algorithm, self._settings
        alg.check_training_config(cfg)
        alg.ensure_optimizers()
        if self._context.finite_guard is not None:  # names tensors by their keys in alg
            self._context.finite_guard.root = alg
        if cfg.offline_buffer_dir:
            env_name = getattr(self._unroller, "env_name", "") or self._env_name
            self.replay.build_offline(self.time_step_spec(), env_name)
        if self._unroller is not None:
            self._build_online()
        self._prepared = True

    def _build_online(self) -> None:
        """The replay buffer of the unroller's envs, unless the regime trains without one
        (on-policy; async whole-buffer training on each batch as it arrives)."""
        alg, cfg = self._algorithm, self._settings
        whole = self._uses("whole_replay_buffer_training")
        if cfg.async_unroll and not whole and cfg.max_policy_lag is not None:
            raise ConfigError(
                f"TrainerConfig.max_policy_lag: {type(alg).__name__} learns from a replay "
                "buffer, i.e. from old data anyway, and a dropped trajectory would leave a "
                "gap inside its envs' replay rows. It applies to algorithms that train on "
                "each fresh batch (APPOAlgorithm, ImpalaAlgorithm): unset it")
        # Async whole-buffer training (APPO, IMPALA) trains on each batch of trajectories
        # as it arrives (``[B, T+1]`` with its bootstrap step): no buffer.
        if not alg.on_policy and not (cfg.async_unroll and whole):
            self.replay.build_online(self.time_step_spec(), self._unroller.batch_size)

    # ------------------------------------------------------------- iteration
    def run_iteration(self) -> int:
        """One training iteration (:meth:`train_iter`), then the unroller gets the new
        weights; returns the env steps unrolled. Scalars gathered with
        ``RunContext.add_iteration_scalar`` are written once the iteration is done."""
        # the training dtype for the whole iteration (a custom train_iter's own updates
        # included); every act step inside sets the acting dtype for itself
        guard = self._context.finite_guard
        try:
            with precision.autocast_networks(self._context.train_dtype):
                steps = self.train_iter()
            if guard is not None:  # CUDA: this iteration's checks, before weights travel
                guard.flush()
        except Exception as e:  # a diverged parameter explains torch's error (one line)
            if guard is None:
                raise
            guard.raise_explained(self._algorithm, e)
        self._context.flush_iteration_scalars()
        if self._unroller is not None:
            self._unroller.after_train_iter(self._algorithm)
        return steps

    def train_iter(self) -> int:
        """Collect and train once; returns the number of env steps unrolled.

        The hook to override for an algorithm with a loop of its own (declare the
        subclass in ``RLAlgorithm.learner_class``): build it from :meth:`collect` (and
        :attr:`last_collected_steps`, what to return), :meth:`sample` with
        ``algorithm.train_on_batch``, :meth:`train_from_replay` and the algorithm's
        hooks (docs/writing_an_algorithm.md, "Where the loop lives, and replacing it")."""
        self.prepare()
        if self._algorithm.on_policy:
            steps = self.next_unroll_length()
            self._last_unroll_steps = 0
            experience = self.collect(max(1, steps))
            with precision.autocast_networks(self._context.train_dtype):
                self._algorithm.train_from_unroll(experience)
            return self._last_unroll_steps
        steps, batch = self.collect_step()
        if batch is not None:
            self.train_collected(batch)
        return steps

    def collect_step(self) -> Tuple[int, Any]:
        """The collecting half of an off-policy iteration: returns the env steps collected
        and what :meth:`train_collected` trains on: the async batch ``[B, T+1]``, ``True``
        (train from the buffers) or None (random initial collection: nothing yet). With
        ``learner_thread`` the main thread calls this and a learner thread the other half."""
        self.prepare()
        self._last_unroll_steps = 0
        if self.offline_buffer is not None and (
                self._unroller is None or self.replay.mix.in_offline_phase()):
            return 0, True  # pure offline, or hybrid's offline phase: step no env
        steps = self.next_unroll_length()
        if steps > 0 or self._settings.async_unroll:
            self.collect(steps)  # off-policy: without gradients
        if self.collecting_randomly():
            self._pending_batch = None
            return self._last_unroll_steps, None
        batch, self._pending_batch = self._pending_batch, None
        if batch is None and self.threaded and self._uses("whole_replay_buffer_training") \
                and self._uses("clear_replay_buffer") and self.replay_buffer is not None:
            # a learner thread: this unroll's trajectories are taken out now, so storing
            # the next unroll cannot merge into them before the thread gets to them
            # (which trained two unrolls as one and the next token on nothing)
            batch = self._take_whole_buffer()
            if batch is None:
                return self._last_unroll_steps, None
        return self._last_unroll_steps, True if batch is None else batch

    def _take_whole_buffer(self) -> Optional[Experience]:
        """Everything in the online buffer ``[num_envs, T]`` (None while it holds fewer
        than 2 steps per env), cleared but for the last step, as whole-buffer training
        would gather and clear it; under the buffer lock."""
        with self.buffer_lock:
            if not self._all_ranks(int(self.replay_buffer.current_size().min()) >= 2):
                return None
            gathered = self.replay.gather()
            self.replay_buffer.clear(keep_last=True)
        return gathered

    def train_collected(self, batch: Any) -> Optional[LossInfo]:
        """The training half: :meth:`train_from_replay` on what :meth:`collect_step`
        returned. With a learner thread, whole-buffer training that clears the buffer
        gets the unroll already taken out by :meth:`collect_step`, and whole-buffer
        training that keeps it holds the buffer lock throughout; sampled training holds
        it only while it samples and sends priorities back, so storing the next unroll
        overlaps the gradient steps."""
        batch = None if batch is True else batch
        if batch is None and self._uses("whole_replay_buffer_training"):
            with self.buffer_lock:
                return self.train_from_replay(batch)
        return self.train_from_replay(batch)

    def use_locks(self, buffer_lock: Optional[ContextManager],
                  weights_lock: Optional[ContextManager]) -> None:
        """A learner thread's locks (None, None: back to none): stores and reads of the
        buffers take ``buffer_lock``; optimizer steps, policy steps and weight
        publications take ``weights_lock`` (``RunContext.weights_lock``)."""
        self.threaded = buffer_lock is not None
        self.buffer_lock = buffer_lock if buffer_lock is not None else contextlib.nullcontext()
        self._context.weights_lock = (weights_lock if weights_lock is not None
                                      else contextlib.nullcontext())

    def next_unroll_length(self) -> int:
        """Steps per env to unroll this iteration: ``unroll_length``, accumulated across
        iterations when fractional (0.25: one step every 4 iterations)."""
        self._unroll_accumulator += float(self._settings.unroll_length)
        steps = int(self._unroll_accumulator + 1e-9)  # 10 x 0.1 must give 1
        self._unroll_accumulator -= steps
        return steps

    def collecting_randomly(self) -> bool:
        """Still within ``initial_collect_steps`` (random actions, no training)."""
        return self._context.env_steps < self._settings.initial_collect_steps

    @property
    def last_collected_steps(self) -> int:
        """The env steps the last :meth:`collect` added to ``context.env_steps`` (every
        rank's in a data-parallel run): what a ``train_iter`` of one's own returns."""
        return self._last_unroll_steps

    def collect(self, unroll_length: int) -> Experience:
        """Step the envs ``unroll_length`` times per env (random actions while
        :meth:`collecting_randomly`) and return the time-major ``Experience [T, B]``
        collected (``[T + 1, B]`` from an async unroller, whose last step is the bootstrap
        step, collected again as the first of the next unroll); the env steps it added
        are :attr:`last_collected_steps`.

        On-policy (``algorithm.on_policy``) the rollout infos keep their autograd graph
        (``train_from_unroll`` trains through it) and nothing is stored. Otherwise the
        policy acts under ``torch.no_grad()`` (stored experience carries no graph: a
        loss on it never backpropagates into an earlier rollout) and the unroll is also
        stored in the replay buffer (:meth:`store`), where :meth:`sample` and
        :meth:`train_from_replay` find it.
        """
        self.prepare()
        if self._algorithm.on_policy:
            return self._collect(unroll_length)
        with torch.no_grad():
            return self._collect(unroll_length)

    def _collect(self, unroll_length: int) -> Experience:
        t0 = time.perf_counter()
        override = (random_actions(self._algorithm.action_spec, self._algorithm.device)
                    if self.collecting_randomly() else None)
        policy_step = self._algorithm.rollout_step
        if self.threaded:  # never act on half an optimizer step of the learner thread
            lock = self._context.weights_lock
            # bf16 acting: the learner thread may have stepped since the last act step, so
            # the bf16 copies of the old weights the unroll kept (keep_weight_casts) are stale
            stale_casts = self._context.act_dtype is not None

            def policy_step(time_step, state, step=policy_step):
                with lock:
                    if stale_casts:
                        precision.drop_weight_casts()
                    return step(time_step, state)
        result = self._unroller.collect(policy_step, unroll_length, action_override=override)
        self._last_unroll_steps = self._context.count_env_steps(result.env_steps)
        with self._context.weights_lock:  # a learner thread may be training the parts
            self._algorithm.observe_collected(result.experience, result.bootstrap_last)
        if not self._algorithm.on_policy:
            self.store(result)
        self._context.unroll_seconds += time.perf_counter() - t0
        return result.experience

    def store(self, result: UnrollResult) -> None:
        """Keep an off-policy unroll: a batch of ``[T + 1, B]`` trajectories for async
        whole-buffer training, else its new steps go into the replay buffer."""
        if self.replay_buffer is None:  # async whole-buffer training: train on it as is
            device = self._algorithm.device
            self._pending_batch = alf_nest.map_structure(
                lambda x: x.to(device, non_blocking=True).transpose(0, 1), result.experience)
            return
        with self.buffer_lock:
            self.replay.store_unroll(result.experience, result.bootstrap_last)

    def _all_ranks(self, ready: bool) -> bool:
        """``ready`` agreed over data-parallel ranks (their buffers may fill unevenly)."""
        dp = self._context.data_parallel
        return ready if dp is None else dp.all_ranks(ready)

    # -------------------------------------------------------------- training
    def sample(self, batch_size: Optional[int] = None,
               length: Optional[int] = None) -> Experience:
        """One training mini-batch ``Experience [B, L]`` from the buffers, as the standard
        replay loop trains on: sampled (offline and online rows mixed with
        ``offline_buffer_dir``), then ``algorithm.preprocess_experience``, ready for
        ``algorithm.train_on_batch`` (or, for transition learners, ``make_transitions``).

        ``preprocess_experience`` sees the ``[B, L]`` fields only; the per-sequence
        ``batch_info`` (``[B]`` env ids, positions, importance weights, the buffer) is
        attached to what it returns, for the importance weights and priorities
        (``replay.update_priority``). ``L`` may come back shorter (PPO's drops the last
        step, which only bootstraps).

        Args:
            batch_size: ``B`` (None: ``TrainerConfig.mini_batch_size``).
            length: ``L`` (None: ``replay.sequence_length()``, the algorithm's ``n_step +
                1`` or ``TrainerConfig.mini_batch_length``).
        """
        self.prepare()
        size = self._settings.mini_batch_size if batch_size is None else batch_size
        if size is None:
            raise ConfigError("Learner.sample: set TrainerConfig.mini_batch_size or pass "
                              "batch_size")
        length = self.replay.sequence_length() if length is None else int(length)
        if self.replay_buffer is None and self.offline_buffer is None:
            raise RuntimeError(
                f"Learner.sample: {type(self._algorithm).__name__} trains without a replay "
                "buffer here (on-policy, or async whole-buffer training): nothing to sample")
        with self.buffer_lock:
            if self.offline_buffer is None:
                held = int(self.replay_buffer.current_size().max())
                if held < length:
                    raise RuntimeError(
                        f"Learner.sample: the replay buffer holds {held} steps per env, fewer "
                        f"than the {length} of a sequence; collect more first")
            batch = self.replay.training_batch(int(size), length)
        return preprocess_sampled(self._algorithm, batch)

    def train_from_replay(self, async_batch: Optional[Experience] = None) -> Optional[LossInfo]:
        """Off-policy update(s): ``async_batch`` (``[B, T+1]`` trajectories) or the whole
        buffer in epochs of mini-batches, else sampled mini-batches (module docstring).
        Networks compute in ``context.train_dtype`` (mixed precision, alf.utils.precision)."""
        with precision.autocast_networks(self._context.train_dtype):
            return self._train_from_replay(async_batch)

    def _train_from_replay(self, async_batch: Optional[Experience]) -> Optional[LossInfo]:
        if self._uses("whole_replay_buffer_training"):
            loss_info, experience, info = self._train_whole_buffer(async_batch)
        else:
            loss_info, experience, info = self._train_sampled()
        if experience is None:
            return None  # too little data yet
        self._algorithm.after_train_iter(experience, info)
        self.replay.drop_sample_blocks()
        per_batch = self._settings.update_counter_every_mini_batch and \
            not self._uses("whole_replay_buffer_training")
        if loss_info is not None and not per_batch:
            self._algorithm.summarize_train(experience, info, loss_info)
        self._context.flush_iteration_scalars()  # a learner thread's pinned iteration too
        return loss_info

    def _train_whole_buffer(self, pending: Optional[Experience]) -> _Trained:
        """Epochs of shuffled ``[mini_batch_size, L]`` batches over the async batch or
        everything in the buffer ``[B, T]``; returns ``(loss, experience, info)``."""
        alg, cfg = self._algorithm, self._settings
        if pending is not None:
            # async: a batch of [B, T+1] trajectories; a learner thread: the buffer's
            # [B, T] as collect_step took it out
            gathered = pending
        elif not self._all_ranks(int(self.replay_buffer.current_size().min()) >= 2):
            return None, None, None  # first iterations of a short/fractional unroll
        else:
            gathered = self.replay.gather()
        experience = alg.preprocess_experience(gathered)
        # min: the first iteration holds one step less (no step kept from before)
        length = min(cfg.mini_batch_length, alf_nest.flatten(experience.step_type)[0].shape[1])
        loss_info = info = None
        for batch in whole_buffer_mini_batches(experience, cfg.mini_batch_size, length,
                                               cfg.num_updates_per_train_iter):
            loss_info, info = alg.train_on_batch(batch)
        if self._uses("clear_replay_buffer") and pending is None:
            self.replay_buffer.clear(keep_last=True)
        return loss_info, experience, info

    def _train_sampled(self) -> _Trained:
        """``num_updates_per_train_iter`` sampled mini-batches ``[B, L]``; returns
        ``(loss, experience, info)`` of the last one."""
        alg, cfg, ctx = self._algorithm, self._settings, self._context
        length = self.replay.sequence_length()
        lock = self.buffer_lock  # a learner thread: held while the buffers are read only
        with lock:
            ready = self.offline_buffer is not None or \
                int(self.replay_buffer.current_size().max()) >= length
        if self.offline_buffer is None and not self._all_ranks(ready):
            return None, None, None
        if cfg.mini_batch_size is None:
            raise ConfigError("Set TrainerConfig.mini_batch_size for replay-buffer sampling")
        self.replay.agree_online_ready(length)  # same offline/online mix on all ranks
        loss_info = info = experience = None
        for _ in range(cfg.num_updates_per_train_iter):
            with lock:
                batch = self.replay.training_batch(cfg.mini_batch_size, length)
            experience = preprocess_sampled(alg, batch)
            loss_info, info = alg.train_on_batch(experience)
            with lock:
                self.replay.update_priority(experience, loss_info)
            if cfg.update_counter_every_mini_batch and ctx.should_summarize_update():
                alg.summarize_train(experience, info, loss_info, step=ctx.num_updates)
        if self._uses("clear_replay_buffer") and self.replay_buffer is not None:
            with lock:
                self.replay_buffer.clear()
        return loss_info, experience, info
