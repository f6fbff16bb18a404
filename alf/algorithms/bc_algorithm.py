"""Behaviour cloning: supervised learning of the dataset's actions from its observations.

Trains on the same n-step :class:`~alf.replay_buffers.n_step.Transition` s as
the other replay learners (of which only ``observation`` and ``action`` are
read), so it learns from an offline dataset (``TrainerConfig.offline_buffer_dir``
with ``unroll_length = 0``) or from its own replay buffer alike. Rows whose
step 0 is ``LAST`` (their stored action is a placeholder) are masked out by
:meth:`OffPolicyAlgorithm.train_on_batch`. Nothing is stored per step:
rollout info and rollout state are ``()``.

Losses per row ``[B]``:

* discrete actions: cross-entropy ``-log pi(a|s)`` of a Categorical policy;
* continuous actions, ``loss_type="mse"`` (their default): squared error between
  the policy's deterministic action (the mode: ``tanh`` of the Gaussian mean
  mapped onto the bounds) and the dataset action, per dimension in units of the
  action half-range, summed over dimensions;
* continuous actions, ``loss_type="nll"``: ``-log pi(a|s)`` of the
  tanh-squashed Gaussian, with the dataset action first pulled inside the
  bounds by ``nll_action_margin`` (a squashed Gaussian has no density *at* a
  bound, where expert actions often saturate);
* ``MultiDiscrete``/``MultiBinary`` and ``Dict``/``Tuple`` action nests: ``"nll"`` only,
  ``-log pi(a|s)`` of the joint distribution (the sum over dimensions and leaves), bounded
  float leaves pulled inside their bounds by ``nll_action_margin``
  (:class:`~alf.algorithms.action_nests.NestCloning`).

``mse`` is the default: on 10k greedy transitions of a converged SAC Pendulum agent
(10k updates of batch 256, the same 20 evaluation episodes) both losses cloned
the expert to within 2% of its return (expert -145.6, mse -146.7, nll -148.0),
and mse needs no log-density (none exists at the bounds, where experts often
saturate) and no std. ``nll`` also learns a calibrated std, for sampling in
``rollout_step``; with ``mse`` the std keeps its initial value.
"""
import math
from typing import Any, Callable, NamedTuple, Optional

import numpy as np
import torch

import alf
from alf.algorithms.action_nests import NestCloning, is_single_action, space_name
from alf.algorithms.off_policy_algorithm import OffPolicyAlgorithm
from alf.algorithms.sac_algorithm import sac_actor_network
from alf.config_ranges import Discount, NonNegative, PositiveInt
from alf.data_structures import AlgStep, LossInfo, TimeStep
from alf.errors import ConfigError
from alf.replay_buffers.n_step import Transition
from alf.tensor_specs import BoundedTensorSpec, TensorSpec
from alf.utils import dist_utils
from alf.utils.optimizers import Adam, OptimizerFactory
from alf.utils.run_context import RunContext


class BcInfo(NamedTuple):
    """Per-row ``[B]`` values of one BC update."""
    loss: Any = ()
    error: Any = ()  # discrete: 1 where the greedy action differs; continuous: |mode - a| mean


def bc_actor_network(input_spec: Any, action_spec: TensorSpec) -> torch.nn.Module:
    """The SAC actor (256x256 ReLU MLP; Categorical for discrete actions, tanh-squashed
    Gaussian for continuous ones) with its std clipped to ``[e^-5, e^2]``."""
    return sac_actor_network(input_spec, action_spec, min_std=math.exp(-5))


@alf.configurable
class BcAlgorithm(OffPolicyAlgorithm):
    """Behaviour cloning for a scalar discrete, a 1-d continuous, a ``[D]`` discrete
    (MultiDiscrete/MultiBinary) action or a Dict/Tuple nest of those (see module doc).

    Args:
        observation_spec, action_spec, reward_spec, context: see RLAlgorithm.
        actor_network_ctor: ``ctor(input_spec=, action_spec=)`` -> action distribution
            ``[B]`` (Categorical for discrete actions; for continuous ones a distribution
            whose mode is the deterministic action, e.g. the tanh-squashed Gaussian of
            ``NormalProjectionNetwork(scale_distribution=True)``).
        loss_type: ``"mse"`` (squared error of the mode, in units of the action
            half-range; continuous actions only) or ``"nll"`` (negative log-likelihood:
            the cross-entropy for discrete actions). None = ``"mse"`` for continuous,
            ``"nll"`` for discrete actions and action nests (which take ``"nll"`` only).
        nll_action_margin: ``"nll"`` on a bounded action: dataset actions are clipped to
            ``[min + m * half_range, max - m * half_range]`` with ``m`` this fraction.
        optimizer: None = Adam(1e-3).
        n_step, gamma: see OffPolicyAlgorithm (BC reads step 0 of each transition only).
        is_eval: build for evaluation only: the actor without its optimizer; a training
            checkpoint loads into it (:func:`alf.experiment.checkpoint_state_for`,
            docs/design/eval_builds.md).
    """

    def __init__(self, observation_spec: Any, action_spec: Any, reward_spec: Any = TensorSpec(()),
                 actor_network_ctor: Callable = bc_actor_network,
                 loss_type: Optional[str] = None,
                 nll_action_margin: NonNegative = 1e-3,
                 optimizer: Optional[OptimizerFactory] = None,
                 n_step: PositiveInt = 1, gamma: Discount = 0.99,
                 context: Optional[RunContext] = None,
                 debug_summaries: bool = False, name: str = "BcAlgorithm",
                 is_eval: bool = False):
        nested = not is_single_action(action_spec)
        if nested and loss_type == "mse":
            raise ConfigError(f"{name}.loss_type='mse' needs one Box action; the action space "
                              f"{space_name(action_spec)} is cloned with its joint likelihood: "
                              "set loss_type='nll' (or None)")
        discrete = nested or action_spec.is_discrete()
        if loss_type is None:
            loss_type = "nll" if discrete else "mse"
        if loss_type not in ("mse", "nll"):
            raise ConfigError(f"{name}.loss_type must be 'mse', 'nll' or None, got {loss_type!r}")
        if discrete and loss_type == "mse":
            raise ConfigError(f"{name}.loss_type='mse' needs continuous actions; discrete actions "
                              "are cloned with the cross-entropy: set loss_type='nll' (or None)")
        if not 0.0 <= nll_action_margin < 0.5:
            raise ConfigError(f"{name}.nll_action_margin must be in [0, 0.5), got "
                              f"{nll_action_margin}")
        super().__init__(observation_spec, action_spec, reward_spec=reward_spec, n_step=n_step,
                         gamma=gamma, context=context,
                         optimizer=None if is_eval else optimizer or Adam(lr=1e-3),
                         debug_summaries=debug_summaries, name=name)
        self._discrete = discrete
        self._nest_cloning = NestCloning(action_spec, nll_action_margin) if nested else None
        self._loss_type = loss_type
        self._actor = actor_network_ctor(input_spec=observation_spec, action_spec=action_spec)
        if is_eval:  # BC is its actor; only the optimizer is left out
            self.eval_omitted = ()
        if not self._discrete:
            dim = action_spec.shape[0]
            lo, hi = _bounds(action_spec)
            bounded = lo is not None
            half = (hi - lo) / 2 if bounded else torch.ones(dim)
            margin = nll_action_margin * half
            self.register_buffer("_inv_half_range", 1.0 / half, persistent=False)
            self.register_buffer("_clip_low", lo + margin if bounded else
                                 torch.full((dim,), -math.inf), persistent=False)
            self.register_buffer("_clip_high", hi - margin if bounded else
                                 torch.full((dim,), math.inf), persistent=False)

    # ------------------------------------------------------------- acting
    def predict_step(self, time_step: TimeStep, state: Any = ()) -> AlgStep:
        dist, _ = self._actor(time_step.observation)
        return AlgStep(output=dist_utils.get_mode(dist), state=state)

    def rollout_step(self, time_step: TimeStep, state: Any = ()) -> AlgStep:
        dist, _ = self._actor(time_step.observation)
        return AlgStep(output=dist.sample(), state=state)

    # ------------------------------------------------------------ training
    def train_step(self, transition: Transition, state: Any = (), rollout_info: Any = ()) -> AlgStep:
        dist, _ = self._actor(transition.observation)
        action = transition.action
        if self._nest_cloning is not None:
            loss, error = self._nest_cloning(dist, dist_utils.get_mode(dist), action)
        elif self._discrete:
            loss = -dist.log_prob(action)
            error = (dist_utils.get_mode(dist).detach() != action).to(loss.dtype)
        else:
            mode = dist_utils.get_mode(dist)
            diff = (mode - action) * self._inv_half_range  # [B, D] in half-range units
            if self._loss_type == "mse":
                loss = diff.square().sum(-1)
            else:
                clipped = torch.maximum(torch.minimum(action, self._clip_high), self._clip_low)
                loss = -dist.log_prob(clipped)
            error = diff.detach().abs().mean(-1)
        return AlgStep(state=state, info=BcInfo(loss=loss, error=error))

    def calc_loss(self, info: BcInfo) -> LossInfo:
        return LossInfo(loss=info.loss, extra={"bc_loss": info.loss.detach(),
                                               "action_error": info.error})


def _bounds(spec: TensorSpec):
    """``(low [D], high [D])`` float tensors of a finitely bounded spec, else ``(None, None)``."""
    if not (isinstance(spec, BoundedTensorSpec) and np.all(np.isfinite(spec.minimum))
            and np.all(np.isfinite(spec.maximum))):
        return None, None
    shape = spec.shape
    lo = torch.tensor(np.broadcast_to(spec.minimum, shape), dtype=torch.float32)
    hi = torch.tensor(np.broadcast_to(spec.maximum, shape), dtype=torch.float32)
    return lo, hi
