"""Memory of an Atari replay buffer with 4-frame stacking: fill 100k transitions, extrapolate to 1M.

    python bench/atari_replay_memory.py                 # Breakout, 100k transitions
    python bench/atari_replay_memory.py --transitions 20000

Builds the replay buffer of ``dqn_atari.gin`` exactly as training does (the
``FrameStacker`` keeps one ``[1, 84, 84]`` uint8 frame per step; stacked
``[4, 84, 84]`` observations are rebuilt when sampling), fills it with
``--transitions`` real Breakout transitions (random actions, through the normal
unroll path) and reports:

- the buffer's allocated bytes per transition (all stored fields);
- the process's resident-memory growth while filling, per transition (what the
  OS really had to provide);
- both extrapolated to 1M transitions, next to naive stacked storage
  (``[4, 84, 84]`` per transition, as a buffer that stores stacked observations
  would need) and SB3's ``ReplayBuffer`` (observation + next observation, both
  stacked, unless ``optimize_memory_usage``);
- a spot check: 256 sampled ``[B, 2]`` sequences re-stacked from the buffer equal
  the stacked observations the agent was given during the unroll.

Writes ``bench/results/atari_replay_memory.json``.
"""
import argparse
import json
import os
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

GIB = 1024 ** 3


def resident_bytes() -> int:
    """This process's resident set size (Linux ``/proc/self/statm``)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
STACKED_FRAME_BYTES = 4 * 84 * 84


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--transitions", type=int, default=100_000)
    p.add_argument("--envs", type=int, default=4)
    p.add_argument("--env", default="ALE/Breakout-v5")
    args = p.parse_args()

    from alf import config as alf_config
    from alf.trainers.trainer import Trainer
    from alf.trainers.trainer_config import TrainerConfig

    per_env = args.transitions // args.envs
    params = [f"create_environment.env_name='{args.env}'",
              f"create_environment.num_parallel_environments={args.envs}",
              f"TrainerConfig.replay_buffer_length={per_env}",
              "TrainerConfig.initial_collect_steps=1000000000", "TrainerConfig.num_threads=1",
              "TrainerConfig.evaluate=False"]
    alf_config.parse_config(conf_file="dqn_atari.gin", conf_params=params)
    trainer = Trainer(TrainerConfig(), tempfile.mkdtemp(prefix="alf_atari_mem_"), quiet=True)
    alg = trainer.algorithm
    alg.prepare()
    rb = alg.replay_buffer
    rss0 = resident_bytes()

    # record the stacked observations the agent saw, to check the re-stacked samples
    seen = []
    rollout_step = alg.rollout_step

    def recording_rollout_step(time_step, state):
        seen.append(time_step.observation.clone())
        return rollout_step(time_step, state)

    alg.rollout_step = recording_rollout_step
    t0 = time.perf_counter()
    unroll = 250
    with torch.no_grad():
        for _ in range(per_env // unroll):
            alg.unroll(unroll)
            if len(seen) > 4 * unroll:  # keep only the recent part in memory
                del seen[:unroll]
    fill_s = time.perf_counter() - t0
    rss1 = resident_bytes()
    stored = int(rb.current_size().sum())

    # spot check: samples from the recent part equal what the agent saw
    total = int(rb.current_pos()[0])
    first_kept = total - len(seen)
    truth = torch.stack(seen)  # [T_recent, B, 4, 84, 84]
    data = alg.sample_replay(256, 2)
    checked = 0
    for i, (b, pos) in enumerate(zip(data.batch_info.env_ids.tolist(),
                                     data.batch_info.positions.tolist())):
        if pos - first_kept >= 0:
            want = truth[pos - first_kept:pos - first_kept + 2, b]
            assert torch.equal(data.time_step.observation[i], want), (b, pos)
            checked += 1

    alloc_per = rb.nbytes / (rb.num_envs * rb.max_length)
    rss_per = (rss1 - rss0) / stored
    obs_spec = rb.data_spec.time_step.observation
    other = alloc_per - obs_spec.nbytes
    naive = STACKED_FRAME_BYTES + other
    result = {
        "env": args.env, "transitions": stored, "fill_seconds": fill_s,
        "stored_observation_shape": list(obs_spec.shape),
        "allocated_bytes_per_transition": alloc_per,
        "rss_bytes_per_transition": rss_per,
        "gib_at_1M_allocated": alloc_per * 1e6 / GIB,
        "gib_at_1M_rss": rss_per * 1e6 / GIB,
        "gib_at_1M_naive_stacked": naive * 1e6 / GIB,
        "gib_at_1M_sb3_obs_and_next_obs": (2 * STACKED_FRAME_BYTES + other) * 1e6 / GIB,
        "restacked_samples_checked": checked,
    }
    print(f"{args.env}: filled {stored:,} transitions in {fill_s:.0f} s "
          f"({stored / fill_s:,.0f} agent steps/s incl. the policy forward)")
    print(f"  stored observation {tuple(obs_spec.shape)} uint8; {alloc_per:,.0f} B allocated and "
          f"{rss_per:,.0f} B resident per transition")
    print(f"  1M transitions: {result['gib_at_1M_allocated']:.2f} GiB allocated, "
          f"{result['gib_at_1M_rss']:.2f} GiB resident (bar: <= 8 GiB); naive stacked storage "
          f"{result['gib_at_1M_naive_stacked']:.1f} GiB, SB3 obs+next_obs "
          f"{result['gib_at_1M_sb3_obs_and_next_obs']:.1f} GiB")
    print(f"  {checked} sampled [2]-step sequences re-stacked from single frames equal what the "
          "agent saw")
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "atari_replay_memory.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
