"""``RLAlgorithm``: an :class:`Algorithm` that interacts with an environment.

Adds observation/action/reward specs, the env, episode metrics, ``unroll``,
``observe_for_replay`` and the default ``train_iter``:

- on-policy (``on_policy = True``, e.g. A2C): unroll with gradients, then
  ``train_from_unroll`` on the ``[T, B]`` infos.
- off-policy (default; DQN, SAC, and PPO the ALF way): unroll without
  gradients into the replay buffer, then ``num_updates_per_train_iter``
  passes of ``preprocess_experience -> train_step -> calc_loss ->
  update_with_gradient``. With ``whole_replay_buffer_training`` each pass is an
  epoch of shuffled mini-batches over everything in the buffer.

The replay buffer is built from specs in :meth:`prepare` (a dry run of
``rollout_step`` on zeros gives the rollout-info spec), before step 0, so
checkpoints load without a warm-up iteration.
"""
import time
from typing import Any, Optional

import torch

from alf import nest as alf_nest
from alf.algorithms.algorithm import Algorithm
from alf.algorithms.replay_training import train_on_batch, whole_buffer_mini_batches
from alf.data_structures import Experience, LossInfo, TimeStep
from alf.errors import ConfigError
from alf.metrics import EpisodeMetrics
from alf.replay_buffers import ReplayBuffer
from alf.tensor_specs import TensorSpec, extract_spec, zeros_from_spec
from alf.unrollers.sync_unroller import SyncUnroller
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
        self._unroll_accumulator = 0.0
        self._prepared = False

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

    def _time_step_spec(self) -> TimeStep:
        env_spec = self._env.time_step_spec()
        return env_spec._replace(observation=self._observation_spec)

    def prepare(self) -> None:
        """Build the unroller, metrics, optimizers and (off-policy) replay buffer from specs."""
        if self._prepared:
            return
        self._prepared = True
        if (self.on_policy and self._config is not None
                and self._config.initial_collect_steps > 0):
            raise ConfigError(f"{type(self).__name__} is on-policy: TrainerConfig."
                              "initial_collect_steps must be 0 (random actions would be trained "
                              "on with the policy's log-probabilities)")
        self._ensure_optimizers()
        if self._env is None:
            return
        buffer_size = self._config.metric_buffer_size if self._config is not None else 20
        self.__dict__["_unroller"] = SyncUnroller(
            self._env, self._data_transformer, EpisodeMetrics(self._env.batch_size, buffer_size),
            self.get_initial_rollout_state, device=self.device)
        if not self.on_policy:
            self._build_replay_buffer()

    def _build_replay_buffer(self) -> None:
        batch = self._env.batch_size
        ts = zeros_from_spec(self._time_step_spec(), batch, device=self.device)
        with torch.no_grad():
            alg_step = self.rollout_step(ts, self.get_initial_rollout_state(batch))
        exp = Experience(time_step=ts, action=alg_step.output, rollout_info=alg_step.info,
                         state=self.get_initial_rollout_state(batch)
                         if not alf_nest.is_empty(self.rollout_state_spec) else ())
        length = self._config.replay_buffer_length if self._config is not None else None
        if length is None:
            if self._regime("whole_replay_buffer_training"):
                # +1: the newest step is kept across clears so no transition is lost.
                length = int(max(1, self._unroll_length())) + 1
            else:
                raise ConfigError(f"{type(self).__name__} is off-policy: set "
                                  "TrainerConfig.replay_buffer_length")
        self.__dict__["_replay_buffer"] = ReplayBuffer(extract_spec(exp, 1), batch, length,
                                                       device=self.device)

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
            batch = self._env.batch_size
            device = self.device
            override = lambda _step: self._action_spec.sample((batch,)).to(device)  # noqa: E731
        experience = self._unroller.unroll(self.rollout_step, unroll_length,
                                           action_override=override)
        self._context.env_steps += unroll_length * self._env.batch_size
        if self.on_policy:
            return experience
        self.observe_for_replay(experience)
        return None

    def observe_for_replay(self, experience: Experience) -> None:
        """Store a time-major unroll ``[T, B]`` in the replay buffer (one write per field)."""
        self._replay_buffer.add_sequence(experience, experience.time_step.env_id[0])

    # -------------------------------------------------------------- training
    def train_iter(self) -> int:
        """One training iteration; returns the number of env steps unrolled."""
        self.prepare()
        self._unroll_accumulator += float(self._unroll_length())
        steps = int(self._unroll_accumulator + 1e-9)  # 10 x 0.1 must give 1
        self._unroll_accumulator -= steps
        if self.on_policy:
            t0 = time.perf_counter()
            experience = self.unroll(max(1, steps))
            self._context.unroll_seconds += time.perf_counter() - t0
            self.train_from_unroll(experience)
            return max(1, steps) * self._env.batch_size
        if steps > 0:
            t0 = time.perf_counter()
            with torch.no_grad():
                self.unroll(steps)
            self._context.unroll_seconds += time.perf_counter() - t0
        if self._config is not None and self._context.env_steps < self._config.initial_collect_steps:
            return steps * self._env.batch_size
        self.train_from_replay_buffer()
        return steps * self._env.batch_size

    def train_from_unroll(self, experience: Experience) -> LossInfo:
        """On-policy update from ``experience [T, B]`` whose rollout infos carry gradients."""
        loss_info = self.calc_loss(experience.rollout_info)
        loss_info = self.update_with_gradient(loss_info)
        self.after_update(experience, experience.rollout_info)
        self.after_train_iter(experience, experience.rollout_info)
        self.summarize_train(experience, experience.rollout_info, loss_info)
        return loss_info

    def train_from_replay_buffer(self) -> Optional[LossInfo]:
        """Off-policy update(s) from the replay buffer (see module docstring)."""
        cfg = self._config
        num_updates = cfg.num_updates_per_train_iter if cfg is not None else 1
        mb_size = cfg.mini_batch_size if cfg is not None else None
        mb_length = cfg.mini_batch_length if cfg is not None else 1
        loss_info, info, experience = None, None, None
        whole, sizes = self._regime("whole_replay_buffer_training"), self._replay_buffer.current_size()
        if int(sizes.min() if whole else sizes.max()) < (2 if whole else mb_length):
            return None  # too little data yet (first iterations of a short/fractional unroll)
        if whole:
            experience = self.preprocess_experience(self._replay_buffer.gather_all())
            # min: the first iteration holds one step less (no step kept from before)
            length = min(mb_length, alf_nest.flatten(experience.step_type)[0].shape[1])
            for batch in whole_buffer_mini_batches(experience, mb_size, length, num_updates):
                loss_info, info = train_on_batch(self, batch)
            if self._regime("clear_replay_buffer"):
                self._replay_buffer.clear(keep_last=True)
        else:
            if mb_size is None:
                raise ConfigError("Set TrainerConfig.mini_batch_size for replay-buffer sampling")
            for _ in range(num_updates):
                batch, batch_info = self._replay_buffer.get_batch(mb_size, mb_length)
                experience = self.preprocess_experience(batch._replace(batch_info=batch_info))
                loss_info, info = train_on_batch(self, experience)
            if self._regime("clear_replay_buffer"):
                self._replay_buffer.clear()
        self.after_train_iter(experience, info)
        if loss_info is not None:
            self.summarize_train(experience, info, loss_info)
        return loss_info
