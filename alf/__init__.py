"""alf: a configurable reinforcement-learning research toolkit.

``import alf`` registers every configurable (algorithms, networks,
environments, trainer) so gin files can name them.
"""
# Before torch (and its OpenMP runtime) loads: idle OpenMP threads spin only briefly,
# then sleep, instead of spinning on a core another process needs (alf.utils.cpu_budget).
from alf.utils.cpu_budget import prefer_yielding_thread_pools as _prefer_yielding

_prefer_yielding()

import torch.distributions as _td  # noqa: E402

from alf.config import configurable  # noqa: F401
from alf import nest  # noqa: F401
from alf.errors import UserError, ConfigError  # noqa: F401

# Distribution argument validation costs ~30% of a small policy's step time.
_td.Distribution.set_default_validate_args(False)

from alf import _registry  # noqa: E402,F401  (imports every configurable module)
