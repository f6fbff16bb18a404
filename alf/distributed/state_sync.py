"""Keeping every rank's copy of the model identical: one flattened gradient
all-reduce per update, rank 0's state broadcast at the start, and a periodic
bit-level drift check.

Why not ``DistributedDataParallel``: alf's training hooks (``train_step``,
``calc_loss``) are not a module's ``forward``, so DDP's autograd hooks would
not see them; and one algorithm update may backprop through several modules
(actor, critics, alpha) in one ``backward()``. Reducing between ``backward()``
and gradient clipping, in :meth:`Algorithm.update_with_gradient`, covers every
algorithm at once: ranks clip and step the same averaged gradients, so their
parameters stay bit-identical (gloo and NCCL hand every rank the same reduced
bits).
"""
from collections import OrderedDict
from typing import Dict, List, Sequence, Tuple

import torch

from alf.distributed.rank_group import RankGroup


def _groups(tensors: Sequence[torch.Tensor]) -> Dict[Tuple[torch.device, torch.dtype], List[int]]:
    """Indices of ``tensors`` grouped by (device, dtype): one flat buffer per group."""
    groups: Dict[Tuple[torch.device, torch.dtype], List[int]] = OrderedDict()
    for i, t in enumerate(tensors):
        groups.setdefault((t.device, t.dtype), []).append(i)
    return groups


def average_gradients(group: RankGroup, params: Sequence[torch.Tensor]) -> None:
    """Replace every ``p.grad`` by its mean over ranks, with one all-reduce per
    (device, dtype) (normally exactly one).

    A parameter without a gradient on some rank counts as a zero gradient there; one
    without a gradient on every rank keeps ``grad = None`` (its optimizer skips it, as
    it would in a single process). The has-gradient flags travel in the same buffer.

    Args:
        group: the ranks.
        params: the parameters one optimizer step updates, in the same order on every rank.
    """
    if not params:
        return
    inv = 1.0 / group.world_size
    groups = _groups(params)
    for n, ((device, dtype), index) in enumerate(groups.items()):
        chunks = []
        for i in index:
            p = params[i]
            g = p.grad
            chunks.append(g.reshape(-1) if g is not None else p.new_zeros(p.numel()))
        # has-gradient flags, reduced with the values (a count of ranks, exact in float)
        chunks.append(torch.tensor([p.grad is not None for p in (params[i] for i in index)],
                                   dtype=dtype, device=device))
        flat = torch.cat(chunks)
        group.all_reduce_(flat, "the gradient all-reduce")
        flags = flat[-len(index):].tolist()  # one device sync, not one per parameter
        offset = 0
        for k, i in enumerate(index):
            p = params[i]
            size = p.numel()
            if flags[k] > 0:
                p.grad = flat[offset:offset + size].view_as(p).mul_(inv)
            offset += size


def state_tensors(module: torch.nn.Module) -> "OrderedDict[str, torch.Tensor]":
    """Parameters and persistent buffers of ``module`` (``state_dict`` keys, live tensors),
    excluding non-tensor extra state."""
    return OrderedDict((k, v) for k, v in module.state_dict(keep_vars=True).items()
                       if isinstance(v, torch.Tensor))


@torch.no_grad()
def broadcast_state(group: RankGroup, module: torch.nn.Module) -> None:
    """Make ``module``'s parameters and buffers rank 0's, in place (one broadcast per
    (device, dtype)). Run once after building, so that ranks start identical even if
    a constructor drew from an RNG that differs between ranks."""
    tensors = list(state_tensors(module).values())
    for (device, dtype), index in _groups(tensors).items():
        flat = torch.cat([tensors[i].detach().reshape(-1) for i in index])
        group.broadcast_(flat, "the initial parameter broadcast")
        offset = 0
        for i in index:
            t = tensors[i]
            t.data.copy_(flat[offset:offset + t.numel()].view_as(t))
            offset += t.numel()


@torch.no_grad()
def tensor_checksum(t: torch.Tensor) -> int:
    """A 63-bit fingerprint of ``t``'s bits: any change of one element changes it (the
    bytes are summed with position-dependent odd weights, modulo 2^63)."""
    raw = t.detach().contiguous().reshape(-1).view(torch.uint8).to(torch.int64)
    weights = torch.arange(raw.numel(), dtype=torch.int64, device=raw.device) % 65_521 * 2 + 1
    return int((raw * weights).sum()) & ((1 << 63) - 1)


def find_drift(group: RankGroup, module: torch.nn.Module) -> List[Tuple[str, List[int]]]:
    """``[(state_dict key, ranks whose bits differ from rank 0's)]``, empty when every rank
    holds the same parameters and buffers (all ranks get the same answer)."""
    tensors = state_tensors(module)
    names = list(tensors.keys())
    sums = torch.tensor([tensor_checksum(t) for t in tensors.values()], dtype=torch.int64)
    every = group.all_gather_object(sums, "the parameter drift check")
    drift = []
    for k, name in enumerate(names):
        ranks = [r for r in range(1, group.world_size) if int(every[r][k]) != int(every[0][k])]
        if ranks:
            drift.append((name, ranks))
    return drift
