"""Root noise drawn from a caller's ``torch.Generator`` (so one seed fixes a search).

``torch.distributions.Dirichlet`` has no ``generator`` argument, so the Dirichlet is
built from Gamma draws made of normal and uniform draws, which do take one:
Marsaglia & Tsang (2000) for ``Gamma(alpha + 1)`` and the boost
``Gamma(alpha) = Gamma(alpha + 1) * U^(1 / alpha)`` (alpha < 1 is the usual case:
AlphaZero's 0.3 for chess, 0.03 for Go).
"""
from typing import Optional

import torch


def sample_gamma(alpha: float, shape: torch.Size, dtype: torch.dtype, device: torch.device,
                 generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """``Gamma(alpha, 1)`` draws of ``shape`` (rejection rounds until all are accepted;
    each round accepts about 95% of the rest)."""
    d = alpha + 1.0 - 1.0 / 3.0
    c = 1.0 / (9.0 * d) ** 0.5
    out = torch.zeros(shape, dtype=dtype, device=device)
    todo = torch.ones(shape, dtype=torch.bool, device=device)
    while bool(todo.any()):
        x = torch.randn(shape, dtype=dtype, device=device, generator=generator)
        u = torch.rand(shape, dtype=dtype, device=device, generator=generator)
        v = (1 + c * x) ** 3
        ok = (v > 0) & (torch.log(u) < 0.5 * x * x + d - d * v + d * torch.log(v.clamp(min=1e-30)))
        accept = todo & ok
        out = torch.where(accept, d * v, out)
        todo = todo & ~ok
    boost = torch.rand(shape, dtype=dtype, device=device, generator=generator)
    return out * boost.clamp(min=1e-30) ** (1.0 / alpha)


def sample_dirichlet(alpha: float, legal: torch.Tensor, dtype: torch.dtype,
                     generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """``Dir(alpha)`` over each row's legal actions ``legal [B, A]`` -> ``[B, A]``
    (0 on illegal actions, each row sums to 1)."""
    g = sample_gamma(alpha, legal.shape, dtype, legal.device, generator)
    g = torch.where(legal, g.clamp(min=1e-30), 0)
    return g / g.sum(-1, keepdim=True)


def sample_gumbel(shape: torch.Size, dtype: torch.dtype, device: torch.device,
                  generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """Standard Gumbel draws ``-log(-log U)`` of ``shape``."""
    u = torch.rand(shape, dtype=dtype, device=device, generator=generator)
    tiny = torch.finfo(dtype).tiny
    return -torch.log(-torch.log(u.clamp(min=tiny, max=1 - torch.finfo(dtype).eps)))
