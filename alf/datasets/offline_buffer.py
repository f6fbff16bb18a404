"""Load alf datasets into the (read-only) offline replay buffer.

One dataset loaded at its own capacity on the CPU becomes a buffer over the
memory-mapped files themselves (:meth:`ReplayBuffer.from_storage`, no copy:
the OS pages data in as it is sampled, so a dataset may be larger than RAM).
Several datasets, another capacity (``TrainerConfig.offline_buffer_length``) or
another device copy the rows into a freshly allocated buffer: each dataset row
becomes a buffer row; a row longer than the capacity keeps its newest steps,
exactly as a ring of that capacity would have.

Every dataset is checked against the experiment before anything is loaded;
a mismatch is one :class:`~alf.errors.UserError` line naming the dataset, the
field and both shapes/dtypes. Then its values are checked
(:mod:`alf.datasets.check_values`), unless the caller skips it.
"""
import logging
import os
from typing import Any, List, Optional, Sequence, Union

import torch

from alf import nest as alf_nest
from alf.data_structures import Experience, TimeStep
from alf.datasets.check_values import check_dataset_values
from alf.datasets.format import Dataset, DatasetSteps, open_dataset
from alf.datasets.spec_json import dtype_name
from alf.environments.env_specs import EnvSpecs
from alf.errors import UserError
from alf.replay_buffers.replay_buffer import ReplayBuffer
from alf.tensor_specs import BoundedTensorSpec, TensorSpec


def dataset_paths(offline_buffer_dir: Union[str, Sequence[str]]) -> List[str]:
    """``TrainerConfig.offline_buffer_dir`` (one path or a list) as a list of paths."""
    if isinstance(offline_buffer_dir, (str, os.PathLike)):
        return [os.fspath(offline_buffer_dir)]
    return [os.fspath(p) for p in offline_buffer_dir]


def dataset_env_specs(path: str) -> EnvSpecs:
    """:class:`~alf.environments.env_specs.EnvSpecs` of the env a dataset was made with
    (pure offline training builds its algorithm from these, without an env)."""
    info = open_dataset(path).info
    ts = TimeStep(step_type=BoundedTensorSpec((), torch.int32, 0, 2), reward=info.reward_spec,
                  discount=BoundedTensorSpec((), torch.float32, 0.0, 1.0),
                  observation=info.observation_spec, prev_action=info.action_spec,
                  env_id=TensorSpec((), torch.int64), env_info={})
    return EnvSpecs(info.observation_spec, info.action_spec, info.reward_spec, ts, info.env_name)


def offline_storage_spec(observation_spec: Any, action_spec: Any, reward_spec: Any) -> Experience:
    """The offline buffer's item spec: raw env fields only (``prev_action`` and ``env_id``
    are derived on sampling, as for the online buffer; no rollout info or state)."""
    ts = TimeStep(step_type=TensorSpec((), torch.int32), reward=_plain(reward_spec),
                  discount=TensorSpec((), torch.float32),
                  observation=alf_nest.map_structure(_plain, observation_spec),
                  prev_action=(), env_id=(), env_info={})
    return Experience(time_step=ts, action=alf_nest.map_structure(_plain, action_spec),
                      rollout_info=(), state=())


def _plain(spec: Any) -> Any:
    return TensorSpec(tuple(spec.shape), spec.dtype)


def check_dataset_fits(dataset: Dataset, observation_spec: Any, action_spec: Any,
                       reward_spec: Any, env_name: str = "") -> None:
    """Raise one line naming the first field whose shape/dtype differ from the experiment's
    (``observation_spec`` is the RAW env observation, before data transformers)."""
    info = dataset.info
    where = f"the env {env_name!r}" if env_name else "this experiment"
    for field, theirs, mine in (("observation", info.observation_spec, observation_spec),
                                ("action", info.action_spec, action_spec),
                                ("reward", info.reward_spec, reward_spec)):
        t_paths = dict(alf_nest.flatten_with_paths(theirs))
        m_paths = dict(alf_nest.flatten_with_paths(mine))
        if set(t_paths) != set(m_paths):
            raise UserError(
                f"dataset {dataset.path} does not fit {where}: its {field} has fields "
                f"{sorted(t_paths) or '(one tensor)'} but the experiment's has "
                f"{sorted(m_paths) or '(one tensor)'}")
        for path in sorted(m_paths):
            t, m = t_paths[path], m_paths[path]
            if tuple(t.shape) != tuple(m.shape) or t.dtype != m.dtype:
                name = field + (f".{path}" if path else "")
                raise UserError(
                    f"dataset {dataset.path} does not fit {where}: {name} is "
                    f"{tuple(t.shape)} {dtype_name(t.dtype)} in the dataset but {tuple(m.shape)} "
                    f"{dtype_name(m.dtype)} in the experiment (was the dataset made with "
                    f"{info.env_name!r}?)")
    if env_name and info.env_name and info.env_name != env_name:
        logging.warning("dataset %s was made with %r, this experiment uses %r (specs match)",
                        dataset.path, info.env_name, env_name)


def _as_storage(steps: DatasetSteps) -> Experience:
    ts = TimeStep(step_type=steps.step_type, reward=steps.reward, discount=steps.discount,
                  observation=steps.observation, prev_action=(), env_id=(), env_info={})
    return Experience(time_step=ts, action=steps.action, rollout_info=(), state=())


def load_offline_buffer(paths: Sequence[str], observation_spec: Any, action_spec: Any,
                        reward_spec: Any, env_name: str = "", capacity: Optional[int] = None,
                        device: Union[str, torch.device] = "cpu",
                        check_values: bool = True) -> ReplayBuffer:
    """Open, check and load datasets into one offline :class:`ReplayBuffer`.

    Args:
        paths: dataset directories (``alf.datasets.format``).
        observation_spec / action_spec / reward_spec: the experiment's RAW env specs.
        env_name: the experiment's env, for messages.
        capacity: steps per row (``TrainerConfig.offline_buffer_length``); None: the
            longest dataset row.
        device: where the buffer lives.
        check_values: check every stored value first (finite floats, valid step types
            and episode boundaries, actions within ``action_spec``:
            :func:`~alf.datasets.check_values.check_dataset_values`); False skips that
            full read (``TrainerConfig.offline_buffer_check_values``).
    Returns:
        a uniform buffer of ``sum(rows)`` rows whose items follow :func:`offline_storage_spec`.
    """
    if not paths:
        raise UserError("TrainerConfig.offline_buffer_dir is empty: give a dataset path or a list")
    datasets = [open_dataset(p) for p in paths]
    for ds in datasets:
        check_dataset_fits(ds, observation_spec, action_spec, reward_spec, env_name)
    if check_values:
        for ds in datasets:
            check_dataset_values(ds, action_spec)
    spec = offline_storage_spec(observation_spec, action_spec, reward_spec)
    device = torch.device(device)
    if len(datasets) == 1 and device.type == "cpu" and (
            capacity is None or int(capacity) == datasets[0].info.row_length):
        ds = datasets[0]
        storage = _as_storage(ds.steps)
        buffer = ReplayBuffer.from_storage(spec, storage, torch.tensor(ds.info.row_lengths),
                                           name="OfflineReplayBuffer")
    else:
        buffer = _copied_buffer(datasets, spec, capacity, device)
    if buffer.total_size() < 2:
        raise UserError(f"the offline dataset(s) {', '.join(paths)} hold "
                        f"{buffer.total_size()} step(s): nothing to train on")
    logging.info("offline buffer: %d steps in %d rows from %s", buffer.total_size(),
                 buffer.num_envs, ", ".join(paths))
    return buffer


def _copied_buffer(datasets: List[Dataset], spec: Experience, capacity: Optional[int],
                   device: torch.device) -> ReplayBuffer:
    """Rows of every dataset copied into one newly allocated buffer (ring placement)."""
    capacity = int(capacity) if capacity is not None else max(d.info.row_length for d in datasets)
    if capacity < 1:
        raise UserError(f"TrainerConfig.offline_buffer_length must be >= 1, got {capacity}")
    num_rows = sum(d.info.num_rows for d in datasets)
    buffer = ReplayBuffer(spec, num_rows, capacity, device=device, name="OfflineReplayBuffer")
    lengths = torch.tensor([n for d in datasets for n in d.info.row_lengths], dtype=torch.int64)
    written = int(lengths.clamp(max=capacity).max()) if num_rows else 0
    mine = alf_nest.flatten_with_paths(buffer._storage)
    fields = [torch.zeros((num_rows, written) + tuple(leaf.shape[2:]), dtype=leaf.dtype)
              for _, leaf in mine]
    row = 0
    dropped = 0
    for ds in datasets:
        leaves = alf_nest.flatten(_as_storage(ds.steps))
        for r, n in enumerate(ds.info.row_lengths):
            keep = min(n, capacity)
            dropped += n - keep
            positions = torch.arange(n - keep, n)
            slots = positions % capacity
            for dst, src in zip(fields, leaves):
                dst[row, slots] = src[r, n - keep:n]
            row += 1
    if dropped:
        logging.warning("offline buffer: capacity %d per row keeps the newest steps; %d "
                        "older steps of the dataset(s) are not loaded", capacity, dropped)
    buffer.load_state_dict({"version": 2, "fields": [p for p, _ in mine], "num_envs": num_rows,
                            "capacity": capacity, "storage": fields, "current_pos": lengths,
                            "current_size": lengths.clamp(max=capacity)})
    return buffer
