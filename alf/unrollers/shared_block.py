"""Many tensors carved out of one (shared-memory) block.

Each shared tensor costs the process a file descriptor (torch's ``file_descriptor``
sharing strategy keeps one open per shared storage): trajectory slots with a dozen
Experience leaves per env group, times groups and workers, plus a weight channel with
every parameter twice, could reach the ``ulimit -n`` of 1,024 with many workers. One
byte block per slot set (or weight buffer), with every tensor a view into it, costs one.
"""
import math
from typing import List, Sequence, Tuple

import torch

ALIGN = 64  # bytes: every view starts on a cache line (and on its dtype's alignment)


def carve(layout: Sequence[Tuple[Sequence[int], torch.dtype]], shared: bool) -> List[torch.Tensor]:
    """Zero tensors of the given ``(shape, dtype)`` s, all views of one byte block.

    Args:
        layout: the tensors to make, in order.
        shared: put the block in shared memory (``share_memory_``).
    Returns:
        one contiguous tensor per entry of ``layout``.
    """
    sizes, offsets, total = [], [], 0
    for shape, dtype in layout:
        nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
        offsets.append(total)
        sizes.append(nbytes)
        total += -(-max(nbytes, 1) // ALIGN) * ALIGN
    block = torch.zeros(max(total, ALIGN), dtype=torch.uint8)
    if shared:
        block.share_memory_()
    return [block[off:off + n].view(dtype).view(tuple(shape))
            for (shape, dtype), off, n in zip(layout, offsets, sizes)]
