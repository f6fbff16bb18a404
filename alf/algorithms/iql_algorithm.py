"""Implicit Q-Learning (Kostrikov, Nair, Levine 2021, "Offline Reinforcement Learning with
Implicit Q-Learning", arXiv:2110.06169).

IQL never evaluates the critics on actions outside the dataset. On an n-step
:class:`~alf.replay_buffers.n_step.Transition` ``[B]`` (``s, a`` from the
dataset, ``r`` the summed n-step reward, ``discount = gamma^m * discount_{t+m}``)::

    value loss  = L2_tau(min_k Q'_k(s, a) - V(s)),   L2_tau(u) = |tau - 1(u < 0)| u^2
    critic loss = sum_k (Q_k(s, a) - (r + discount * V(s')))^2
    actor loss  = -min(exp(beta * (min_k Q'_k(s, a) - V(s))), 100) * log pi(a|s)

``Q'`` is the Polyak-averaged target of the twin critics (tau 0.005). With the
expectile ``tau > 0.5`` V approaches an upper expectile of Q over the dataset's
actions (``tau = 0.5`` is the mean: SARSA), the critics learn the value of the
best in-data behaviour, and the policy is extracted by advantage-weighted
regression with inverse temperature ``beta``.

Defaults are the paper's MuJoCo locomotion settings (its appendix B): 256x256
ReLU networks, Adam with lr 3e-4 for the actor, critics and value, batch 256,
gamma 0.99, target tau 0.005, expectile 0.7, temperature ``beta = 3.0``,
weights clipped at 100, the actor lr cosine-decayed to 0 over training. The
paper's AntMaze settings are expectile 0.9, beta 10.0; Kitchen/Adroit 0.7, 0.5.
``beta`` multiplies a difference of Q values, so it assumes the paper's reward
scale: for locomotion it multiplies the rewards by ``1000 / (max - min)`` of the
dataset's episode returns (``Dataset.episode_returns()``); do the same with the
``RewardScaling`` data transformer (``RewardScaling.scale``), or the weights
saturate at ``max_weight`` / vanish and the policy degrades to BC / noise.

The actor, as in the paper's code, is a Gaussian with a state-independent
log-std (clipped to ``[-5, 2]``) whose *mean* is squashed by ``tanh`` onto
the action bounds (no tanh on the samples, so ``log pi`` of a dataset action at
a bound is finite). A tanh-squashed actor (``scale_distribution=True``) also
works: dataset actions are then pulled inside the bounds by
``nll_action_margin`` before their log-probability is taken.

Speed: the three losses are computed from the same parameters and minimised by
one backward pass. (The paper's code updates V first and computes the actor and
critic losses with the updated V, d3rlpy uses the updated V for the actor; here
all three read V as it was before this step: V lags by one gradient step.) Each
network runs once per update: the target critics once on ``(s, a)`` (for the
value loss and the advantage), V once on ``s`` and once, without autograd, on
``s'``; the twin critics are one batched
:class:`~alf.networks.critic_networks.CriticNetwork` ensemble. Nothing syncs
with the host.
"""
import math
from functools import partial
from typing import Annotated, Any, Callable, NamedTuple, Optional

import numpy as np
import torch
import torch.distributions as td

import alf
from alf.algorithms.action_nests import is_single_action, refuse_action_space
from alf.algorithms.off_policy_algorithm import OffPolicyAlgorithm
from alf.config_ranges import Discount, NonNegative, Positive, PositiveInt, Range, UpdateRate
from alf.data_structures import AlgStep, LossInfo, TimeStep
from alf.errors import ConfigError
from alf.networks import ActorDistributionNetwork, NormalProjectionNetwork, ValueNetwork
from alf.networks.critic_networks import CriticNetwork
from alf.replay_buffers.n_step import Transition
from alf.tensor_specs import BoundedTensorSpec, TensorSpec
from alf.utils import dist_utils
from alf.utils.optimizers import Adam, OptimizerFactory
from alf.utils.run_context import RunContext
from alf.utils.schedules import Schedule

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


Expectile = Annotated[float, Range(0, 1, low_open=True, high_open=True)]


class IqlInfo(NamedTuple):
    """Per-row ``[B]`` terms of one IQL update."""
    critic_loss: Any = ()
    value_loss: Any = ()
    actor_loss: Any = ()
    td_error: Any = ()   # mean_k |Q_k(s, a) - target|, the priority
    advantage: Any = ()  # min_k Q'_k(s, a) - V(s)
    weight: Any = ()     # the clipped AWR weight
    q_value: Any = ()
    value: Any = ()
    target_q: Any = ()   # the TD target [B] of the critics (summaries)
    valid: Any = ()      # the transition's valid [B] (summaries)


@alf.configurable
class CosineDecaySchedule(Schedule):
    """``start * (1 + cos(pi * progress)) / 2``: from ``start`` at progress 0 to 0 at the end
    of training (the paper's actor learning-rate schedule, ``optax.cosine_decay_schedule``).

    Args:
        start: value at progress 0.
    """

    def __init__(self, start: float):
        self.start = float(start)

    def __call__(self, progress: float) -> float:
        return self.start * 0.5 * (1.0 + math.cos(math.pi * min(1.0, max(0.0, progress))))

    def __repr__(self):
        return f"CosineDecaySchedule({self.start} -> 0)"


def expectile_loss(diff: torch.Tensor, expectile: float) -> torch.Tensor:
    """``|expectile - 1(diff < 0)| * diff^2`` elementwise (asymmetric squared loss).

    Minimising ``E[L(y - v)]`` over ``v`` gives the ``expectile``-expectile of ``y``
    (0.5: the mean; towards 1: the maximum).
    """
    weight = torch.where(diff < 0, 1.0 - expectile, expectile)
    return weight * diff.square()


def iql_actor_network(input_spec: Any, action_spec: TensorSpec) -> torch.nn.Module:
    """The paper's policy: 256x256 ReLU MLP, Gaussian with tanh on the mean (mapped onto the
    action bounds) and a state-independent log-std (initially 0) clipped to ``[-5, 2]``."""
    head = partial(NormalProjectionNetwork, state_dependent_std=False, squash_mean=True,
                   scale_distribution=False, init_std=1.0, min_std=math.exp(-5.0),
                   max_std=math.exp(2.0))
    return ActorDistributionNetwork(input_spec, action_spec, fc_layer_params=(256, 256),
                                    activation=torch.relu, use_orthogonal_init=False,
                                    continuous_projection_net_ctor=head)


def iql_value_network(input_spec: Any) -> torch.nn.Module:
    """V(s): 256x256 ReLU MLP -> ``[B]``."""
    return ValueNetwork(input_spec, fc_layer_params=(256, 256), activation=torch.relu,
                        use_orthogonal_init=False)


@alf.configurable
class IqlAlgorithm(OffPolicyAlgorithm):
    """Implicit Q-Learning for a 1-d continuous action (see the module docstring).

    Args:
        observation_spec, action_spec, reward_spec, context: see RLAlgorithm.
        actor_network_ctor: ``ctor(input_spec=, action_spec=)`` -> action distribution.
        critic_network_ctor: ``ctor(input_spec=(obs_spec, action_spec), num_critics=)`` ->
            ``q [B, K]`` (one batched ensemble).
        value_network_ctor: ``ctor(input_spec=)`` -> ``v [B]``.
        num_critics: critic ensemble size (the paper: 2; the min is used).
        expectile: ``tau`` of the value loss (0.7 locomotion, 0.9 AntMaze).
        temperature: inverse temperature ``beta`` of the AWR weights (3.0 locomotion,
            10.0 AntMaze, 0.5 Kitchen/Adroit).
        max_weight: clip of the AWR weights (100).
        nll_action_margin: for a tanh-squashed actor: dataset actions are clipped into
            ``[min + m * half_range, max - m * half_range]`` before ``log pi``.
        actor_optimizer: None = Adam with lr ``CosineDecaySchedule(3e-4)`` (the paper's
            cosine decay over training; constant 3e-4 when no training length is known).
        critic_optimizer: for the critics and V together. None = Adam(3e-4).
        n_step, gamma, target_update_tau, target_update_period: see OffPolicyAlgorithm.
        is_eval: build for evaluation only: no critics, no V network, no target critics, no
            optimizers; a training checkpoint loads into it
            (:func:`alf.experiment.checkpoint_state_for`, docs/design/eval_builds.md).
    """

    def __init__(self, observation_spec: Any, action_spec: Any, reward_spec: Any = TensorSpec(()),
                 actor_network_ctor: Callable = iql_actor_network,
                 critic_network_ctor: Callable = CriticNetwork,
                 value_network_ctor: Callable = iql_value_network,
                 num_critics: PositiveInt = 2,
                 expectile: Expectile = 0.7,
                 temperature: NonNegative = 3.0,
                 max_weight: Positive = 100.0,
                 nll_action_margin: NonNegative = 1e-3,
                 actor_optimizer: Optional[OptimizerFactory] = None,
                 critic_optimizer: Optional[OptimizerFactory] = None,
                 n_step: PositiveInt = 1, gamma: Discount = 0.99,
                 target_update_tau: UpdateRate = 0.005,
                 target_update_period: PositiveInt = 1,
                 context: Optional[RunContext] = None,
                 debug_summaries: bool = False, name: str = "IqlAlgorithm",
                 is_eval: bool = False):
        if not is_single_action(action_spec):
            raise refuse_action_space(name, action_spec, "one Box action (its critic takes one action tensor)")
        if not (isinstance(action_spec, TensorSpec) and action_spec.is_continuous()
                and action_spec.ndim == 1):
            raise ConfigError(
                f"{name} needs a 1-d continuous action space (gymnasium Box), got "
                f"{action_spec!r}: for discrete actions use BcAlgorithm or DqnAlgorithm")
        if not 0.0 < expectile < 1.0:
            raise ConfigError(f"{name}.expectile must be in (0, 1), got {expectile}")
        if temperature < 0 or max_weight <= 0:
            raise ConfigError(f"{name}: temperature must be >= 0 and max_weight > 0, got "
                              f"{temperature} and {max_weight}")
        super().__init__(observation_spec, action_spec, reward_spec=reward_spec, n_step=n_step,
                         gamma=gamma, target_update_tau=target_update_tau,
                         target_update_period=target_update_period, context=context, debug_summaries=debug_summaries, name=name)
        self._actor = actor_network_ctor(input_spec=observation_spec, action_spec=action_spec)
        if is_eval:  # the actor alone acts (docs/design/eval_builds.md)
            self.eval_omitted = ("_critic", "_value", "_target_critic")
        else:
            self._critic = critic_network_ctor(input_spec=(observation_spec, action_spec),
                                               num_critics=num_critics)
            self._value = value_network_ctor(input_spec=observation_spec)
            self._target_critic = self.register_target(self._critic)
        self._expectile = float(expectile)
        self._temperature = float(temperature)
        self._max_weight = float(max_weight)
        lo, hi = _bounds(action_spec)
        self._bounded = lo is not None
        if self._bounded:
            margin = nll_action_margin * (hi - lo) / 2
            self.register_buffer("_action_low", lo, persistent=False)
            self.register_buffer("_action_high", hi, persistent=False)
            self.register_buffer("_clip_low", lo + margin, persistent=False)
            self.register_buffer("_clip_high", hi - margin, persistent=False)
        if not is_eval:
            self.add_optimizer(actor_optimizer or Adam(lr=CosineDecaySchedule(3e-4)),
                               [self._actor])
            self.add_optimizer(critic_optimizer or Adam(lr=3e-4), [self._critic, self._value])

    # ------------------------------------------------------------- acting
    def predict_step(self, time_step: TimeStep, state: Any = ()) -> AlgStep:
        dist, _ = self._actor(time_step.observation)
        return AlgStep(output=dist_utils.get_mode(dist), state=state)

    def rollout_step(self, time_step: TimeStep, state: Any = ()) -> AlgStep:
        dist, _ = self._actor(time_step.observation)
        action = dist.sample()
        if self._bounded:  # the Gaussian's samples may leave the bounds
            action = torch.maximum(torch.minimum(action, self._action_high), self._action_low)
        return AlgStep(output=action, state=state)

    # ------------------------------------------------------------ training
    def _log_prob(self, dist: td.Distribution, action: torch.Tensor) -> torch.Tensor:
        """``log pi(a|s)`` ``[B]`` of dataset actions ``[B, D]``."""
        if isinstance(dist, td.Independent) and isinstance(dist.base_dist, td.Normal):
            normal = dist.base_dist  # the closed form, without the distribution's overhead
            z = (action - normal.loc) / normal.scale
            return (-0.5 * z.square() - normal.scale.log() - _HALF_LOG_2PI).sum(-1)
        if isinstance(dist, td.TransformedDistribution) and self._bounded:
            action = torch.maximum(torch.minimum(action, self._clip_high), self._clip_low)
        return dist.log_prob(action)

    def train_step(self, transition: Transition, state: Any = (), rollout_info: Any = ()) -> AlgStep:
        t = transition
        obs, action = t.observation, t.action
        with torch.no_grad():
            target_q = self._target_critic((obs, action))[0].min(-1).values  # [B]
            next_v, _ = self._value(t.next_observation)                       # [B]
            td_target = t.reward + t.discount * next_v
        v, _ = self._value(obs)
        diff_v = target_q - v
        value_loss = expectile_loss(diff_v, self._expectile)
        q, _ = self._critic((obs, action))                                     # [B, K]
        diff = q - td_target[:, None]
        critic_loss = diff.square().sum(-1)
        advantage = diff_v.detach()
        weight = torch.exp(self._temperature * advantage).clamp(max=self._max_weight)
        dist, _ = self._actor(obs)
        actor_loss = -weight * self._log_prob(dist, action)
        return AlgStep(state=state, info=IqlInfo(
            critic_loss=critic_loss, value_loss=value_loss, actor_loss=actor_loss,
            td_error=diff.detach().abs().mean(-1), advantage=advantage, weight=weight,
            q_value=q.detach().mean(-1), value=v.detach(), target_q=td_target,
            valid=t.valid))

    def calc_loss(self, info: IqlInfo) -> LossInfo:
        return LossInfo(loss=info.critic_loss + info.value_loss + info.actor_loss,
                        priority=info.td_error,
                        extra={"critic_loss": info.critic_loss.detach(),
                               "value_loss": info.value_loss.detach(),
                               "actor_loss": info.actor_loss.detach(),
                               "advantage": info.advantage, "weight": info.weight,
                               "q_value": info.q_value, "value": info.value})


def _bounds(spec: TensorSpec):
    """``(low [D], high [D])`` of a finitely bounded spec, else ``(None, None)``."""
    if not (isinstance(spec, BoundedTensorSpec) and np.all(np.isfinite(spec.minimum))
            and np.all(np.isfinite(spec.maximum))):
        return None, None
    lo = torch.tensor(np.broadcast_to(spec.minimum, spec.shape), dtype=torch.float32)
    hi = torch.tensor(np.broadcast_to(spec.maximum, spec.shape), dtype=torch.float32)
    return lo, hi
