"""Gymnasium wrappers for single (unbatched) environments.

Pass them to ``create_environment(gym_wrappers=[...])`` (in gin:
``create_environment.gym_wrappers = [@MaskVelocityWrapper]``); each is applied
as ``wrapper(env)`` to every sub-env. Wrappers must be picklable (module-level
classes holding plain numpy state) so the async backend can ship them to
``spawn``/``forkserver`` workers.
"""
from typing import Dict, Optional, Sequence, Tuple

import gymnasium as gym
import numpy as np

from alf.config import configurable
from alf.errors import UserError

# Velocity components of classic-control (and Box2D) observations, by env name
# (the id without version, so e.g. CartPole-v0 and CartPole-v1 share one entry).
VELOCITY_INDICES: Dict[str, Tuple[int, ...]] = {
    "CartPole": (1, 3),  # [x, x_dot, theta, theta_dot]
    "Pendulum": (2,),  # [cos(theta), sin(theta), theta_dot]
    "MountainCar": (1,),  # [position, velocity]
    "MountainCarContinuous": (1,),  # [position, velocity]
    "Acrobot": (4, 5),  # [cos t1, sin t1, cos t2, sin t2, t1_dot, t2_dot]
    "LunarLander": (2, 3, 5),  # [x, y, vx, vy, angle, angular_vel, leg1, leg2]
}


@configurable
class MaskVelocityWrapper(gym.ObservationWrapper):
    """Zero the velocity components of the observation (a POMDP for recurrent policies).

    Args:
        env: the single environment to wrap.
        velocity_indices: indices (into the flat Box observation) to zero; by
            default looked up from ``VELOCITY_INDICES`` by the env's id.
    Raises:
        UserError: the env is not in ``VELOCITY_INDICES`` and no indices were given.
    """

    def __init__(self, env: gym.Env, velocity_indices: Optional[Sequence[int]] = None):
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
            raise UserError(f"MaskVelocityWrapper needs a flat Box observation, got {space!r}.")
        if velocity_indices is None:
            env_id = env.spec.id if env.spec is not None else type(env.unwrapped).__name__
            name = env.spec.name if env.spec is not None else env_id
            if name not in VELOCITY_INDICES:
                raise UserError(
                    f"MaskVelocityWrapper does not know the velocity components of '{env_id}'. "
                    f"Known envs: {', '.join(sorted(VELOCITY_INDICES))}; or pass "
                    f"MaskVelocityWrapper.velocity_indices = [...].")
            velocity_indices = VELOCITY_INDICES[name]
        indices = np.asarray(list(velocity_indices), dtype=np.int64)
        if indices.size and (indices.min() < -space.shape[0] or indices.max() >= space.shape[0]):
            raise UserError(f"MaskVelocityWrapper: velocity_indices {indices.tolist()} out of range "
                            f"for observation shape {space.shape}.")
        self._indices = indices

    def observation(self, observation: np.ndarray) -> np.ndarray:
        observation = np.array(observation)  # never modify the wrapped env's array
        observation[self._indices] = 0
        return observation
