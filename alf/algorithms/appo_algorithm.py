"""APPO: PPO's clipped surrogate on V-trace targets (Sample Factory's asynchronous PPO).

With ``TrainerConfig.async_unroll=True`` the trajectories the learner trains on
were collected by an older policy ``mu`` (policy lag), so PPO's GAE advantages,
which assume the data comes from the current policy ``pi``, are biased. APPO
(Petrenko et al. 2020, Sample Factory) keeps PPO's loss -- the clipped ratio
``pi / mu`` against the behaviour log-prob stored at rollout -- and replaces GAE
by V-trace (Espeholt et al. 2018): :meth:`APPOAlgorithm.preprocess_experience`
runs the current policy and value network once, without gradient, over the whole
``[B, T+1]`` buffer, and with ``log_rhos = log pi(a|x) - log mu(a|x)`` computes

- ``returns = vs`` (V-trace value targets, truncated-IS traces ``c = lambda * min(c_bar, rho)``),
- ``advantages = min(rho_bar_pg, rho) * (r + gamma * d * vs' - V)``.

In the synchronous whole-buffer regime (the same as PPO's) ``mu == pi`` at
preprocessing time, ``rho == 1`` and APPO is PPO with TD(``vtrace_lambda``)
returns; it trains unchanged when the unroll is asynchronous.
"""
from typing import Any, Callable, Dict, Optional, Tuple

import torch

import alf
from alf import nest as alf_nest
from alf.algorithms.ppo_algorithm import PPOAlgorithm
from alf.algorithms.ppo_loss import PPOLoss
from alf.config_ranges import Discount, Positive, UnitInterval
from alf.data_structures import Experience, StepType
from alf.networks import ActorDistributionNetwork, ValueNetwork
from alf.tensor_specs import TensorSpec
from alf.utils import dist_utils, value_ops
from alf.utils.optimizers import OptimizerFactory
from alf.utils.run_context import RunContext
from alf.utils.tensor_utils import reset_state_if_necessary


def vtrace_statistics(log_rhos: torch.Tensor, step_type: torch.Tensor,
                      clip_rho_threshold: Optional[float]) -> Dict[str, torch.Tensor]:
    """Scalars describing the importance weights of a ``[B, T]`` buffer (last step excluded).

    ``rho_mean``: mean of ``rho = exp(log_rhos)``; ``rho_clip_fraction``: fraction
    with ``rho > clip_rho_threshold`` (0 without a threshold); ``abs_log_rho_mean``:
    mean ``|log rho|``, 0 on-policy and growing with the policy lag. Steps whose
    transition crosses an episode boundary (LAST) are excluded.
    """
    valid = (step_type[:, :-1] != StepType.LAST)
    lr = log_rhos[:, :-1][valid]
    if lr.numel() == 0:
        zero = torch.zeros((), dtype=log_rhos.dtype, device=log_rhos.device)
        return dict(rho_mean=zero, rho_clip_fraction=zero, abs_log_rho_mean=zero)
    rho = lr.exp()
    clipped = (rho > clip_rho_threshold).to(rho.dtype) if clip_rho_threshold is not None \
        else torch.zeros_like(rho)
    return dict(rho_mean=rho.mean(), rho_clip_fraction=clipped.mean(),
                abs_log_rho_mean=lr.abs().mean())


@alf.configurable
class APPOAlgorithm(PPOAlgorithm):
    """PPO's clipped surrogate with V-trace returns and advantages (policy-lag corrected).

    Args: as :class:`PPOAlgorithm` (``gae_lambda`` is replaced by ``vtrace_lambda``), plus
        vtrace_lambda: lambda of the V-trace traces ``c_t = lambda * min(c_bar, rho_t)``:
            1.0 as IMPALA (Monte-Carlo-like on-policy), 0.95 as PPO's usual GAE lambda.
        clip_rho_threshold: ``rho_bar`` clipping the weights of the value targets'
            TD errors (None: no clipping).
        clip_c_threshold: ``c_bar`` clipping the traces (None: no clipping).
        clip_pg_rho_threshold: clipping of the weights of the policy-gradient
            advantages (None: no clipping).

    ``rollout_info.value`` is replaced by the current value (start of this
    iteration's updates), so ``PPOLoss.value_clipping`` clips around it, as PPO
    does in the synchronous regime.
    """

    #: APPO's V-trace targets stay valid when the samples come from an older policy.
    supports_async_unroll = True

    def __init__(self, observation_spec: Any, action_spec: Any, reward_spec: Any = TensorSpec(()),
                 actor_network_ctor: Callable = ActorDistributionNetwork,
                 value_network_ctor: Callable = ValueNetwork,
                 encoding_network_ctor: Optional[Callable] = None,
                 gamma: Discount = 0.99, vtrace_lambda: UnitInterval = 1.0,
                 clip_rho_threshold: Optional[Positive] = 1.0,
                 clip_c_threshold: Optional[Positive] = 1.0,
                 clip_pg_rho_threshold: Optional[Positive] = 1.0,
                 loss_ctor: Callable = PPOLoss,
                 context: Optional[RunContext] = None,
                 optimizer: Optional[OptimizerFactory] = None, debug_summaries: bool = False,
                 name: str = "APPOAlgorithm", is_eval: bool = False):
        super().__init__(observation_spec, action_spec, reward_spec,
                         actor_network_ctor=actor_network_ctor,
                         value_network_ctor=value_network_ctor,
                         encoding_network_ctor=encoding_network_ctor, gamma=gamma,
                         gae_lambda=vtrace_lambda, loss_ctor=loss_ctor, context=context, optimizer=optimizer, debug_summaries=debug_summaries,
                         name=name, is_eval=is_eval)
        self._vtrace_lambda = vtrace_lambda
        self._clip_rho = clip_rho_threshold
        self._clip_c = clip_c_threshold
        self._clip_pg_rho = clip_pg_rho_threshold

    def current_log_prob_and_value(self, experience: Experience) -> Tuple[torch.Tensor,
                                                                           torch.Tensor]:
        """``log pi(a_t | x_t)`` and ``V(x_t)``, both ``[B, T]`` (``V`` ``[B, T, k]`` with
        reward columns), of a ``[B, T]`` experience
        under the current parameters, without gradient.

        Stateless networks: one forward pass over the ``B * T`` flattened steps.
        Recurrent ones: a pass over time from the stored rollout state of step 0,
        reset to the initial state at FIRST steps (as ``train_on_batch`` does).
        """
        step_type = experience.time_step.step_type
        B, T = step_type.shape[:2]
        obs, action = experience.time_step.observation, experience.action
        with torch.no_grad():
            if alf_nest.is_empty(self.train_state_spec):
                flat = lambda x: x.reshape((B * T,) + tuple(x.shape[2:]))  # noqa: E731
                dist, value, _ = self._policy(alf_nest.map_structure(flat, obs),
                                              self.get_initial_train_state(B * T))
                log_prob = dist_utils.compute_log_probability(
                    dist, alf_nest.map_structure(flat, action))
                return log_prob.reshape(B, T), value.reshape((B, T) + tuple(value.shape[1:]))
            init = self.get_initial_train_state(B)
            state = alf_nest.map_structure(lambda s: s[:, 0], experience.state)
            log_probs, values = [], []
            for t in range(T):
                at_t = lambda x: x[:, t]  # noqa: E731
                state = reset_state_if_necessary(state, init, step_type[:, t] == StepType.FIRST)
                dist, value, state = self._policy(alf_nest.map_structure(at_t, obs), state)
                log_probs.append(dist_utils.compute_log_probability(
                    dist, alf_nest.map_structure(at_t, action)))
                values.append(value)
            return torch.stack(log_probs, dim=1), torch.stack(values, dim=1)

    def preprocess_experience(self, experience: Experience) -> Experience:
        """``[B, T]`` buffer -> ``[B, T-1]`` with V-trace ``returns`` and ``advantages``.

        The last step only provides the bootstrap value (as in PPO's preprocessing).
        """
        ts, info = experience.time_step, experience.rollout_info
        log_pi, value = self.current_log_prob_and_value(experience)
        log_rhos = log_pi - info.log_prob
        step_types, discounts, gamma = ts.step_type, ts.discount, self._gamma
        if self.reward_columns is not None:  # [B, T, k]: per column (reward_columns.py)
            step_types, discounts = self.reward_columns.per_column(step_types, discounts)
            gamma = self.reward_columns.gammas.to(value.dtype)
        vt = value_ops.vtrace(rewards=ts.reward, values=value, step_types=step_types,
                              discounts=discounts, log_rhos=log_rhos, gamma=gamma,
                              td_lambda=self._vtrace_lambda,
                              clip_rho_threshold=self._clip_rho,
                              clip_c_threshold=self._clip_c,
                              clip_pg_rho_threshold=self._clip_pg_rho,
                              time_major=False)  # [B, T-1] ([B, T-1, k])
        advantages = vt.pg_advantages
        if self.reward_columns is not None:
            advantages = self.reward_columns.combine(advantages)
        if self._context.should_summarize():
            for key, v in vtrace_statistics(log_rhos, ts.step_type, self._clip_rho).items():
                self._context.add_scalar(f"VTrace/{self._name}/{key}", v)
        exp = alf_nest.map_structure(lambda x: x[:, :-1], experience)
        return exp._replace(rollout_info=exp.rollout_info._replace(
            value=value[:, :-1], advantages=advantages, returns=vt.vs))
