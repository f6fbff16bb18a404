"""Offline and hybrid replay: which buffer each mini-batch row comes from.

A Learner with ``TrainerConfig.offline_buffer_dir`` holds two buffers (its
:class:`~alf.trainers.replay_source.ReplaySource`): the
offline one (datasets, raw env data, never written to) and, when it also
steps an env (hybrid), the online replay buffer. Every mini-batch of ``B``
sequences draws ``round(f * B)`` of them from the offline buffer and the rest
from the online one, concatenated along the batch (offline rows last), where
the offline fraction ``f`` is

- 1 in pure offline training (no online buffer);
- 1 during the first ``rl_train_after_update_steps`` updates of hybrid
  training (the offline phase; no env is stepped then, see the ``Learner``);
- 1 for updates whose index counted from the end of that phase is not a multiple
  of ``rl_train_every_update_steps``;
- 1 while the online buffer holds no full sequence yet;
- else ``TrainerConfig.offline_fraction``: a float, or a schedule over the
  run's progress (e.g. ``@LinearSchedule(0.5, 0.1)``), RLPD's symmetric
  sampling (Ball et al. 2023) being the default 0.5.

Offline rows are restored like online ones (``prev_action``, stacked frames)
and then go through the data transformer's ``transform_replay`` (datasets hold
raw observations and rewards). The mixed batch's ``BatchInfo.replay_buffer``
is a :class:`MixedBatchSource` naming the buffer of each row range, so
priorities go back to the buffer each row came from.
"""
from typing import Any, NamedTuple, Optional, Tuple

import torch

from alf import nest as alf_nest
from alf.data_structures import BatchInfo, Experience
from alf.algorithms.data_transformers import DataTransformer
from alf.datasets.offline_buffer import dataset_paths, load_offline_buffer
from alf.errors import ConfigError, UserError


class MixedBatchSource(NamedTuple):
    """``BatchInfo.replay_buffer`` of a mixed batch: ``parts`` are ``(buffer, start, stop)``
    row ranges of the batch, in order."""
    parts: Tuple[Tuple[Any, int, int], ...]

    @property
    def prioritized(self) -> bool:
        """Whether any part's buffer is prioritized (then importance weights matter)."""
        return any(getattr(b, "prioritized", False) for b, _, _ in self.parts)


def concat_batches(first: Experience, second: Experience) -> Experience:
    """``[B1, L]`` and ``[B2, L]`` sampled batches -> ``[B1 + B2, L]``; the ``BatchInfo``
    becomes a :class:`MixedBatchSource` over the two buffers."""
    info1, info2 = first.batch_info, second.batch_info
    b1 = int(info1.env_ids.shape[0])
    data = alf_nest.map_structure(lambda a, b: torch.cat([a, b], 0),
                                  first._replace(batch_info=()), second._replace(batch_info=()))
    source = MixedBatchSource(_parts(info1, 0) + _parts(info2, b1))
    info = BatchInfo(env_ids=torch.cat([info1.env_ids, info2.env_ids]),
                     positions=torch.cat([info1.positions, info2.positions]),
                     importance_weights=torch.cat([info1.importance_weights,
                                                   info2.importance_weights]),
                     replay_buffer=source)
    return data._replace(batch_info=info)


def _parts(info: BatchInfo, offset: int) -> Tuple[Tuple[Any, int, int], ...]:
    source = info.replay_buffer
    if isinstance(source, MixedBatchSource):
        return tuple((b, s + offset, e + offset) for b, s, e in source.parts)
    return ((source, offset, offset + int(info.env_ids.shape[0])),)


def update_priorities(batch_info: BatchInfo, priority: torch.Tensor) -> None:
    """Send ``priority [B]`` to the prioritized buffer(s) the batch's rows came from."""
    source = batch_info.replay_buffer
    parts = source.parts if isinstance(source, MixedBatchSource) else (
        (source, 0, int(priority.shape[0])),)
    for buffer, start, stop in parts:
        if getattr(buffer, "prioritized", False) and stop > start:
            buffer.update_priority(batch_info.env_ids[start:stop],
                                   batch_info.positions[start:stop],
                                   priority[start:stop].detach())


def fill_missing_env_info(experience: Experience, env_info_spec: Any) -> Experience:
    """Offline rows carry no ``env_info`` (datasets do not store it): zeros ``[B, L, ...]``
    of the online spec so the two halves of a mixed batch have the same structure."""
    if alf_nest.is_empty(env_info_spec):
        return experience
    ts = experience.time_step
    B, L = ts.step_type.shape[:2]
    device = ts.step_type.device
    zeros = alf_nest.map_structure(
        lambda s: torch.zeros((B, L) + tuple(s.shape), dtype=s.dtype, device=device),
        env_info_spec)
    return experience._replace(time_step=ts._replace(env_info=zeros))


class OfflineFraction:
    """How many rows of each mini-batch come from the offline buffer (module docstring).

    Args:
        config: the :class:`~alf.trainers.training_settings.TrainingSettings`
            (``offline_fraction``, ``rl_train_after_update_steps``,
            ``rl_train_every_update_steps``).
        context: the run context (``num_updates``, ``progress()``).
    """

    def __init__(self, config: Any, context: Any):
        self._config = config
        self._context = context

    def in_offline_phase(self) -> bool:
        """Hybrid: still within the first ``rl_train_after_update_steps`` updates."""
        return self._context.num_updates < int(self._config.rl_train_after_update_steps)

    def fraction(self) -> float:
        """The current offline fraction of a mixed batch (online data available)."""
        if self.in_offline_phase():
            return 1.0
        every = max(1, int(self._config.rl_train_every_update_steps))
        since = self._context.num_updates - int(self._config.rl_train_after_update_steps)
        if since % every != 0:
            return 1.0
        f = self._config.offline_fraction
        return float(f(self._context.progress())) if callable(f) else float(f)

    def offline_rows(self, batch_size: int, online_ready: Optional[bool]) -> int:
        """Rows of a ``batch_size`` batch to draw from the offline buffer (``online_ready``:
        None without an online buffer, else whether it holds a full sequence)."""
        if not online_ready:
            return batch_size
        return int(round(self.fraction() * batch_size))


def build_offline_buffer(algorithm: Any, settings: Any, experience_spec: Experience,
                         raw_time_step_spec: Any, env_name: str, sequence_length: int) -> Any:
    """Load ``settings.offline_buffer_dir`` into the offline buffer after checking that
    the algorithm can learn from raw env data.

    Args:
        algorithm: the :class:`~alf.algorithms.rl_algorithm.RLAlgorithm`.
        settings: the :class:`~alf.trainers.training_settings.TrainingSettings`.
        experience_spec: its full experience spec (dry run of ``rollout_step``).
        raw_time_step_spec: the env's time step spec (raw reward spec).
        env_name: for messages.
        sequence_length: steps per sampled sequence (``n_step + 1`` for transition
            learners): every dataset must hold at least one such row.
    """
    name = type(algorithm).__name__
    if algorithm.on_policy or algorithm.uses_regime("whole_replay_buffer_training", settings):
        raise ConfigError(
            f"TrainerConfig.offline_buffer_dir: {name} trains on its fresh unrolls, not on "
            "sampled replay, so it cannot learn from a dataset; use an off-policy algorithm "
            "(SacAlgorithm, IqlAlgorithm, BcAlgorithm, DqnAlgorithm, ...)")
    for field, value in (("rollout_info", experience_spec.rollout_info),
                         ("state", experience_spec.state)):
        if not alf_nest.is_empty(value):
            raise ConfigError(
                f"TrainerConfig.offline_buffer_dir: {name} stores a rollout {field} "
                f"({', '.join(p or field for p, _ in alf_nest.flatten_with_paths(value))}) "
                "that datasets do not hold (they hold raw env data only); train offline "
                "with an algorithm whose train_step recomputes from observations")
    _check_offline_transformer(algorithm.data_transformer)
    cfg = settings
    buffer = load_offline_buffer(
        dataset_paths(cfg.offline_buffer_dir), algorithm.data_transformer.observation_spec,
        algorithm.action_spec, raw_time_step_spec.reward, env_name=env_name,
        capacity=cfg.offline_buffer_length, device=algorithm.device,
        check_values=getattr(cfg, "offline_buffer_check_values", True))
    length = sequence_length
    if int((buffer.current_size() - length + 1).clamp(min=0).sum()) == 0:
        raise UserError(
            f"the offline dataset(s) {', '.join(dataset_paths(cfg.offline_buffer_dir))} have no "
            f"row of {length} steps (longest: {int(buffer.current_size().max())}), the "
            f"sequence length {name} samples (n_step + 1): use longer datasets or a smaller "
            "n_step")
    fit_transformer_to_dataset(algorithm.data_transformer, buffer)
    return buffer


def fit_transformer_to_dataset(transformer: Any, buffer: Any, chunk: int = 65536) -> None:
    """Show every stored step of the offline ``buffer`` to ``transformer.observe_dataset``
    (observation normalisers fit their statistics to the data), ``chunk`` steps at a time.
    A checkpoint restored afterwards overwrites these statistics with its own."""
    storage = buffer._storage
    filled = buffer.current_pos().clamp(max=buffer.max_length).tolist()
    for row, n in enumerate(filled):
        for start in range(0, n, chunk):
            part = alf_nest.map_structure(lambda x: x[row, start:min(n, start + chunk)],
                                          storage.time_step)
            transformer.observe_dataset(part)


def _check_offline_transformer(transformer: Any) -> None:
    """Offline frames are raw: re-stacking them is only right when no transformer before
    the FrameStacker changes observations (those would have to apply to single frames)."""
    members = list(getattr(transformer, "members", [transformer]))
    for member in members:  # fail before training, not at the first sample
        if type(member).transform_replay is DataTransformer.transform_replay:
            raise ConfigError(
                f"TrainerConfig.offline_buffer_dir: {type(member).__name__} does not define "
                "transform_replay(), so it cannot be applied to (raw) dataset steps; "
                "implement it or leave it out of data_transformer_ctor")
    for i, member in enumerate(members):
        if getattr(member, "stacks_frames", False) and any(
                m.changes_observation for m in members[:i]):
            raise ConfigError(
                "TrainerConfig.offline_buffer_dir with data_transformer_ctor "
                f"{[type(m).__name__ for m in members]}: datasets store raw frames, so no "
                "transformer that changes observations may come before FrameStacker")
