"""What one acting forward of the Nature CNN costs per sample, in the ways torch offers on
a CPU: is the async engine's non-env CPU (mostly this forward) plumbing, or FLOPs?

    python bench/acting_forward_variants.py                 # ~45 s, 1 thread
    python bench/acting_forward_variants.py --batches 4 8 16 32 --calls 2000

The network is the Nature CNN (Mnih et al. 2015: conv 32 8x8/4, conv 64 4x4/2, conv 64
3x3/1, fc 512) with a 4-action linear head, ~9.4 MFLOP multiply-adds per sample; its
input a ``uint8 [B, 4, 84, 84]`` batch scaled by 1/255, as an env worker acts on it. One
torch thread; thread CPU time (``time.thread_time``) per sample, after 20 warm-up calls.

Variants (same weights; all under ``torch.no_grad``):

- ``eager``: plain fp32 ``nn.Sequential`` (what alf's networks run);
- ``channels_last``: NHWC input and weights;
- ``mkldnn_convs``: the conv stack converted by ``torch.utils.mkldnn.to_mkldnn`` (weights
  reordered once into oneDNN's blocked layout), fc on dense tensors;
- ``jit_freeze``: ``torch.jit.optimize_for_inference(torch.jit.freeze(trace))``;
- ``bf16_weights``: the weights held in bf16 and the input cast to bf16 (what acting
  under ``TrainerConfig.act_precision="bf16"`` with kept weight casts computes).

Writes ``bench/results/acting_forward_variants.json``.
"""
import argparse
import copy
import json
import os
import time
from typing import Callable, Dict

import torch
import torch.utils.mkldnn  # noqa: F401 - torch.utils.mkldnn.to_mkldnn
from torch import nn

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def nature_cnn(actions: int = 4) -> nn.Sequential:
    """The Nature CNN with a linear head: ``[B, 4, 84, 84]`` float -> ``[B, actions]``."""
    return nn.Sequential(nn.Conv2d(4, 32, 8, 4), nn.ReLU(), nn.Conv2d(32, 64, 4, 2), nn.ReLU(),
                         nn.Conv2d(64, 64, 3, 1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(3136, 512), nn.ReLU(), nn.Linear(512, actions))


def cpu_ms_per_sample(forward: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor,
                      calls: int) -> float:
    """Thread CPU milliseconds per sample of ``forward(x)`` (``x``: ``uint8 [B, 4, 84, 84]``)."""
    for _ in range(20):
        forward(x)
    start = time.thread_time()
    for _ in range(calls):
        forward(x)
    return (time.thread_time() - start) / calls / x.shape[0] * 1e3


def variants(net: nn.Sequential, example: torch.Tensor) -> Dict[str, Callable]:
    """The forward variants of the module docstring, sharing ``net``'s weights."""
    scaled = lambda x: x.float() / 255  # noqa: E731
    convs = torch.utils.mkldnn.to_mkldnn(copy.deepcopy(net)[:6])
    head = net[6:]
    nhwc = copy.deepcopy(net).to(memory_format=torch.channels_last)
    frozen = torch.jit.optimize_for_inference(torch.jit.freeze(
        torch.jit.trace(copy.deepcopy(net), scaled(example))))
    bf16 = copy.deepcopy(net).to(torch.bfloat16)
    return {
        "eager": lambda x: net(scaled(x)),
        "channels_last": lambda x: nhwc(scaled(x).contiguous(memory_format=torch.channels_last)),
        "mkldnn_convs": lambda x: head(convs(scaled(x).to_mkldnn()).to_dense()),
        "jit_freeze": lambda x: frozen(scaled(x)),
        "bf16_weights": lambda x: bf16(x.to(torch.bfloat16) / 255).float(),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batches", type=int, nargs="+", default=[4, 8, 16])
    p.add_argument("--calls", type=int, default=1000)
    p.add_argument("--out", default=os.path.join(RESULTS, "acting_forward_variants.json"))
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    net = nature_cnn().eval()
    table: Dict[str, Dict[int, float]] = {}
    with torch.no_grad():
        for batch in args.batches:
            x = torch.randint(0, 256, (batch, 4, 84, 84), dtype=torch.uint8)
            for name, forward in variants(net, x).items():
                table.setdefault(name, {})[batch] = cpu_ms_per_sample(forward, x, args.calls)
    print("| variant | " + " | ".join(f"batch {b}" for b in args.batches) + " |")
    print("|---|" + "---:|" * len(args.batches))
    for name, row in table.items():
        print(f"| {name} | " + " | ".join(f"{row[b]:.3f}" for b in args.batches) + " |")
    print("(thread CPU ms per sample, 1 torch thread)")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"cpu_ms_per_sample": table, "calls": args.calls}, f, indent=1)


if __name__ == "__main__":
    main()
