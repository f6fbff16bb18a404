"""Atari network speed on CPU: alf's PPO update and rollout forward with a shared Nature CNN.

    python bench/atari_network_bench.py                 # ~25 s, 1 thread
    python bench/atari_network_bench.py --threads 2 --no_sb3
    python bench/atari_network_bench.py --encoder impala --rounds 2   # ~50 s

Network (what ``ppo_atari``-style configs build): ``PPOAlgorithm`` with
``encoding_network_ctor=NatureCnnEncoder`` (3 convs + fc 512, shared) and linear
policy (4 actions) / value heads (``fc_layer_params=()``), Adam.

* update: one ``train_on_batch`` on an Experience ``[256, 1]`` of ``uint8``
  ``4 x 84 x 84`` frames (``train_step`` forward of encoder + heads, PPO loss,
  backward, Adam step): the mini-batch step of SB3/CleanRL's Atari PPO;
* rollout: one ``rollout_step`` (no grad) on ``[8, 4, 84, 84]`` (8 envs).

Variants (same weights, numerics all fp32 and checked equal to 1e-4):
  contiguous     torch default NCHW layout
  channels_last  NHWC conv input, always
  cl_fold        channels_last + 1/255 folded into conv1's weights
                 (conv(x, W/255) == conv(x/255, W), saves one pass over the image)
  auto           alf's default: channels_last on CPU while autograd records
  no_mkldnn      contiguous with torch.backends.mkldnn disabled
  sb3            stable-baselines3 ActorCriticCnnPolicy, same batch and loss (the peer)

``--encoder impala`` times ``ImpalaCnnEncoder`` (fc 256) instead, with the
contiguous, channels_last and auto variants only (auto = channels_last on CPU
for it, with or without grad).

Rounds interleave the variants; the table gives medians in ms of wall-clock
time and of process CPU time (``time.process_time``: all threads of this
process; on a shared machine it is far less disturbed by other jobs than the
wall clock). The results are written to
``bench/results/atari_network_bench[_impala].json`` (or ``--out``). Figures and
conclusions: the docstring of :mod:`alf.networks.image_encoders`.
"""
import argparse
import contextlib
import functools
import json
import os
import statistics
import sys
import time
import warnings

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from alf import nest as alf_nest  # noqa: E402
from alf.algorithms.ppo_algorithm import PPOAlgorithm, PPORolloutInfo  # noqa: E402
from alf.algorithms.ppo_loss import PPOLoss  # noqa: E402
from alf.algorithms.replay_training import train_on_batch  # noqa: E402
from alf.data_structures import Experience, StepType, TimeStep  # noqa: E402
from alf.networks import (ActorDistributionNetwork, ImpalaCnnEncoder,  # noqa: E402
                          NatureCnnEncoder, ValueNetwork)
from alf.tensor_specs import BoundedTensorSpec  # noqa: E402
from alf.utils.optimizers import Adam  # noqa: E402
from alf.utils.run_context import RunContext  # noqa: E402

OBS = BoundedTensorSpec((4, 84, 84), torch.uint8, 0, 255)
ACTIONS = BoundedTensorSpec((), torch.int64, 0, 3)


class FoldedNatureCnn(NatureCnnEncoder):
    """Bench-only variant: channels_last input and 1/255 folded into conv1's weights.

    ``[B, C, H, W]`` uint8 only (enough for this bench)."""

    def forward(self, inputs, state=()):
        x = inputs.contiguous(memory_format=torch.channels_last).to(torch.float32)
        first, *rest = self._conv_layers
        x = torch.relu(F.conv2d(x, first.weight * (1.0 / 255), first.bias, first.stride,
                                first.padding))
        for conv in rest:
            x = torch.relu(conv(x))
        x = x.flatten(1)
        for layer in self._fc_layers:
            x = torch.relu(F.linear(x, layer.weight, layer.bias))
        return x, state


def make_alf(encoder_ctor) -> PPOAlgorithm:
    torch.manual_seed(0)
    return PPOAlgorithm(
        OBS, ACTIONS, context=RunContext(num_iterations=10),
        encoding_network_ctor=encoder_ctor,
        actor_network_ctor=functools.partial(ActorDistributionNetwork, fc_layer_params=()),
        value_network_ctor=functools.partial(ValueNetwork, fc_layer_params=()),
        loss_ctor=functools.partial(PPOLoss, importance_ratio_clipping=0.1,
                                    entropy_regularization=0.01),
        optimizer=Adam(lr=2.5e-4, eps=1e-5, gradient_clipping=0.5))


def time_step(obs: torch.Tensor) -> TimeStep:
    n = obs.shape[0]
    return TimeStep(step_type=torch.full((n,), int(StepType.MID), dtype=torch.int32),
                    reward=torch.zeros(n), discount=torch.ones(n), observation=obs,
                    prev_action=torch.zeros(n, dtype=torch.int64),
                    env_id=torch.arange(n), env_info={})


def make_batch(batch: int, gen: torch.Generator):
    obs = torch.randint(0, 256, (batch,) + tuple(OBS.shape), dtype=torch.uint8, generator=gen)
    action = torch.randint(0, 4, (batch,), generator=gen)
    info = PPORolloutInfo(log_prob=torch.full((batch,), -1.386), value=torch.zeros(batch),
                          advantages=torch.randn(batch, generator=gen),
                          returns=torch.randn(batch, generator=gen))
    exp = Experience(time_step=time_step(obs), action=action, rollout_info=info, state=())
    return alf_nest.map_structure(lambda x: x.unsqueeze(1), exp)  # [B, L=1]


def alf_variant(name: str, exp, rollout_obs, encoder_cls=NatureCnnEncoder):
    if name == "cl_fold":
        ctor = FoldedNatureCnn
    else:
        fmt = "contiguous" if name == "no_mkldnn" else name
        ctor = functools.partial(encoder_cls, conv_memory_format=fmt)
    alg = make_alf(ctor)
    ts = time_step(rollout_obs)
    state = alg.get_initial_rollout_state(rollout_obs.shape[0])
    flags = (functools.partial(torch.backends.mkldnn.flags, enabled=False) if name == "no_mkldnn"
             else contextlib.nullcontext)

    def update():
        with flags():
            train_on_batch(alg, exp)

    def rollout():
        with flags(), torch.no_grad():
            alg.rollout_step(ts, state)

    def features():  # for the numerics check: encoder output on the rollout batch, with grad
        with flags():
            return alg._encoder(rollout_obs)[0].detach()
    return update, rollout, features


def sb3_variant(exp, rollout_obs):
    import numpy as np
    from gymnasium import spaces
    from stable_baselines3.common.policies import ActorCriticCnnPolicy
    torch.manual_seed(0)
    policy = ActorCriticCnnPolicy(spaces.Box(0, 255, tuple(OBS.shape), np.uint8),
                                  spaces.Discrete(4), lr_schedule=lambda _: 2.5e-4)
    obs = exp.time_step.observation[:, 0]
    actions = exp.action[:, 0]
    info = alf_nest.map_structure(lambda x: x[:, 0], exp.rollout_info)

    def update():  # the body of SB3 PPO.train's mini-batch loop
        values, log_prob, entropy = policy.evaluate_actions(obs, actions)
        adv = (info.advantages - info.advantages.mean()) / (info.advantages.std() + 1e-8)
        ratio = torch.exp(log_prob - info.log_prob)
        pg = -torch.min(adv * ratio, adv * torch.clamp(ratio, 0.9, 1.1)).mean()
        loss = pg + 0.5 * F.mse_loss(info.returns, values.flatten()) - 0.01 * entropy.mean()
        policy.optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 0.5)
        policy.optimizer.step()

    def rollout():
        with torch.no_grad():
            policy(rollout_obs)
    return update, rollout, None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--batch", type=int, default=256, help="update mini-batch size")
    p.add_argument("--envs", type=int, default=8, help="rollout batch size")
    p.add_argument("--rounds", type=int, default=4, help="interleaved measurement rounds")
    p.add_argument("--encoder", default="nature", choices=["nature", "impala"])
    p.add_argument("--no_sb3", action="store_true", help="skip the stable-baselines3 peer")
    p.add_argument("--out", default=None, help="result JSON (default: bench/results/...)")
    args = p.parse_args()
    impala = args.encoder == "impala"
    out = args.out or os.path.join(HERE, "results", "atari_network_bench%s.json"
                                   % ("_impala" if impala else ""))
    # torch.backends.mkldnn.flags() warns about Intel-GPU TF32 on every use
    warnings.filterwarnings("ignore", message="TF32 acceleration on top of oneDNN")
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    exp = make_batch(args.batch, gen)
    rollout_obs = exp.time_step.observation[:args.envs, 0].clone()

    if impala:
        names = ["contiguous", "channels_last", "auto"]
        variants = {n: alf_variant(n, exp, rollout_obs, ImpalaCnnEncoder) for n in names}
    else:
        names = ["contiguous", "channels_last", "cl_fold", "auto", "no_mkldnn"]
        variants = {n: alf_variant(n, exp, rollout_obs) for n in names}
    ref = variants["contiguous"][2]()
    for n in names[1:]:  # same initial weights (seed 0): the layouts must not change the maths
        torch.testing.assert_close(variants[n][2](), ref, rtol=1e-4, atol=1e-4)
    if not (args.no_sb3 or impala):
        try:
            variants["sb3"] = sb3_variant(exp, rollout_obs)
        except ImportError as e:
            print(f"(no sb3 line: {e})")

    times = {n: {k: [] for k in ("update", "update_cpu", "rollout", "rollout_cpu")}
             for n in variants}

    def timed(fn, key, n):
        t, c = time.perf_counter(), time.process_time()
        fn()
        times[n][key].append(time.perf_counter() - t)
        times[n][key + "_cpu"].append(time.process_time() - c)

    for update, rollout, _ in variants.values():  # warm-up: allocator, oneDNN primitives
        update()
        rollout()
    for _ in range(args.rounds):
        for n, (update, rollout, _) in variants.items():
            for _ in range(2):
                timed(update, "update", n)
            for _ in range(10):
                timed(rollout, "rollout", n)

    result = {"encoder": args.encoder, "threads": args.threads, "batch": args.batch,
              "envs": args.envs, "torch": torch.__version__, "variants": {}}
    print(f"torch {torch.__version__}, {args.threads} thread(s); median ms over "
          f"{args.rounds} interleaved rounds")
    print(f"{'variant':15s} {'update [%d] wall / cpu' % args.batch:>26s} "
          f"{'rollout [%d] wall / cpu' % args.envs:>25s}")
    for n, t in times.items():
        ms = {k: statistics.median(v) * 1e3 for k, v in t.items()}
        result["variants"][n] = {k + "_ms": round(v, 3) for k, v in ms.items()}
        print(f"{n:15s} {ms['update']:17.1f} / {ms['update_cpu']:6.1f} "
              f"{ms['rollout']:16.2f} / {ms['rollout_cpu']:5.2f}")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
