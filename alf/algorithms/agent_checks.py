"""What an :class:`~alf.algorithms.agent.Agent` refuses before it builds anything, and the
mini-batch check of its parts (docs/design/agent.md, "What it is").

Each check is one :class:`~alf.errors.ConfigError` naming the gin binding and the line
that fixes it, raised while the algorithm is built (before the run directory is
written) or in ``check_training_config`` (also before it): a wrong value here would
otherwise surface as a Python error deep inside the build (``'ABCMeta' has no len()``,
a RecursionError of 2,830 lines) or after the first iteration.
"""
import inspect
from typing import Any, Callable, List, Optional, Sequence

import torch

from alf.algorithms.rl_algorithm import RLAlgorithm
from alf.errors import ConfigError
# the Agent builds its RL algorithm with eval_kwargs, as alf.experiment builds the
# algorithm: one helper for both (alf/utils/signatures.py)
from alf.utils.signatures import eval_kwargs  # noqa: F401 - used as agent_checks.eval_kwargs


def _name(obj: Any) -> str:
    return getattr(obj, "__name__", None) or type(obj).__name__


def check_agent_args(agent_cls: type, rl_algorithm_cls: Any, reward_modules: Any,
                     reward_weights: Any, representation_learner_cls: Any) -> List[Callable]:
    """The checks of :class:`~alf.algorithms.agent.Agent`'s constructor arguments that run
    before anything is built; returns ``reward_modules`` as a list."""
    check_rl_algorithm_cls(rl_algorithm_cls, agent_cls)
    modules = check_part_ctors("Agent.reward_modules", reward_modules, "@RNDRewardModule")
    check_optional_ctor("Agent.representation_learner_cls", representation_learner_cls,
                        "@LatentDynamicsLearner")
    check_weight_values(reward_weights)
    return modules


def check_weight_values(reward_weights: Any) -> None:
    """Each of ``Agent.reward_weights`` is a number or a built schedule: a schedule's
    class (``@LinearSchedule`` without ``()``) would be called with the run's progress
    and make a schedule, not a weight."""
    if not isinstance(reward_weights, (list, tuple)):
        return  # None (all 1), or refused by its type annotation when gin binds it
    for w in reward_weights:
        if inspect.isclass(w):
            raise ConfigError(f"Agent.reward_weights: @{w.__name__} is a class; a schedule "
                              f"is built with its settings: write @{w.__name__}() (and bind "
                              f"its parameters, e.g. {w.__name__}.start)")


def check_rl_algorithm_cls(rl_algorithm_cls: Any, agent_cls: type) -> None:
    """``Agent.rl_algorithm_cls`` must build a plain RL algorithm: not an Agent (an Agent's
    parts go into one Agent) and not one that brings its own Learner (that Learner drives
    the algorithm itself, e.g. DynaDqnAlgorithm's model and imagined updates, which
    would bypass the Agent's parts and read attributes an Agent does not have)."""
    if not callable(rl_algorithm_cls):
        raise ConfigError(f"Agent.rl_algorithm_cls = {rl_algorithm_cls!r} is not an RL "
                          "algorithm's constructor: write e.g. "
                          "`Agent.rl_algorithm_cls = @PPOAlgorithm`")
    if inspect.isclass(rl_algorithm_cls) and not issubclass(rl_algorithm_cls, RLAlgorithm):
        raise ConfigError(f"Agent.rl_algorithm_cls = @{_name(rl_algorithm_cls)} is not an RL "
                          "algorithm (alf.algorithms.rl_algorithm.RLAlgorithm): write e.g. "
                          "`Agent.rl_algorithm_cls = @PPOAlgorithm`")
    if inspect.isclass(rl_algorithm_cls) and issubclass(rl_algorithm_cls, agent_cls):
        raise ConfigError(
            f"Agent.rl_algorithm_cls = @{_name(rl_algorithm_cls)}: an Agent cannot hold an "
            "Agent; put every reward module and the representation learner in one Agent "
            "and name the RL algorithm, e.g. `Agent.rl_algorithm_cls = @PPOAlgorithm`")
    learner = getattr(rl_algorithm_cls, "learner_class", None)
    if learner is not None:
        name = _name(rl_algorithm_cls)
        raise ConfigError(
            f"Agent.rl_algorithm_cls = @{name}: {name} trains with its own learner "
            f"({_name(learner)}), which drives {name} itself and not an Agent's parts, so "
            f"it cannot be composed in an Agent; train it alone "
            f"(`TrainerConfig.algorithm_ctor = @{name}`)")


def check_part_ctors(binding: str, ctors: Any, example: str) -> List[Callable]:
    """``ctors`` (the value of ``binding``, e.g. ``Agent.reward_modules``) as a list of
    constructors; a single constructor, a built object (``@Name()`` in gin) or anything
    not callable is one error naming the line to write (``example``)."""
    if not isinstance(ctors, (list, tuple)):
        got = f"@{_name(ctors)}" if callable(ctors) else repr(ctors)
        raise ConfigError(f"{binding} = {got} must be a list of constructors, e.g. "
                          f"`{binding} = [{example}]` (square brackets, even for one)")
    for c in ctors:
        _check_ctor(binding, c, example)
    return list(ctors)


def check_optional_ctor(binding: str, ctor: Any, example: str) -> None:
    """A single constructor (or None) in ``binding``, e.g.
    ``Agent.representation_learner_cls``."""
    if ctor is not None:
        _check_ctor(binding, ctor, example)


def _check_ctor(binding: str, ctor: Any, example: str) -> None:
    if isinstance(ctor, torch.nn.Module):
        name = type(ctor).__name__
        raise ConfigError(f"{binding}: @{name}() is already built; the Agent builds it with "
                          f"the env's specs: write @{name} without ()")
    if not callable(ctor):
        raise ConfigError(f"{binding}: {ctor!r} is not a constructor; write e.g. "
                          f"`{binding} = {example}`")


def check_single_step_parts(parts: Sequence[Any], length: Optional[int]) -> None:
    """Refuse mini-batches of single steps (``length`` < 2) when a part learns from
    transitions (``uses_previous_step``): before anything is written, not after the first
    iteration. ``parts``: the Agent's reward modules and representation learner."""
    if length is None or length >= 2:
        return
    for part in parts:
        if part is not None and part.uses_previous_step:
            raise ConfigError(
                f"{part.name} learns from transitions (previous observation and action) "
                "and the mini-batches hold single steps: set "
                "TrainerConfig.mini_batch_length to 2 or more")
