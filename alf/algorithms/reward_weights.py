"""An :class:`~alf.algorithms.agent.Agent`'s reward weights across a resume
(docs/design/config_on_resume.md).

The rule for a resumed run is that its config (the saved ``config.gin`` with the
resume's ``--conf_param`` changes) is the configuration and the checkpoint is the state.
``Agent.reward_weights`` is configuration: the checkpoint's copy of the current weights
(``_reward_weights``) is a cache of the configured schedules at the run's progress, and
the config's values replace it on every restore. One case is state: weights fixed from
code by :meth:`Agent.set_reward_weights` (a callback, a script). They persist across a
resume whose ``Agent.reward_weights`` is what it was when they were fixed; a resume that
changes ``Agent.reward_weights`` replaces them (the config's change is the newer
decision), with one line saying so.

To tell the two resumes apart, the checkpoint records the configured weights (each
schedule's value at 11 points of progress, in the Agent's extra state; no tensor, so
checkpoints written before it still load).
"""
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch

#: the Agent's extra-state key of the configured weights
CONFIG_KEY = "reward_weights_config"
_PROGRESS = [i / 10 for i in range(11)]


def configured_values(schedules: Sequence[Callable[[float], float]]) -> List[List[float]]:
    """``[k][11]``: each column's configured weight at progress 0, 0.1, ..., 1 (what a
    checkpoint records of ``Agent.reward_weights``)."""
    return [[float(s(p)) for p in _PROGRESS] for s in schedules]


def restore(state_dict: Dict[str, Any], prefix: str,
            schedules: Sequence[Callable[[float], float]],
            configured_weights: torch.Tensor) -> Optional[str]:
    """Make the checkpoint's entries in ``state_dict`` (under ``prefix``) follow the rule
    above before the Agent loads them; returns a one-line note when weights fixed by
    ``set_reward_weights`` were replaced by a changed config, else None.

    Args:
        configured_weights: ``[k]`` the config's weights at the start of training (the
            Agent's as built): what replaces a stale copy (scheduled columns are set
            again from their schedule for the next trained batch).
    """
    key_weights, key_fixed = prefix + "_reward_weights", prefix + "_reward_weights_fixed"
    # checkpoints written before reward-weight schedules have no "_reward_weights_fixed":
    # their weights were never fixed by the API
    fixed = bool(state_dict.setdefault(key_fixed, torch.tensor(False)))
    extra = state_dict.get(prefix + "_extra_state")
    saved = extra.get(CONFIG_KEY) if isinstance(extra, dict) else None
    config = configured_values(schedules)
    if fixed and (saved is None or saved == config):
        return None  # fixed from code, config unchanged (or unknown: an older checkpoint)
    old = state_dict.get(key_weights)
    state_dict[key_weights] = configured_weights.detach().clone()
    state_dict[key_fixed] = torch.tensor(False)
    if not fixed or old is None:
        return None
    new = [round(float(s(0.0)), 6) for s in schedules] if all(
        len(set(row)) == 1 for row in config) else "schedules"
    return (f"[alf] Agent.reward_weights changed in the config: its {new} replace the "
            f"weights {[round(float(w), 6) for w in old.tolist()]} that "
            "set_reward_weights had fixed")
