"""What a constructor accepts, read from its signature: one place for the checks that
decide which optional arguments a builder passes.

An algorithm written before the Learner existed takes ``config``; a bundled RL algorithm
takes ``is_eval`` (an evaluation-only build, docs/design/eval_builds.md) and a user's own
may not. ``alf.experiment.build_algorithm`` and ``alf.algorithms.agent.Agent`` (building
its RL algorithm) pass such an argument only to a constructor that declares it, so one
without it still builds (in full).
"""
import inspect
from typing import Any, Dict


def takes_argument(ctor: Any, name: str) -> bool:
    """Whether ``ctor`` (a class or function) has a parameter ``name``; False when its
    signature cannot be read (a builtin, a C extension)."""
    try:
        return name in inspect.signature(ctor).parameters
    except (TypeError, ValueError):
        return False


def eval_kwargs(ctor: Any, is_eval: bool) -> Dict[str, bool]:
    """``{"is_eval": True}`` for an evaluation-only build of a ``ctor`` that declares
    ``is_eval`` (every bundled RL algorithm), else ``{}`` (a full build, or one of the
    user's own constructors without it, which is then built in full)."""
    return {"is_eval": True} if is_eval and takes_argument(ctor, "is_eval") else {}
