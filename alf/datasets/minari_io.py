"""Minari datasets <-> alf datasets, both ways, from and to the LOCAL Minari cache only.

`Minari <https://minari.farama.org>`_ stores one record per episode: ``n + 1``
observations (the reset observation and the one after each step), ``n`` actions,
rewards, terminations and truncations. alf stores a row of
:class:`~alf.data_structures.TimeStep` -style steps (:mod:`alf.datasets.format`).
Each Minari episode of ``n`` steps becomes ``n + 1`` consecutive alf steps::

    alf step t      step_type   observation   action        reward        discount
    0               FIRST       obs[0]        action[0]     0             1
    1 .. n-1        MID         obs[t]        action[t]     reward[t-1]   1
    n               LAST        obs[n]        zeros         reward[n-1]   0 if terminated[n-1]
                                                                          else 1 (truncated)

so the action taken at step ``t`` is Minari's action ``t`` and the reward of arriving at
step ``t + 1`` is Minari's reward ``t``.

Layout: an imported dataset has ONE row holding every episode back to back, in Minari's
episode order (episodes have different lengths, so one row wastes no padding and keeps the
order; alf samples across rows and episodes alike).

Dtypes follow alf's environment conventions (:mod:`alf.environments.spec_utils`), so an
imported dataset has exactly the specs that alf's own environment of the same id reports
and can feed training: a float64 ``Box`` becomes float32, ``Discrete`` / ``MultiDiscrete``
int64, rewards float32 (Minari's collector records float64 rewards; they are rounded to
float32, alf's reward dtype). Minari's ``infos`` and per-episode seeds are not kept (alf
datasets hold no env info). An episode whose last step is neither terminated nor truncated
is imported as truncated, as Minari's own ``DataCollector`` records an episode cut by a
reset; one both terminated and truncated counts as terminated (discount 0).

Export writes the complete episodes of an alf dataset, in row order, through Minari's own
:func:`minari.create_dataset_from_buffers` with ``jpeg_encoding=False`` (image spaces are
stored raw, not JPEG-compressed). Fragments that miss their start or end (a row that
starts or stops mid-episode) are dropped with a warning counting their steps. Spaces come
from the dataset's specs, or, for a dataset imported from Minari, are the original Minari
spaces (and reward dtype), so a round trip gives back Minari's own spaces.

Round trips: alf -> Minari -> alf reproduces every complete episode bit for bit
(observations, actions, rewards, step types, discounts and their dtypes);
Minari -> alf -> Minari reproduces Minari's episodes bit for bit except float64 values,
which alf keeps as float32.
"""
import contextlib
import json
import logging
import os
import re
import shutil
import warnings
from dataclasses import dataclass, field
from typing import Any, Iterator, List, Optional, Tuple

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.envs.registration import EnvSpec

from alf.data_structures import StepType
from alf.datasets.format import DatasetInfo, DatasetSteps, DatasetWriter, open_dataset
from alf.datasets.spec_json import dtype_name
from alf.environments.spec_utils import action_spec_from_space, observation_spec_from_space
from alf.errors import UserError
from alf.tensor_specs import BoundedTensorSpec, TensorSpec

logger = logging.getLogger(__name__)

ENV_VAR = "MINARI_DATASETS_PATH"
MIN_VERSION = "0.5.4"
DEFAULT_ROOT = os.path.join("~", ".minari", "datasets")
INSTALL_HINT = "pip install -e \".[offline]\" (or pip install \"minari[hdf5]>=0.5.4,<0.6\")"
_METADATA = "metadata.json"
_ID_RE = re.compile(r"^(?:[-_\w][-_\w/]*[-_\w]+/)?[-_\w]+?-v\d+$")
# episodes per write when exporting (bounded memory: each chunk is a list of array views)
_EXPORT_CHUNK_STEPS = 100_000


@dataclass
class MinariExport:
    """What :func:`export_minari` wrote: the Minari id and directory, counts, and the
    steps of unfinished episode fragments it left out."""
    dataset_id: str
    path: str
    num_episodes: int
    num_steps: int
    dropped_fragments: int = 0
    dropped_steps: int = 0
    notices: List[str] = field(default_factory=list)


# ----------------------------------------------------------------------------- locating


def _minari():
    """The ``minari`` module, or a one-line UserError saying how to install it."""
    try:  # deferred: minari and h5py are optional (the [offline] extra) and heavy
        import h5py  # noqa: F401  (Minari's default storage; imported lazily by minari)
        import minari
        from packaging.version import Version  # comes with minari; [offline] declares it
    except ImportError as e:
        raise UserError(f"Minari datasets need the '{e.name}' package, which is not installed: "
                        f"{INSTALL_HINT}") from None
    if Version(minari.__version__) < Version(MIN_VERSION):  # jpeg_encoding=False is 0.5.4's
        raise UserError(f"Minari {minari.__version__} is installed; alf needs Minari >= "
                        f"{MIN_VERSION} (raw, lossless image storage): {INSTALL_HINT}")
    return minari


def cache_dir(root: Optional[str] = None) -> str:
    """The local Minari cache directory: ``root`` if given, else ``$MINARI_DATASETS_PATH``,
    else ``~/.minari/datasets`` (where Minari itself looks)."""
    chosen = root or os.environ.get(ENV_VAR) or DEFAULT_ROOT
    return os.path.abspath(os.path.expanduser(chosen))


def _where_root_came_from(root: Optional[str]) -> str:
    if root:
        return "from --minari_root"
    if os.environ.get(ENV_VAR):
        return f"from ${ENV_VAR}"
    return f"the default; ${ENV_VAR} is not set"


def local_dataset_ids(root: Optional[str] = None, limit: int = 1000) -> List[str]:
    """Ids of the Minari datasets under the cache ``root`` (a ``<id>/data/metadata.json``
    each), sorted; at most ``limit``."""
    base = cache_dir(root)
    found: List[str] = []
    for dirpath, dirnames, _ in os.walk(base):
        if os.path.isfile(os.path.join(dirpath, "data", _METADATA)):
            found.append(os.path.relpath(dirpath, base).replace(os.sep, "/"))
            dirnames[:] = []
        else:
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        if len(found) >= limit or dirpath.count(os.sep) - base.count(os.sep) > 6:
            dirnames[:] = []
    return sorted(found)[:limit]


def _find_minari_data(dataset_id_or_path: str, root: Optional[str]) -> str:
    """The ``data`` directory (holding ``metadata.json``) of a Minari dataset named by id
    (looked up in the local cache) or by its directory. Never downloads."""
    text = str(dataset_id_or_path)
    as_path = os.path.abspath(os.path.expanduser(text))
    for candidate in (as_path, os.path.join(as_path, "data")):
        if os.path.isfile(os.path.join(candidate, _METADATA)):
            return candidate
    base = cache_dir(root)
    data = os.path.join(base, text, "data")
    if os.path.isfile(os.path.join(data, _METADATA)):
        return data
    local = local_dataset_ids(root, limit=6)
    have = ("it holds no datasets" if not local else
            "it holds " + ", ".join(local[:5]) + (", ..." if len(local) > 5 else ""))
    raise UserError(
        f"Minari dataset '{text}' is not in the local Minari cache: {data} does not exist "
        f"(the cache is {base}, {_where_root_came_from(root)}; {have}); alf never downloads: "
        f"get it with `minari download {text}`, or point --minari_root / ${ENV_VAR} at the "
        "directory that holds it")


@contextlib.contextmanager
def _cache_root(root: str) -> Iterator[None]:
    """Make Minari's own functions use ``root`` (they read ``$MINARI_DATASETS_PATH`` on
    every call)."""
    old = os.environ.get(ENV_VAR)
    os.environ[ENV_VAR] = root
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = old


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


# ----------------------------------------------------------------------------- spaces


_SUPPORTED = "Box, Discrete, MultiDiscrete, MultiBinary and Dict nests of those"


def _check_space(space: Any, what: str, dataset: str, path: str = "") -> None:
    if isinstance(space, spaces.Dict):
        for key, sub in space.spaces.items():
            _check_space(sub, what, dataset, f"{path}.{key}" if path else str(key))
        return
    if not isinstance(space, (spaces.Box, spaces.Discrete, spaces.MultiDiscrete,
                              spaces.MultiBinary)):
        where = f"{what} space" + (f" '{path}'" if path else "")
        raise UserError(f"Minari dataset {dataset}: its {where} {space!r} cannot be imported "
                        f"(alf imports {_SUPPORTED})")


def _np_dtype(spec: TensorSpec) -> np.dtype:
    return np.dtype(dtype_name(spec.dtype))


def _space_from_spec(spec: Any, what: str, path: str = "") -> Any:
    """A gymnasium space whose alf spec (:mod:`alf.environments.spec_utils`) is ``spec``:
    bounded int64 -> Discrete / MultiDiscrete, everything else -> Box (unbounded floats get
    infinite bounds, unbounded ints their dtype's range)."""
    if isinstance(spec, dict):
        return spaces.Dict({k: _space_from_spec(v, what, f"{path}.{k}" if path else str(k))
                            for k, v in spec.items()})
    if not isinstance(spec, TensorSpec):
        raise UserError(f"the {what} spec{' ' + repr(path) if path else ''} is a "
                        f"{type(spec).__name__}; a Minari dataset holds {_SUPPORTED}")
    dtype = _np_dtype(spec)
    shape = tuple(spec.shape)
    bounded = isinstance(spec, BoundedTensorSpec)
    if dtype == np.int64 and bounded:
        low, high = spec.minimum.astype(np.int64), spec.maximum.astype(np.int64)
        if shape == ():
            return spaces.Discrete(int(high - low + 1), start=int(low))
        return spaces.MultiDiscrete(high - low + 1, dtype=np.int64, start=low)
    if bounded:
        return spaces.Box(spec.minimum, spec.maximum, shape=shape, dtype=dtype)
    if np.issubdtype(dtype, np.floating):
        return spaces.Box(-np.inf, np.inf, shape=shape, dtype=dtype)
    if dtype == np.bool_:
        return spaces.Box(0, 1, shape=shape, dtype=dtype)
    info = np.iinfo(dtype)
    return spaces.Box(info.min, info.max, shape=shape, dtype=dtype)


def _source_space(info: DatasetInfo, key: str, spec: Any, spec_fn) -> Optional[Any]:
    """The original Minari space of a dataset imported from Minari, when alf's spec of it
    is still the dataset's spec (else None)."""
    text = info.source.get(key) if info.source.get("kind") == "minari" else None
    if not isinstance(text, str):
        return None
    try:
        from minari.serialization import deserialize_space  # deferred: minari is optional/heavy
        space = deserialize_space(text)
        return space if spec_fn(space) == spec else None
    except Exception:  # an unreadable note in the manifest: fall back to the spec
        return None


def _space_dtype(space: Any) -> np.dtype:
    return np.dtype(space.dtype if space.dtype is not None else np.int64)


# ----------------------------------------------------------------------------- import


def _episode_leaves(value: Any, space: Any, spec: Any, length: int, what: str,
                    where: str) -> Any:
    """Minari's arrays of one episode field as an alf nest of ``[length, ...]`` arrays in the
    spec's dtypes (dict spaces by key)."""
    if isinstance(space, spaces.Dict):
        if not isinstance(value, dict) or set(value) != set(space.spaces):
            got = sorted(value) if isinstance(value, dict) else type(value).__name__
            raise UserError(f"{where}: {what} holds {got}, its space has keys "
                            f"{sorted(space.spaces)}")
        return {k: _episode_leaves(value[k], space.spaces[k], spec[k], length, f"{what}.{k}",
                                   where) for k in spec}
    array = np.asarray(value)
    want = (length,) + tuple(spec.shape)
    if array.shape != want:
        raise UserError(f"{where}: {what} has shape {list(array.shape)}, expected {list(want)} "
                        "(n + 1 observations / n actions per n-step episode)")
    return array.astype(_np_dtype(spec), copy=False)


def _pad_last(leaf: np.ndarray) -> np.ndarray:
    """``[n, ...]`` actions -> ``[n + 1, ...]`` with zeros for the LAST step."""
    return np.concatenate([leaf, np.zeros((1,) + leaf.shape[1:], leaf.dtype)])


def _map(fn, nest: Any) -> Any:
    if isinstance(nest, dict):
        return {k: _map(fn, v) for k, v in nest.items()}
    return fn(nest)


def import_minari(dataset_id_or_path: str, out: str, *, minari_root: Optional[str] = None,
                  overwrite: bool = False) -> DatasetInfo:
    """Convert a Minari dataset from the local cache into an alf dataset at ``out``.

    Args:
        dataset_id_or_path: a Minari id (``"cartpole/random-v0"``), looked up as
            ``<root>/<id>/data``, or the directory of a Minari dataset (or its ``data``).
        out: the alf dataset directory to write (see :mod:`alf.datasets.format`).
        minari_root: the Minari cache; default ``$MINARI_DATASETS_PATH``, else
            ``~/.minari/datasets``. Nothing is ever downloaded: a dataset that is not there
            is a one-line :class:`~alf.errors.UserError` naming the id and the directory.
        overwrite: replace an existing alf dataset at ``out``.

    Returns:
        The written dataset's manifest: one row, ``sum(n_i + 1)`` steps for episodes of
        ``n_i`` steps, ``source = {"kind": "minari", "dataset_id", "observation_space",
        "action_space", "env_spec", ...}`` (Minari's own serialisations).
    """
    _minari()
    # deferred: minari is optional/heavy (_minari() above says how to install it)
    from minari.dataset.minari_dataset import MinariDataset
    from minari.serialization import serialize_space

    data_path = _find_minari_data(dataset_id_or_path, minari_root)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dataset = MinariDataset(data_path)
    except ImportError as e:
        raise UserError(f"cannot read Minari dataset {data_path}: {_one_line(e)}") from None
    except Exception as e:  # Minari raises ValueError/KeyError/AssertionError/OSError
        raise UserError(f"cannot read Minari dataset {data_path}: {_one_line(e)}") from None
    name = dataset.id
    obs_space, act_space = dataset.observation_space, dataset.action_space
    _check_space(obs_space, "observation", name)
    _check_space(act_space, "action", name)
    obs_spec = observation_spec_from_space(obs_space)
    act_spec = action_spec_from_space(act_space)
    env_spec = dataset.env_spec
    env_name = env_spec.id if env_spec is not None else ""
    indices = [int(i) for i in dataset.episode_indices]
    storage = dataset.storage

    reward_shape: Tuple[int, ...] = ()
    reward_dtype = "float64"
    for episode in storage.get_episodes(indices[:1]):
        rewards = np.asarray(episode["rewards"])
        reward_shape, reward_dtype = tuple(rewards.shape[1:]), rewards.dtype.name
    reward_spec = TensorSpec(reward_shape, np.float32)

    source = {
        "kind": "minari", "dataset_id": name, "minari_version": dataset.minari_version,
        "data_path": data_path, "observation_space": serialize_space(obs_space),
        "action_space": serialize_space(act_space), "reward_dtype": reward_dtype,
        "env_spec": _env_spec_json(env_spec), "layout": "one row, episodes in Minari order",
    }
    row_length = int(dataset.total_steps) + len(indices)
    empty = unflagged = 0
    writer = DatasetWriter(out, 1, row_length, env_name, obs_spec, act_spec, reward_spec,
                           source=source, overwrite=overwrite)
    with writer:
        for episode in storage.get_episodes(indices):
            converted = _episode_steps(episode, name, obs_space, act_space, obs_spec, act_spec,
                                       reward_shape)
            if converted is None:
                empty += 1
                continue
            steps, flagged = converted
            unflagged += int(not flagged)
            writer.append(_map_steps(lambda x: x[:, None], steps))  # [n + 1, 1 row, ...]
        info = writer.close()
    if empty:
        logger.warning("Minari dataset %s: skipped %d episode(s) with no steps", name, empty)
    if unflagged:
        logger.warning("Minari dataset %s: %d episode(s) end neither terminated nor truncated; "
                       "imported as truncated (discount 1)", name, unflagged)
    return info


def _episode_steps(episode: Any, name: str, obs_space: Any, act_space: Any, obs_spec: Any,
                   act_spec: Any, reward_shape: Tuple[int, ...]
                   ) -> Optional[Tuple[DatasetSteps, bool]]:
    """One Minari episode of ``n`` steps as ``n + 1`` alf steps (FIRST, MID..., LAST; the
    reward and discount of step ``t`` are those that led to it) and whether its last step
    is flagged terminated or truncated; None if it is empty.

    Raises:
        UserError: inconsistent termination flags, an episode that ends before its last
            step, or rewards shaped unlike the first episode's.
    """
    where = f"Minari dataset {name} episode {episode['id']}"
    rewards = np.asarray(episode["rewards"])
    n = len(rewards)
    if n == 0:
        return None
    terminated = np.asarray(episode["terminations"], dtype=bool).reshape(-1)
    truncated = np.asarray(episode["truncations"], dtype=bool).reshape(-1)
    if terminated.shape != (n,) or truncated.shape != (n,):
        raise UserError(f"{where}: {n} rewards but {terminated.size} terminations and "
                        f"{truncated.size} truncations")
    early = np.flatnonzero(terminated[:-1] | truncated[:-1])
    if early.size:
        raise UserError(f"{where} ends at step {early[0]} of {n} (terminated or truncated "
                        "before its last step); alf needs one episode per Minari episode")
    if rewards.shape[1:] != reward_shape:
        raise UserError(f"{where}: rewards of shape {list(rewards.shape[1:])} per step, the "
                        f"first episode has {list(reward_shape)}")
    observation = _episode_leaves(episode["observations"], obs_space, obs_spec, n + 1,
                                  "observations", where)
    action = _episode_leaves(episode["actions"], act_space, act_spec, n, "actions", where)
    step_type = np.full(n + 1, StepType.MID, np.int32)
    step_type[0], step_type[-1] = StepType.FIRST, StepType.LAST
    reward = np.zeros((n + 1,) + reward_shape, np.float32)
    reward[1:] = rewards
    discount = np.ones(n + 1, np.float32)
    discount[-1] = 0.0 if terminated[-1] else 1.0
    steps = DatasetSteps(step_type=step_type, reward=reward, discount=discount,
                         observation=observation, action=_map(_pad_last, action))
    return steps, bool(terminated[-1] or truncated[-1])


def _map_steps(fn, steps: DatasetSteps) -> DatasetSteps:
    return DatasetSteps(*[_map(fn, x) for x in steps])


def _env_spec_json(env_spec: Any) -> Optional[str]:
    if env_spec is None:
        return None
    try:
        return env_spec.to_json()
    except Exception:  # kwargs that JSON cannot hold
        return None


# ----------------------------------------------------------------------------- export


def _check_minari_id(dataset_id: str) -> None:
    if not _ID_RE.fullmatch(dataset_id or ""):
        raise UserError(f"'{dataset_id}' is not a Minari dataset id: use "
                        "(namespace/)name-v<version>, e.g. pendulum/expert-v0")


def _export_env_spec(info: DatasetInfo) -> Optional[str]:
    """The env spec JSON to record: Minari's original (imported datasets), else the
    gymnasium registry's (no env is made), else a bare spec with the env id."""
    if info.source.get("kind") == "minari":
        text = info.source.get("env_spec")
        try:
            if json.loads(text).get("id") == info.env_name:
                return text
        except (TypeError, ValueError, AttributeError):  # absent or not an env spec
            pass
    if not info.env_name:
        return None
    try:
        return gym.spec(info.env_name).to_json()
    except Exception:  # not registered here (e.g. needs an extra) or not serialisable
        pass
    try:
        return EnvSpec(id=info.env_name).to_json()
    except Exception:  # an id gymnasium cannot parse
        return None


def _cast_to_space(value: Any, space: Any) -> Any:
    if isinstance(space, spaces.Dict):
        return {k: _cast_to_space(value[k], s) for k, s in space.spaces.items()}
    array = np.asarray(value)
    return array.astype(_space_dtype(space), copy=False)


def _episode_buffers(dataset, episodes: np.ndarray, obs_space: Any, act_space: Any,
                     reward_dtype: np.dtype) -> Iterator[list]:
    """Chunks of Minari ``EpisodeBuffer``s (array views of the memory-mapped dataset) for
    the complete episodes ``[E, 4]``, in order."""
    from minari.data_collector import EpisodeBuffer  # deferred: minari is optional/heavy
    steps = dataset.steps
    np_steps = _map_steps(lambda t: t.numpy(), steps)
    chunk, chunk_steps = [], 0
    for row, start, length, _ in episodes.tolist():
        end = start + length
        obs = _map(lambda x: x[row, start:end], np_steps.observation)
        act = _map(lambda x: x[row, start:end - 1], np_steps.action)
        rewards = np_steps.reward[row, start + 1:end].astype(reward_dtype, copy=False)
        terminated = np.zeros(length - 1, dtype=bool)
        truncated = np.zeros(length - 1, dtype=bool)
        if np_steps.discount[row, end - 1] == 0:
            terminated[-1] = True
        else:
            truncated[-1] = True
        chunk.append(EpisodeBuffer(observations=_cast_to_space(obs, obs_space),
                                   actions=_cast_to_space(act, act_space), rewards=rewards,
                                   terminations=terminated, truncations=truncated))
        chunk_steps += length - 1
        if chunk_steps >= _EXPORT_CHUNK_STEPS:
            yield chunk
            chunk, chunk_steps = [], 0
    if chunk:
        yield chunk


def export_minari(alf_dataset_path: str, dataset_id: str, *,
                  minari_root: Optional[str] = None) -> MinariExport:
    """Write the complete episodes of an alf dataset as the Minari dataset ``dataset_id``
    in the local Minari cache (``<root>/<dataset_id>/data``), through Minari's own
    :func:`minari.create_dataset_from_buffers`.

    Episodes keep the dataset's order (row by row). A fragment without its FIRST or LAST
    step (a row cut mid-episode) is dropped; the steps dropped are counted in the result
    and in a logged warning. ``minari.load_dataset(dataset_id)`` (with the same cache)
    reads the result; :func:`import_minari` turns it back into the same alf episodes.

    Args:
        alf_dataset_path: an alf dataset directory.
        dataset_id: the new Minari id, ``(namespace/)name-v<version>``; it must not exist.
        minari_root: the Minari cache; default ``$MINARI_DATASETS_PATH``, else
            ``~/.minari/datasets``.
    """
    minari = _minari()
    _check_minari_id(dataset_id)
    dataset = open_dataset(alf_dataset_path)
    info = dataset.info
    obs_space = (_source_space(info, "observation_space", info.observation_spec,
                               observation_spec_from_space)
                 or _space_from_spec(info.observation_spec, "observation"))
    act_space = (_source_space(info, "action_space", info.action_spec, action_spec_from_space)
                 or _space_from_spec(info.action_spec, "action"))
    reward_dtype = np.dtype(np.float32)
    if info.source.get("kind") == "minari" and info.source.get("reward_dtype") == "float64":
        reward_dtype = np.dtype(np.float64)  # Minari's own dtype back (values float32-exact)
    env_spec = _export_env_spec(info)

    root = cache_dir(minari_root)
    target = os.path.join(root, dataset_id)
    if os.path.lexists(target):
        raise UserError(f"Minari dataset '{dataset_id}' already exists at {target}: choose "
                        f"another id or version, or delete it with `minari delete {dataset_id}`")
    episodes = dataset.episodes()
    complete = episodes[episodes[:, 3] == 1]
    partial = episodes[episodes[:, 3] == 0]
    result = MinariExport(dataset_id=dataset_id, path=target, num_episodes=len(complete),
                          num_steps=int((complete[:, 2] - 1).sum()),
                          dropped_fragments=len(partial),
                          dropped_steps=int(partial[:, 2].sum()))
    if result.dropped_steps:
        note = (f"dropped {result.dropped_steps} step(s) of {result.dropped_fragments} "
                f"unfinished episode fragment(s) of {dataset.path} (a row that starts or ends "
                "mid-episode); Minari stores complete episodes only")
        result.notices.append(note)
        logger.warning(note)
    try:
        with _cache_root(root), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Minari's advice on unset optional metadata
            created = minari.create_dataset_from_buffers(
                dataset_id, [], env=None, observation_space=obs_space, action_space=act_space,
                algorithm_name="alf", description=f"exported from the alf dataset "
                f"{dataset.path} ({info.source.get('kind', 'unknown')} source)",
                jpeg_encoding=False)
            if env_spec is not None:
                created.storage.update_metadata({"env_spec": env_spec})
            for chunk in _episode_buffers(dataset, complete, obs_space, act_space,
                                          reward_dtype):
                created.update_dataset_from_buffer(chunk)
    except BaseException as e:
        shutil.rmtree(target, ignore_errors=True)
        if isinstance(e, (KeyboardInterrupt, SystemExit, UserError)):
            raise
        raise UserError(f"cannot write Minari dataset '{dataset_id}' to {target}: "
                        f"{_one_line(e)}") from None
    return result

