"""A goal env's reward as a function the learner can call: ``GoalEnvReward``.

Hindsight relabeling recomputes rewards for goals the agent did not pursue, on the
learner, from stored ``(achieved_goal, desired_goal[, info])``. gymnasium-robotics goal
envs (and alf's bit-flipping env) expose that as ``env.unwrapped.compute_reward(
achieved_goal, desired_goal, info)``, a pure function of its arguments that accepts a
batch. The envs that collect data may live in other processes (``backend="async"``,
async unrollers, env workers), so the learner cannot call *their* method; it builds
one instance of the same env for itself (never stepped) and calls its
``compute_reward``. Only the env id and kwargs travel (this object pickles without
the env), and the env is built where the function is first called.
"""
from typing import Any, Callable, Optional

import gin
import numpy as np
import torch

import alf
from alf import nest as alf_nest
from alf.errors import ConfigError

Nest = Any


def _bound(name: str, default: Any) -> Any:
    """The gin binding ``name`` (``Configurable.param``), or ``default`` if unbound."""
    try:
        return gin.query_parameter(name)
    except ValueError:
        return default


@alf.configurable
class GoalEnvReward:
    """``reward(achieved_goal [N, G], desired_goal [N, G], info) -> [N]`` float32 from a
    gymnasium goal env's ``compute_reward``.

    Args:
        env_name: gymnasium id of the env whose ``compute_reward`` to call; ``None``: the
            run's env (``create_environment.env_name`` as bound in gin).
        env_kwargs: its constructor kwargs; ``None``: ``create_environment.env_kwargs``
            when ``env_name`` is ``None`` too, else none.
    Raises ConfigError (one line) when the env has no ``compute_reward``.
    """

    def __init__(self, env_name: Optional[str] = None, env_kwargs: Optional[dict] = None):
        if env_name is None:
            env_name = _bound("create_environment.env_name", None)
            if env_kwargs is None:
                env_kwargs = _bound("create_environment.env_kwargs", None)
        if env_name is None:
            raise ConfigError("GoalEnvReward: no env to take compute_reward from: bind "
                              "create_environment.env_name or GoalEnvReward.env_name")
        self.env_name = env_name
        self.env_kwargs = dict(env_kwargs or {})
        self._fn: Optional[Callable] = None

    def _compute_reward(self) -> Callable:
        if self._fn is None:
            import gymnasium as gym
            env = gym.make(self.env_name, **self.env_kwargs)
            fn = getattr(env.unwrapped, "compute_reward", None)
            if not callable(fn):
                raise ConfigError(
                    f"GoalEnvReward: {self.env_name} has no compute_reward(achieved_goal, "
                    "desired_goal, info): set HindsightRelabeler.reward_fn to a function of "
                    "(achieved_goal, desired_goal, info)")
            self._fn = fn
        return self._fn

    def check(self) -> None:
        """Build the env now, so a missing ``compute_reward`` is reported at construction."""
        self._compute_reward()

    def __call__(self, achieved_goal: torch.Tensor, desired_goal: torch.Tensor,
                 info: Nest = ()) -> torch.Tensor:
        np_info = alf_nest.map_structure(lambda x: x.cpu().numpy(), info) if info != () else {}
        reward = self._compute_reward()(achieved_goal.cpu().numpy(),
                                        desired_goal.cpu().numpy(), np_info)
        return torch.as_tensor(np.asarray(reward, np.float32), device=achieved_goal.device)

    def __getstate__(self) -> dict:
        return {"env_name": self.env_name, "env_kwargs": self.env_kwargs, "_fn": None}
