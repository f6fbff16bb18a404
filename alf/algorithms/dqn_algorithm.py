"""DQN (Mnih et al. 2015) with double Q (van Hasselt et al. 2016), an optional dueling
head (Wang et al. 2016), n-step targets and an epsilon-greedy exploration schedule.

One update on an n-step :class:`Transition` ``[B]``::

    a* = argmax_a Q(s', a)            (double Q; argmax_a Q'(s', a) without it)
    target = r + discount * Q'(s', a*)
    loss = huber(Q(s, a) - target)    (or squared error)
"""
from typing import Any, Callable, NamedTuple, Optional, Union

import torch
import torch.nn.functional as F

import alf
from alf.algorithms.action_nests import is_single_action, refuse_action_space
from alf.algorithms.off_policy_algorithm import OffPolicyAlgorithm
from alf.config_ranges import Discount, PositiveInt, UpdateRate
from alf.data_structures import AlgStep, LossInfo, TimeStep
from alf.errors import ConfigError, IncompatibleSpecError
from alf.networks.q_networks import QNetwork
from alf.replay_buffers.n_step import Transition
from alf.tensor_specs import TensorSpec
from alf.utils.optimizers import Adam, OptimizerFactory
from alf.utils.run_context import RunContext
from alf.utils.summary_stats import add_q_summaries
from alf.utils.schedules import LinearSchedule

Schedule = Union[float, Callable[[float], float]]


class DqnInfo(NamedTuple):
    """Per-row ``[B]`` values of one DQN update."""
    q_value: Any = ()
    target: Any = ()
    td_error: Any = ()
    valid: Any = ()  # the transition's valid [B] (summaries)


@alf.configurable
class DqnAlgorithm(OffPolicyAlgorithm):
    """Deep Q-learning for a scalar discrete action.

    Args:
        observation_spec, action_spec, reward_spec, context: see RLAlgorithm.
        q_network_ctor: ``ctor(input_spec=, action_spec=)`` -> ``q [B, A]``; its
            ``dueling`` argument gives the dueling head.
        double_q: pick the bootstrap action with the online network.
        epsilon_greedy: exploration probability while collecting: a number, or a schedule
            of training progress. Default: SB3's 1.0 -> 0.05 over the first 10% of training.
        loss: ``"huber"`` (SB3, Nature DQN) or ``"mse"``.
        optimizer: None = Adam(1e-4).
        n_step, gamma, target_update_tau, target_update_period: see OffPolicyAlgorithm
            (DQN default: hard copy every 1000 gradient steps).
        is_eval: build for evaluation only: the Q-network (the policy) without its
            target and optimizer; a training checkpoint loads into it
            (:func:`alf.experiment.checkpoint_state_for`, docs/design/eval_builds.md).
    """

    def __init__(self, observation_spec: Any, action_spec: Any, reward_spec: Any = TensorSpec(()),
                 q_network_ctor: Callable = QNetwork,
                 double_q: bool = True,
                 epsilon_greedy: Schedule = LinearSchedule(1.0, 0.05, end_progress=0.1),
                 loss: str = "huber",
                 optimizer: Optional[OptimizerFactory] = None,
                 n_step: PositiveInt = 1, gamma: Discount = 0.99,
                 target_update_tau: UpdateRate = 1.0,
                 target_update_period: PositiveInt = 1000,
                 context: Optional[RunContext] = None,
                 debug_summaries: bool = False, name: str = "DqnAlgorithm",
                 is_eval: bool = False):
        if not is_single_action(action_spec):
            raise refuse_action_space(name, action_spec, "one Discrete action (one Q-value per action)")
        if not (isinstance(action_spec, TensorSpec) and action_spec.is_discrete()
                and action_spec.ndim == 0):
            raise IncompatibleSpecError(
                f"{name} needs a scalar discrete action space (gymnasium Discrete), got "
                f"{action_spec!r}. For continuous actions use SacAlgorithm, DdpgAlgorithm or "
                "Td3Algorithm.")
        if loss not in ("huber", "mse"):
            raise ConfigError(f"{name}.loss must be 'huber' or 'mse', got {loss!r}")
        super().__init__(observation_spec, action_spec, reward_spec=reward_spec, n_step=n_step,
                         gamma=gamma, target_update_tau=target_update_tau,
                         target_update_period=target_update_period, context=context, optimizer=None if is_eval else optimizer or Adam(lr=1e-4),
                         debug_summaries=debug_summaries, name=name)
        self._q_network = q_network_ctor(input_spec=observation_spec, action_spec=action_spec)
        if is_eval:  # the policy is the Q-network: only its target is left out
            self.eval_omitted = ("_target_q_network",)
        else:
            self._target_q_network = self.register_target(self._q_network)
        self._double_q = bool(double_q)
        self._epsilon = epsilon_greedy
        self._huber = loss == "huber"
        self._offset = int(action_spec.minimum)
        self._num_actions = int(action_spec.maximum) - self._offset + 1

    def epsilon(self) -> float:
        """The current exploration probability."""
        eps = self._epsilon
        return float(eps(self._context.progress())) if callable(eps) else float(eps)

    # ------------------------------------------------------------- acting
    def predict_step(self, time_step: TimeStep, state: Any = ()) -> AlgStep:
        q, _ = self._q_network(time_step.observation)
        action = q.argmax(-1)
        return AlgStep(output=action + self._offset if self._offset else action, state=state)

    def rollout_step(self, time_step: TimeStep, state: Any = ()) -> AlgStep:
        eps = self.epsilon()
        if eps > 0:
            shape, device = time_step.step_type.shape, time_step.step_type.device
            explore = torch.rand(shape, device=device) < eps
            random = torch.randint(0, self._num_actions, shape, device=device)
            if bool(explore.all()):  # every row acts at random: no Q values needed
                action = random
            else:
                q, _ = self._q_network(time_step.observation)
                action = torch.where(explore, random, q.argmax(-1))
        else:
            q, _ = self._q_network(time_step.observation)
            action = q.argmax(-1)
        if self._offset:
            action = action + self._offset
        return AlgStep(output=action, state=state)

    # ------------------------------------------------------------ training
    def train_step(self, transition: Transition, state: Any = (), rollout_info: Any = ()) -> AlgStep:
        t = transition
        with torch.no_grad():
            next_target_q, _ = self._target_q_network(t.next_observation)  # [B, A]
            if self._double_q:
                next_action = self._q_network(t.next_observation)[0].argmax(-1, keepdim=True)
                next_q = next_target_q.gather(-1, next_action).squeeze(-1)
            else:
                next_q = next_target_q.max(-1).values
            target = t.reward + t.discount * next_q
        q_all, _ = self._q_network(t.observation)
        action = t.action.long()
        if self._offset:
            action = action - self._offset
        q = q_all.gather(-1, action.unsqueeze(-1)).squeeze(-1)
        return AlgStep(state=state, info=DqnInfo(q_value=q, target=target, td_error=q - target,
                                                 valid=t.valid))

    def calc_loss(self, info: DqnInfo) -> LossInfo:
        if self._huber:
            loss = F.smooth_l1_loss(info.q_value, info.target, reduction="none")
        else:
            loss = (info.q_value - info.target).square()
        abs_td = info.td_error.detach().abs()
        return LossInfo(loss=loss, priority=abs_td,
                        extra={"q_value": info.q_value.detach(), "td_error": abs_td,
                               "epsilon": self.epsilon()})

    def add_train_summaries(self, batch: Any, info: DqnInfo) -> None:
        """``Value/<name>/q_*`` of the taken actions' Q and ``target_q_*`` of their
        targets (``epsilon`` is a loss term)."""
        add_q_summaries(batch, self._name, info.q_value, info.target, info.valid)
