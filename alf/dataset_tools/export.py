"""Make a dataset from a training run's saved replay buffer.

A run that checkpointed its replay buffer (``TrainerConfig.save_replay_buffer=True``) holds,
per env row, the newest ``current_size`` steps of a ring. :func:`export_replay_buffer` writes
row ``e``'s stored steps ``[pos - size, pos)`` in time order (the ring unwrapped) as dataset
row ``e``. What the buffer stores is what the dataset needs, minus what is dropped:

- ``rollout_info`` / ``state`` (algorithm-specific) and ``time_step.env_info`` are dropped;
- ``env_id`` / ``prev_action`` are not stored by the buffer (derivable) and not needed;
- with a :class:`~alf.algorithms.frame_stacker.FrameStacker` the buffer stores the newest
  frame of each step, which is the raw observation when nothing before the stacker changed it.

A buffer holds the observations and rewards *after* the run's data transformer, so a run
whose transformer changed them (normalisers, reward clipping/scaling) cannot give raw data:
that is refused with one line pointing to collect mode (:mod:`alf.dataset_tools.collect`), which
records raw steps while running the trained policy.
"""
import inspect
import json
import logging
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from alf import config as alf_config
from alf import nest as alf_nest
from alf.algorithms.data_transformers import IdentityDataTransformer, create_data_transformer
from alf.datasets.format import DatasetInfo, DatasetWriter, check_output_path, step_spec
from alf.environments import create_environment
from alf.errors import CheckpointError, ConfigError, UserError
from alf.trainers.checkpointer import Checkpointer, unreadable_reason
from alf.trainers.trainer import CONFIG_FILE
from alf.trainers.trainer_config import TrainerConfig

#: steps gathered from the buffer per write, per row (bounds the export's memory)
CHUNK_STEPS = 1 << 16
REWARD_TRANSFORMERS = ("RewardScaling", "RewardClipping", "RewardNormalizer")


def collect_hint(root_dir: str) -> str:
    return (f"make a dataset by running the trained policy instead: python -m "
            f"alf.bin.export_dataset --root_dir={root_dir} --out=PATH --collect_steps=N")


# ------------------------------------------------------------------ run config and env


def parse_run_config(root_dir: Optional[str] = None, conf: Optional[str] = None,
                     conf_params: Sequence[str] = ()) -> Optional[str]:
    """Parse a run's saved ``config.gin`` (``root_dir``) or a gin file (``conf``), then
    ``conf_params``. Returns the absolute ``root_dir`` (None with ``conf``).

    Raises ConfigError (one line) when ``root_dir`` is not a run directory."""
    params = alf_config.iter_conf_params(list(conf_params))
    if root_dir is None:
        alf_config.parse_config(conf_file=conf, conf_params=params)
        return None
    root_dir = os.path.abspath(os.path.expanduser(root_dir))
    saved = os.path.join(root_dir, CONFIG_FILE)
    if not os.path.isdir(root_dir):
        raise ConfigError(f"--root_dir {root_dir} does not exist: give the directory of a run "
                          "written by alf.bin.train")
    if not os.path.isfile(saved):
        raise ConfigError(f"{saved} not found: --root_dir must be a directory written by "
                          "alf.bin.train")
    with open(saved) as f:
        alf_config.parse_config(config_text=f.read(), conf_params=params, config_name=saved)
    return root_dir


def env_specs(env: Any) -> Tuple[str, Any, Any, Any]:
    """``(env_name, observation_spec, action_spec, reward_spec)`` of a built env."""
    return env.env_name, env.observation_spec(), env.action_spec(), env.reward_spec()


def transformer_members(transformer: Any) -> List[Any]:
    """The individual transformers of a (sequential) data transformer, identities dropped."""
    members = list(getattr(transformer, "members", [transformer]))
    return [m for m in members if not isinstance(m, IdentityDataTransformer)]


def describe_transformers(transformer: Any) -> Tuple[List[dict], int]:
    """``(data_transformers, frame_stack)`` for a manifest: per member ``{"class": name,
    param: value}`` for its constructor parameters that have a plain (JSON) value, and the
    FrameStacker's ``k`` (1 without one)."""
    described, frame_stack = [], 1
    for m in transformer_members(transformer):
        entry: Dict[str, Any] = {"class": type(m).__name__}
        for name, p in inspect.signature(type(m).__init__).parameters.items():
            if name in ("self", "observation_spec") or p.kind in (p.VAR_POSITIONAL,
                                                                 p.VAR_KEYWORD):
                continue
            value = getattr(m, "_" + name, getattr(m, name, p.default))
            if value is not inspect.Parameter.empty and _is_plain(value):
                entry[name] = list(value) if isinstance(value, tuple) else value
        if getattr(m, "stacks_frames", False):
            frame_stack = int(m.stack_size)
        described.append(entry)
    return described, frame_stack


def _is_plain(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
        return not isinstance(value, dict)
    except (TypeError, ValueError):
        return False


def raw_data_blocker(transformer: Any) -> Optional[str]:
    """Why a replay buffer of a run with ``transformer`` does not hold raw env data
    (``"ObservationNormalizer changes the observations"``), or None when it does (no
    transformer, or only FrameStackers, whose stored newest frames are raw)."""
    for m in transformer_members(transformer):
        name = type(m).__name__
        if getattr(m, "stacks_frames", False):
            continue
        if m.changes_observation:
            return f"{name} changes the observations"
        if name in REWARD_TRANSFORMERS:
            return f"{name} changes the rewards"
        return f"{name} transforms the time steps"
    return None


# ------------------------------------------------------------------ saved replay buffer


def find_saved_replay_buffer(root_dir: str) -> Tuple[int, str, dict]:
    """``(iteration, file, state)`` of the newest readable saved replay buffer of a run
    (loaded memory-mapped, without unpickling). Raises UserError (one line) when there is
    none, saying how to get one."""
    ckpt_dir = os.path.join(root_dir, "train")
    checkpoints = Checkpointer(ckpt_dir).list_checkpoints()
    if not checkpoints:
        raise CheckpointError(f"no checkpoint in {ckpt_dir}: train first (python -m "
                              f"alf.bin.train --root_dir={root_dir} ...)")
    found = []
    for iteration, path in checkpoints:
        rb = os.path.join(ckpt_dir, f"replay_buffer-{iteration:010d}.pt")
        if os.path.isfile(rb):
            found.append((iteration, rb))
    if not found:
        raise UserError(
            f"{ckpt_dir} has no saved replay buffer (the run did not set "
            "TrainerConfig.save_replay_buffer); train or resume it with --conf_param "
            f"TrainerConfig.save_replay_buffer=True to save one, or {collect_hint(root_dir)}")
    for iteration, rb in found:
        try:
            state = torch.load(rb, map_location="cpu", weights_only=True, mmap=True)
            state = state["replay_buffer"]
            if not isinstance(state, dict) or "storage" not in state:
                raise ValueError("not a replay buffer state")
        except Exception as e:  # noqa: BLE001 - any read failure: try the previous one
            logging.warning("Replay buffer file %s is unreadable (%s); trying the previous one",
                            rb, unreadable_reason(rb, e))
            continue
        if iteration != checkpoints[0][0]:
            print(f"[alf] note: exporting the replay buffer of iteration {iteration:,}, older "
                  f"than the newest checkpoint ({checkpoints[0][0]:,})", file=sys.stderr)
        return iteration, rb, state
    raise CheckpointError(f"none of the {len(found)} saved replay buffer file(s) in {ckpt_dir} "
                          f"is readable; {collect_hint(root_dir)}")


def _stored_path(dataset_path: str) -> str:
    """Replay-buffer storage path (Experience nest) of a dataset field path."""
    return dataset_path if dataset_path.split(".")[0] == "action" else "time_step." + dataset_path


def buffer_rows(state: dict, where: str) -> Tuple[int, int, np.ndarray, np.ndarray]:
    """``(num_envs, capacity, current_pos, current_size)`` of a saved buffer state, checked
    to describe data the state holds (one-line UserError naming ``where`` otherwise)."""
    try:
        envs, capacity = int(state["num_envs"]), int(state["capacity"])
        pos = torch.as_tensor(state["current_pos"]).to(torch.int64).numpy()
        size = torch.as_tensor(state["current_size"]).to(torch.int64).numpy()
        leaves = list(state["storage"])
        written = int(leaves[0].shape[1]) if leaves else 0
    except (KeyError, TypeError, IndexError, ValueError) as e:
        raise UserError(f"{where} is not a replay buffer alf can export (missing "
                        f"{e}); it was saved by an older alf or is damaged") from None
    if (pos.shape != (envs,) or size.shape != (envs,) or np.any(size < 0)
            or np.any(size > np.minimum(pos, capacity)) or np.any(np.minimum(pos, capacity) > written)):
        raise UserError(f"{where} is damaged: counters current_pos {pos.tolist()}, "
                        f"current_size {size.tolist()} do not fit {written} saved slots of a "
                        f"{capacity}-step ring")
    return envs, capacity, pos, size


def write_buffer_state(out: str, state: dict, where: str, env_name: str, observation_spec: Any,
                       action_spec: Any, reward_spec: Any, *,
                       data_transformers: Sequence[dict] = (), frame_stack: int = 1,
                       source: Optional[dict] = None, overwrite: bool = False) -> DatasetInfo:
    """Write a saved replay buffer ``state`` (``ReplayBuffer.state_dict()``) as a dataset.

    Row ``e`` of the dataset is buffer row ``e``'s stored steps ``[pos - size, pos)`` in time
    order. ``observation_spec`` is the spec of the stored observation (the raw env's).
    Raises UserError (one line) naming a field the buffer lacks or holds with another
    shape/dtype than the specs say."""
    envs, capacity, pos, size = buffer_rows(state, where)
    fields = state.get("fields")
    if fields is None:
        raise UserError(f"{where} was saved by an older alf without field names; it cannot be "
                        "exported")
    spec = step_spec(observation_spec, action_spec, reward_spec)
    leaves = []
    for path, leaf_spec in alf_nest.flatten_with_paths(spec):
        stored = _stored_path(path)
        if stored not in fields:
            raise UserError(f"{where} has no field '{stored}' (it holds {', '.join(fields)}); "
                            "the run's env does not match its saved buffer")
        leaf = state["storage"][fields.index(stored)]
        want = tuple(leaf_spec.shape)
        if tuple(leaf.shape[2:]) != want or leaf.dtype != leaf_spec.dtype:
            raise UserError(f"{where}: field '{stored}' holds {tuple(leaf.shape[2:])} "
                            f"{leaf.dtype} items but the env's spec is {want} {leaf_spec.dtype}")
        leaves.append(leaf)
    source = dict(source or {}, kind="replay_buffer", num_envs=envs, capacity=capacity,
                  current_pos=pos.tolist(), current_size=size.tolist())
    row_length = int(size.max()) if envs else 0
    with DatasetWriter(out, max(envs, 1), row_length, env_name, observation_spec, action_spec,
                       reward_spec, data_transformers=data_transformers,
                       frame_stack=frame_stack, source=source, overwrite=overwrite) as writer:
        for e in range(envs):
            first = int(pos[e] - size[e])
            for start in range(0, int(size[e]), CHUNK_STEPS):
                n = min(CHUNK_STEPS, int(size[e]) - start)
                slots = torch.from_numpy((first + start + np.arange(n)) % capacity)
                chunk = [leaf[e].index_select(0, slots)[:, None] for leaf in leaves]  # [n, 1, ...]
                writer.append(alf_nest.pack_sequence_as(spec, chunk), rows=[e])
        return writer.close()


# ------------------------------------------------------------------ the whole export


def export_replay_buffer(root_dir: str, out: str, conf_params: Sequence[str] = (),
                         overwrite: bool = False) -> DatasetInfo:
    """Export the newest saved replay buffer of the run in ``root_dir`` to the dataset ``out``.

    Rebuilds the run's env (one, in-process) for its specs and its data transformer to check
    that the buffer holds raw data; raises UserError (one line) when the run has no saved
    buffer, when its transformer changed observations or rewards, or when ``out`` exists
    (unless ``overwrite``)."""

    root_dir = parse_run_config(root_dir=root_dir, conf_params=conf_params)
    out = os.path.abspath(os.path.expanduser(out))
    check_output_path(out, overwrite)  # before any slow work
    config = TrainerConfig()
    env = create_environment(num_parallel_environments=1, backend="sync", seed=0)
    try:
        env_name, obs_spec, action_spec, reward_spec = env_specs(env)
    finally:
        env.close()
    transformer = create_data_transformer(config.data_transformer_ctor, obs_spec)
    blocker = raw_data_blocker(transformer)
    if blocker is not None:
        raise UserError(f"cannot export raw data from the replay buffer of {root_dir}: its data "
                        f"transformer {blocker} before they are stored "
                        f"(TrainerConfig.data_transformer_ctor), so the raw env data cannot be "
                        f"recovered; {collect_hint(root_dir)}")
    described, frame_stack = describe_transformers(transformer)
    iteration, rb_file, state = find_saved_replay_buffer(root_dir)
    return write_buffer_state(
        out, state, rb_file, env_name, obs_spec, action_spec, reward_spec,
        data_transformers=described, frame_stack=frame_stack, overwrite=overwrite,
        source={"root_dir": root_dir, "file": os.path.basename(rb_file), "iteration": iteration})
