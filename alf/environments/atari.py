"""Atari (ALE) games: one set of options, the same preprocessing on every backend.

``create_environment`` applies this module to every id whose gymnasium entry
point is ale-py's ``AtariEnv`` (``ALE/Breakout-v5``, and the legacy ids ale-py
registers such as ``BreakoutNoFrameskip-v4``). The id only selects the game;
the dynamics and preprocessing come from :class:`AtariOptions`, so
``ALE/Breakout-v5`` and ``BreakoutNoFrameskip-v4`` give the same environment.

Standard preprocessing (Mnih et al. 2015; Machado et al. 2018), the defaults:

- no-op reset: a random number (up to ``noop_max=30``) of NOOP frames after
  each reset, so episodes do not all start from the same state;
- frame skip 4: one agent step repeats the action for 4 emulator frames and
  returns the pixel-wise max of the last two (removes Atari sprite flicker);
  rewards of the 4 frames are summed;
- observation: 84x84 greyscale ``uint8``, channel first: ``[1, 84, 84]``
  (``[3, 84, 84]`` with ``grayscale=False``). No frame stacking: stack
  frames in the model or with a data transformer;
- fire-on-reset (default on, only for games whose action set has FIRE):
  press FIRE for one frame at each reset, for games that wait for it
  (Breakout);
- sticky actions: with probability ``sticky_action_prob`` the emulator
  repeats the previous action for a frame. Default 0.0. Machado et al. (2018)
  recommend 0.25, and the ``ALE/*-v5`` ids register 0.25, but alf always
  uses the configured value (set ``atari_options.sticky_action_prob = 0.25``
  for the Machado protocol);
- episodes are truncated after ``max_episode_frames=108000`` emulator frames
  (27,000 agent steps, 30 minutes of play): ``LAST`` with discount 1;
- ``full_action_space=False``: the game's minimal action set;
- rewards are **not** clipped: clipping is alf's ``RewardClipping`` data
  transformer, so the reported episode returns are the true game scores.

End of life (``terminal_on_life_loss=True``, ALF style). On the step where
``info["lives"]`` decreases and the game is not over, the TimeStep stays
``MID`` but gets ``discount=0``, so value targets do not bootstrap across a
lost life (the DQN "episodic life" trick), while the episode - and its
reported return - goes on until the real game over (``LAST``, discount 0;
the next step is ``FIRST``). ``terminal_on_life_loss=False`` keeps discount 1
at a life loss. A life lost on a truncation step (``LAST``, discount 1) gets
discount 0 too. Implemented once, as :class:`LifeLossDiscount`, an
:class:`~alf.environments.gym_environment.InfoHook` that every backend's
:class:`~alf.environments.gym_environment.GymVectorEnvironment` runs on the
(vectorised) ``info["lives"]``.

``fire_after_life_loss`` (default False): in FIRE games, when an agent step
loses a life (game not over), press FIRE for one more agent step
(``frame_skip`` frames) inside the same alf step (like CleanRL's
``FireResetEnv`` applied on the resets its ``EpisodicLifeEnv`` makes); that
extra step's reward is added and its observation returned. Without it the
agent must learn to press FIRE to relaunch. Only the per-env backends
(``sync``/``async``) can do it; ``ale_vector``/``envpool`` raise a
:class:`UserError` (``"auto"`` picks ``"sync"``).

``preprocessing=False`` gives the raw frames instead (``[210, 160, 3]``
RGB, the id's own frame skip, e.g. 4 for ``ALE/*-v5`` and 1 for
``*NoFrameskip-v4``; ``noop_max``, ``frame_skip``, ``screen_size``,
``grayscale``, ``fire_on_reset`` and ``fire_after_life_loss`` are ignored);
sticky actions, the frame limit, the action set and the life-loss discount
still apply. Per-env backends only.

Per backend (``alf.environments.backends``): ``ale_vector`` (the default for
Atari) passes the options to ale-py's C++ ``AtariVectorEnv``; ``envpool`` to
``envpool.make``; ``sync``/``async`` build ``gym.make(id, frameskip=1, ...)``
+ :class:`FireOnReset` + gymnasium's ``AtariPreprocessing`` + the wrappers
below. All give the same specs, TimeStep semantics and per-step
preprocessing (bit-identical frames when their resets coincide); the RNG
streams, the exact reset no-op range and how the frame limit counts reset
frames differ (see the ``backends`` module docstring).

Fire-on-reset per backend: one emulator frame of FIRE at each reset in all
three (``use_fire_reset`` in ``AtariVectorEnv``/envpool, :class:`FireOnReset`
inside ``AtariPreprocessing`` for ``sync``/``async``), only in games whose
action set has FIRE. Life loss per backend: all read ``info["lives"]``
(``AtariVectorEnv`` and envpool report it per env; gymnasium's vector envs
merge the sub-envs' ``info["lives"]`` into a ``[B]`` array) and share
:class:`LifeLossDiscount`; none of the engines' own ``episodic_life`` modes
is used.

Gin::

    atari_options.sticky_action_prob = 0.25
    atari_options.terminal_on_life_loss = False
"""
import dataclasses
import re
from typing import Any, Mapping, Optional

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import EnvSpec

from alf.config import configurable
from alf.errors import UserError


@dataclasses.dataclass(frozen=True)
class AtariOptions:
    """How Atari games are preprocessed and how lives are handled (see the module doc).

    Frozen and made of plain values: ``create_environment`` resolves it (gin
    bindings of :func:`atari_options`) in the main process and ships it in the
    ``EnvRequest`` to ``spawn``/``forkserver`` env workers.

    Attributes:
        preprocessing: False: raw ``[210, 160, 3]`` frames (per-env backends only).
        noop_max: at most this many NOOP frames after each reset (0: none).
        frame_skip: emulator frames per agent step (max-pooled over the last two).
        screen_size: observations are ``screen_size x screen_size``.
        grayscale: ``[1, S, S]`` greyscale if True, ``[3, S, S]`` RGB if False.
        fire_on_reset: press FIRE after each reset in games that have FIRE.
        sticky_action_prob: per-frame probability of repeating the previous
            action (Machado et al. 2018 recommend 0.25; default 0.0).
        max_episode_frames: truncate episodes after this many emulator frames.
        full_action_space: all 18 actions instead of the game's minimal set.
        terminal_on_life_loss: discount 0 (step type stays MID) when a life is lost.
        fire_after_life_loss: press FIRE after a lost life (per-env backends only).
    """
    preprocessing: bool = True
    noop_max: int = 30
    frame_skip: int = 4
    screen_size: int = 84
    grayscale: bool = True
    fire_on_reset: bool = True
    sticky_action_prob: float = 0.0
    max_episode_frames: int = 108_000
    full_action_space: bool = False
    terminal_on_life_loss: bool = True
    fire_after_life_loss: bool = False

    def __post_init__(self):
        for name, low in (("noop_max", 0), ("frame_skip", 1), ("screen_size", 1),
                          ("max_episode_frames", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise UserError(f"atari_options.{name} must be an integer >= {low}, got {value!r}.")
        if not 0.0 <= float(self.sticky_action_prob) <= 1.0:
            raise UserError("atari_options.sticky_action_prob must be in [0, 1], got "
                            f"{self.sticky_action_prob!r}.")

    @property
    def observation_shape(self) -> tuple:
        """``[C, H, W]`` of a preprocessed observation."""
        return (1 if self.grayscale else 3, self.screen_size, self.screen_size)


_DEFAULT = AtariOptions()


@configurable
def atari_options(preprocessing: bool = _DEFAULT.preprocessing,
                  noop_max: int = _DEFAULT.noop_max,
                  frame_skip: int = _DEFAULT.frame_skip,
                  screen_size: int = _DEFAULT.screen_size,
                  grayscale: bool = _DEFAULT.grayscale,
                  fire_on_reset: bool = _DEFAULT.fire_on_reset,
                  sticky_action_prob: float = _DEFAULT.sticky_action_prob,
                  max_episode_frames: int = _DEFAULT.max_episode_frames,
                  full_action_space: bool = _DEFAULT.full_action_space,
                  terminal_on_life_loss: bool = _DEFAULT.terminal_on_life_loss,
                  fire_after_life_loss: bool = _DEFAULT.fire_after_life_loss) -> AtariOptions:
    """The gin-configurable :class:`AtariOptions` (arguments: its attributes).

    ``create_environment`` calls it in the main process for every Atari id
    (unless given ``atari=AtariOptions(...)`` explicitly).
    """
    return AtariOptions(preprocessing=bool(preprocessing), noop_max=noop_max,
                        frame_skip=frame_skip, screen_size=screen_size,
                        grayscale=bool(grayscale), fire_on_reset=bool(fire_on_reset),
                        sticky_action_prob=float(sticky_action_prob),
                        max_episode_frames=max_episode_frames,
                        full_action_space=bool(full_action_space),
                        terminal_on_life_loss=bool(terminal_on_life_loss),
                        fire_after_life_loss=bool(fire_after_life_loss))


# ------------------------------------------------------------------ ids
def is_atari_spec(spec: EnvSpec) -> bool:
    """Whether ``spec`` is an ale-py game (``ALE/*-v5`` or a legacy ``*-v0``/``*-v4`` id)."""
    entry = spec.entry_point if isinstance(spec.entry_point, str) else ""
    return entry.startswith("ale_py")


def rom_name(spec: EnvSpec) -> str:
    """ale-py ROM name of an Atari id: ``ALE/SpaceInvaders-v5`` -> ``"space_invaders"``.

    Taken from the registered ``game`` kwarg; for ids without one, derived
    from the name (``SpaceInvadersNoFrameskip`` -> ``space_invaders``).
    """
    game = spec.kwargs.get("game")
    if isinstance(game, str) and game:
        return game
    name = re.sub(r"(NoFrameskip|Deterministic|-ram)$", "", spec.name)
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def envpool_task_id(rom: str) -> str:
    """envpool's id of a ROM: ``"space_invaders"`` -> ``"SpaceInvaders-v5"``."""
    return "".join(part.capitalize() for part in rom.split("_")) + "-v5"


# ---------------------------------------------------------- life-loss hook
class LifeLossDiscount:
    """An :class:`~alf.environments.gym_environment.InfoHook`: discount 0 where lives dropped.

    ``lives`` is the ``[B]`` integer array every Atari backend reports in its
    step ``info``. A row whose lives decreased since the previous step (and
    that was not just autoreset) gets ``discount = 0``; its step type is
    untouched (MID, or LAST on a game over / truncation). Vectorised numpy,
    ~2 us per step for any ``B``.
    """

    def __init__(self):
        self._lives: Optional[np.ndarray] = None

    @staticmethod
    def _read(info: Mapping[str, Any]) -> np.ndarray:
        lives = info.get("lives") if isinstance(info, Mapping) else None
        if lives is None:
            raise UserError("atari_options.terminal_on_life_loss needs the env to report "
                            "info['lives'] (a gym_wrapper may have dropped it); set "
                            "atari_options.terminal_on_life_loss = False.")
        return np.array(lives, dtype=np.int64)  # a copy: backends may reuse their buffers

    def reset(self, info: Mapping[str, Any]) -> None:
        self._lives = self._read(info)

    def __call__(self, info: Mapping[str, Any], discount: np.ndarray,
                 reset_rows: Optional[np.ndarray]) -> None:
        lives = self._read(info)
        lost = lives < self._lives
        if reset_rows is not None:
            lost &= ~reset_rows  # a new episode's lives are not a loss
        discount[lost] = 0.0
        self._lives = lives


def life_loss_hook(options: Optional[AtariOptions]) -> Optional[LifeLossDiscount]:
    """A fresh :class:`LifeLossDiscount` when ``options`` ask for it, else None."""
    if options is not None and options.terminal_on_life_loss:
        return LifeLossDiscount()
    return None


# ------------------------------------------------- single-env gym wrappers
def fire_action(env: gym.Env) -> Optional[int]:
    """Index of the FIRE action of an Atari env, or None if the game has none."""
    meanings = env.unwrapped.get_action_meanings()
    return meanings.index("FIRE") if "FIRE" in meanings else None


class FireOnReset(gym.Wrapper):
    """Press FIRE for one emulator frame right after every reset of the raw env.

    For games that wait for FIRE to start (Breakout): without it an agent
    that never fires idles until the frame limit. Wraps the unskipped
    (``frameskip=1``) ``AtariEnv`` *inside* ``AtariPreprocessing``, so it is
    one frame followed by the no-ops, as in ale-py's ``AtariVectorEnv``. If
    that frame ends the game, the env is reset again.
    """

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self._fire = fire_action(env)
        if self._fire is None:
            raise UserError(f"FireOnReset: {env.unwrapped.spec.id if env.unwrapped.spec else env} "
                            "has no FIRE action.")

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        self.env.reset(seed=seed, options=options)
        obs, _, terminated, truncated, info = self.env.step(self._fire)
        if terminated or truncated:
            obs, info = self.env.reset(options=options)
        return obs, info


class FireAfterLifeLoss(gym.Wrapper):
    """After a step that loses a life (game not over), press FIRE once more.

    The FIRE step's reward is added to the step's and its observation,
    ``terminated``, ``truncated`` and ``info`` are returned. Lives come from
    the emulator (``ale.lives()``), so it works under any observation wrapper.
    """

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self._fire = fire_action(env)
        if self._fire is None:
            raise UserError("FireAfterLifeLoss: the game has no FIRE action.")
        self._lives = 0

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        obs, info = self.env.reset(seed=seed, options=options)
        self._lives = self.env.unwrapped.ale.lives()
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = self.env.unwrapped.ale.lives()
        if lives < self._lives and not (terminated or truncated):
            obs, extra, terminated, truncated, info = self.env.step(self._fire)
            reward += extra
            lives = self.env.unwrapped.ale.lives()
        self._lives = lives
        return obs, reward, terminated, truncated, info


class ChannelFirstObservation(gym.ObservationWrapper):
    """``[H, W]`` greyscale -> ``[1, H, W]`` (a view); ``[H, W, 3]`` RGB -> ``[3, H, W]``.

    Channel first is what alf's conv nets, ``AtariVectorEnv`` and envpool use,
    so every backend has the same observation spec.
    """

    def __init__(self, env: gym.Env):
        super().__init__(env)
        shape = env.observation_space.shape
        if len(shape) == 2:
            new_shape = (1,) + tuple(shape)
        elif len(shape) == 3 and shape[2] in (1, 3):
            new_shape = (shape[2],) + tuple(shape[:2])
        else:
            raise UserError(f"ChannelFirstObservation: unexpected image shape {shape}.")
        self.observation_space = gym.spaces.Box(0, 255, new_shape, np.uint8)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        if observation.ndim == 2:
            return observation[None]
        return np.ascontiguousarray(np.moveaxis(observation, -1, 0))


# Options alf sets itself; passing them in env_kwargs would silently conflict.
_MANAGED_KWARGS = {
    "frameskip": "frame_skip", "repeat_action_probability": "sticky_action_prob",
    "full_action_space": "full_action_space",
    "max_num_frames_per_episode": "max_episode_frames", "obs_type": "preprocessing",
}


def make_atari_env(env_name: str, options: AtariOptions, env_kwargs: Mapping[str, Any],
                   render_mode: Optional[str] = None,
                   max_episode_steps: Optional[int] = None) -> gym.Env:
    """One preprocessed Atari env for the per-env (``sync``/``async``) backends.

    ``gym.make(env_name, frameskip=1, repeat_action_probability=...,
    full_action_space=..., max_num_frames_per_episode=...)``, then
    :class:`FireOnReset` (FIRE games, if asked), gymnasium's
    ``AtariPreprocessing(noop_max, frame_skip, screen_size,
    terminal_on_life_loss=False, grayscale_obs, scale_obs=False)``,
    :class:`FireAfterLifeLoss` (FIRE games, if asked) and
    :class:`ChannelFirstObservation`. Observation ``[C, S, S]`` uint8.
    With ``options.preprocessing=False``: only the ``gym.make`` (own frame
    skip, raw ``[210, 160, 3]`` frames; ``max_episode_steps`` adds a
    gymnasium ``TimeLimit`` in agent steps).

    Args:
        env_name: the Atari id.
        options: the resolved :class:`AtariOptions`.
        env_kwargs: extra ``AtariEnv`` arguments (e.g. ``mode``, ``difficulty``).
        render_mode: e.g. ``"rgb_array"``: ``render()`` gives the ``[210, 160, 3]`` screen.
        max_episode_steps: only for ``preprocessing=False`` (with preprocessing
            the factory folds it into ``max_episode_frames``).
    """
    clash = sorted(k for k in env_kwargs if k in _MANAGED_KWARGS)
    if clash:
        raise UserError(
            f"env_kwargs {clash} for Atari id '{env_name}' are set by alf from AtariOptions; bind "
            + ", ".join(f"atari_options.{_MANAGED_KWARGS[k]}" for k in clash) + " instead.")
    kwargs = dict(env_kwargs)
    kwargs.update(repeat_action_probability=float(options.sticky_action_prob),
                  full_action_space=bool(options.full_action_space),
                  max_num_frames_per_episode=int(options.max_episode_frames))
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    if not options.preprocessing:
        if max_episode_steps is not None:
            kwargs["max_episode_steps"] = int(max_episode_steps)
        return gym.make(env_name, **kwargs)
    env = gym.make(env_name, frameskip=1, **kwargs)
    has_fire = fire_action(env) is not None
    if options.fire_on_reset and has_fire:
        env = FireOnReset(env)
    env = gym.wrappers.AtariPreprocessing(
        env, noop_max=options.noop_max, frame_skip=options.frame_skip,
        screen_size=options.screen_size, terminal_on_life_loss=False,
        grayscale_obs=options.grayscale, grayscale_newaxis=False, scale_obs=False)
    if options.fire_after_life_loss and has_fire:
        env = FireAfterLifeLoss(env)
    return ChannelFirstObservation(env)
