"""Weight initialisers shared by the networks.

The defaults follow Stable-Baselines3 / CleanRL, which make PPO/A2C results
reproducible across libraries: orthogonal weights with gain ``sqrt(2)`` for
hidden layers, ``0.01`` for the policy head (near-uniform initial policy),
``1.0`` for the value head, and zero biases.
"""
import math

from torch import nn

HIDDEN_GAIN = math.sqrt(2.0)
POLICY_GAIN = 0.01
VALUE_GAIN = 1.0


def orthogonal_init_(module: nn.Module, gain: float = HIDDEN_GAIN, bias: float = 0.0) -> nn.Module:
    """Orthogonal ``weight`` scaled by ``gain`` and constant ``bias``, in place.

    Works for ``nn.Linear``, ``nn.Conv2d`` (the kernel is viewed as
    ``[out, in * kh * kw]``) and ``nn.LSTMCell`` (each of ``weight_ih`` /
    ``weight_hh`` as a whole). Returns ``module`` for chaining.
    """
    for name, param in module.named_parameters(recurse=False):
        if name.startswith("weight"):
            nn.init.orthogonal_(param, gain=gain)
        elif name.startswith("bias"):
            nn.init.constant_(param, bias)
    return module
