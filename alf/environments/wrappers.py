"""Gymnasium wrappers for single (unbatched) environments.

Pass them to ``create_environment(gym_wrappers=[...])`` (in gin:
``create_environment.gym_wrappers = [@MaskVelocityWrapper]``); each is applied
as ``wrapper(env)`` to every sub-env. Wrappers must be picklable (module-level
classes holding plain numpy state) so the async backend can ship them to
``spawn``/``forkserver`` workers.

- :class:`MaskVelocityWrapper`: zero the velocities (a POMDP for recurrent policies).
- :class:`MiniGridObservationWrapper`: MiniGrid's partial view as a flat float vector
  (its observation is a dict holding a text mission, which no network takes).
- :class:`StepLatencyWrapper`: each step waits a fixed time (a remote simulator, a
  fixed-rate game engine, a robot), for latency-bound throughput benchmarks.
"""
import time
from typing import Any, Dict, Optional, Sequence, Tuple

import gymnasium as gym
import numpy as np

from alf.config import configurable
from alf.config_ranges import NonNegative
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


@configurable
class StepLatencyWrapper(gym.Wrapper):
    """Each ``step`` waits ``latency_s`` seconds (sleeping) before it returns.

    Why: many real envs are bound by latency rather than by computation: a remote
    simulator answering over the network, a game engine ticking at a fixed rate,
    a robot whose action takes effect in the physical world. Their step *waits*;
    the CPU is free meanwhile, so what raises throughput is having more envs
    waiting at once (more processes, double buffering), not more cores. This
    wrapper turns any cheap env (e.g. CartPole) into such an env: with ``B`` envs
    stepped strictly one after another the bound is ``1 / latency_s`` agent
    steps/s, and with all ``B`` waiting concurrently it is ``B / latency_s``
    (``bench/latency_bound.py``). Observations, rewards and episodes are exactly
    the inner env's.

    In gin: ``create_environment.gym_wrappers = [@StepLatencyWrapper]`` and
    ``StepLatencyWrapper.latency_s = 0.01`` (on the command line:
    ``--conf_param 'create_environment.gym_wrappers=[@StepLatencyWrapper]'``).
    Like every gym wrapper it needs a per-env backend (``"sync"``, ``"threads"``,
    ``"async"``; ``"auto"`` picks ``"sync"``); ``backend="vector"`` refuses gym
    wrappers. ``"threads"`` overlaps the waits of all envs in one process.

    Args:
        env: the single environment to wrap.
        latency_s: seconds each ``step`` sleeps after the inner step, before returning.
        reset_latency_s: seconds each ``reset`` sleeps (0: none).
    """

    def __init__(self, env: gym.Env, latency_s: NonNegative = 0.01,
                 reset_latency_s: NonNegative = 0.0):
        super().__init__(env)
        for name, value in (("latency_s", latency_s), ("reset_latency_s", reset_latency_s)):
            if not value >= 0:  # also refuses NaN
                raise UserError(f"StepLatencyWrapper: {name} must be >= 0 seconds, got {value!r}.")
        self.latency_s = float(latency_s)
        self.reset_latency_s = float(reset_latency_s)

    def step(self, action: Any) -> Tuple[Any, float, bool, bool, Dict[str, Any]]:
        """The inner env's ``step(action)``, returned ``latency_s`` seconds later."""
        result = self.env.step(action)
        if self.latency_s > 0:
            time.sleep(self.latency_s)
        return result

    def reset(self, **kwargs: Any) -> Tuple[Any, Dict[str, Any]]:
        """The inner env's ``reset(**kwargs)``, returned ``reset_latency_s`` seconds later."""
        result = self.env.reset(**kwargs)
        if self.reset_latency_s > 0:
            time.sleep(self.reset_latency_s)
        return result


@configurable
class MiniGridObservationWrapper(gym.ObservationWrapper):
    """MiniGrid's egocentric partial view ``obs["image"]`` ``[V, V, 3]`` uint8 (per cell:
    object, colour and state indices; V = 7 by default) as a flat float32 vector
    ``[V * V * 3]``; the text ``mission`` and the ``direction`` are dropped.

    A flat vector lets an MLP policy, ``ObservationNormalizer`` and RND's observation
    whitening take it as they take any vector observation (the indices are small
    integers, 0-10, so scaling uint8 by 1/255 as for pixels would squash them).

    Args:
        env: a MiniGrid env (``pip install -e .[minigrid]``).
    Raises:
        UserError: the observation has no ``"image"`` entry (not a MiniGrid env).
    """

    def __init__(self, env: gym.Env):
        super().__init__(env)
        space = env.observation_space
        image = space.spaces.get("image") if isinstance(space, gym.spaces.Dict) else None
        if not isinstance(image, gym.spaces.Box):
            raise UserError("MiniGridObservationWrapper needs MiniGrid's dict observation with "
                            f"an 'image' entry, got {space!r}.")
        size = int(np.prod(image.shape))
        self.observation_space = gym.spaces.Box(
            low=0.0, high=float(np.max(image.high)), shape=(size,), dtype=np.float32)

    def observation(self, observation: Dict[str, Any]) -> np.ndarray:
        return np.asarray(observation["image"], dtype=np.float32).reshape(-1)
