"""``RewardModule``: the intrinsic-reward role of an :class:`~alf.algorithms.agent.Agent`.

A reward module is an ordinary :class:`~alf.algorithms.algorithm.Algorithm` (its own
networks, optimizer, checkpoint entries and summaries under its name) that the Agent
asks two things, both on flattened transitions ``[N]`` taken from stored experience on
the learner (docs/design/agent.md, decision 2):

- :meth:`RewardModule.reward`: the intrinsic reward of arriving at ``observation``
  from ``prev_observation`` with ``prev_action`` (``[N]``, no gradient);
- :meth:`RewardModule.update`: one gradient step of its own loss on the same data.

A new module is a subclass implementing :meth:`reward` and :meth:`loss`.
"""
from typing import Any, Optional

import torch

from alf.algorithms.algorithm import Algorithm
from alf.data_structures import LossInfo
from alf.errors import ConfigError
from alf.utils.normalizers import RunningMeanVar
from alf.utils.optimizers import OptimizerFactory
from alf.utils.run_context import RunContext


class RewardModule(Algorithm):
    """Base class of intrinsic-reward modules.

    Class attribute:
        uses_previous_step: whether :meth:`reward` / :meth:`loss` read
            ``prev_observation`` (ICM's forward and inverse models do; RND does not and
            can also train on single-step mini-batches, where it is None).

    Args:
        observation_spec: the (transformed) observation spec of one step.
        action_spec: the env's action spec.
        optimizer: optimizer factory for the module's parameters (each part of an Agent
            trains with its own).
        gamma: the discount factor of this reward's column where the RL algorithm learns
            one value per column (PPO, APPO, IMPALA); None: the RL algorithm's own.
        episodic: whether this reward's return ends with the episode (False: it flows
            on into the next one, as RND's intrinsic return does).
        context, debug_summaries, name: see :class:`Algorithm`.
    """

    uses_previous_step: bool = True

    def __init__(self, observation_spec: Any, action_spec: Any,
                 optimizer: Optional[OptimizerFactory] = None,
                 gamma: Optional[float] = None, episodic: bool = True,
                 context: Optional[RunContext] = None, debug_summaries: bool = False,
                 name: str = "RewardModule"):
        if optimizer is None:
            raise ConfigError(f"{name} trains with its own optimizer: set {name}.optimizer, "
                              f"e.g. `{name}.optimizer = @rnd/alf.optimizers.Adam()` and "
                              "`rnd/alf.optimizers.Adam.lr = 1e-4`")
        super().__init__(optimizer=optimizer, context=context,
                         debug_summaries=debug_summaries, name=name)
        if gamma is not None and not 0.0 <= gamma <= 1.0:
            raise ConfigError(f"{name}.gamma = {gamma} is out of range: it must be in [0, 1] "
                              "(or None: the RL algorithm's)")
        self.gamma = None if gamma is None else float(gamma)
        self.episodic = bool(episodic)
        self._observation_spec = observation_spec
        self._action_spec = action_spec
        self._reward_stats: Optional[RunningMeanVar] = None  # see normalize_reward_by_std

    def normalize_reward_by_std(self) -> None:
        """Have :meth:`scaled` divide bonuses by their running standard deviation (so
        their scale does not drift as the module learns); call from the constructor."""
        self._reward_stats = RunningMeanVar(())

    def fold_statistics(self, stats: RunningMeanVar, x: torch.Tensor) -> None:
        """Fold ``x`` into ``stats``; in a data-parallel run every rank's ``x`` together
        (so the statistics, part of the checkpoint, stay identical on all ranks)."""
        dp = self._context.data_parallel
        stats.update(x, sum_over_ranks=None if dp is None else dp.sum_over_ranks)

    def scaled(self, bonus: torch.Tensor) -> torch.Tensor:
        """``bonus [N]`` over its running standard deviation (folding it in first) when
        :meth:`normalize_reward_by_std` was called, else unchanged."""
        if self._reward_stats is None:
            return bonus
        self.fold_statistics(self._reward_stats, bonus)
        return bonus / self._reward_stats.var.sqrt().clamp(min=1e-8).to(bonus.dtype)

    @property
    def observation_spec(self) -> Any:
        return self._observation_spec

    @property
    def action_spec(self) -> Any:
        return self._action_spec

    def reward(self, prev_observation: Any, prev_action: Any,
               observation: Any) -> torch.Tensor:
        """The intrinsic reward ``[N]`` of each transition (called without gradients).
        Abstract: every module defines its bonus."""
        raise NotImplementedError(f"{type(self).__name__} must implement reward")

    def loss(self, prev_observation: Any, prev_action: Any,
             observation: Any) -> torch.Tensor:
        """The module's own training loss per transition ``[N]``. Abstract: every module
        defines how it learns."""
        raise NotImplementedError(f"{type(self).__name__} must implement loss")

    def update(self, prev_observation: Any, prev_action: Any, observation: Any,
               valid: torch.Tensor) -> LossInfo:
        """One gradient step of :meth:`loss` over the ``valid [N]`` transitions, on this
        module's parameters only; not counted in ``context.num_updates`` (the RL
        algorithm's clock)."""
        loss = self.loss(prev_observation, prev_action, observation)
        return self.update_with_gradient(LossInfo(loss=loss), valid_masks=valid.to(loss.dtype),
                                         count_update=False)
