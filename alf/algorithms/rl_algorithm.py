"""``RLAlgorithm``: an :class:`Algorithm` that interacts with an environment.

Adds observation/action/reward specs, the unroller seam (``attach_unroller``:
the Trainer owns a sync or async unroller; standalone, an algorithm given an
``env`` builds a sync one), ``unroll``, ``observe_unroll`` /
``observe_for_replay`` and the default ``train_iter``:

- on-policy (``on_policy = True``, e.g. A2C): unroll with gradients, then
  ``train_from_unroll`` on the ``[T, B]`` infos.
- off-policy (default; DQN, SAC, and PPO the ALF way): unroll without
  gradients into the replay buffer, then ``num_updates_per_train_iter``
  passes of ``preprocess_experience -> train_step -> calc_loss ->
  update_with_gradient``. With ``whole_replay_buffer_training`` each pass is an
  epoch of shuffled mini-batches over everything in the buffer. With
  ``TrainerConfig.async_unroll`` such whole-buffer algorithms (APPO, IMPALA)
  train on each async batch of ``[B, T+1]`` trajectories directly (no buffer).

The replay buffer is built from specs in :meth:`prepare` (a dry run of
``rollout_step`` on zeros gives the rollout-info spec), before step 0, so
checkpoints load without a warm-up iteration.

Offline and hybrid (``TrainerConfig.offline_buffer_dir``, docs/offline.md): the
datasets are loaded into a second, read-only buffer; without an unroller
(``unroll_length = 0``) training is purely offline, otherwise each mini-batch
mixes both buffers (:mod:`alf.algorithms.hybrid_replay`). Replay code takes the
buffer it works on and a batch's ``BatchInfo`` names where its rows came from.
"""
import time
from typing import Any, Optional

import torch

from alf import nest as alf_nest
from alf.algorithms.algorithm import Algorithm
from alf.algorithms.frame_stacker import find_frame_stacker
from alf.algorithms import hybrid_replay
from alf.algorithms.replay_training import train_on_batch, whole_buffer_mini_batches
from alf.data_structures import Experience, LossInfo, TimeStep
from alf.errors import ConfigError
from alf.metrics import EpisodeMetrics
from alf.replay_buffers import ReplayBuffer, experience_storage
from alf.tensor_specs import TensorSpec, extract_spec, zeros_from_spec
from alf.unrollers.sync_unroller import SyncUnroller
from alf.unrollers.unroll_result import UnrollResult
from alf.utils.optimizers import OptimizerFactory
from alf.utils.run_context import RunContext


class _IdentityTransformer(torch.nn.Module):
    state_spec = ()

    def transform_timestep(self, time_step, state):
        return time_step, state


class RLAlgorithm(Algorithm):
    """Base class of reinforcement-learning algorithms.

    Class attributes a subclass sets to declare its training regime:
        on_policy: train on the freshly unrolled (grad-carrying) experience.
        whole_replay_buffer_training / clear_replay_buffer: defaults used when
            the TrainerConfig leaves them ``None``.

    Args:
        observation_spec: (transformed) observation spec the algorithm sees.
        action_spec: the env's action spec.
        reward_spec: ``TensorSpec(())`` unless rewards are vectors.
        env: the batched training env (None for offline training or tests).
        config: the :class:`TrainerConfig` (None: algorithm used standalone).
        context: the run context.
        optimizer, train/rollout/predict_state_spec, debug_summaries, name: see :class:`Algorithm`.
    """

    on_policy: bool = False
    whole_replay_buffer_training: bool = False
    clear_replay_buffer: bool = False

    def __init__(self, observation_spec: Any, action_spec: Any, reward_spec: Any = TensorSpec(()),
                 env: Any = None, config: Any = None, context: Optional[RunContext] = None,
                 optimizer: Optional[OptimizerFactory] = None, train_state_spec: Any = (),
                 rollout_state_spec: Any = None, predict_state_spec: Any = None,
                 debug_summaries: bool = False, name: str = "RLAlgorithm"):
        super().__init__(train_state_spec=train_state_spec, rollout_state_spec=rollout_state_spec,
                         predict_state_spec=predict_state_spec, optimizer=optimizer,
                         context=context, debug_summaries=debug_summaries, name=name)
        self._observation_spec = observation_spec
        self._action_spec = action_spec
        self._reward_spec = reward_spec
        self._env = env
        self._config = config
        self._data_transformer: torch.nn.Module = _IdentityTransformer()
        # Not nn.Module attributes: the buffer is checkpointed separately, the
        # unroller holds the env.
        self.__dict__["_replay_buffer"] = None
        self.__dict__["_unroller"] = None
        self.__dict__["_frame_stacker"] = None  # part of the data transformer, not a submodule
        self.__dict__["_offline_buffer"] = None  # datasets (offline/hybrid training)
        self.__dict__["_time_step_spec_override"] = None
        self.__dict__["_env_name"] = ""
        self._unroll_accumulator = 0.0
        self._prepared = False
        self._pending_batch: Optional[Experience] = None  # async whole-buffer batch [B, T+1]
        self._last_unroll_steps = 0

    # -------------------------------------------------------------- plumbing
    @property
    def observation_spec(self) -> Any:
        return self._observation_spec

    @property
    def action_spec(self) -> Any:
        return self._action_spec

    @property
    def reward_spec(self) -> Any:
        return self._reward_spec

    @property
    def env(self) -> Any:
        return self._env

    @property
    def config(self) -> Any:
        return self._config

    @property
    def replay_buffer(self) -> Optional[ReplayBuffer]:
        return self._replay_buffer

    @property
    def offline_buffer(self) -> Optional[ReplayBuffer]:
        """The read-only buffer of ``TrainerConfig.offline_buffer_dir`` datasets (or None)."""
        return self._offline_buffer

    @property
    def clears_replay_buffer(self) -> bool:
        """Whether the replay buffer is emptied after every iteration (e.g. PPO's), so
        nothing in it outlives an iteration or needs checkpointing."""
        return self._regime("clear_replay_buffer")

    @property
    def metrics(self) -> Optional[EpisodeMetrics]:
        return self._unroller.metrics if self._unroller is not None else None

    @property
    def data_transformer(self) -> torch.nn.Module:
        return self._data_transformer

    def set_data_transformer(self, transformer: torch.nn.Module) -> None:
        """Use ``transformer`` on every env TimeStep (it is checkpointed with the algorithm)."""
        self._data_transformer = transformer

    def _regime(self, name: str) -> bool:
        value = getattr(self._config, name, None) if self._config is not None else None
        return getattr(type(self), name) if value is None else bool(value)

    def set_time_step_spec(self, time_step_spec: TimeStep, env_name: str = "") -> None:
        """The raw env's time step spec (and name), for an algorithm with neither env nor
        unroller (pure offline training: they come from the dataset)."""
        self.__dict__["_time_step_spec_override"] = time_step_spec
        self.__dict__["_env_name"] = env_name

    def _raw_time_step_spec(self) -> TimeStep:
        if self._unroller is not None:
            return self._unroller.time_step_spec()
        if self._env is not None:
            return self._env.time_step_spec()
        if self._time_step_spec_override is None:
            raise RuntimeError(f"{type(self).__name__} has no env, unroller or time step spec")
        return self._time_step_spec_override

    def _time_step_spec(self) -> TimeStep:
        return self._raw_time_step_spec()._replace(observation=self._observation_spec)

    def attach_unroller(self, unroller: Any) -> None:
        """Use ``unroller`` (owned and closed by the Trainer) as the source of experience.

        Without one, an algorithm given an ``env`` builds a :class:`SyncUnroller` over
        it in :meth:`prepare` (standalone use: tests, notebooks)."""
        if self._prepared:
            raise RuntimeError("attach_unroller() must come before prepare()")
        self.__dict__["_unroller"] = unroller

    @property
    def _async(self) -> bool:
        return bool(self._config is not None and getattr(self._config, "async_unroll", False))

    def prepare(self) -> None:
        """Build the unroller (standalone), optimizers and (off-policy) replay buffer from specs."""
        if self._prepared:
            return
        self._prepared = True
        if (self.on_policy and self._config is not None
                and self._config.initial_collect_steps > 0):
            raise ConfigError(f"{type(self).__name__} is on-policy: TrainerConfig."
                              "initial_collect_steps must be 0 (random actions would be trained "
                              "on with the policy's log-probabilities)")
        if self.on_policy and self._async:
            raise ConfigError(
                f"{type(self).__name__} trains through its rollout's autograd graph, which "
                "cannot cross processes: TrainerConfig.async_unroll=True needs an algorithm "
                "that trains on stored experience, e.g. ImpalaAlgorithm or APPOAlgorithm")
        self._ensure_optimizers()
        if self._unroller is None and self._env is not None:
            buffer_size = self._config.metric_buffer_size if self._config is not None else 20
            self.__dict__["_unroller"] = SyncUnroller.for_algorithm(self._env, self,
                                                                    buffer_size)
        if self._offline_dir():
            self._build_offline_buffer()
        if self._unroller is None:
            return
        whole = self._regime("whole_replay_buffer_training")
        if self._async and not whole and self._config.max_policy_lag is not None:
            raise ConfigError(
                f"TrainerConfig.max_policy_lag: {type(self).__name__} learns from a replay "
                "buffer, i.e. from old data anyway, and a dropped trajectory would leave a "
                "gap inside its envs' replay rows. It applies to algorithms that train on "
                "each fresh batch (APPOAlgorithm, ImpalaAlgorithm): unset it")
        # Async whole-buffer training (APPO, IMPALA) trains on each batch of trajectories
        # as it arrives (``[B, T+1]`` with its bootstrap step): no buffer.
        if not self.on_policy and not (self._async and whole):
            self._build_replay_buffer()

    def experience_spec(self) -> Experience:
        """Spec of one step of :class:`Experience` this algorithm rolls out (no batch dim):
        the transformed time step, action, rollout info and rollout state (``()`` if
        stateless), from a dry run of ``rollout_step`` on zeros."""
        return extract_spec(self._dry_run_experience(1), 1)

    def _dry_run_experience(self, batch: int) -> Experience:
        ts = zeros_from_spec(self._time_step_spec(), batch, device=self.device)
        with torch.no_grad():
            alg_step = self.rollout_step(ts, self.get_initial_rollout_state(batch))
        return Experience(time_step=ts, action=alg_step.output, rollout_info=alg_step.info,
                          state=self.get_initial_rollout_state(batch)
                          if not alf_nest.is_empty(self.rollout_state_spec) else ())

    def _offline_dir(self) -> Any:
        return getattr(self._config, "offline_buffer_dir", None) if self._config else None

    def _build_offline_buffer(self) -> None:
        self._full_experience_spec = extract_spec(self._dry_run_experience(1), 1)
        self.__dict__["_frame_stacker"] = find_frame_stacker(self._data_transformer)
        env_name = getattr(self._unroller or self._env, "env_name", "") or self._env_name
        self.__dict__["_offline_buffer"] = hybrid_replay.build_offline_buffer(
            self, self._full_experience_spec, self._raw_time_step_spec(), env_name)
        self.__dict__["_mix"] = hybrid_replay.OfflineFraction(self._config, self._context)

    def _build_replay_buffer(self) -> None:
        batch = self._unroller.batch_size
        exp = self._dry_run_experience(batch)
        # a FrameStacker's frames are stored once and re-stacked when sampled
        self.__dict__["_frame_stacker"] = find_frame_stacker(self._data_transformer)
        length = self._config.replay_buffer_length if self._config is not None else None
        if length is None:
            if self._regime("whole_replay_buffer_training"):
                # +1: the newest step is kept across clears so no transition is lost;
                # + history: the slots before it, from which its prev_action (1 slot) and
                # stacked frames (k - 1 slots with a FrameStacker) are restored.
                length = int(max(1, self._unroll_length())) + 1 + \
                    experience_storage.history_length(self._frame_stacker)
            else:
                raise ConfigError(f"{type(self).__name__} is off-policy: set "
                                  "TrainerConfig.replay_buffer_length")
        cfg = self._config
        prioritized = bool(cfg is not None and cfg.priority_replay)
        if prioritized and self._regime("whole_replay_buffer_training"):
            raise ConfigError("TrainerConfig.priority_replay needs sampled mini-batches: it cannot "
                              "be combined with whole_replay_buffer_training")
        # prev_action and env_id are derivable: not stored (see replay_buffers/experience_storage.py)
        self._full_experience_spec = extract_spec(exp, 1)
        kwargs = {}
        if prioritized:
            kwargs = dict(prioritized=True, priority_alpha=cfg.priority_replay_alpha,
                          priority_eps=cfg.priority_replay_eps)
        self.__dict__["_replay_buffer"] = ReplayBuffer(
            experience_storage.storage_spec(self._full_experience_spec, self._frame_stacker),
            batch, length,
            device=self.device, **kwargs)

    def _unroll_length(self) -> float:
        return self._config.unroll_length if self._config is not None else 8

    # ------------------------------------------------------------- unrolling
    def unroll(self, unroll_length: int) -> Optional[Experience]:
        """Step the env ``unroll_length`` times per env.

        On-policy: returns time-major ``Experience [T, B]`` (rollout infos keep
        their graph). Off-policy: stores the unroll via :meth:`observe_for_replay`
        and returns None.
        """
        self.prepare()
        random_collect = (self._config is not None and
                          self._context.env_steps < self._config.initial_collect_steps)
        override = None
        if random_collect:
            device = self.device
            spec = self._action_spec
            override = lambda step: spec.sample(  # noqa: E731
                (alf_nest.flatten(step.output)[0].shape[0],)).to(device)
        result = self._unroller.collect(self.rollout_step, unroll_length,
                                        action_override=override)
        self._last_unroll_steps = self._context.count_env_steps(result.env_steps)
        if self.on_policy:
            return result.experience
        self.observe_unroll(result)
        return None

    def observe_unroll(self, result: UnrollResult) -> None:
        """Keep an off-policy unroll: a batch of ``[T + 1, B]`` trajectories for async
        whole-buffer training, else its new steps go into the replay buffer."""
        experience = result.experience
        if self._replay_buffer is None:  # async whole-buffer training: train on it as is
            device = self.device
            self._pending_batch = alf_nest.map_structure(
                lambda x: x.to(device, non_blocking=True).transpose(0, 1), experience)
            return
        if result.bootstrap_last:  # the bootstrap step is the first of the next unroll
            experience = alf_nest.map_structure(lambda x: x[:-1], experience)
        # An async batch may hold consecutive trajectories of the same envs: write the
        # columns in runs without repeated env ids, in order, so none overwrites another.
        columns = lambda a, b: alf_nest.map_structure(lambda x: x[:, a:b], experience)  # noqa: E731
        start, seen = 0, set()
        for col, env_id in enumerate(experience.time_step.env_id[0].tolist()):
            if env_id in seen:
                self.observe_for_replay(columns(start, col))
                start, seen = col, set()
            seen.add(env_id)
        self.observe_for_replay(experience if start == 0 else columns(start, None))

    def observe_for_replay(self, experience: Experience) -> None:
        """Store a time-major unroll ``[T, B]`` in the replay buffer (one write per field)."""
        # rows are env ids relative to this unroller's first env (data-parallel ranks
        # offset their env ids, each rank's buffer holds its own envs)
        self._replay_buffer.add_sequence(experience_storage.to_storage(experience,
                                                                       self._frame_stacker),
                                         experience.time_step.env_id[0] - self._env_id_base())

    def _all_ranks(self, ready: bool) -> bool:
        """``ready`` agreed over data-parallel ranks (their buffers may fill unevenly)."""
        dp = self._context.data_parallel
        return ready if dp is None else dp.all_ranks(ready)

    def _env_id_base(self) -> int:
        return int(getattr(self._unroller, "env_id_base", 0)) if self._unroller is not None else 0

    # -------------------------------------------------------------- training
    def train_iter(self) -> int:
        """One training iteration; returns the number of env steps unrolled."""
        self.prepare()
        if self._offline_buffer is not None and (
                self._unroller is None or self._mix.in_offline_phase()):
            # pure offline, or hybrid's offline phase: train on the datasets, step no env
            self._last_unroll_steps = 0
            self.train_from_replay_buffer()
            return 0
        self._unroll_accumulator += float(self._unroll_length())
        steps = int(self._unroll_accumulator + 1e-9)  # 10 x 0.1 must give 1
        self._unroll_accumulator -= steps
        self._last_unroll_steps = 0
        if self.on_policy:
            t0 = time.perf_counter()
            experience = self.unroll(max(1, steps))
            self._context.unroll_seconds += time.perf_counter() - t0
            self.train_from_unroll(experience)
            return self._last_unroll_steps
        if steps > 0 or self._async:
            t0 = time.perf_counter()
            with torch.no_grad():
                self.unroll(steps)
            self._context.unroll_seconds += time.perf_counter() - t0
        if self._config is not None and self._context.env_steps < self._config.initial_collect_steps:
            self._pending_batch = None
            return self._last_unroll_steps
        self.train_from_replay_buffer()
        return self._last_unroll_steps

    def train_from_unroll(self, experience: Experience) -> LossInfo:
        """On-policy update from ``experience [T, B]`` whose rollout infos carry gradients."""
        loss_info = self.calc_loss(experience.rollout_info)
        loss_info = self.update_with_gradient(loss_info)
        self.after_update(experience, experience.rollout_info)
        self.after_train_iter(experience, experience.rollout_info)
        self.summarize_train(experience, experience.rollout_info, loss_info)
        return loss_info

    def replay_sequence_length(self) -> int:
        """Steps per sampled sequence (``TrainerConfig.mini_batch_length``; transition
        learners override it with ``n_step + 1``)."""
        return self._config.mini_batch_length if self._config is not None else 1

    def train_on_batch(self, experience: Experience):
        """One gradient step on ``experience [B, L]``; returns ``(LossInfo, info [L, B])``.
        The default is :func:`alf.algorithms.replay_training.train_on_batch`."""
        return train_on_batch(self, experience)

    def _priority_beta(self) -> float:
        beta = self._config.priority_replay_beta
        return float(beta(self._context.progress())) if callable(beta) else float(beta)

    def sample_replay(self, batch_size: int, length: int,
                      buffer: Optional[ReplayBuffer] = None) -> Experience:
        """Sample ``[B, L]`` sequences from ``buffer`` (default: the online replay buffer)
        with their derived fields restored and ``batch_info`` set. Offline (dataset) rows
        are raw env data: the data transformer's ``transform_replay`` is applied."""
        rb = self._replay_buffer if buffer is None else buffer
        if rb.prioritized:
            data, info = rb.get_batch(batch_size, length, beta=self._priority_beta())
        else:
            data, info = rb.get_batch(batch_size, length)
        data = self._restore(rb, data, info.env_ids, info.positions)
        return data._replace(batch_info=info)

    def gather_replay(self, buffer: Optional[ReplayBuffer] = None) -> Experience:
        """Everything in ``buffer`` (default: the online one), ``[num_envs, T]``, derived
        fields restored."""
        rb = self._replay_buffer if buffer is None else buffer
        env_ids, positions = experience_storage.gather_all_positions(rb)
        return self._restore(rb, rb.gather_all(), env_ids, positions)

    def _restore(self, rb: ReplayBuffer, data: Experience, env_ids: torch.Tensor,
                 positions: torch.Tensor) -> Experience:
        data = experience_storage.restore_derived_fields(
            rb, data, env_ids, positions, self._full_experience_spec.time_step.prev_action,
            self._frame_stacker)
        base = self._env_id_base()
        if base and rb is self._replay_buffer:  # rows back to this rank's env ids
            data = data._replace(time_step=data.time_step._replace(
                env_id=data.time_step.env_id + base))
        if rb is self._offline_buffer and rb is not None:
            data = data._replace(time_step=self._data_transformer.transform_replay(
                data.time_step))
            data = hybrid_replay.fill_missing_env_info(
                data, self._full_experience_spec.time_step.env_info)
        return data

    def _sample_training_batch(self, batch_size: int, length: int) -> Experience:
        """One mini-batch: online only, or offline and online rows mixed
        (:mod:`alf.algorithms.hybrid_replay`)."""
        if self._offline_buffer is None:
            return self.sample_replay(batch_size, length)
        online = self._replay_buffer
        ready = self.__dict__.get("_online_ready")  # agreed over ranks once per iteration
        if ready is None and online is not None:
            ready = int(online.current_size().max()) >= length
        n_off = self._mix.offline_rows(batch_size, ready)
        if n_off >= batch_size:
            return self.sample_replay(batch_size, length, self._offline_buffer)
        if n_off <= 0:
            return self.sample_replay(batch_size, length)
        return hybrid_replay.concat_batches(
            self.sample_replay(batch_size - n_off, length),
            self.sample_replay(n_off, length, self._offline_buffer))

    def train_from_replay_buffer(self) -> Optional[LossInfo]:
        """Off-policy update(s) from the replay buffer (see module docstring)."""
        cfg = self._config
        num_updates = cfg.num_updates_per_train_iter if cfg is not None else 1
        mb_size = cfg.mini_batch_size if cfg is not None else None
        loss_info, info, experience = None, None, None
        whole = self._regime("whole_replay_buffer_training")
        pending, self._pending_batch = self._pending_batch, None
        if whole:
            mb_length = cfg.mini_batch_length if cfg is not None else 1
            if pending is not None:
                gathered = pending  # async: a batch of [B, T+1] trajectories
            elif not self._all_ranks(int(self._replay_buffer.current_size().min()) >= 2):
                return None  # too little data yet (first iterations of a short/fractional unroll)
            else:
                gathered = self.gather_replay()
            experience = self.preprocess_experience(gathered)
            # min: the first iteration holds one step less (no step kept from before)
            length = min(mb_length, alf_nest.flatten(experience.step_type)[0].shape[1])
            for batch in whole_buffer_mini_batches(experience, mb_size, length, num_updates):
                loss_info, info = self.train_on_batch(batch)
            if self._regime("clear_replay_buffer") and pending is None:
                self._replay_buffer.clear(keep_last=True)
        else:
            mb_length = self.replay_sequence_length()
            if self._offline_buffer is None and not self._all_ranks(
                    int(self._replay_buffer.current_size().max()) >= mb_length):
                return None
            if mb_size is None:
                raise ConfigError("Set TrainerConfig.mini_batch_size for replay-buffer sampling")
            if self._offline_buffer is not None and self._context.data_parallel is not None \
                    and self._replay_buffer is not None:  # same offline/online mix on all ranks
                self.__dict__["_online_ready"] = self._all_ranks(
                    int(self._replay_buffer.current_size().max()) >= mb_length)
            per_batch = bool(cfg is not None and cfg.update_counter_every_mini_batch)
            for _ in range(num_updates):
                experience = self.preprocess_experience(
                    self._sample_training_batch(mb_size, mb_length))
                loss_info, info = self.train_on_batch(experience)
                self._update_priority(experience, loss_info)
                if per_batch and self._context.should_summarize_update():
                    self.summarize_train(experience, info, loss_info,
                                         step=self._context.num_updates)
            if self._regime("clear_replay_buffer") and self._replay_buffer is not None:
                self._replay_buffer.clear()
        self.after_train_iter(experience, info)
        if loss_info is not None and not (cfg is not None and cfg.update_counter_every_mini_batch
                                           and not whole):
            self.summarize_train(experience, info, loss_info)
        return loss_info

    def _update_priority(self, experience: Experience, loss_info: LossInfo) -> None:
        """Send ``LossInfo.priority`` ``[B]`` back to the prioritized buffer(s) the batch's
        rows came from (named by its ``BatchInfo``)."""
        priority = loss_info.priority
        info = experience.batch_info
        if isinstance(priority, torch.Tensor) and not alf_nest.is_empty(info):
            hybrid_replay.update_priorities(info, priority)

