"""An action as a feature vector, for models that take it as input (ICM's forward
model, a latent dynamics model): one-hot for a discrete action, the flattened
vector for a continuous one."""
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from alf.errors import ConfigError
from alf.tensor_specs import BoundedTensorSpec


class ActionFeatures:
    """``action [N, ...] -> [N, size]`` float features for ``action_spec``.

    Args:
        action_spec: one discrete bounded scalar, or one continuous tensor.
        owner: who asks (named in the error for any other action).

    Attributes:
        discrete: whether the action is discrete (then ``size`` is the number of
            actions and :meth:`index` gives the class of each action).
        size: feature width ``A``.
    """

    def __init__(self, action_spec: Any, owner: str):
        dtype = getattr(action_spec, "dtype", None)
        if dtype is None:
            raise ConfigError(f"{owner}: the action must be one tensor, got {action_spec!r}")
        self.discrete = not dtype.is_floating_point
        if self.discrete:
            if not isinstance(action_spec, BoundedTensorSpec) or action_spec.shape != ():
                raise ConfigError(f"{owner}: a discrete action must be one bounded scalar, "
                                  f"got {action_spec!r}")
            self._low = int(np.asarray(action_spec.minimum).item())
            self.size = int(np.asarray(action_spec.maximum).item()) - self._low + 1
        else:
            self._low = 0
            self.size = int(np.prod(action_spec.shape)) if action_spec.shape else 1

    def index(self, action: torch.Tensor) -> torch.Tensor:
        """``[N]`` long: the class of each discrete action (0-based)."""
        return action.long().reshape(-1) - self._low

    def __call__(self, action: torch.Tensor) -> torch.Tensor:
        """``[N, size]``: one-hot for a discrete action, the flattened vector otherwise."""
        if self.discrete:
            return F.one_hot(self.index(action), self.size).float()
        return action.reshape(action.shape[0], -1).float()
