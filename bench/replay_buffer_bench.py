"""Replay-buffer throughput and memory with SAC's HalfCheetah-v5 experience.

    python bench/replay_buffer_bench.py [--capacity 1000000] [--num-envs 1] [--seconds 3]

The experience spec is built from specs (no env): observation [17] float32,
action [6] float32, reward / discount float32, step_type int32, no rollout
info or state; ``prev_action`` and ``env_id`` are stripped before storage
(``alf.replay_buffers.experience_storage``), as the RL algorithm does.

(a) Throughput, on a buffer filled to ``--capacity`` transitions (spread over
    ``--num-envs`` rows), of one SAC training step's buffer work:
    ``add_batch`` (one step per env), ``get_batch(256, 2)``,
    ``restore_derived_fields`` and, prioritized, ``update_priority`` (256
    random priorities). Reported per call (us), as calls/s of the whole step
    and as sampled transitions/s.
(b) Memory: ``ReplayBuffer.nbytes`` (storage; priority tree separately) vs the
    raw data (obs + action + reward + discount + step_type per transition),
    plus the process RSS growth (``VmRSS``) over allocation + fill.
"""
import argparse
import gc
import json
import os
import sys
import time
from typing import Callable, Dict

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from alf import nest  # noqa: E402
from alf.data_structures import Experience, TimeStep  # noqa: E402
from alf.replay_buffers import ReplayBuffer  # noqa: E402
from alf.replay_buffers.experience_storage import (  # noqa: E402
    restore_derived_fields, storage_spec, to_storage)
from alf.tensor_specs import BoundedTensorSpec, TensorSpec, nbytes  # noqa: E402

OBS_DIM, ACTION_DIM = 17, 6


def half_cheetah_experience_spec() -> Experience:
    """The full SAC experience spec for HalfCheetah-v5 (what the unroller produces)."""
    action = BoundedTensorSpec((ACTION_DIM,), torch.float32, -1.0, 1.0)
    ts = TimeStep(step_type=BoundedTensorSpec((), torch.int32, 0, 2),
                  reward=TensorSpec((), torch.float32),
                  discount=BoundedTensorSpec((), torch.float32, 0.0, 1.0),
                  observation=TensorSpec((OBS_DIM,), torch.float32),
                  prev_action=action, env_id=TensorSpec((), torch.int64), env_info={})
    return Experience(time_step=ts, action=action, rollout_info=(), state=())


def raw_bytes_per_transition() -> int:
    """obs + action + reward + discount + step_type."""
    return 4 * OBS_DIM + 4 * ACTION_DIM + 4 + 4 + 4


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def random_experience(spec: Experience, outer, gen: torch.Generator) -> Experience:
    exp = nest.map_structure(lambda s: s.zeros(outer), spec)
    ts = exp.time_step._replace(
        observation=torch.randn(*outer, OBS_DIM, generator=gen),
        reward=torch.randn(*outer, generator=gen),
        discount=torch.ones(outer), step_type=torch.ones(outer, dtype=torch.int32))
    return exp._replace(time_step=ts, action=torch.rand(*outer, ACTION_DIM, generator=gen) * 2 - 1)


def build_and_fill(full_spec: Experience, num_envs: int, length: int, prioritized: bool,
                   device: str, gen: torch.Generator):
    """Allocate a buffer and fill every row; returns (buffer, RSS growth in bytes)."""
    chunk = min(length, 10_000)
    block = to_storage(random_experience(full_spec, (chunk, num_envs), gen))  # not counted
    env_ids = torch.arange(num_envs)
    gc.collect()
    rss0 = rss_bytes()
    buf = ReplayBuffer(storage_spec(full_spec), num_envs, length, device=device,
                       prioritized=prioritized, name="Prioritized" if prioritized else "Uniform")
    for _ in range(length // chunk):
        buf.add_sequence(block, env_ids)
    if length % chunk:
        buf.add_sequence(nest.map_structure(lambda x: x[:length % chunk], block), env_ids)
    return buf, rss_bytes() - rss0


def time_per_call(fn: Callable[[], None], seconds: float) -> float:
    """Mean seconds per call over ~``seconds`` of calls (after a short warm-up)."""
    for _ in range(20):
        fn()
    n, t0 = 0, time.perf_counter()
    while True:
        for _ in range(20):
            fn()
        n += 20
        dt = time.perf_counter() - t0
        if dt >= seconds:
            return dt / n


def throughput(buf: ReplayBuffer, full_spec: Experience, batch_size: int, length: int,
               seconds: float, gen: torch.Generator) -> Dict[str, float]:
    step = to_storage(random_experience(full_spec, (buf.num_envs,), gen))
    prev_spec = full_spec.time_step.prev_action
    sample_gen = torch.Generator(device=buf.device).manual_seed(0)
    prios = torch.rand(batch_size, generator=gen).to(buf.device)
    last = {}

    def add():
        buf.add_batch(step)

    def get():
        last["batch"] = buf.get_batch(batch_size, length, generator=sample_gen, beta=0.4)

    def restore():
        data, info = last["batch"]
        restore_derived_fields(buf, data, info.env_ids, info.positions, prev_spec)

    def update():
        _, info = last["batch"]
        buf.update_priority(info.env_ids, info.positions, prios)

    def train_step():
        add()
        get()
        restore()
        if buf.prioritized:
            update()

    get()
    out = {"add_batch_us": time_per_call(add, seconds / 4) * 1e6,
           "get_batch_us": time_per_call(get, seconds / 4) * 1e6,
           "restore_us": time_per_call(restore, seconds / 4) * 1e6}
    out["update_priority_us"] = (time_per_call(update, seconds / 4) * 1e6
                                 if buf.prioritized else 0.0)
    per_step = time_per_call(train_step, seconds)
    out["step_us"] = per_step * 1e6
    out["steps_per_s"] = 1.0 / per_step
    out["sampled_transitions_per_s"] = batch_size * length / per_step
    out["added_transitions_per_s"] = buf.num_envs / per_step
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--capacity", type=int, default=1_000_000,
                   help="total transitions (spread over --num-envs rows)")
    p.add_argument("--num-envs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--batch-length", type=int, default=2)
    p.add_argument("--seconds", type=float, default=3.0, help="timing budget per mode")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--device", default="cpu")
    p.add_argument("--json", default=None, help="also write the results to this file")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    full_spec = half_cheetah_experience_spec()
    length = args.capacity // args.num_envs
    n = length * args.num_envs
    raw = raw_bytes_per_transition() * n
    stored_per_transition = nbytes(storage_spec(full_spec))
    print(f"HalfCheetah-v5 SAC experience: {nbytes(full_spec)} B/transition as produced, "
          f"{stored_per_transition} B stored (prev_action, env_id derived), "
          f"{raw_bytes_per_transition()} B raw (obs+action+reward+discount+step_type)")
    print(f"{n:,} transitions = {args.num_envs} envs x {length:,}; device {args.device}, "
          f"{args.threads} torch thread(s)\n")
    results = {"capacity": n, "num_envs": args.num_envs, "device": args.device,
               "threads": args.threads, "raw_bytes": raw}
    rows = []
    warm, _ = build_and_fill(full_spec, 1, 1000, True, args.device, gen)  # torch's lazy inits
    warm.get_batch(8, 2)
    del warm
    for prioritized in (False, True):
        mode = "prioritized" if prioritized else "uniform"
        buf, rss_growth = build_and_fill(full_spec, args.num_envs, length, prioritized,
                                         args.device, gen)
        tree = buf.nbytes - buf.storage_nbytes
        t = throughput(buf, full_spec, args.batch_size, args.batch_length, args.seconds, gen)
        results[mode] = dict(t, storage_bytes=buf.storage_nbytes, tree_bytes=tree,
                             rss_growth_bytes=rss_growth)
        rows.append((mode, buf.storage_nbytes, tree, rss_growth, t))
        del buf
        gc.collect()

    mb = 1e6
    print("(b) memory for the filled buffer")
    print(f"{'mode':<12}{'storage MB':>11}{'tree MB':>9}{'total MB':>10}{'raw MB':>8}"
          f"{'ratio':>7}{'RSS growth MB':>15}{'RSS ratio':>10}")
    for mode, storage, tree, rss, _ in rows:
        print(f"{mode:<12}{storage / mb:>11.1f}{tree / mb:>9.1f}{(storage + tree) / mb:>10.1f}"
              f"{raw / mb:>8.1f}{(storage + tree) / raw:>7.3f}{rss / mb:>15.1f}"
              f"{rss / raw if args.device == 'cpu' else float('nan'):>10.3f}")
    print(f"\n(a) throughput: add_batch ({args.num_envs} step(s)) + get_batch({args.batch_size}, "
          f"{args.batch_length}) + restore_derived_fields [+ update_priority({args.batch_size})]")
    print(f"{'mode':<12}{'add us':>8}{'get us':>8}{'restore us':>11}{'update us':>10}"
          f"{'step us':>9}{'steps/s':>9}{'sampled trans/s':>17}")
    for mode, _, _, _, t in rows:
        print(f"{mode:<12}{t['add_batch_us']:>8.0f}{t['get_batch_us']:>8.0f}"
              f"{t['restore_us']:>11.0f}{t['update_priority_us']:>10.0f}{t['step_us']:>9.0f}"
              f"{t['steps_per_s']:>9.0f}{t['sampled_transitions_per_s']:>17,.0f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
