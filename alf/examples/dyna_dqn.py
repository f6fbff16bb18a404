"""Dyna-Q (Sutton 1990) with function approximation: DQN that also learns a one-step model
of its env and takes extra Q-learning steps on transitions the model imagines.

Sutton, "Integrated architectures for learning, planning, and reacting based on
approximating dynamic programming", ICML 1990. One training iteration
(:meth:`DynaLearner.train_iter`) is Dyna's three processes in turn:

1. **acting and direct RL**: the standard iteration (``Learner.train_iter``) collects
   ``unroll_length`` env steps into the replay buffer and takes
   ``num_updates_per_train_iter`` DQN updates on real transitions;
2. **model learning**: ``model_updates`` gradient steps of :class:`DynaModel` on real
   one-step transitions sampled from the buffer;
3. **planning**: ``imagined_updates`` DQN updates on imagined transitions: states from
   the buffer, actions from the current epsilon-greedy policy, reward, next state and
   discount from the model (``gamma * (1 - P(termination))``).

This file is the worked example of an algorithm with a loop of its own
(``RLAlgorithm.learner_class``), in ``docs/writing_an_algorithm.md``.
``context.num_updates`` counts Q-network updates, real and imagined (the clock of
``target_update_period``); the model's steps are counted by the model.
"""
from typing import Any, Callable, NamedTuple, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

import alf
from alf.algorithms.dqn_algorithm import DqnAlgorithm, Schedule
from alf.config_ranges import Discount, NonNegativeInt, PositiveInt, UpdateRate
from alf.data_structures import LossInfo
from alf.errors import ConfigError, IncompatibleSpecError
from alf.networks.q_networks import QNetwork
from alf.replay_buffers.n_step import Transition
from alf.tensor_specs import TensorSpec
from alf.trainers.learner import Learner
from alf.utils.optimizers import Adam, OptimizerFactory
from alf.utils.run_context import RunContext
from alf.utils.schedules import LinearSchedule


class DynaModel(nn.Module):
    """``(observation [B, D], one-hot action [B, A])`` -> ``(Δobservation [B, D], reward
    [B], termination logit [B])``, an MLP; with the counts of its gradient steps and of
    the Q updates taken on its imagined transitions (checkpointed with it)."""

    def __init__(self, obs_dim: int, num_actions: int, fc_layer_params: Sequence[int],
                 activation: Callable = torch.relu):
        super().__init__()
        sizes = [obs_dim + num_actions] + list(fc_layer_params)
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))
        self.out = nn.Linear(sizes[-1], obs_dim + 2)
        self._activation = activation
        self.register_buffer("num_updates", torch.zeros((), dtype=torch.int64))
        self.register_buffer("num_imagined_updates", torch.zeros((), dtype=torch.int64))

    def forward(self, observation: torch.Tensor, action_one_hot: torch.Tensor
                ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x = torch.cat([observation, action_one_hot], -1)
        for layer in self.hidden:
            x = self._activation(layer(x))
        out = self.out(x)
        return out[..., :-2], out[..., -2], out[..., -1]


class DynaModelLoss(NamedTuple):
    """Mean over the valid rows, written as ``Loss/<name>/model_*``."""
    model_loss: Any = ()
    model_observation_mse: Any = ()
    model_reward_mse: Any = ()
    model_termination_bce: Any = ()


class DynaLearner(Learner):
    """The Learner of :class:`DynaDqnAlgorithm`: the standard iteration, then model steps
    and Q updates on imagined transitions (module docstring)."""

    def train_iter(self) -> int:
        alg, ctx = self.algorithm, self.context
        updates_before = ctx.num_updates
        steps = super().train_iter()  # collect, store, real Q updates
        if ctx.num_updates == updates_before:  # random collection, or too little data yet
            return steps
        for _ in range(alg.model_updates):
            loss_info = self.model_step()
        for _ in range(alg.imagined_updates):
            self.imagined_step()
        self.replay.drop_sample_blocks()  # the next unroll makes sampled sequences stale
        if alg.model_updates and ctx.should_summarize():
            for name, value in loss_info.extra._asdict().items():
                ctx.add_scalar(f"Loss/{alg.name}/{name}", value)
        return steps

    def model_step(self) -> LossInfo:
        """One model gradient step on real one-step transitions from the buffer."""
        return self.algorithm.update_model(self._sample_transitions())

    def imagined_step(self) -> LossInfo:
        """One DQN update (``train_step``, ``calc_loss``, ``update_with_gradient``,
        ``after_update``) on imagined transitions from buffer states."""
        alg = self.algorithm
        imagined = alg.imagine(self._sample_transitions())
        step = alg.train_step(imagined)
        loss_info = alg.update_with_gradient(alg.calc_loss(step.info), valid_masks=imagined.valid)
        alg.after_update(imagined, step.info)
        alg.model.num_imagined_updates += 1
        return loss_info

    def _sample_transitions(self) -> Transition:
        """``mini_batch_size`` one-step transitions ``[B]`` sampled from the replay buffer
        (``Learner.sample``: sampled and preprocessed as the real Q updates' batches)."""
        return self.algorithm.make_transitions(self.sample())


@alf.configurable
class DynaDqnAlgorithm(DqnAlgorithm):
    """Dyna-Q: one-step DQN, a learned model, Q updates on imagined transitions.

    Args:
        observation_spec: a float vector ``[D]`` (the model predicts its change).
        action_spec, reward_spec: a scalar discrete action, a scalar reward.
        model_updates: model gradient steps per training iteration.
        imagined_updates: Q updates on imagined transitions per training iteration.
        model_fc_layer_params, model_activation: the model's hidden layers.
        model_optimizer: the model's own optimizer (None: Adam(1e-3)); the Q network's is
            ``optimizer``.
        (rest): see :class:`~alf.algorithms.dqn_algorithm.DqnAlgorithm` (``n_step`` is 1:
            the model predicts one step).
    """

    learner_class = DynaLearner

    def __init__(self, observation_spec: Any, action_spec: Any, reward_spec: Any = TensorSpec(()),
                 model_updates: NonNegativeInt = 4, imagined_updates: NonNegativeInt = 4,
                 model_fc_layer_params: Sequence[PositiveInt] = (64, 64),
                 model_activation: Callable = torch.relu,
                 model_optimizer: Optional[OptimizerFactory] = None,
                 q_network_ctor: Callable = QNetwork, double_q: bool = True,
                 epsilon_greedy: Schedule = LinearSchedule(1.0, 0.05, end_progress=0.1),
                 loss: str = "huber", optimizer: Optional[OptimizerFactory] = None,
                 gamma: Discount = 0.99, target_update_tau: UpdateRate = 1.0,
                 target_update_period: PositiveInt = 1000, context: Optional[RunContext] = None,
                 debug_summaries: bool = False, name: str = "DynaDqnAlgorithm"):
        if not (isinstance(observation_spec, TensorSpec) and observation_spec.ndim == 1
                and observation_spec.dtype.is_floating_point) or reward_spec.shape != ():
            raise IncompatibleSpecError(
                f"{name} models a float vector observation and a scalar reward, got "
                f"{observation_spec!r} and reward {reward_spec!r}")
        super().__init__(observation_spec, action_spec, reward_spec, q_network_ctor=q_network_ctor,
                         double_q=double_q, epsilon_greedy=epsilon_greedy, loss=loss,
                         optimizer=optimizer, n_step=1, gamma=gamma,
                         target_update_tau=target_update_tau,
                         target_update_period=target_update_period, context=context,
                         debug_summaries=debug_summaries, name=name)
        self.model_updates = int(model_updates)
        self.imagined_updates = int(imagined_updates)
        self.model = DynaModel(observation_spec.shape[0], self._num_actions,
                               model_fc_layer_params, model_activation)
        self.add_optimizer(model_optimizer or Adam(lr=1e-3), [self.model])
        self.exclude_from_rollout(self.model)  # acting never reads it

    def check_training_config(self, config: Any) -> None:
        """The model learns from the online replay buffer: refuse pure offline data (the
        learner thread, which would bypass DynaLearner.train_iter, is refused by the Trainer
        for every Learner with its own train_iter)."""
        super().check_training_config(config)
        if config.offline_buffer_dir:
            raise ConfigError(f"{type(self).__name__} learns its model online: "
                              "TrainerConfig.offline_buffer_dir is not supported")

    def _one_hot(self, action: torch.Tensor) -> torch.Tensor:
        return F.one_hot(action.long() - self._offset, self._num_actions).float()

    def model_loss(self, real: Transition
                   ) -> Tuple[torch.Tensor, Tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """Per-row model loss ``[B]`` on real one-step transitions ``[B]`` and its terms."""
        delta, reward, done_logit = self.model(real.observation, self._one_hot(real.action))
        obs_mse = (delta - (real.next_observation - real.observation)).square().mean(-1)
        reward_mse = (reward - real.reward).square()
        terminated = (real.discount == 0).float()  # the next step ended the episode
        done_bce = F.binary_cross_entropy_with_logits(done_logit, terminated, reduction="none")
        return obs_mse + reward_mse + done_bce, (obs_mse, reward_mse, done_bce)

    def update_model(self, real: Transition) -> LossInfo:
        """One gradient step of the model on real transitions ``[B]``. Only the model
        moves: the Q network gets no gradient, and the optimizers skip a parameter without
        one (Adam's moments included)."""
        loss, terms = self.model_loss(real)
        valid = real.valid
        means = [(x.detach() * valid).sum() / valid.sum().clamp(min=1) for x in (loss,) + terms]
        # not a Q update: the target network's clock (context.num_updates) does not move
        loss_info = self.update_with_gradient(LossInfo(loss=loss, extra=DynaModelLoss(*means)),
                                              valid_masks=valid, count_update=False)
        self.model.num_updates += 1
        return loss_info

    @torch.no_grad()
    def imagine(self, real: Transition) -> Transition:
        """Real transitions ``[B]`` with what follows each state replaced by the model's
        prediction for an action of the current epsilon-greedy policy: ``action [B]``,
        ``reward [B]``, ``discount [B]`` (``gamma * (1 - P(termination))``),
        ``next_observation [B, D]``."""
        action = self.rollout_step(real.time_step).output
        delta, reward, done_logit = self.model(real.observation, self._one_hot(action))
        return real._replace(action=action, reward=reward,
                             discount=self.gamma * (1 - torch.sigmoid(done_logit)),
                             next_observation=real.observation + delta, next_time_step=(),
                             rollout_info=(), importance_weights=torch.ones_like(real.valid),
                             batch_info=())
