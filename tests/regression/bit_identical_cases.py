"""Bit-identical training regression: the cases, how they run, and how a run is hashed.

Shared by ``test_bit_identical.py`` (recomputes and compares) and
``make_bit_identical_fixture.py`` (writes ``fixtures/bit_identical.json``).

Every bundled example in ``alf/examples`` that is a runnable experiment is trained
in-process for a few iterations (few envs, short unrolls, small batches and buffers,
a little random initial collection so that off-policy training really starts), through
the public entry points only: :func:`alf.config.parse_config`, ``Trainer(TrainerConfig(),
root_dir).run()``. The async examples run with ``TrainerConfig.async_mode='deterministic'``
(bit-identical by design). Two RESUME cases train N iterations, then rerun the same
``root_dir`` with a higher ``num_iterations``.

What is recorded is read back from the run's newest checkpoint file
(``root_dir/train/ckpt-*.pt``) and its replay-buffer file, i.e. from the on-disk format,
not from any in-memory object that a refactor may move: every tensor of the
``algorithm`` entry (parameters, buffers, normalizer statistics, and every optimizer's
state, which the checkpoint keeps under ``algorithm/_extra_state/optimizers``), the run
counters, RNG states, episode metrics and the replay buffer. A tensor is recorded as the
SHA-256 of its dtype, shape and raw bytes (equal digests <=> ``torch.equal`` with the
same dtype and shape); a plain value (int, float, str) as ``"=" + repr(value)``.
Only ``wall_time_s`` (a clock reading) is left out.
"""
import glob
import hashlib
import os
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence

import torch

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures",
                       "bit_identical.json")

# Clocks and nothing else: everything else in a checkpoint is a number training produced.
_NOT_RECORDED = {"wall_time_s"}

# Every case: fixed seed, no evaluation, one pinned torch thread (float results can depend
# on the thread count), the final checkpoint only, the replay buffer saved with it (so it
# is compared too, and a resume continues with it), summaries at the first iterations
# (summarize_first_interval) and every 3rd.
COMMON = [
    "TrainerConfig.random_seed=0",
    "TrainerConfig.evaluate=False",
    "TrainerConfig.adapt_threads=False",
    "TrainerConfig.num_threads=1",
    "TrainerConfig.summary_interval=3",
    "TrainerConfig.checkpoint_interval=1000",
    "TrainerConfig.save_replay_buffer=True",
    "TrainerConfig.progress_interval_seconds=0.0",
]

ASYNC = ["TrainerConfig.async_mode='deterministic'"]

# Datasets for the offline / hybrid examples: random actions in the env, written with
# alf's DatasetWriter (no download). name -> (env, rows, steps per row, seed).
# Episodes of at most 16 steps, so that the datasets hold episode boundaries.
DATASETS = {
    "pendulum": ("Pendulum-v1", 2, 64, 0),
    "halfcheetah": ("HalfCheetah-v5", 2, 64, 0),
}
DATASET_EPISODE_STEPS = 16


# Each case keeps its example's num_env_steps (schedules anneal over it, as in the real
# run) and stops at ``TrainerConfig.num_iterations``.
class Case(NamedTuple):
    conf: str  # an example in alf/examples
    params: List[str]  # overrides that shrink it
    iterations: Sequence[int]  # one run, or (N, M): N iterations, then resumed up to M
    dataset: Optional[str] = None  # a DATASETS name bound as TrainerConfig.offline_buffer_dir


def _envs(n):
    return [f"create_environment.num_parallel_environments={n}"]


# Episodes cut short (Pendulum, MuJoCo, Atari) so that those cases too see episode
# boundaries (time-limit truncations) in their replay buffers and finished episodes in
# their metrics within a few dozen steps.
def _short_episodes(steps=16):
    return [f"create_environment.max_episode_steps={steps}"]


def _onpolicy(envs=2, unroll=8):
    return _envs(envs) + [f"TrainerConfig.unroll_length={unroll}"]


def _ppo(envs=2, unroll=8, batch=8, updates=2):
    return _onpolicy(envs, unroll) + [f"TrainerConfig.mini_batch_size={batch}",
                                      f"TrainerConfig.num_updates_per_train_iter={updates}"]


# Off-policy: a few random steps first, then small batches from a small ring buffer that
# the run fills past its capacity (so it wraps around).
def _offpolicy(collect=8, batch=16, buffer=32):
    return [f"TrainerConfig.initial_collect_steps={collect}",
            f"TrainerConfig.mini_batch_size={batch}",
            f"TrainerConfig.replay_buffer_length={buffer}"]


_OFFLINE = ["TrainerConfig.num_updates_per_train_iter=4", "TrainerConfig.mini_batch_size=16"]

# sac_pendulum.gin: 1 env, 1 env step and 1 update per iteration
_SAC_PENDULUM = _short_episodes() + _offpolicy()
_PPO_CART_POLE = _ppo()

CASES: Dict[str, Case] = {
    "ac_cart_pole": Case("ac_cart_pole.gin", _onpolicy(), [4]),
    "appo_atari": Case("appo_atari.gin", ASYNC + _short_episodes(12) + _ppo(), [3]),
    "appo_cart_pole": Case("appo_cart_pole.gin", ASYNC + _ppo(), [6]),
    "bc_halfcheetah": Case("bc_halfcheetah.gin", _OFFLINE, [4], "halfcheetah"),
    "bc_pendulum": Case("bc_pendulum.gin", _OFFLINE, [4], "pendulum"),
    "ddpg_pendulum": Case("ddpg_pendulum.gin", _short_episodes() + _offpolicy(), [40]),
    "dqn_atari": Case("dqn_atari.gin", _envs(2) + _short_episodes(12)
                      + ["DqnAlgorithm.target_update_period=2"]
                      + _offpolicy(collect=8, batch=8, buffer=16), [20]),
    # regenerated when the example took 3-step returns and an annealed lr (issue 21)
    "dqn_cart_pole": Case("dqn_cart_pole.gin", ["TrainerConfig.unroll_length=8",
                                                "TrainerConfig.num_updates_per_train_iter=4",
                                                "DqnAlgorithm.target_update_period=2"]
                          + _offpolicy(collect=16), [6]),
    # added after the Learner change (a new example: recorded from its first version)
    "dyna_dqn_cart_pole": Case("dyna_dqn_cart_pole.gin", ["TrainerConfig.unroll_length=8",
                                                          "TrainerConfig.num_updates_per_train_iter=2",
                                                          "DynaDqnAlgorithm.target_update_period=2",
                                                          "DynaDqnAlgorithm.model_updates=2",
                                                          "DynaDqnAlgorithm.imagined_updates=2"]
                               + _offpolicy(collect=16), [6]),
    "hybrid_sac_halfcheetah": Case("hybrid_sac_halfcheetah.gin",
                                   _short_episodes()
                                   + ["TrainerConfig.rl_train_after_update_steps=4"]
                                   + _offpolicy(collect=0), [24], "halfcheetah"),
    "hybrid_sac_pendulum": Case("hybrid_sac_pendulum.gin", _SAC_PENDULUM, [24], "pendulum"),
    "impala_atari": Case("impala_atari.gin", ASYNC + _short_episodes(12) + _onpolicy(), [3]),
    # added with the example (issue 21): recorded from its first version
    "impala_cart_pole": Case("impala_cart_pole.gin", ASYNC + _onpolicy(), [6]),
    "iql_halfcheetah": Case("iql_halfcheetah.gin", _OFFLINE, [4], "halfcheetah"),
    "iql_pendulum": Case("iql_pendulum.gin", _OFFLINE, [4], "pendulum"),
    "ppo_atari": Case("ppo_atari.gin", _short_episodes(12) + _ppo(), [3]),
    "ppo_cart_pole": Case("ppo_cart_pole.gin", _PPO_CART_POLE, [4]),
    "ppo_halfcheetah": Case("ppo_halfcheetah.gin", _short_episodes() + _ppo(), [4]),
    "ppo_hopper": Case("ppo_hopper.gin", _ppo(), [4]),
    "ppo_lstm_cart_pole": Case("ppo_lstm_cart_pole.gin",
                               _ppo(batch=2) + ["TrainerConfig.mini_batch_length=4"], [4]),
    "reinforce_cart_pole": Case("reinforce_cart_pole.gin", _onpolicy(unroll=32), [3]),
    "sac_halfcheetah": Case("sac_halfcheetah.gin", _short_episodes() + _offpolicy(), [40]),
    "sac_pendulum": Case("sac_pendulum.gin", _SAC_PENDULUM, [40]),
    "sac_pendulum_async": Case("sac_pendulum_async.gin",
                               ASYNC + _short_episodes()
                               + ["TrainerConfig.unroll_length=4",
                                  "TrainerConfig.num_updates_per_train_iter=2"]
                               + _offpolicy(collect=16), [10]),
    "td3_halfcheetah": Case("td3_halfcheetah.gin", _short_episodes() + _offpolicy(), [40]),
    # resume: the same root_dir run again with a higher num_iterations (replay buffer and
    # optimizer state come back from the checkpoint)
    "resume_sac_pendulum": Case("sac_pendulum.gin", _SAC_PENDULUM, [24, 40]),
    "resume_ppo_cart_pole": Case("ppo_cart_pole.gin", _PPO_CART_POLE, [3, 5]),
}


# ----------------------------------------------------------------------------- hashing
def tensor_digest(t: torch.Tensor) -> str:
    """SHA-256 of ``t``'s dtype, shape and raw bytes."""
    t = t.detach().cpu().contiguous()
    h = hashlib.sha256(f"{t.dtype}|{tuple(t.shape)}|".encode())
    if t.numel():
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _is_scalar(x: Any) -> bool:
    return x is None or isinstance(x, (bool, int, float, str))


def flat_digests(obj: Any, prefix: str = "", out: Optional[Dict[str, str]] = None
                 ) -> Dict[str, str]:
    """``{path: digest}`` of every leaf of a nest of dicts / lists / tuples: a tensor's
    :func:`tensor_digest`, a plain value's ``"=" + repr``, and a long list of plain values
    (Python's RNG state) one SHA-256 of its repr."""
    out = {} if out is None else out
    if isinstance(obj, torch.Tensor):
        out[prefix] = tensor_digest(obj)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            flat_digests(v, f"{prefix}/{k}" if prefix else str(k), out)
    elif isinstance(obj, (list, tuple)) and len(obj) > 16 and all(map(_is_scalar, obj)):
        out[prefix] = "sha256:" + hashlib.sha256(repr(list(obj)).encode()).hexdigest()
    elif isinstance(obj, (list, tuple)):
        if not obj:
            out[prefix] = "=" + repr(obj)
        for i, v in enumerate(obj):
            flat_digests(v, f"{prefix}/{i}", out)
    elif _is_scalar(obj):
        out[prefix] = "=" + repr(obj)
    else:
        raise TypeError(f"{prefix}: unexpected {type(obj).__name__} in a checkpoint")
    return out


def checkpoint_digests(root_dir: str) -> Dict[str, str]:
    """The digests of the newest checkpoint in ``root_dir/train`` (and its replay buffer)."""
    found = sorted(glob.glob(os.path.join(root_dir, "train", "ckpt-*.pt")))
    assert found, f"no checkpoint in {root_dir}/train"
    path = found[-1]
    state = torch.load(path, map_location="cpu", weights_only=True)
    state = {k: v for k, v in state.items() if k not in _NOT_RECORDED}
    out = flat_digests(state)
    rb_path = os.path.join(os.path.dirname(path),
                           "replay_buffer-" + os.path.basename(path)[len("ckpt-"):])
    if os.path.exists(rb_path):
        flat_digests(torch.load(rb_path, map_location="cpu", weights_only=True),
                     "replay_buffer_file", out)
    return out


def optimizer_paths(digests: Dict[str, str]) -> List[str]:
    """The recorded optimizer-state tensors (Adam's step / moments, RMSprop's averages)."""
    return [k for k, v in digests.items()
            if k.startswith("algorithm/_extra_state/optimizers/") and "/state/" in k
            and not v.startswith("=")]


# ----------------------------------------------------------------------------- datasets
def make_dataset(path: str, env_name: str, num_rows: int, steps_per_row: int,
                 seed: int) -> str:
    """A random-policy dataset of ``num_rows`` envs x ``steps_per_row`` steps."""
    from alf.datasets.format import DatasetSteps, DatasetWriter
    from alf.environments import create_environment
    env = create_environment(env_name=env_name, num_parallel_environments=num_rows, seed=seed,
                             max_episode_steps=DATASET_EPISODE_STEPS)
    gen = torch.Generator().manual_seed(seed)
    try:
        spec = env.action_spec()
        with DatasetWriter(path, num_rows, steps_per_row, env_name, env.observation_spec(),
                           spec, env.reward_spec()) as writer:
            ts = env.reset()
            low = torch.as_tensor(spec.minimum, dtype=torch.float32)
            high = torch.as_tensor(spec.maximum, dtype=torch.float32)
            for _ in range(steps_per_row):
                u = torch.rand((num_rows,) + tuple(spec.shape), generator=gen)
                action = (low + (high - low) * u).to(spec.dtype)
                writer.append(DatasetSteps(
                    step_type=ts.step_type[None], reward=ts.reward[None],
                    discount=ts.discount[None], observation=ts.observation[None],
                    action=action[None]))
                ts = env.step(action)
    finally:
        env.close()
    return path


def make_datasets(directory: str) -> Dict[str, str]:
    """Every dataset of :data:`DATASETS` under ``directory``: ``{name: path}``."""
    return {name: make_dataset(os.path.join(directory, name), *args)
            for name, args in DATASETS.items()}


def dataset_digests(path: str) -> Dict[str, str]:
    """Digests of a dataset's step arrays (what the offline cases train on)."""
    from alf.datasets.format import open_dataset
    steps = open_dataset(path, mmap=False).steps
    return flat_digests({k: torch.as_tensor(v) if not isinstance(v, torch.Tensor) else v
                         for k, v in steps._asdict().items()})


# ----------------------------------------------------------------------------- running
def run_case(name: str, work_dir: str, datasets: Dict[str, str],
             check: Optional[Callable[[Any, Dict[str, str]], None]] = None) -> Dict[str, str]:
    """Train case ``name`` in ``work_dir/name`` (resumed when it has two iteration counts)
    and return :func:`checkpoint_digests` of its final checkpoint.

    ``check(trainer, digests)``, if given, is called after the last run (the generator
    uses it to make sure the checkpoint holds the live state and every optimizer's state).
    """
    import gin

    from alf import config as alf_config
    from alf.trainers.trainer import Trainer
    from alf.trainers.trainer_config import TrainerConfig

    case = CASES[name]
    root = os.path.join(work_dir, name)
    params = COMMON + case.params
    if case.dataset is not None:
        params = params + [f"TrainerConfig.offline_buffer_dir='{datasets[case.dataset]}'"]
    try:
        for n in case.iterations:
            gin.clear_config()
            alf_config.parse_config(conf_file=case.conf,
                                    conf_params=params + [f"TrainerConfig.num_iterations={n}"])
            trainer = Trainer(TrainerConfig(), root, config_text=alf_config.config_text(),
                              quiet=True)
            trainer.run()
            assert trainer.context.iteration == n, (name, trainer.context.iteration, n)
        digests = checkpoint_digests(root)
        if check is not None:
            check(trainer, digests)
    finally:
        gin.clear_config()
    return digests


def environment() -> Dict[str, str]:
    """What else decides the bits: library versions and the CPU kernels torch picks."""
    import platform

    import numpy
    versions = {"python": platform.python_version(), "torch": torch.__version__,
                "numpy": numpy.__version__,
                "torch_cpu_capability": torch.backends.cpu.get_cpu_capability()}
    for module in ("gymnasium", "mujoco", "ale_py"):
        try:
            versions[module] = __import__(module).__version__
        except ImportError:
            versions[module] = "missing"
    return versions


def differences(expected: Dict[str, str], actual: Dict[str, str], limit: int = 10) -> List[str]:
    """Lines naming the first ``limit`` entries that differ (in the recorded order)."""
    lines = []
    for k, v in expected.items():
        if k not in actual:
            lines.append(f"missing   {k}")
        elif actual[k] != v:
            what = (f"{v[1:]} -> {actual[k][1:]}" if v.startswith("=") else "bytes differ")
            lines.append(f"differs   {k}: {what}")
    lines += [f"unexpected {k}" for k in actual if k not in expected]
    more = len(lines) - limit
    return lines[:limit] + ([f"... and {more} more"] if more > 0 else [])
