"""What a checkpoint was trained on, so resuming with another env fails with one clear line.

A run dir resumed with an override that changes the env (``create_environment.env_name``)
or the network shapes used to die deep in ``load_state_dict`` with a 30-line torch
``size mismatch`` traceback. Each checkpoint records the env id, its observation and
action specs and the algorithm class; on resume they are compared with what the
current config builds before any state is loaded or anything written, and a
mismatch raises :class:`~alf.errors.IncompatibleSpecError` naming both.
"""
from typing import Any, Dict, Optional

import torch

from alf import nest as alf_nest
from alf.errors import IncompatibleSpecError


def experiment_signature(env: Any, algorithm: torch.nn.Module) -> Dict[str, str]:
    """Plain strings (checkpoint-safe) describing the env specs and the algorithm class."""
    return {"env_name": str(getattr(env, "env_name", "?")),
            "observation_spec": describe_spec(env.observation_spec()),
            "action_spec": describe_spec(env.action_spec()),
            "algorithm": type(algorithm).__name__}


def describe_spec(spec: Any) -> str:
    """Compact text of a spec nest: ``float32[4]``, ``int64[] in [0, 1]`` (discrete
    bounds are part of the identity: 2 vs 3 actions), dict/tuple nests keep their keys."""
    def one(s) -> str:
        text = f"{str(s.dtype).replace('torch.', '')}{list(s.shape)}"
        low, high = getattr(s, "minimum", None), getattr(s, "maximum", None)
        if low is not None and not s.dtype.is_floating_point and getattr(low, "size", 1) == 1:
            text += f" in [{int(low)}, {int(high)}]"
        return text

    described = alf_nest.map_structure(one, spec)
    return described if isinstance(described, str) else str(described)


def check_compatible(saved: Optional[Dict[str, str]], current: Dict[str, str],
                     run_dir: str) -> None:
    """Raise :class:`IncompatibleSpecError` if the checkpoint's env specs or algorithm
    differ from the current experiment's. ``saved`` None (older checkpoints): no check
    here; :func:`load_algorithm_state` still turns shape mismatches into one line."""
    if not saved:
        return
    fields = ("observation_spec", "action_spec")
    if any(saved.get(k) != current.get(k) for k in fields):
        def show(sig: Dict[str, str]) -> str:
            return (f"{sig.get('env_name', '?')} (observation {sig.get('observation_spec')}, "
                    f"action {sig.get('action_spec')})")
        raise IncompatibleSpecError(
            f"{run_dir} holds a run of {show(saved)}, but this config builds {show(current)}. "
            "Use a new --root_dir for another env, or resume without the override that "
            "changed it.")
    if saved.get("algorithm") and saved["algorithm"] != current["algorithm"]:
        raise IncompatibleSpecError(
            f"{run_dir} holds a run of {saved['algorithm']}, but this config builds "
            f"{current['algorithm']}. Use a new --root_dir for another algorithm.")


def load_algorithm_state(algorithm: torch.nn.Module, state: Dict[str, Any], run_dir: str) -> None:
    """``algorithm.load_state_dict(state)``, with a parameter-shape mismatch (another
    network size, an override of the env in an old checkpoint) as one clear line.

    Shapes are compared before anything is loaded: the optimizer state (in the
    modules' extra state) would otherwise be loaded first and fail with its own
    "parameter group doesn't match" error."""
    detail = _first_mismatch(state, algorithm.state_dict())
    if detail is None:
        try:
            algorithm.load_state_dict(state)
            return
        except (RuntimeError, KeyError, ValueError) as e:
            lines = [l.strip() for l in str(e).splitlines() if l.strip()]
            detail = next((l for l in lines if l.startswith(("size mismatch", "Missing key",
                                                              "Unexpected key"))),
                          lines[0] if lines else type(e).__name__)
    raise IncompatibleSpecError(
        f"{run_dir} holds a checkpoint that does not fit the network this config builds "
        f"({detail.rstrip('.')}). Use a new --root_dir, or resume without the override "
        "that changed the env or network.") from None


def _first_mismatch(saved: Dict[str, Any], current: Dict[str, Any]) -> Optional[str]:
    """The first tensor whose shape differs, or a parameter only one side has; None if
    the two state dicts have the same tensor keys and shapes."""
    def tensors(d: Dict[str, Any]) -> Dict[str, tuple]:
        return {k: tuple(v.shape) for k, v in d.items() if isinstance(v, torch.Tensor)}

    mine, theirs = tensors(current), tensors(saved)
    for key, shape in mine.items():
        if key in theirs and theirs[key] != shape:
            return (f"size mismatch for {key}: {list(theirs[key])} in the checkpoint, "
                    f"{list(shape)} here")
    missing = [k for k in mine if k not in theirs]
    if missing:
        return f"Missing key(s) in the checkpoint: {', '.join(missing[:3])}"
    extra = [k for k in theirs if k not in mine]
    if extra:
        return f"Unexpected key(s) in the checkpoint: {', '.join(extra[:3])}"
    return None
