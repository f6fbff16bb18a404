"""Make a dataset by running a policy: a run's trained one (greedy or sampled, optionally
with epsilon-random actions or Gaussian action noise) or a uniformly random one.

``K`` envs are stepped together; row ``r`` of the dataset is env ``r``'s stream of RAW time
steps (what the env returned, before the run's data transformer, which is applied only to
choose actions) with the action taken at each. Exactly ``collect_steps`` steps are recorded
in total: env ``r`` contributes ``collect_steps // K`` steps, plus one for the first
``collect_steps % K`` envs, so a row may end mid-episode. Rows are written with the streaming
:class:`~alf.datasets.format.DatasetWriter`, so memory stays bounded and an interrupted
collection leaves no dataset behind.
"""
import math
import os
import sys
import time
from typing import Any, List, Optional, Sequence, TextIO

import numpy as np
import torch

from alf import nest as alf_nest
from alf.algorithms.data_transformers import create_data_transformer
from alf.data_structures import StepType
from alf.dataset_tools.export import describe_transformers, env_specs, parse_run_config
from alf.datasets.format import DatasetInfo, DatasetSteps, DatasetWriter, check_output_path
from alf.environments import create_environment
from alf.errors import CheckpointError, ConfigError
from alf.experiment import EnvSpecs, build_algorithm, checkpoint_state_for
from alf.tensor_specs import BoundedTensorSpec
from alf.trainers.checkpointer import Checkpointer
from alf.trainers.experiment_signature import load_algorithm_state
from alf.trainers.milestones import load_iteration
from alf.trainers.trainer_config import TrainerConfig
from alf.utils.act_step import ActStep, executed_action
from alf.utils.process_signals import sigint_ignored_in_children
from alf.utils.run_context import RunContext
from alf.utils import precision

POLICIES = ("greedy", "sample", "random")
#: steps per env buffered before they are written
FLUSH_STEPS = 256


def check_collect_args(collect_steps: int, policy: str, epsilon: float, noise_std: float,
                       num_envs: Optional[int], root_dir: Optional[str],
                       conf: Optional[str]) -> None:
    """One-line ConfigError for an impossible combination of collect options."""
    if collect_steps < 1:
        raise ConfigError(f"--collect_steps must be >= 1, got {collect_steps}")
    if policy not in POLICIES:
        raise ConfigError(f"--policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    if not 0.0 <= epsilon <= 1.0:
        raise ConfigError(f"--epsilon must be in [0, 1], got {epsilon}")
    if not noise_std >= 0.0:
        raise ConfigError(f"--noise_std must be >= 0, got {noise_std}")
    if num_envs is not None and num_envs < 1:
        raise ConfigError(f"--num_envs must be >= 1, got {num_envs}")
    if root_dir and conf:
        raise ConfigError("give either --root_dir (a trained run) or --conf (a gin file, "
                          "--policy=random only), not both")
    if not root_dir and not conf:
        raise ConfigError("--root_dir is required (a directory written by alf.bin.train); "
                          "a random-policy dataset may use --conf=X.gin instead")
    if conf and policy != "random":
        raise ConfigError(f"--policy={policy} needs a trained policy: give --root_dir of a run "
                          "(--conf works only with --policy=random)")


def _load_policy(root_dir: str, config: Any, specs: Any, iteration: Optional[int] = None,
                 greedy: bool = True):
    """The run's algorithm with its newest checkpoint (or the one of ``iteration``, a
    milestone's too) loaded: the evaluation-only build (player role) for ``greedy``
    (``predict_step``); the full acting build (actor role) to sample with ``rollout_step``,
    which may read more than the actor (PPO's value for its rollout info)."""
    algorithm = build_algorithm(config, specs, "player" if greedy else "actor", RunContext())
    ckpt_dir = os.path.join(root_dir, "train")
    checkpointer = Checkpointer(ckpt_dir)
    if iteration is None:
        found = checkpointer.load_latest()
    else:
        _, state = load_iteration(ckpt_dir, iteration, checkpointer.list_checkpoints(),
                                  f"--checkpoint={iteration}")
        found = (iteration, state, None)
    if found is None:
        raise CheckpointError(f"no checkpoint in {ckpt_dir}: train first (python -m "
                              f"alf.bin.train --root_dir={root_dir} ...), or use "
                              "--policy=random")
    iteration, state, _ = found
    load_algorithm_state(algorithm, checkpoint_state_for(algorithm, state["algorithm"]),
                         root_dir)
    algorithm.eval()
    env_steps = int(state.get("context", {}).get("env_steps", 0))
    return algorithm, iteration, env_steps


class _Actor:
    """Chooses the ``[K]`` actions for raw time steps: one
    :class:`~alf.utils.act_step.ActStep` (transformer in eval mode, its state threaded;
    policy state reset at FIRST; ``predict_step`` or ``rollout_step``) whose action
    override is :meth:`_explore`; or, without an algorithm, uniformly random actions."""

    def __init__(self, policy: str, algorithm: Any, transformer: Any, action_spec: Any,
                 num_envs: int, epsilon: float, noise_std: float, generator: torch.Generator):
        self._spec, self._k = action_spec, num_envs
        self._eps, self._noise, self._gen = epsilon, noise_std, generator
        self._act: Optional[ActStep] = None
        if algorithm is not None:
            greedy = policy == "greedy"
            init_state = (algorithm.get_initial_predict_state(num_envs) if greedy
                          else algorithm.get_initial_rollout_state(num_envs))
            self._act = ActStep(transformer,
                                algorithm.predict_step if greedy else algorithm.rollout_step,
                                init_state, precision.act_dtype_of(algorithm))
            self._state = init_state
            self._tstate = transformer.get_initial_state(num_envs)

    def __call__(self, ts: Any) -> Any:
        if self._act is None:
            return self._random()
        acted = self._act(ts, self._state, self._tstate, self._explore)
        self._state, self._tstate = acted.alg_step.state, acted.transformer_state
        return acted.action

    def _explore(self, step: Any) -> Any:
        """The action override: the policy's action detached and cast to the spec's dtypes
        -> Gaussian noise on continuous leaves (clipped to the bounds) -> with probability
        ``epsilon`` per env, a uniformly random action instead (all from the generator)."""
        action = alf_nest.map_structure(lambda a, s: a.detach().to(s.dtype), step.output,
                                        self._spec)
        if self._noise > 0:
            action = alf_nest.map_structure(self._add_noise, action, self._spec)
        if self._eps > 0:
            explore = torch.rand(self._k, generator=self._gen) < self._eps
            if bool(explore.any()):
                action = alf_nest.map_structure(
                    lambda a, r: torch.where(explore.reshape((-1,) + (1,) * (a.ndim - 1)),
                                             r, a), action, self._random())
        return action

    def _random(self) -> Any:
        return alf_nest.map_structure(lambda s: s.sample((self._k,), generator=self._gen),
                                      self._spec)

    def _add_noise(self, a: torch.Tensor, spec: Any) -> torch.Tensor:
        if not spec.is_continuous():
            return a
        noisy = a + self._noise * torch.randn(a.shape, generator=self._gen, dtype=a.dtype)
        if isinstance(spec, BoundedTensorSpec):
            noisy = torch.minimum(torch.maximum(noisy, torch.as_tensor(spec.minimum)),
                                  torch.as_tensor(spec.maximum))
        return noisy.to(spec.dtype)


class _Progress:
    """Episode returns of the recorded steps and a progress line every ``interval`` s."""

    def __init__(self, total: int, num_envs: int, interval: float, stream: TextIO):
        self.total, self.interval, self.stream = total, interval, stream
        self.returns = torch.zeros(num_envs, dtype=torch.float64)
        self.completed: List[float] = []
        self.steps = 0
        self.start = self._last = time.monotonic()

    def record(self, step_type: torch.Tensor, reward: torch.Tensor, rows: np.ndarray) -> None:
        st = step_type.cpu()
        r = reward.cpu().to(torch.float64).reshape(len(st), -1).sum(1)
        for i, row in enumerate(rows):
            if st[i] == StepType.FIRST:
                self.returns[row] = 0.0
            else:
                self.returns[row] += r[i]
            if st[i] == StepType.LAST:
                self.completed.append(float(self.returns[row]))
        self.steps += len(rows)
        now = time.monotonic()
        if self.interval > 0 and now - self._last >= self.interval:
            self._last = now
            print(f"[collect] {self.line()}", file=self.stream, flush=True)

    def average_return(self) -> float:
        return sum(self.completed) / len(self.completed) if self.completed else math.nan

    def line(self) -> str:
        rate = self.steps / max(1e-9, time.monotonic() - self.start)
        avg = self.average_return()
        return (f"steps {self.steps:,}/{self.total:,} | {rate:,.0f} steps/s | episodes "
                f"{len(self.completed):,} | average return "
                f"{'n/a' if math.isnan(avg) else f'{avg:.2f}'}")


def collect_dataset(out: str, collect_steps: int, *, root_dir: Optional[str] = None,
                    conf: Optional[str] = None, conf_params: Sequence[str] = (),
                    policy: str = "greedy", epsilon: float = 0.0, noise_std: float = 0.0,
                    num_envs: Optional[int] = None, seed: int = 0, overwrite: bool = False,
                    progress_interval: float = 5.0, checkpoint: Optional[int] = None,
                    overwrite_policy_output: bool = False,
                    stream: TextIO = sys.stderr) -> DatasetInfo:
    """Run a policy for ``collect_steps`` env steps (in total over ``num_envs`` envs; default:
    the config's ``create_environment.num_parallel_environments``) and write them to the
    dataset ``out``. ``policy``: ``"greedy"`` (``predict_step``), ``"sample"``
    (``rollout_step``) or ``"random"`` (uniform over the action spec; no checkpoint needed,
    so ``conf`` may name a gin file instead of a run). ``seed`` seeds the envs and every
    random choice. ``checkpoint``: the iteration of the checkpoint to act with (default:
    the newest; e.g. an earlier one for a "medium" dataset). ``overwrite_policy_output``:
    record the action each env executed (clipped to a Box's bounds, or what the env or a
    gym wrapper reports as ``info["executed_action"]``) instead of the policy's, as
    ``TrainerConfig.overwrite_policy_output`` does for training. Progress goes to
    ``stream``. Returns the written manifest."""
    check_collect_args(collect_steps, policy, epsilon, noise_std, num_envs, root_dir, conf)
    root_dir = parse_run_config(root_dir=root_dir, conf=conf, conf_params=conf_params)
    out = os.path.abspath(os.path.expanduser(out))
    check_output_path(out, overwrite)
    try:
        config = TrainerConfig()
    except ConfigError:
        if policy != "random":
            raise
        config = None  # a gin file with only an env is enough for random actions
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    torch.set_num_threads(1)  # batch K acting: more threads only add synchronisation
    kwargs = {} if num_envs is None else {"num_parallel_environments": num_envs}
    with sigint_ignored_in_children():
        env = create_environment(seed=seed, report_executed_action=overwrite_policy_output,
                                 **kwargs)
    try:
        env_name, obs_spec, action_spec, reward_spec = env_specs(env)
        if noise_std > 0 and not any(s.is_continuous() for s in alf_nest.flatten(action_spec)):
            raise ConfigError(f"--noise_std applies to continuous actions, but {env_name}'s "
                              "actions are all discrete (use --epsilon)")
        k = env.batch_size
        algorithm, source = None, {"kind": "collect", "policy": policy, "epsilon": epsilon,
                                   "noise_std": noise_std, "num_envs": k, "seed": seed}
        if overwrite_policy_output:
            source["executed_actions"] = True
        if policy != "random":
            algorithm, iteration, steps = _load_policy(root_dir, config, EnvSpecs.of(env),
                                                       checkpoint, greedy=policy == "greedy")
            transformer = algorithm.data_transformer
            source.update(root_dir=root_dir, iteration=iteration, trained_env_steps=steps)
        else:
            source.update({"root_dir": root_dir} if root_dir else {"conf": conf})
            transformer = create_data_transformer(
                config.data_transformer_ctor if config is not None else None, obs_spec)
        transformer.eval()
        described, frame_stack = describe_transformers(transformer)
        actor = _Actor(policy, algorithm, transformer, action_spec, k, epsilon, noise_std,
                       generator)
        quota = np.full(k, collect_steps // k, dtype=np.int64)
        quota[:collect_steps % k] += 1
        progress = _Progress(collect_steps, k, progress_interval, stream)
        writer = DatasetWriter(out, k, int(quota.max()), env_name, obs_spec, action_spec,
                               reward_spec, data_transformers=described,
                               frame_stack=frame_stack, source=source, overwrite=overwrite)
        with writer, torch.no_grad():
            _run(env, actor, writer, quota, progress, overwrite_policy_output)
            info = writer.close()
    finally:
        env.close()
    print(f"[collect] done: {progress.line()}", file=stream, flush=True)
    avg = progress.average_return()
    print(f"wrote {out}: {info.num_steps:,} steps in {_rows(info.num_rows)}, "
          f"{info.num_episodes:,} complete episodes, average episode return "
          f"{'n/a' if math.isnan(avg) else f'{avg:.2f}'}", flush=True)
    return info


def _rows(n: int) -> str:
    return f"{n} row" if n == 1 else f"{n} rows"


def _run(env: Any, actor: _Actor, writer: DatasetWriter, quota: np.ndarray,
         progress: _Progress, overwrite_policy_output: bool = False) -> None:
    """Step ``env`` until every env ``r`` has recorded ``quota[r]`` steps; with
    ``overwrite_policy_output`` each recorded action becomes the executed one once the
    env has answered it (a row's last recorded action, never run, stays the policy's)."""
    done = np.zeros(len(quota), dtype=np.int64)
    pending: List[DatasetSteps] = []
    pending_rows: Optional[np.ndarray] = None

    def flush() -> None:
        if pending:
            writer.append(alf_nest.map_structure(lambda *xs: torch.stack(xs), *pending),
                          rows=None if len(pending_rows) == len(quota) else pending_rows)
            pending.clear()

    ts = env.reset()
    while True:
        rows = np.flatnonzero(done < quota)
        if len(rows) == 0:
            break
        action = actor(ts)
        if pending_rows is not None and (len(rows) != len(pending_rows)
                                         or len(pending) >= FLUSH_STEPS):
            flush()
        pending_rows = rows
        sel = torch.from_numpy(rows)
        take = (lambda x: x) if len(rows) == len(quota) else (lambda x: x.index_select(0, sel))
        step = DatasetSteps(step_type=ts.step_type, reward=ts.reward, discount=ts.discount,
                            observation=ts.observation, action=action)
        pending.append(alf_nest.map_structure(lambda x: take(x.cpu()), step))
        progress.record(take(ts.step_type), take(ts.reward), rows)
        done[rows] += 1
        if bool((done < quota).any()):
            ts = env.step(action)
            if overwrite_policy_output:
                executed = alf_nest.map_structure(lambda x: take(x.cpu()),
                                                  executed_action(action, ts))
                pending[-1] = pending[-1]._replace(action=executed)
    flush()
