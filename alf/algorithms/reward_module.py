"""``RewardModule``: the intrinsic-reward role of an :class:`~alf.algorithms.agent.Agent`.

A reward module is an ordinary :class:`~alf.algorithms.algorithm.Algorithm` (its own
networks, optimizer, checkpoint entries and summaries under its name) that the Agent
calls on flattened transitions ``[N]`` on the learner (docs/design/agent.md, "When each
hook runs"):

- :meth:`RewardModule.observe`: each newly collected transition, once, when its unroll
  is stored (however often replay samples it later): where visit counts are kept;
- :meth:`RewardModule.reward`: the intrinsic reward of arriving at ``observation``
  from ``prev_observation`` with ``prev_action`` (``[N]``, no gradient), for every
  trained batch (a replayed transition again each time it is sampled);
- :meth:`RewardModule.update`: one gradient step of its own loss on the trained batch
  (none for a module without trainable parameters, which needs no optimizer).

A new module is a subclass implementing :meth:`reward`, and :meth:`loss` if it has
trainable parameters (:meth:`observe` if it keeps statistics of what was collected).
Its constructor is called by the Agent as ``ctor(observation_spec=..., action_spec=...,
context=...)`` (keyword arguments; everything else comes from gin) and passes them on,
with its ``name``, to ``RewardModule.__init__``.
"""
import abc
from typing import Any, Optional

import torch

from alf.algorithms.agent_part import AgentPart
from alf.errors import ConfigError
from alf.utils.normalizers import RunningMeanVar
from alf.utils.optimizers import OptimizerFactory
from alf.utils.run_context import RunContext


class RewardModule(AgentPart):
    """Base class of intrinsic-reward modules.

    Class attribute:
        uses_previous_step: whether :meth:`reward` / :meth:`loss` read
            ``prev_observation`` (ICM's forward and inverse models do; RND does not and
            can also train on single-step mini-batches, where it is None).

    Args:
        observation_spec: the (transformed) observation spec of one step.
        action_spec: the env's action spec.
        optimizer: optimizer factory for the module's parameters (each part of an Agent
            trains with its own); None for a module without trainable parameters.
        gamma: the discount factor of this reward's column where the RL algorithm learns
            one value per column (PPO, APPO, IMPALA); None: the RL algorithm's own.
        episodic: whether this reward's return ends with the episode (False: it flows
            on into the next one, as RND's intrinsic return does).
        context, debug_summaries, name: see :class:`Algorithm`.
    """

    uses_previous_step: bool = True
    optimizer_example = ("rnd", "1e-4")

    def __init__(self, observation_spec: Any, action_spec: Any,
                 optimizer: Optional[OptimizerFactory] = None,
                 gamma: Optional[float] = None, episodic: bool = True,
                 context: Optional[RunContext] = None, debug_summaries: bool = False,
                 name: str = "RewardModule"):
        super().__init__(observation_spec, action_spec, optimizer=optimizer, context=context,
                         debug_summaries=debug_summaries, name=name)
        if gamma is not None and not 0.0 <= gamma <= 1.0:
            raise ConfigError(f"{name}.gamma = {gamma} is out of range: it must be in [0, 1] "
                              "(or None: the RL algorithm's)")
        self.gamma = None if gamma is None else float(gamma)
        self.episodic = bool(episodic)
        self._reward_stats: Optional[RunningMeanVar] = None  # see normalize_reward_by_std

    def normalize_reward_by_std(self) -> None:
        """Have :meth:`scaled` divide bonuses by their running standard deviation (so
        their scale does not drift as the module learns); call from the constructor."""
        self._reward_stats = RunningMeanVar(())

    def scaled(self, bonus: torch.Tensor) -> torch.Tensor:
        """``bonus [N]`` over its running standard deviation (folding it in first) when
        :meth:`normalize_reward_by_std` was called, else unchanged."""
        if self._reward_stats is None:
            return bonus
        self.fold_statistics(self._reward_stats, bonus)
        return bonus / self._reward_stats.var.sqrt().clamp(min=1e-8).to(bonus.dtype)

    @abc.abstractmethod
    def reward(self, prev_observation: Any, prev_action: Any,
               observation: Any) -> torch.Tensor:
        """The intrinsic reward ``[N]`` of each transition (called without gradients)."""

    def observe(self, prev_observation: Any, prev_action: Any, observation: Any,
                valid: torch.Tensor) -> None:
        """Each newly collected step ``observation [N]`` with the step before it in the same
        env (``prev_observation``, ``prev_action``: the action taken there), called once
        per step when its unroll is stored, on the learner, without gradients (the Agent's
        :meth:`~alf.algorithms.agent.Agent.observe_collected`). ``valid [N]``: False where
        ``observation`` begins an episode (``prev_observation`` ends the previous one).
        Default: nothing."""
