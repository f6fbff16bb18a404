"""Twin-critic cost: alf's ensemble ``CriticNetwork`` vs two separate ``nn.Sequential`` critics.

    python bench/critic_ensemble_bench.py [--batch 256] [--obs 17] [--act 6] [--hidden 256 256]

HalfCheetah-sized SAC/TD3 critics (obs 17, action 6, 256x256, batch 256), CPU.
For ``torch.set_num_threads`` 2 and 1 it times, per call, the best of
interleaved rounds (``timeit``'s advice: the minimum is the least disturbed by
other load on a shared machine; rounds interleave the lines so load hits all alike):

* ``train``: critic loss forward + backward into the critic parameters
  (``0.5 * sum_k mse(q_k, target)``, SB3's critic loss), grads reset to None;
* ``target``: forward under ``no_grad`` (target critic);
* ``actor_sac``: forward + backward of ``-min_k q_k`` into the action only
  (critic frozen): SAC's actor loss through the critics;
* ``actor_td3``: the same through critic 0 only (TD3/DDPG; SB3's
  ``q1_forward``, alf's ``CriticNetwork.forward_critic(inputs, 0)``).

Lines:

* ``sb3_sequentials``: the peer, SB3's ``ContinuousCritic`` layout: ``cat(obs,
  act)`` then two ``nn.Sequential(Linear, ReLU, Linear, ReLU, Linear)``;
* ``alf_ensemble``: :class:`alf.networks.CriticNetwork` (what alf uses: one
  stride-0 ``baddbmm`` for the shared first layer, ``baddbmm`` per layer after);
* ``alt_concat_first``: alternative layout, first layer as one ``[B, in] x
  [in, K*out]`` matmul against the concatenated weights, then transpose to
  ``[K, B, out]`` and ``baddbmm`` (what was tried before settling);
* ``alt_member_loop``: the ensemble's parameters used member by member with
  ``addmm`` (no batched gemm).

``ratio`` = sb3 time / line time (> 1: faster than the peer).
"""
import argparse
import os
import sys
import time
from typing import Callable, Dict, List

import torch
from torch import nn


_CLOCK = time.perf_counter


def _time_ms(fn: Callable[[], None], n: int) -> float:
    t0 = _CLOCK()
    for _ in range(n):
        fn()
    return (_CLOCK() - t0) / n * 1e3


def _sb3_critics(d_in: int, hidden: List[int], k: int) -> nn.ModuleList:
    def mlp():
        layers, size = [], d_in
        for h in hidden:
            layers += [nn.Linear(size, h), nn.ReLU()]
            size = h
        return nn.Sequential(*layers, nn.Linear(size, 1))
    return nn.ModuleList(mlp() for _ in range(k))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--obs", type=int, default=17)
    p.add_argument("--act", type=int, default=6)
    p.add_argument("--hidden", type=int, nargs="+", default=[256, 256])
    p.add_argument("--num_critics", type=int, default=2)
    p.add_argument("--calls", type=int, default=30, help="calls per timed round")
    p.add_argument("--rounds", type=int, default=10, help="interleaved rounds (best reported)")
    p.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    p.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                   help="wall: perf_counter; cpu: process CPU time (steadier on a busy shared "
                        "machine, meaningful with --threads 1 only)")
    args = p.parse_args()
    global _CLOCK
    _CLOCK = time.perf_counter if args.clock == "wall" else time.process_time

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from alf.networks import CriticNetwork
    from alf.networks.ensemble_layers import ensemble_linear
    from alf.tensor_specs import BoundedTensorSpec, TensorSpec

    torch.manual_seed(0)
    b, k, hidden = args.batch, args.num_critics, list(args.hidden)
    d_in = args.obs + args.act
    obs, act = torch.randn(b, args.obs), torch.randn(b, args.act).clamp(-1, 1)
    target = torch.randn(b, 1)
    seqs = _sb3_critics(d_in, hidden, k)
    alf_net = CriticNetwork((TensorSpec((args.obs,)), BoundedTensorSpec((args.act,), torch.float32, -1, 1)),
                            fc_layer_params=hidden, num_critics=k)
    layers = list(alf_net._joint_mlp.layers)  # the ensemble's [K, in, out] weights, shared by the alt lines
    n_layers = len(layers)

    # Same numbers in every line: copy the ensemble's weights into the sequentials.
    with torch.no_grad():
        for i, s in enumerate(seqs):
            for lin, layer in zip([m for m in s if isinstance(m, nn.Linear)], layers):
                lin.weight.copy_(layer.weight[i].t())
                lin.bias.copy_(layer.bias[i, 0])

    def q_sb3(o, a):  # SB3 ContinuousCritic.forward: a tuple of [B, 1]
        x = torch.cat([o, a], dim=1)
        return tuple(s(x) for s in seqs)

    def q_alf(o, a):
        return alf_net((o, a))[0]  # [B, K]

    def q_concat_first(o, a):
        x = torch.cat([o, a], dim=1)
        w0, b0 = layers[0].weight, layers[0].bias
        y = torch.addmm(b0.transpose(0, 1).reshape(1, -1), x, w0.transpose(0, 1).reshape(d_in, -1))
        h = torch.relu(y.view(b, k, -1).transpose(0, 1))             # [K, B, H] (strided view)
        for i, layer in enumerate(layers[1:], 1):
            h = ensemble_linear(h, layer.weight, layer.bias)
            if i < n_layers - 1:
                h = torch.relu(h)
        return h.squeeze(-1).t()

    def q_member_loop(o, a):
        x = torch.cat([o, a], dim=1)
        outs = []
        for m in range(k):
            h = x
            for i, layer in enumerate(layers):
                h = torch.addmm(layer.bias[m], h, layer.weight[m])
                if i < n_layers - 1:
                    h = torch.relu(h)
            outs.append(h)
        return torch.cat(outs, dim=1)

    # Same values from every layout (also checks the bench itself).
    ref = torch.cat(q_sb3(obs, act), dim=1)
    for fn in (q_alf, q_concat_first, q_member_loop):
        torch.testing.assert_close(fn(obs, act), ref, rtol=1e-5, atol=1e-5)

    def q0_sb3(o, a):  # SB3 ContinuousCritic.q1_forward (TD3 actor loss)
        return seqs[0](torch.cat([o, a], dim=1))[:, 0]

    def q0_alf(o, a):
        return alf_net.forward_critic((o, a), 0)

    torch.testing.assert_close(q0_alf(obs, act), ref[:, 0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(q0_sb3(obs, act), ref[:, 0], rtol=1e-5, atol=1e-5)

    # name -> (all critics [B, K] or tuple of [B, 1], critic 0 only [B] or None, parameters)
    lines = {"sb3_sequentials": (q_sb3, q0_sb3, list(seqs.parameters())),
             "alf_ensemble": (q_alf, q0_alf, list(alf_net.parameters())),
             "alt_concat_first": (q_concat_first, None, list(alf_net.parameters())),
             "alt_member_loop": (q_member_loop, None, list(alf_net.parameters()))}

    def as_bk(q):
        return torch.cat(q, dim=1) if isinstance(q, tuple) else q

    def make_calls(q_fn, q0_fn, params):
        def train():
            q = q_fn(obs, act)
            if isinstance(q, tuple):  # SB3: 0.5 * sum_k mse(q_k, target)
                loss = 0.5 * sum(nn.functional.mse_loss(qk, target) for qk in q)
            else:
                loss = 0.5 * ((q - target) ** 2).mean(0).sum()
            loss.backward()
            for prm in params:
                prm.grad = None

        def target_fwd():
            with torch.no_grad():
                q_fn(obs, act)

        def actor(q_of_action):
            def call():
                for prm in params:
                    prm.requires_grad_(False)
                a = act.clone().requires_grad_(True)
                (-q_of_action(a).mean()).backward()
                for prm in params:
                    prm.requires_grad_(True)
            return call

        calls = {"train": train, "target": target_fwd,
                 "actor_sac": actor(lambda a: as_bk(q_fn(obs, a)).min(dim=1)[0])}
        if q0_fn is not None:
            calls["actor_td3"] = actor(lambda a: q0_fn(obs, a))
        return calls

    calls = {name: make_calls(*v) for name, v in lines.items()}
    modes = ("train", "target", "actor_sac", "actor_td3")
    flops_train = 0
    sizes = [d_in] + hidden + [1]
    for i, (fi, fo) in enumerate(zip(sizes[:-1], sizes[1:])):
        flops_train += 2 * b * fi * fo * (2 if i == 0 else 3)  # fwd + grad weight (+ grad input)
    flops_train *= k

    print(f"twin critic: batch {b}, obs {args.obs}, act {args.act}, hidden {hidden}, "
          f"{k} critics; torch {torch.__version__}")
    for nt in args.threads:
        torch.set_num_threads(nt)
        results: Dict[str, Dict[str, List[float]]] = {
            mode: {name: [] for name in lines if mode in calls[name]} for mode in modes}
        for mode, per_line in results.items():
            for name in per_line:  # warm up
                _time_ms(calls[name][mode], max(5, args.calls // 5))
            for _ in range(args.rounds):
                for name in per_line:
                    per_line[name].append(_time_ms(calls[name][mode], args.calls))
        print(f"\n-- torch.set_num_threads({nt}) -- {args.clock}-clock ms per call (best of "
              f"{args.rounds} rounds x {args.calls} calls); ratio = sb3 / line")
        print(f"{'line':<18}" + "".join(f"{m:>10}{'ratio':>7}" for m in results))
        for name in lines:
            row = f"{name:<18}"
            for mode, per_line in results.items():
                if name not in per_line:
                    row += f"{'-':>10}{'':>7}"
                    continue
                ms = min(per_line[name])
                peer = min(per_line["sb3_sequentials"])
                row += f"{ms:10.3f}{peer / ms:7.2f}"
            print(row)
        ens = min(results["train"]["alf_ensemble"])
        print(f"alf_ensemble train: {flops_train / ens / 1e6:.0f} GFLOP/s "
              f"({flops_train / 1e6:.0f} MFLOP per call: the gemms dominate)")


if __name__ == "__main__":
    main()
