"""Soft Actor-Critic (Haarnoja et al. 2018, "SAC: Algorithms and Applications").

Continuous actions: a tanh-squashed Gaussian actor, an ensemble of
``num_critics`` Q(s, a) critics evaluated as one batched network (twin critics
by default, target = min over the ensemble), and automatic entropy tuning
(``alpha`` learned towards ``target_entropy = -dim(A)``).

Discrete actions (Christodoulou 2019): the critics output Q(s, .) for every
action and the expectations over the policy are exact sums.

A ``Dict``/``Tuple`` nest of Box actions: the actor has one tanh-squashed Gaussian per
leaf (``NestedProjectionNetwork``), ``log pi`` is the sum of the leaves' log-densities
(they are independent given the state), ``target_entropy = -(total action dims)``, and
the critics read the leaves concatenated in ``alf.nest.flatten`` order; the actor loss's
``dQ/da~ . a~`` is summed over the leaves. A nest with a discrete leaf is refused.

One update (``train_step`` on an n-step :class:`Transition` ``[B]``)::

    target = r + discount * (min_k Q'_k(s', a') - alpha * log pi(a'|s')),  a' ~ pi(s')
    critic loss = 0.5 * sum_k (Q_k(s, a) - target)^2
    actor loss  = alpha * log pi(a~|s) - min_k Q_k(s, a~),                 a~ ~ pi(s)
    alpha loss  = -log_alpha * (log pi(a~|s) + target_entropy)

The actor loss reaches the actor through ``dQ/da~`` only (computed with
``torch.autograd.grad`` w.r.t. the action), so the critics' weight gradients
are not computed twice and one ``backward`` of the summed loss updates all
three optimizers.

RLPD (Ball, Smith, Kostrikov, Levine 2023, "Efficient Online Reinforcement
Learning with Offline Data", arXiv:2302.02948) is this SAC with:

* LayerNorm critics: ``CriticNetwork.use_layer_norm = True``;
* a larger ensemble whose target is the min over a random subset:
  ``num_critics = 10``, ``target_critic_subset = 2`` (a fresh subset of the
  target critics every update; RLPD's actor maximises the ensemble mean:
  ``actor_critic_reduction = "mean"``);
* optionally no entropy term in the critic target
  (``critic_entropy_backup = False``);
* a high update-to-data ratio, which is ``TrainerConfig.num_updates_per_train_iter``
  with ``TrainerConfig.unroll_length = 1`` (RLPD uses 20): nothing to set here;
* symmetric sampling of offline and online data, which is
  ``TrainerConfig.offline_buffer_dir`` with ``offline_fraction = 0.5``.
"""
import math
from functools import partial, reduce
from typing import Any, Callable, NamedTuple, Optional

import torch
import torch.nn.functional as F
from torch import nn

import alf
from alf import nest as alf_nest
from alf.algorithms.action_nests import is_box_nest, is_single_action, refuse_action_space
from alf.algorithms.off_policy_algorithm import OffPolicyAlgorithm
from alf.config_ranges import Discount, NonNegative, Positive, PositiveInt, UpdateRate
from alf.data_structures import AlgStep, LossInfo, TimeStep
from alf.errors import ConfigError, IncompatibleSpecError
from alf.networks import ActorDistributionNetwork, NormalProjectionNetwork
from alf.networks.critic_networks import CriticNetwork
from alf.networks.q_networks import QNetwork
from alf.replay_buffers.n_step import Transition
from alf.tensor_specs import TensorSpec
from alf.utils import dist_utils
from alf.utils.distributions import JointDistribution
from alf.utils.optimizers import Adam, OptimizerFactory
from alf.utils.run_context import RunContext


class SacInfo(NamedTuple):
    """Per-row ``[B]`` terms of the SAC losses."""
    critic_loss: Any = ()
    actor_loss: Any = ()       # surrogate with the true actor-loss gradient
    actor_objective: Any = ()  # alpha * log pi - Q, for summaries
    alpha_loss: Any = ()
    td_error: Any = ()         # mean_k |Q_k - target|, the priority
    entropy: Any = ()          # -log pi(a~|s) (continuous) or exact entropy (discrete)
    q_value: Any = ()
    target_q: Any = ()         # the TD target [B] (summaries)
    valid: Any = ()            # the transition's valid [B] (summaries)


def sac_actor_network(input_spec: Any, action_spec: TensorSpec,
                      min_std: float = math.exp(-20)) -> nn.Module:
    """SB3/CleanRL's SAC actor: 256x256 ReLU MLP, state-dependent log-std clipped to
    [log(min_std), 2] (default [-20, 2]), tanh squashing onto the action bounds (a
    Categorical for discrete actions)."""
    head = partial(NormalProjectionNetwork, state_dependent_std=True, scale_distribution=True,
                   min_std=min_std, max_std=math.exp(2), projection_output_init_gain=1.0)
    return ActorDistributionNetwork(input_spec, action_spec, fc_layer_params=(256, 256),
                                    activation=torch.relu, use_orthogonal_init=False,
                                    continuous_projection_net_ctor=head)


@alf.configurable
class SacAlgorithm(OffPolicyAlgorithm):
    """Soft Actor-Critic for continuous (Box [D], or a Dict/Tuple nest of them) or
    discrete (scalar Discrete) actions.

    Args:
        observation_spec, action_spec, reward_spec, context: see RLAlgorithm.
        actor_network_ctor: ``ctor(input_spec=, action_spec=)`` -> distribution network;
            continuous actions need a bounded (tanh-squashed) distribution (per leaf of a
            nest).
        critic_network_ctor: continuous: ``ctor(input_spec=(obs_spec, action_spec),
            num_critics=)`` -> ``q [B, K]`` (``action_spec`` may be a nest of Box).
        q_network_ctor: discrete: ``ctor(input_spec=, action_spec=, num_critics=)`` ->
            ``q [B, K, A]``.
        num_critics: ensemble size (2 = clipped double Q; RLPD uses 10).
        target_critic_subset: the TD target is the min over ``M`` = this many target
            critics drawn at random without replacement, a fresh subset every update
            (RLPD/REDQ; RLPD uses 2 of 10). None = the min over all ``num_critics``.
        critic_entropy_backup: include ``- alpha * log pi(a'|s')`` in the TD target
            (SAC). RLPD offers False (a plain clipped-Q target); the actor and alpha
            losses keep their entropy terms either way.
        actor_critic_reduction: how the actor loss combines the critics: ``"min"``
            (SAC's clipped double Q) or ``"mean"`` (RLPD/REDQ with large ensembles).
        target_entropy: None = ``-dim(A)`` (continuous; a nest: minus the total dims of its
            leaves) or ``0.98 * log(A)`` (discrete).
        initial_alpha: initial entropy coefficient.
        fixed_alpha: if set, alpha is this constant and not learned.
        actor_optimizer, critic_optimizer, alpha_optimizer: None = Adam(3e-4).
        n_step, gamma, target_update_tau, target_update_period: see OffPolicyAlgorithm.
        is_eval: build for evaluation only: no critics, no target critics, no optimizers
            (``_log_alpha`` is kept); a training checkpoint loads into it
            (:func:`alf.experiment.checkpoint_state_for`, docs/design/eval_builds.md).
    """

    def __init__(self, observation_spec: Any, action_spec: Any, reward_spec: Any = TensorSpec(()),
                 actor_network_ctor: Callable = sac_actor_network,
                 critic_network_ctor: Callable = CriticNetwork,
                 q_network_ctor: Callable = QNetwork,
                 num_critics: PositiveInt = 2,
                 target_critic_subset: Optional[PositiveInt] = None,
                 critic_entropy_backup: bool = True,
                 actor_critic_reduction: str = "min",
                 target_entropy: Optional[float] = None,
                 initial_alpha: Positive = 1.0,
                 fixed_alpha: Optional[NonNegative] = None,
                 actor_optimizer: Optional[OptimizerFactory] = None,
                 critic_optimizer: Optional[OptimizerFactory] = None,
                 alpha_optimizer: Optional[OptimizerFactory] = None,
                 n_step: PositiveInt = 1, gamma: Discount = 0.99,
                 target_update_tau: UpdateRate = 0.005,
                 target_update_period: PositiveInt = 1,
                 context: Optional[RunContext] = None,
                 debug_summaries: bool = False, name: str = "SacAlgorithm",
                 is_eval: bool = False):
        nested = is_box_nest(action_spec)
        if not (nested or is_single_action(action_spec)):
            raise refuse_action_space(
                name, action_spec, "one Box, one Discrete or a Dict/Tuple nest of 1-d Box "
                "actions (one squashed Gaussian per leaf; its critics take float actions)")
        if target_critic_subset is not None and not 1 <= int(target_critic_subset) <= num_critics:
            raise ConfigError(f"{name}.target_critic_subset must be in [1, num_critics = "
                              f"{num_critics}] or None (all critics), got {target_critic_subset}")
        if actor_critic_reduction not in ("min", "mean"):
            raise ConfigError(f"{name}.actor_critic_reduction must be 'min' or 'mean', got "
                              f"{actor_critic_reduction!r}")
        super().__init__(observation_spec, action_spec, reward_spec=reward_spec, n_step=n_step,
                         gamma=gamma, target_update_tau=target_update_tau,
                         target_update_period=target_update_period, context=context, debug_summaries=debug_summaries, name=name)
        self._target_subset = None if target_critic_subset is None else int(target_critic_subset)
        self._critic_entropy_backup = bool(critic_entropy_backup)
        self._actor_mean_q = actor_critic_reduction == "mean"
        self._discrete = not nested and action_spec.is_discrete()
        self._actor = actor_network_ctor(input_spec=observation_spec, action_spec=action_spec)
        if is_eval:  # predict_step reads the actor only (docs/design/eval_builds.md)
            self.eval_omitted = ("_critic", "_target_critic")
            self._log_alpha = nn.Parameter(torch.tensor(0.0), requires_grad=False)
            if not self._discrete:
                self._check_bounded_actor()
            return
        if self._discrete:
            self._critic = q_network_ctor(input_spec=observation_spec, action_spec=action_spec,
                                          num_critics=num_critics)
            num_actions = int(action_spec.maximum) - int(action_spec.minimum) + 1
            default_entropy = 0.98 * math.log(num_actions)
        else:
            self._critic = critic_network_ctor(input_spec=(observation_spec, action_spec),
                                               num_critics=num_critics)
            default_entropy = -float(sum(s.shape[0] for s in alf_nest.flatten(action_spec)))
        self._target_critic = self.register_target(self._critic)
        self._target_entropy = default_entropy if target_entropy is None else float(target_entropy)
        self._fixed_alpha = fixed_alpha
        self._log_alpha = nn.Parameter(torch.tensor(math.log(
            fixed_alpha if fixed_alpha is not None else initial_alpha)),
            requires_grad=fixed_alpha is None)
        self._num_critics = int(num_critics)
        default = Adam(lr=3e-4)
        self.add_optimizer(actor_optimizer or default, [self._actor])
        self.add_optimizer(critic_optimizer or default, [self._critic])
        if fixed_alpha is None:
            self.add_optimizer(alpha_optimizer or default, [_ParamHolder(self._log_alpha)])
        if not self._discrete:
            self._check_bounded_actor()

    def _check_bounded_actor(self) -> None:
        spec = self._observation_spec
        obs = alf_nest.map_structure(lambda s: s.zeros((1,)), spec)
        with torch.no_grad():
            dist, _ = self._actor(obs)
        leaves = dist.leaves if isinstance(dist, JointDistribution) else [dist]
        if not all(isinstance(d, torch.distributions.TransformedDistribution) for d in leaves):
            raise IncompatibleSpecError(
                f"{self._name}: the actor must output a bounded (tanh-squashed) distribution for "
                "continuous actions; set `NormalProjectionNetwork.scale_distribution = True` "
                "(and usually `state_dependent_std = True`) in the gin file")

    def _target_subset_indices(self) -> torch.Tensor:
        """``[M]`` distinct critic indices drawn uniformly (global torch RNG)."""
        return torch.randperm(self._num_critics, device=self.device)[:self._target_subset]

    def _target_min_q(self, obs: Any, action: Any) -> torch.Tensor:
        """Continuous: ``min_k Q'_k(s', a')`` ``[B]`` over all target critics or, with
        ``target_critic_subset``, over a fresh random subset of them."""
        if self._target_subset is None:
            return self._target_critic((obs, action))[0].min(-1).values
        index = self._target_subset_indices()
        if hasattr(self._target_critic, "forward_members"):  # only the M chosen critics
            q = self._target_critic.forward_members((obs, action), index)
        else:
            q = self._target_critic((obs, action))[0].index_select(-1, index)
        return q.min(-1).values

    @property
    def alpha(self) -> torch.Tensor:
        return self._log_alpha.detach().exp()

    # ------------------------------------------------------------- acting
    def predict_step(self, time_step: TimeStep, state: Any = ()) -> AlgStep:
        dist, _ = self._actor(time_step.observation)
        return AlgStep(output=dist_utils.get_mode(dist), state=state)

    def rollout_step(self, time_step: TimeStep, state: Any = ()) -> AlgStep:
        dist, _ = self._actor(time_step.observation)
        return AlgStep(output=dist.sample(), state=state)

    # ------------------------------------------------------------ training
    def train_step(self, transition: Transition, state: Any = (), rollout_info: Any = ()) -> AlgStep:
        if self._discrete:
            return AlgStep(state=state, info=self._discrete_step(transition))
        return AlgStep(state=state, info=self._continuous_step(transition))

    def _continuous_step(self, t: Transition) -> SacInfo:
        obs, next_obs = t.observation, t.next_observation
        alpha = self._log_alpha.detach().exp()
        with torch.no_grad():  # separate call: no actor backward over the B next states
            next_dist, _ = self._actor(next_obs)
            next_action, next_log_pi = dist_utils.rsample_and_log_prob(next_dist)
            next_q = self._target_min_q(next_obs, next_action)
            if self._critic_entropy_backup:
                target = t.reward + t.discount * (next_q - alpha * next_log_pi)
            else:
                target = t.reward + t.discount * next_q
        dist, _ = self._actor(obs)
        new_action, log_pi_new = dist_utils.rsample_and_log_prob(dist)  # [B, D] (a nest), [B]
        q = self._critic((obs, t.action))[0]  # [B, K]
        diff = q - target[:, None]
        critic_loss = 0.5 * diff.square().sum(-1)
        # dQ/da at a~ (each leaf of a nest), without touching the critics' weight gradients
        a_leaf = alf_nest.map_structure(lambda a: a.detach().requires_grad_(True), new_action)
        q_new_all = self._critic((obs, a_leaf))[0]
        q_new = q_new_all.mean(-1) if self._actor_mean_q else q_new_all.min(-1).values
        dqda = torch.autograd.grad(q_new.sum(), alf_nest.flatten(a_leaf))
        surrogate = reduce(torch.add, [(g * a).sum(-1) for g, a in
                                       zip(dqda, alf_nest.flatten(new_action))])
        actor_loss = alpha * log_pi_new - surrogate
        alpha_loss = -self._log_alpha * (log_pi_new.detach() + self._target_entropy)
        return SacInfo(critic_loss=critic_loss, actor_loss=actor_loss,
                       actor_objective=(alpha * log_pi_new - q_new).detach(),
                       alpha_loss=alpha_loss, td_error=diff.detach().abs().mean(-1),
                       entropy=-log_pi_new.detach(), q_value=q.detach().mean(-1),
                       target_q=target, valid=t.valid)

    def _discrete_step(self, t: Transition) -> SacInfo:
        obs, next_obs = t.observation, t.next_observation
        batch = t.valid.shape[0]
        alpha = self._log_alpha.detach().exp()
        both = alf_nest.map_structure(lambda a, b: torch.cat([a, b], 0), obs, next_obs)
        dist, _ = self._actor(both)
        log_probs = F.log_softmax(dist.logits, -1)  # [2B, A]
        probs = log_probs.exp()
        with torch.no_grad():
            next_q_all = self._target_critic(next_obs)[0]  # [B, K, A]
            if self._target_subset is not None:
                next_q_all = next_q_all.index_select(1, self._target_subset_indices())
            next_q = next_q_all.min(1).values  # [B, A]
            if self._critic_entropy_backup:
                next_v = (probs[batch:] * (next_q - alpha * log_probs[batch:])).sum(-1)
            else:
                next_v = (probs[batch:] * next_q).sum(-1)
            target = t.reward + t.discount * next_v
        q_all = self._critic(obs)[0]  # [B, K, A]
        offset = int(self._action_spec.minimum)
        index = (t.action.long() - offset).view(batch, 1, 1).expand(-1, q_all.shape[1], 1)
        q = q_all.gather(2, index).squeeze(2)  # [B, K]
        diff = q - target[:, None]
        critic_loss = 0.5 * diff.square().sum(-1)
        p, lp = probs[:batch], log_probs[:batch]
        min_q = q_all.detach().mean(1) if self._actor_mean_q else q_all.detach().min(1).values
        actor_loss = (p * (alpha * lp - min_q)).sum(-1)
        entropy = -(p * lp).sum(-1)
        alpha_loss = self._log_alpha * (entropy.detach() - self._target_entropy)
        return SacInfo(critic_loss=critic_loss, actor_loss=actor_loss,
                       actor_objective=actor_loss.detach(), alpha_loss=alpha_loss,
                       td_error=diff.detach().abs().mean(-1), entropy=entropy.detach(),
                       q_value=q.detach().mean(-1), target_q=target, valid=t.valid)

    def calc_loss(self, info: SacInfo) -> LossInfo:
        loss = info.critic_loss + info.actor_loss
        if self._fixed_alpha is None:
            loss = loss + info.alpha_loss
        return LossInfo(loss=loss, priority=info.td_error,
                        extra={"critic_loss": info.critic_loss.detach(),
                               "actor_loss": info.actor_objective,
                               "alpha_loss": info.alpha_loss.detach(),
                               "alpha": self.alpha, "entropy": info.entropy,
                               "q_value": info.q_value})

    def add_train_summaries(self, batch: Any, info: SacInfo) -> None:
        """Q and target-Q statistics, and ``Loss/<name>/target_entropy`` (the entropy
        alpha is tuned towards; ``alpha`` and ``entropy`` are loss terms)."""
        super().add_train_summaries(batch, info)
        if hasattr(self, "_target_entropy"):
            batch.add(f"Loss/{self._name}/target_entropy", self._target_entropy)


class _ParamHolder(nn.Module):
    """Wraps a bare parameter so it can get its own optimizer (``add_optimizer`` takes modules)."""

    def __init__(self, param: nn.Parameter):
        super().__init__()
        # a tuple, so the parameter is not registered here too: the algorithm owns (and
        # checkpoints) it
        self._held = (param,)

    def parameters(self, recurse: bool = True):
        yield self._held[0]
