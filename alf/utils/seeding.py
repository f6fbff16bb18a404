"""Seeding and RNG-state capture for reproducible runs and exact resume."""
import random
from typing import Any, Dict

import numpy as np
import torch


def set_random_seed(seed: int) -> None:
    """Seed python, numpy and torch (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed % (2 ** 32))
    torch.manual_seed(seed)


def get_rng_state() -> Dict[str, Any]:
    """RNG states as tensors / plain lists (loadable with ``weights_only=True``)."""
    np_state = np.random.get_state()
    state = {
        "torch": torch.get_rng_state(),
        "numpy": [np_state[0], torch.from_numpy(np_state[1].astype(np.int64)), int(np_state[2]),
                  int(np_state[3]), float(np_state[4])],
        "python": [list(x) if isinstance(x, tuple) else x for x in random.getstate()],
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    n = state["numpy"]
    np.random.set_state((n[0], n[1].numpy().astype(np.uint32), n[2], n[3], n[4]))
    p = state["python"]
    random.setstate((p[0], tuple(p[1]), p[2]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
