"""DDPG (Lillicrap et al. 2016), and the machinery TD3 reuses (Fujimoto et al. 2018).

A deterministic actor ``mu(s)`` explores with Gaussian noise; an ensemble of
``num_critics`` Q(s, a) critics (one for DDPG, two for TD3) evaluated as one
batched network. One update on an n-step :class:`Transition` ``[B]``::

    a' = clip(mu'(s') + clip(N(0, target_policy_noise), +-target_noise_clip))   (TD3 smoothing)
    target = r + discount * min_k Q'_k(s', a')
    critic loss = sum_k (Q_k(s, a) - target)^2
    actor loss  = -Q_1(s, mu(s))      every ``actor_update_period`` updates (TD3 delay)

Noise scales are fractions of the action range's half-width, so one setting
fits any bounds. Targets (actor and critics) move with ``target_update_tau``
when the actor is updated.
"""
from typing import Any, Callable, NamedTuple, Optional

import numpy as np
import torch

import alf
from alf.algorithms.action_nests import is_single_action, refuse_action_space
from alf.algorithms.off_policy_algorithm import OffPolicyAlgorithm
from alf.config_ranges import Discount, NonNegative, PositiveInt, UpdateRate
from alf.data_structures import AlgStep, LossInfo, TimeStep
from alf.errors import ConfigError, IncompatibleSpecError
from alf.networks.actor_networks import ActorNetwork
from alf.networks.critic_networks import CriticNetwork
from alf.replay_buffers.n_step import Transition
from alf.tensor_specs import BoundedTensorSpec, TensorSpec
from alf.utils.optimizers import Adam, OptimizerFactory
from alf.utils.run_context import RunContext


class DdpgInfo(NamedTuple):
    """Per-row ``[B]`` terms of one update (``actor_loss`` is 0 on non-actor updates)."""
    critic_loss: Any = ()
    actor_loss: Any = ()
    actor_objective: Any = ()
    td_error: Any = ()
    q_value: Any = ()
    target_q: Any = ()  # the TD target [B] (summaries)
    valid: Any = ()     # the transition's valid [B] (summaries)


@alf.configurable
class DdpgAlgorithm(OffPolicyAlgorithm):
    """Deterministic policy gradient with target networks.

    Args:
        observation_spec, action_spec, reward_spec, context: see RLAlgorithm.
        actor_network_ctor: ``ctor(input_spec=, action_spec=)`` -> action ``[B, D]`` in bounds.
        critic_network_ctor: ``ctor(input_spec=(obs_spec, action_spec), num_critics=)`` ->
            ``q [B, K]``.
        num_critics: critic ensemble size (the target uses the min over it).
        exploration_noise: std of the Gaussian added to actions while collecting, as a
            fraction of the action half-range.
        target_policy_noise, target_noise_clip: TD3 target smoothing (0 disables), same units.
        actor_update_period: update the actor and the targets every this many critic updates.
        actor_optimizer, critic_optimizer: None = Adam(1e-3).
        n_step, gamma, target_update_tau: see OffPolicyAlgorithm.
        is_eval: build for evaluation only: no critics, no target actor or critics, no
            optimizers; a training checkpoint loads into it
            (:func:`alf.experiment.checkpoint_state_for`, docs/design/eval_builds.md).
    """

    def __init__(self, observation_spec: Any, action_spec: Any, reward_spec: Any = TensorSpec(()),
                 actor_network_ctor: Callable = ActorNetwork,
                 critic_network_ctor: Callable = CriticNetwork,
                 num_critics: PositiveInt = 1,
                 exploration_noise: NonNegative = 0.1,
                 target_policy_noise: NonNegative = 0.0,
                 target_noise_clip: NonNegative = 0.5,
                 actor_update_period: PositiveInt = 1,
                 actor_optimizer: Optional[OptimizerFactory] = None,
                 critic_optimizer: Optional[OptimizerFactory] = None,
                 n_step: PositiveInt = 1, gamma: Discount = 0.99,
                 target_update_tau: UpdateRate = 0.005,
                 context: Optional[RunContext] = None,
                 debug_summaries: bool = False, name: str = "DdpgAlgorithm",
                 is_eval: bool = False):
        if not is_single_action(action_spec):
            raise refuse_action_space(name, action_spec, "one bounded Box action (its critic takes one action tensor)")
        if not (isinstance(action_spec, BoundedTensorSpec) and action_spec.is_continuous()
                and action_spec.ndim == 1 and np.all(np.isfinite(action_spec.minimum))
                and np.all(np.isfinite(action_spec.maximum))):
            raise IncompatibleSpecError(
                f"{name} needs a bounded 1-d continuous action space (gymnasium Box with finite "
                f"low/high), got {action_spec!r}. For discrete actions use DqnAlgorithm or "
                "SacAlgorithm.")
        if actor_update_period < 1:
            raise ConfigError(f"{name}.actor_update_period must be >= 1")
        super().__init__(observation_spec, action_spec, reward_spec=reward_spec, n_step=n_step,
                         gamma=gamma, target_update_tau=target_update_tau,
                         target_update_period=actor_update_period, context=context, debug_summaries=debug_summaries, name=name)
        self._actor = actor_network_ctor(input_spec=observation_spec, action_spec=action_spec)
        if is_eval:  # the actor alone acts (docs/design/eval_builds.md)
            self.eval_omitted = ("_critic", "_target_actor", "_target_critic")
        else:
            self._critic = critic_network_ctor(input_spec=(observation_spec, action_spec),
                                               num_critics=num_critics)
            self._target_actor = self.register_target(self._actor)
            self._target_critic = self.register_target(self._critic)
        lo = torch.as_tensor(action_spec.minimum, dtype=torch.float32).expand(action_spec.shape)
        hi = torch.as_tensor(action_spec.maximum, dtype=torch.float32).expand(action_spec.shape)
        self.register_buffer("_action_low", lo.clone(), persistent=False)
        self.register_buffer("_action_high", hi.clone(), persistent=False)
        self.register_buffer("_half_range", ((hi - lo) / 2).clone(), persistent=False)
        self._exploration_noise = float(exploration_noise)
        self._target_policy_noise = float(target_policy_noise)
        self._target_noise_clip = float(target_noise_clip)
        self._actor_update_period = int(actor_update_period)
        if not is_eval:
            self.add_optimizer(actor_optimizer or Adam(lr=1e-3), [self._actor])
            self.add_optimizer(critic_optimizer or Adam(lr=1e-3), [self._critic])

    def _clip(self, action: torch.Tensor) -> torch.Tensor:
        return torch.maximum(torch.minimum(action, self._action_high), self._action_low)

    # ------------------------------------------------------------- acting
    def predict_step(self, time_step: TimeStep, state: Any = ()) -> AlgStep:
        action, _ = self._actor(time_step.observation)
        return AlgStep(output=action, state=state)

    def rollout_step(self, time_step: TimeStep, state: Any = ()) -> AlgStep:
        action, _ = self._actor(time_step.observation)
        if self._exploration_noise > 0:
            noise = torch.randn_like(action) * (self._exploration_noise * self._half_range)
            action = self._clip(action + noise)
        return AlgStep(output=action, state=state)

    # ------------------------------------------------------------ training
    def _actor_update_due(self) -> bool:
        # num_updates counts finished gradient steps; this one will be number num_updates + 1
        return (self._context.num_updates + 1) % self._actor_update_period == 0

    def train_step(self, transition: Transition, state: Any = (), rollout_info: Any = ()) -> AlgStep:
        t = transition
        with torch.no_grad():
            next_action, _ = self._target_actor(t.next_observation)
            if self._target_policy_noise > 0:
                noise = torch.randn_like(next_action) * self._target_policy_noise
                noise = noise.clamp(-self._target_noise_clip, self._target_noise_clip)
                next_action = self._clip(next_action + noise * self._half_range)
            next_q = self._target_critic((t.next_observation, next_action))[0].min(-1).values
            target = t.reward + t.discount * next_q
        q = self._critic((t.observation, t.action))[0]  # [B, K]
        diff = q - target[:, None]
        critic_loss = diff.square().sum(-1)
        if self._actor_update_due():
            action, _ = self._actor(t.observation)
            a_leaf = action.detach().requires_grad_(True)
            if hasattr(self._critic, "forward_critic"):  # critic 0 alone: 1/K of the work
                q1 = self._critic.forward_critic((t.observation, a_leaf), 0)
            else:
                q1 = self._critic((t.observation, a_leaf))[0][:, 0]
            dqda, = torch.autograd.grad(q1.sum(), a_leaf)
            actor_loss = -(dqda * action).sum(-1)
            objective = -q1.detach()
        else:
            actor_loss = objective = torch.zeros_like(critic_loss)
        return AlgStep(state=state, info=DdpgInfo(
            critic_loss=critic_loss, actor_loss=actor_loss, actor_objective=objective,
            td_error=diff.detach().abs().mean(-1), q_value=q.detach().mean(-1),
            target_q=target, valid=t.valid))

    def calc_loss(self, info: DdpgInfo) -> LossInfo:
        return LossInfo(loss=info.critic_loss + info.actor_loss, priority=info.td_error,
                        extra={"critic_loss": info.critic_loss.detach(),
                               "actor_loss": info.actor_objective, "q_value": info.q_value})
