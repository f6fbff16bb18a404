"""Memory of an Atari replay buffer with 4-frame stacking: fill 100k transitions, extrapolate to 1M.

    python bench/atari_replay_memory.py                 # Breakout, 100k transitions
    python bench/atari_replay_memory.py --transitions 20000

Builds the replay buffer of ``dqn_atari.gin`` exactly as training does (the
``FrameStacker`` keeps one ``[1, 84, 84]`` uint8 frame per step; stacked
``[4, 84, 84]`` observations are rebuilt when sampling), fills it with
``--transitions`` real Breakout transitions (random actions, through the normal
unroll path) and reports:

- the buffer's allocated bytes per transition (all stored fields);
- the process's resident-memory growth from before the trainer was built to
  after the buffer was filled (what the OS really had to provide: the buffer,
  which is zero-filled and so fully resident from creation, plus the env, the
  networks, the optimizer and the unroll's working memory);
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
    from alf.replay_buffers.experience_storage import restore_derived_fields
    from alf.trainers.trainer import Trainer
    from alf.trainers.trainer_config import TrainerConfig

    per_env = args.transitions // args.envs
    params = [f"create_environment.env_name='{args.env}'",
              f"create_environment.num_parallel_environments={args.envs}",
              f"TrainerConfig.replay_buffer_length={per_env}",
              "TrainerConfig.initial_collect_steps=1000000000", "TrainerConfig.num_threads=1",
              "TrainerConfig.evaluate=False"]
    alf_config.parse_config(conf_file="dqn_atari.gin", conf_params=params)
    rss0 = resident_bytes()  # before the trainer (env, networks, buffer) exists
    trainer = Trainer(TrainerConfig(), tempfile.mkdtemp(prefix="alf_atari_mem_"), quiet=True)
    alg, learner = trainer.algorithm, trainer.learner
    learner.prepare()
    rb = learner.replay_buffer

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
            learner.collect(unroll)
            if len(seen) > 4 * unroll:  # keep only the recent part in memory
                del seen[:unroll]
    fill_s = time.perf_counter() - t0
    # minus what this bench itself keeps: the recorded stacked observations
    rss1 = resident_bytes() - sum(x.numel() * x.element_size() for x in seen)
    stored = int(rb.current_size().sum())

    # spot check: samples from the recent part equal what the agent saw
    total = int(rb.current_pos()[0])
    first_kept = total - len(seen)
    truth = torch.stack(seen)  # [T_recent, B, 4, 84, 84]
    data = learner.replay.sample(256, 2)
    checked = 0
    for i, (b, pos) in enumerate(zip(data.batch_info.env_ids.tolist(),
                                     data.batch_info.positions.tolist())):
        if pos - first_kept >= 0:
            want = truth[pos - first_kept:pos - first_kept + 2, b]
            assert torch.equal(data.time_step.observation[i], want), (b, pos)
            checked += 1
    # and 256 sequences that certainly start in the recorded part, through the same read path
    gen = torch.Generator().manual_seed(0)
    env_ids = torch.randint(0, rb.num_envs, (256,), generator=gen)
    positions = torch.randint(first_kept, total - 2, (256,), generator=gen)
    stored_part = rb.get_by_position(env_ids, positions, 2)
    restored = restore_derived_fields(rb, stored_part, env_ids, positions,
                                      learner.replay.full_experience_spec.time_step.prev_action,
                                      frame_stacker=learner.replay.frame_stacker)
    want = torch.stack([truth[p - first_kept:p - first_kept + 2, b]
                        for p, b in zip(positions.tolist(), env_ids.tolist())])
    assert torch.equal(restored.time_step.observation, want)
    checked += 256

    alloc_per = rb.nbytes / (rb.num_envs * rb.max_length)
    rss_per = (rss1 - rss0) / stored
    obs_spec = rb.data_spec.time_step.observation
    other = alloc_per - obs_spec.nbytes
    naive = STACKED_FRAME_BYTES + other
    result = {
        "env": args.env, "transitions": stored, "fill_seconds": fill_s,
        "stored_observation_shape": list(obs_spec.shape),
        "allocated_bytes_per_transition": alloc_per,
        "rss_growth_bytes": rss1 - rss0,
        "rss_bytes_per_transition": rss_per,
        "gib_at_1M_allocated": alloc_per * 1e6 / GIB,
        # the growth that is not the buffer (env, networks, optimizer) does not scale with it
        "gib_at_1M_process": (rss1 - rss0 - rb.nbytes + alloc_per * 1e6) / GIB,
        "gib_at_1M_naive_stacked": naive * 1e6 / GIB,
        "gib_at_1M_sb3_obs_and_next_obs": (2 * STACKED_FRAME_BYTES + other) * 1e6 / GIB,
        "restacked_samples_checked": checked,
    }
    print(f"{args.env}: filled {stored:,} transitions in {fill_s:.0f} s "
          f"({stored / fill_s:,.0f} agent steps/s incl. the policy forward)")
    print(f"  stored observation {tuple(obs_spec.shape)} uint8; {alloc_per:,.0f} B allocated per "
          f"transition; the process grew by {(rss1 - rss0) / GIB:.2f} GiB resident "
          f"({rss_per:,.0f} B per transition, env + networks included)")
    print(f"  1M transitions: {result['gib_at_1M_allocated']:.2f} GiB of buffer, "
          f"{result['gib_at_1M_process']:.2f} GiB for the whole process (bar: <= 8 GiB); "
          f"naive stacked storage "
          f"{result['gib_at_1M_naive_stacked']:.1f} GiB, SB3 obs+next_obs "
          f"{result['gib_at_1M_sb3_obs_and_next_obs']:.1f} GiB")
    print(f"  {checked} sampled [2]-step sequences re-stacked from single frames equal what the "
          "agent saw")
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "atari_replay_memory.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
