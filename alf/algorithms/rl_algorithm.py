"""``RLAlgorithm``: an :class:`Algorithm` that acts in an environment: specs, hooks, the
data transformer, and a declaration of how it trains.

What an RL algorithm is made of, and nothing more:

- **specs**: the (transformed) observation spec, the env's action and reward specs;
- **hooks** (from :class:`Algorithm`): ``rollout_step`` / ``predict_step`` act,
  ``train_step`` / ``preprocess_experience`` / ``calc_loss`` / ``after_update`` /
  ``after_train_iter`` learn; :meth:`train_from_unroll` and :meth:`train_on_batch`
  are the one-update steps of the two data shapes (a fresh unroll ``[T, B]``, a
  mini-batch ``[B, L]``);
- **the data transformer** applied to every env time step (checkpointed with it);
- **the training regime** it declares (class attributes below) and
  :meth:`check_training_config`, which refuses settings the algorithm cannot train
  with, naming the field.

The loop that feeds it (unroll, store, sample, train, priorities, hybrid
mixing, ranks) is the :class:`~alf.trainers.learner.Learner`'s, which the Trainer
owns. An algorithm that needs a loop of its own (model-based, MuZero-style)
names a Learner subclass in :attr:`RLAlgorithm.learner_class` and overrides
``Learner.train_iter`` there (docs/writing_an_algorithm.md).
"""
import warnings
from typing import Any, Optional, Tuple

import torch

from alf import nest as alf_nest
from alf.algorithms.algorithm import Algorithm
from alf.algorithms.replay_training import train_on_batch
from alf.data_structures import Experience, LossInfo, TimeStep
from alf.errors import ConfigError
from alf.tensor_specs import TensorSpec, extract_spec, zeros_from_spec
from alf.utils.optimizers import OptimizerFactory
from alf.utils.run_context import RunContext


class _IdentityTransformer(torch.nn.Module):
    state_spec = ()

    def transform_timestep(self, time_step, state):
        return time_step, state


class RLAlgorithm(Algorithm):
    """Base class of reinforcement-learning algorithms.

    Class attributes a subclass sets to declare its training regime (read by the
    :class:`~alf.trainers.learner.Learner`):
        on_policy: train on the freshly unrolled (grad-carrying) experience ``[T, B]``
            with :meth:`train_from_unroll`; no replay buffer.
        whole_replay_buffer_training / clear_replay_buffer: the defaults used when
            ``TrainerConfig`` leaves them ``None`` (PPO the ALF way: both True).
        replay_sample_blocks: mini-batches may be sampled a block of
            ``num_updates_per_train_iter`` batches at a time (one indexing pass over
            the buffer instead of one per update; transition learners).
        learner_class: the :class:`~alf.trainers.learner.Learner` subclass that trains
            this algorithm (None: the standard one).

    Args:
        observation_spec: (transformed) observation spec the algorithm sees.
        action_spec: the env's action spec.
        reward_spec: ``TensorSpec(())`` unless rewards are vectors.
        env, config: accepted, in their old places, for algorithms written before the
            Learner existed (they pass them on to this constructor); the env is not
            used, ``config`` is kept as :attr:`config` for such an algorithm's own checks.
            New code leaves both out and passes the rest by keyword.
        context: the run context (counters, summaries).
        optimizer, train/rollout/predict_state_spec, debug_summaries, name: see
            :class:`Algorithm`.
    """

    on_policy: bool = False
    whole_replay_buffer_training: bool = False
    clear_replay_buffer: bool = False
    replay_sample_blocks: bool = False
    learner_class: Optional[type] = None
    #: the loss reads the behaviour policy's log-probability of each stored action
    #: (importance ratios, policy gradients): an overwritten action would not match it
    trains_on_behaviour_log_probs: bool = False

    def __init__(self, observation_spec: Any, action_spec: Any, reward_spec: Any = TensorSpec(()),
                 env: Any = None, config: Any = None, context: Optional[RunContext] = None,
                 optimizer: Optional[OptimizerFactory] = None, train_state_spec: Any = (),
                 rollout_state_spec: Any = None, predict_state_spec: Any = None,
                 debug_summaries: bool = False, name: str = "RLAlgorithm"):
        super().__init__(train_state_spec=train_state_spec, rollout_state_spec=rollout_state_spec,
                         predict_state_spec=predict_state_spec, optimizer=optimizer,
                         context=context, debug_summaries=debug_summaries, name=name)
        if env is not None:
            warnings.warn(f"{type(self).__name__}: RLAlgorithm no longer takes an env (the "
                          "Learner steps it); it is ignored", DeprecationWarning, stacklevel=2)
        _check_reward_spec(self, reward_spec)
        self._observation_spec = observation_spec
        self._action_spec = action_spec
        self._reward_spec = reward_spec
        self._legacy_config = config
        self._data_transformer: torch.nn.Module = _IdentityTransformer()

    # ----------------------------------------------------------------- specs
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
    def config(self) -> Any:
        """The ``TrainerConfig`` given to the constructor by an algorithm that still takes
        one (None otherwise): the Learner, not the algorithm, reads the config."""
        return self._legacy_config

    @property
    def data_transformer(self) -> torch.nn.Module:
        return self._data_transformer

    def set_data_transformer(self, transformer: torch.nn.Module) -> None:
        """Use ``transformer`` on every env TimeStep (it is checkpointed with the algorithm)."""
        self._data_transformer = transformer

    def experience_spec(self, time_step_spec: TimeStep) -> Experience:
        """Spec of one step of :class:`Experience` this algorithm rolls out (no batch dim)
        in an env of raw ``time_step_spec``: the transformed time step, action, rollout
        info and rollout state (``()`` if stateless), from a dry run of ``rollout_step``
        on zeros."""
        return extract_spec(self.dry_run_experience(time_step_spec, 1), 1)

    def dry_run_experience(self, time_step_spec: TimeStep, batch: int) -> Experience:
        """``Experience [batch]`` of zeros through ``rollout_step`` (no gradients)."""
        ts_spec = time_step_spec._replace(observation=self._observation_spec)
        ts = zeros_from_spec(ts_spec, batch, device=self.device)
        with torch.no_grad():
            alg_step = self.rollout_step(ts, self.get_initial_rollout_state(batch))
        return Experience(time_step=ts, action=alg_step.output, rollout_info=alg_step.info,
                          state=self.get_initial_rollout_state(batch)
                          if not alf_nest.is_empty(self.rollout_state_spec) else ())

    # ---------------------------------------------------------------- regime
    def uses_regime(self, name: str, config: Any) -> bool:
        """``config.<name>`` (``whole_replay_buffer_training`` / ``clear_replay_buffer``),
        or this class's declaration when the config leaves it ``None``."""
        value = getattr(config, name, None) if config is not None else None
        return getattr(type(self), name) if value is None else bool(value)

    def check_training_config(self, config: Any) -> None:
        """Refuse training settings this algorithm cannot train with (one
        :class:`~alf.errors.ConfigError` naming the field). ``config`` has the
        ``TrainerConfig`` field names (a :class:`~alf.trainers.training_settings.TrainingSettings`).
        Subclasses extend it; the default checks what the declared regime implies."""
        name = type(self).__name__
        if self.on_policy and config.initial_collect_steps > 0:
            raise ConfigError(f"{name} is on-policy: TrainerConfig.initial_collect_steps "
                              "must be 0 (random actions would be trained on with the "
                              "policy's log-probabilities)")
        if getattr(config, "overwrite_policy_output", False) and \
                self.trains_on_behaviour_log_probs:
            raise ConfigError(
                f"{name} trains with the log-probability its policy gave the stored action, "
                "which an executed action replacing it would not have: "
                "TrainerConfig.overwrite_policy_output=True needs an algorithm that learns "
                "from stored actions alone (SacAlgorithm, DqnAlgorithm, DdpgAlgorithm, "
                "Td3Algorithm, BcAlgorithm, IqlAlgorithm)")
        if self.on_policy and config.async_unroll:
            raise ConfigError(
                f"{name} trains through its rollout's autograd graph, which cannot cross "
                "processes: TrainerConfig.async_unroll=True needs an algorithm that trains "
                "on stored experience, e.g. ImpalaAlgorithm or APPOAlgorithm")

    def replay_sequence_length(self) -> Optional[int]:
        """Steps per sampled sequence; None: ``TrainerConfig.mini_batch_length``
        (transition learners return ``n_step + 1``)."""
        return None

    # ------------------------------------------------------------- updating
    def observe_collected(self, experience: Experience, bootstrap_last: bool) -> None:
        """Called once per collected unroll ``[T(+1), B]`` (``bootstrap_last``: its last step
        is collected again as the next one's first) on the learner, before it is trained
        on: each step is seen here once, however often replay samples it. Default: nothing."""

    def train_from_unroll(self, experience: Experience) -> LossInfo:
        """On-policy update from ``experience [T, B]`` whose rollout infos carry gradients."""
        loss_info = self.calc_loss(experience.rollout_info)
        loss_info = self.update_with_gradient(loss_info)
        self.after_update(experience, experience.rollout_info)
        self.after_train_iter(experience, experience.rollout_info)
        self.summarize_train(experience, experience.rollout_info, loss_info)
        return loss_info

    def train_on_batch(self, experience: Experience) -> Tuple[LossInfo, Any]:
        """One gradient step on ``experience [B, L]``; returns ``(LossInfo, info [L, B])``.
        The default is :func:`alf.algorithms.replay_training.train_on_batch`."""
        return train_on_batch(self, experience)


def _check_reward_spec(algorithm: "RLAlgorithm", reward_spec: Any) -> None:
    """A vector reward ``[d]`` (an env's own columns) reaches only algorithms that take
    reward columns (``supports_reward_columns``); the others are told to let an Agent
    weigh the columns into their scalar reward."""
    shape = tuple(getattr(reward_spec, "shape", ()))
    if not shape or getattr(algorithm, "supports_reward_columns", False):
        return
    name = type(algorithm).__name__
    raise ConfigError(
        f"{name} learns from a scalar reward and the env's reward has columns "
        f"(reward_spec {reward_spec!r}): compose it with an Agent, which weighs the "
        f"columns: TrainerConfig.algorithm_ctor = @Agent, Agent.rl_algorithm_cls = @{name}, "
        f"Agent.reward_weights = [...] (one per column; docs/design/agent.md)")
