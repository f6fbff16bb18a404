"""``ReplaySource``: the Learner's buffers and everything that reads or writes them.

It holds the online replay buffer (built from the algorithm's experience spec:
a dry run of ``rollout_step`` on zeros, before step 0, so checkpoints load
without a warm-up iteration) and, with ``TrainerConfig.offline_buffer_dir``, the
read-only offline buffer of datasets. It

- stores unrolls (:meth:`store_unroll`): an async batch may hold consecutive
  trajectories of the same envs, written in runs without repeated env ids;
- samples mini-batches ``[B, L]`` (:meth:`sample`, :meth:`training_batch`, which
  mixes offline and online rows, :mod:`alf.trainers.hybrid_replay`), a block of
  ``K`` batches at a time for algorithms that declare ``replay_sample_blocks``;
- gathers a whole buffer ``[num_envs, T]`` (:meth:`gather`);
- restores the fields that are derived rather than stored (``prev_action``,
  stacked frames, a rank's env ids) and sends priorities back to the buffer each
  row came from.
"""
from typing import Any, Dict, Optional, Tuple

import torch

from alf import nest as alf_nest
from alf.algorithms.frame_stacker import find_frame_stacker
from alf.data_structures import Experience, LossInfo
from alf.errors import ConfigError
from alf.replay_buffers import ReplayBuffer, experience_storage
from alf.replay_buffers.sample_block import SampleBlock, block_batches
from alf.tensor_specs import extract_spec
from alf.tensor_specs import nbytes as spec_nbytes
from alf.trainers import hybrid_replay
from alf.trainers.training_settings import TrainingSettings
from alf.utils.run_context import RunContext

#: Most bytes of stored data one sampled block (``replay_sample_blocks``) may hold.
BLOCK_BYTES = 32 << 20


class ReplaySource:
    """The buffers of one :class:`~alf.trainers.learner.Learner`.

    Args:
        algorithm: the :class:`~alf.algorithms.rl_algorithm.RLAlgorithm` (its data
            transformer, device, dry runs and declared regime).
        settings: the :class:`TrainingSettings`.
        context: the run context (progress for schedules, update counter, ranks).
        unroller: the source of experience (None: pure offline training).
    """

    def __init__(self, algorithm: Any, settings: TrainingSettings, context: RunContext,
                 unroller: Any = None):
        self._algorithm = algorithm
        self._unroller = unroller
        self._settings = settings
        self._context = context
        self.replay_buffer: Optional[ReplayBuffer] = None
        self.offline_buffer: Optional[ReplayBuffer] = None
        self.full_experience_spec: Optional[Experience] = None
        self.frame_stacker = None  # part of the data transformer: frames are stored once
        self._mix: Optional[hybrid_replay.OfflineFraction] = None
        self._online_ready: Optional[bool] = None  # agreed over ranks once per iteration
        self._blocks: Dict[Tuple[int, int, int], SampleBlock] = {}
        self._block_batches_cache: Optional[Tuple[Tuple[int, int], int]] = None

    @property
    def env_id_base(self) -> int:
        """``TimeStep.env_id`` of the unroller's first env (a data-parallel rank's envs come
        after the lower ranks'): buffer rows are env ids relative to it."""
        return int(getattr(self._unroller, "env_id_base", 0)) if self._unroller is not None else 0

    @property
    def mix(self) -> Optional[hybrid_replay.OfflineFraction]:
        """The offline fraction of hybrid training (None without datasets)."""
        return self._mix

    # ----------------------------------------------------------------- build
    def build_offline(self, raw_time_step_spec: Any, env_name: str) -> None:
        """Load the datasets of ``offline_buffer_dir`` (checked against the algorithm)."""
        alg = self._algorithm
        self.full_experience_spec = extract_spec(alg.dry_run_experience(raw_time_step_spec, 1), 1)
        self.frame_stacker = find_frame_stacker(alg.data_transformer)
        self.offline_buffer = hybrid_replay.build_offline_buffer(
            alg, self._settings, self.full_experience_spec, raw_time_step_spec, env_name,
            self.sequence_length())
        self._mix = hybrid_replay.OfflineFraction(self._settings, self._context)

    def build_online(self, raw_time_step_spec: Any, batch: int) -> None:
        """The replay buffer for ``batch`` envs, from a dry run of the algorithm."""
        alg, cfg = self._algorithm, self._settings
        exp = alg.dry_run_experience(raw_time_step_spec, batch)
        self.frame_stacker = find_frame_stacker(alg.data_transformer)
        whole = alg.uses_regime("whole_replay_buffer_training", cfg)
        length = cfg.replay_buffer_length
        if length is None:
            if not whole:
                raise ConfigError(f"{type(alg).__name__} is off-policy: set "
                                  "TrainerConfig.replay_buffer_length")
            # +1: the newest step is kept across clears so no transition is lost;
            # + history: the slots before it, from which its prev_action (1 slot) and
            # stacked frames (k - 1 slots with a FrameStacker) are restored.
            length = int(max(1, cfg.unroll_length)) + 1 + \
                experience_storage.history_length(self.frame_stacker)
        if cfg.priority_replay and whole:
            raise ConfigError("TrainerConfig.priority_replay needs sampled mini-batches: it cannot "
                              "be combined with whole_replay_buffer_training")
        # prev_action and env_id are derivable: not stored (replay_buffers/experience_storage.py)
        self.full_experience_spec = extract_spec(exp, 1)
        kwargs = {}
        if cfg.priority_replay:
            kwargs = dict(prioritized=True, priority_alpha=cfg.priority_replay_alpha,
                          priority_eps=cfg.priority_replay_eps)
        self.replay_buffer = ReplayBuffer(
            experience_storage.storage_spec(self.full_experience_spec, self.frame_stacker),
            batch, length, device=alg.device, **kwargs)

    def sequence_length(self) -> int:
        """Steps per sampled sequence: the algorithm's (``n_step + 1``) or the config's."""
        length = self._algorithm.replay_sequence_length()
        return self._settings.mini_batch_length if length is None else int(length)

    # ----------------------------------------------------------------- write
    def store_unroll(self, experience: Experience, bootstrap_last: bool) -> None:
        """Add the new steps of a time-major unroll ``[T(+1), B]`` (``bootstrap_last``: its
        last step is the first of the next unroll and is left for then)."""
        if bootstrap_last:
            experience = alf_nest.map_structure(lambda x: x[:-1], experience)
        # An async batch may hold consecutive trajectories of the same envs: write the
        # columns in runs without repeated env ids, in order, so none overwrites another.
        columns = lambda a, b: alf_nest.map_structure(lambda x: x[:, a:b], experience)  # noqa: E731
        start, seen = 0, set()
        for col, env_id in enumerate(experience.time_step.env_id[0].tolist()):
            if env_id in seen:
                self.add(columns(start, col))
                start, seen = col, set()
            seen.add(env_id)
        self.add(experience if start == 0 else columns(start, None))

    def add(self, experience: Experience) -> None:
        """Store a time-major unroll ``[T, B]`` in the replay buffer (one write per field)."""
        self.drop_sample_blocks()  # the buffer changes: sequences sampled before are stale
        # rows are env ids relative to this unroller's first env (data-parallel ranks
        # offset their env ids, each rank's buffer holds its own envs)
        self.replay_buffer.add_sequence(
            experience_storage.to_storage(experience, self.frame_stacker),
            experience.time_step.env_id[0] - self.env_id_base)

    # ------------------------------------------------------------------ read
    def sample(self, batch_size: int, length: int,
               buffer: Optional[ReplayBuffer] = None) -> Experience:
        """``[B, L]`` sequences from ``buffer`` (default: the online replay buffer) with
        their derived fields restored and ``batch_info`` (per sequence: ``[B]``) set.
        Offline (dataset) rows are raw env data: the data transformer's
        ``transform_replay`` is applied. Not yet preprocessed: a training batch is
        :meth:`Learner.sample <alf.trainers.learner.Learner.sample>`'s (or this through
        :func:`~alf.algorithms.replay_training.preprocess_sampled`, which keeps the
        ``[B]`` ``batch_info`` out of ``preprocess_experience``'s ``[B, L]`` maps).

        For an algorithm with ``replay_sample_blocks``, a uniform buffer is sampled a
        :class:`~alf.replay_buffers.sample_block.SampleBlock` of ``K * B`` sequences at
        a time (``K`` = the updates per iteration, capped at :data:`BLOCK_BYTES`), which
        serves the next ``K`` calls with the same sampling distribution while the
        buffers do not change; blocks are dropped when data is added and after every
        iteration (:meth:`drop_sample_blocks`). Prioritized buffers sample every call.
        """
        rb = self.replay_buffer if buffer is None else buffer
        if not self._algorithm.replay_sample_blocks:
            return self._sample_now(batch_size, length, rb)
        k = self._block_count(batch_size, length)
        if rb.prioritized or k <= 1:
            return self._sample_now(batch_size, length, rb)
        key = (id(rb), batch_size, length)
        block = self._blocks.get(key)
        batch = block.next_batch() if block is not None else None  # None once used up
        if batch is None:
            block = SampleBlock(self._sample_now(k * batch_size, length, rb), batch_size)
            self._blocks[key] = block
            batch = block.next_batch()
        return batch

    def drop_sample_blocks(self) -> None:
        """Forget the sampled blocks (the next :meth:`sample` samples afresh)."""
        self._blocks.clear()

    def _block_count(self, batch_size: int, length: int) -> int:
        key = (batch_size, length)
        cached = self._block_batches_cache
        if cached is None or cached[0] != key:
            # the bytes of a restored step (stacked frames included), not of a stored one
            k = block_batches(self._settings.num_updates_per_train_iter, batch_size, length,
                              spec_nbytes(self.full_experience_spec), BLOCK_BYTES)
            cached = self._block_batches_cache = (key, k)
        return cached[1]

    def _sample_now(self, batch_size: int, length: int, rb: ReplayBuffer) -> Experience:
        if rb.prioritized:
            data, info = rb.get_batch(batch_size, length, beta=self._priority_beta())
        else:
            data, info = rb.get_batch(batch_size, length)
        data = self._restore(rb, data, info.env_ids, info.positions)
        return data._replace(batch_info=info)

    def _priority_beta(self) -> float:
        beta = self._settings.priority_replay_beta
        return float(beta(self._context.progress())) if callable(beta) else float(beta)

    def gather(self, buffer: Optional[ReplayBuffer] = None) -> Experience:
        """Everything in ``buffer`` (default: the online one), ``[num_envs, T]``, derived
        fields restored."""
        rb = self.replay_buffer if buffer is None else buffer
        env_ids, positions = experience_storage.gather_all_positions(rb)
        return self._restore(rb, rb.gather_all(), env_ids, positions)

    def _restore(self, rb: ReplayBuffer, data: Experience, env_ids: torch.Tensor,
                 positions: torch.Tensor) -> Experience:
        spec = self.full_experience_spec
        data = experience_storage.restore_derived_fields(
            rb, data, env_ids, positions, spec.time_step.prev_action, self.frame_stacker)
        base = self.env_id_base
        if base and rb is self.replay_buffer:  # rows back to this rank's env ids
            data = data._replace(time_step=data.time_step._replace(
                env_id=data.time_step.env_id + base))
        if rb is self.offline_buffer and rb is not None:
            data = data._replace(time_step=self._algorithm.data_transformer.transform_replay(
                data.time_step))
            data = hybrid_replay.fill_missing_env_info(data, spec.time_step.env_info)
        return data

    def agree_online_ready(self, length: int) -> None:
        """Data-parallel hybrid training: agree once per iteration over ranks whether the
        online buffer holds a full sequence (every rank then mixes its batches alike)."""
        dp = self._context.data_parallel
        if self.offline_buffer is not None and dp is not None and self.replay_buffer is not None:
            self._online_ready = dp.all_ranks(
                int(self.replay_buffer.current_size().max()) >= length)

    def training_batch(self, batch_size: int, length: int) -> Experience:
        """One mini-batch: online only, or offline and online rows mixed
        (:mod:`alf.trainers.hybrid_replay`)."""
        if self.offline_buffer is None:
            return self.sample(batch_size, length)
        online = self.replay_buffer
        ready = self._online_ready
        if ready is None and online is not None:
            ready = int(online.current_size().max()) >= length
        n_off = self._mix.offline_rows(batch_size, ready)
        if n_off >= batch_size:
            return self.sample(batch_size, length, self.offline_buffer)
        if n_off <= 0:
            return self.sample(batch_size, length)
        return hybrid_replay.concat_batches(
            self.sample(batch_size - n_off, length),
            self.sample(n_off, length, self.offline_buffer))

    def update_priority(self, experience: Experience, loss_info: LossInfo) -> None:
        """Send ``LossInfo.priority`` ``[B]`` back to the prioritized buffer(s) the batch's
        rows came from (named by its ``BatchInfo``)."""
        priority = loss_info.priority
        info = experience.batch_info
        if isinstance(priority, torch.Tensor) and not alf_nest.is_empty(info):
            hybrid_replay.update_priorities(info, priority)
