"""Resolve an environment id to its gymnasium ``EnvSpec`` with user-friendly errors.

- ``ALE/...`` ids import ``ale_py`` lazily (and ``gym.register_envs(ale_py)``);
  a missing ale-py is a :class:`UserError` naming ``pip install -e .[atari]``.
- MuJoCo ids check that ``mujoco`` imports (``pip install -e .[mujoco]``).
- ``MiniGrid-...`` and ``BabyAI-...`` ids import ``minigrid`` lazily (it registers
  them); a missing minigrid is a :class:`UserError` naming ``pip install -e .[minigrid]``.
- ``"module:Env-v0"`` ids import ``module`` first (gymnasium's convention).
- An unknown id raises :class:`EnvironmentNotFoundError` saying how to make a user's
  own id known (``import my_module`` in the gin file, or ``"my_module:Env-v0"``) and
  listing up to three close matches from ``gymnasium.registry``.

Runs in env worker processes too (``spawn``/``forkserver`` children start
with gymnasium's default registry), so it must stay cheap and side-effect free
apart from registration.
"""
import difflib
import importlib
from typing import Tuple

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

from alf.errors import EnvironmentNotFoundError, UserError

_ATARI_HINT = "pip install -e .[atari]"
_MUJOCO_HINT = "pip install -e .[mujoco]"
_MINIGRID_HINT = "pip install -e .[minigrid]"
_MINIGRID_PREFIXES = ("MiniGrid-", "BabyAI-")


def _import_ale(env_name: str, required: bool) -> bool:
    try:
        import ale_py  # deferred: ale_py is optional/heavy  pylint: disable=import-outside-toplevel
    except ImportError as e:
        if required:
            raise UserError(f"Environment '{env_name}' is an Atari game and needs ale-py, which is "
                            f"not installed ({e}). Install it with: {_ATARI_HINT}") from None
        return False
    gym.register_envs(ale_py)
    # the emulator's banner ("A.L.E: Arcade Learning Environment ...", "[Powered by
    # Stella]") goes to stderr at each first ALE in a process; the env checker builds one
    # before a config error can be reported, which must stay one line. Errors still show.
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    return True


def _import_minigrid(env_name: str) -> None:
    try:
        import minigrid  # noqa: F401  deferred: optional; importing it registers its ids  pylint: disable=import-outside-toplevel,unused-import
    except ImportError as e:
        raise UserError(f"Environment '{env_name}' is a MiniGrid env and needs minigrid, which "
                        f"is not installed ({e}). Install it with: {_MINIGRID_HINT}") from None


def split_module(env_name: str) -> Tuple[str, str]:
    """``"pkg.mod:Env-v0"`` -> ``("pkg.mod", "Env-v0")``; plain ids give ``("", id)``."""
    if ":" in env_name:
        module, _, env_id = env_name.partition(":")
        return module, env_id
    return "", env_name


def find_env_spec(env_name: str) -> EnvSpec:
    """The registered ``EnvSpec`` of ``env_name``, importing what it needs.

    Raises:
        EnvironmentNotFoundError: unknown id (the message lists close matches).
        UserError: the env's optional dependency (ale-py, mujoco) is missing.
    """
    module, env_id = split_module(env_name)
    if module:
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise UserError(f"Environment '{env_name}': cannot import module '{module}' ({e}).") from None
    if env_id.startswith("ALE/"):
        _import_ale(env_name, required=True)
    spec = gym.registry.get(env_id)
    if spec is None and env_id.startswith(_MINIGRID_PREFIXES):
        _import_minigrid(env_name)
        spec = gym.registry.get(env_id)
    if spec is None and _import_ale(env_name, required=False):
        # legacy Atari ids such as 'PongNoFrameskip-v4' are registered by ale_py too
        spec = gym.registry.get(env_id)
    if spec is None:
        raise EnvironmentNotFoundError(_not_found_message(env_id))
    _check_dependencies(env_name, spec)
    return spec


def _not_found_message(env_id: str) -> str:
    ids = list(gym.registry.keys())
    close = difflib.get_close_matches(env_id, ids, n=3, cutoff=0.6)
    if not close:  # compare case-insensitively as a fallback ('cartpole-v1')
        lower = {i.lower(): i for i in ids}
        close = [lower[c] for c in difflib.get_close_matches(env_id.lower(), list(lower), n=3, cutoff=0.6)]
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    # a user's own id is unknown when the module that registers it was not imported
    custom = (f" If it is your own env, import the module that registers it "
              f"(gymnasium.register) first: add `import my_module` to the gin file (a "
              f"my_module.py next to the gin file is found), or write the id as "
              f"'my_module:{env_id}'.") if not env_id.startswith("ALE/") else ""
    return (f"Unknown environment '{env_id}'.{hint}{custom} Atari ids start with 'ALE/' "
            f"(needs `{_ATARI_HINT}`); run `python -c \"import gymnasium; "
            f"gymnasium.pprint_registry()\"` to list every registered id.")


def _check_dependencies(env_name: str, spec: EnvSpec) -> None:
    entry = spec.entry_point if isinstance(spec.entry_point, str) else ""
    if entry.startswith("gymnasium.envs.mujoco"):
        try:
            # deferred: mujoco is optional/heavy
            import mujoco  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
        except ImportError as e:
            raise UserError(f"Environment '{env_name}' needs MuJoCo, which is not installed ({e}). "
                            f"Install it with: {_MUJOCO_HINT}") from None
    elif entry.startswith("ale_py"):
        _import_ale(env_name, required=True)
