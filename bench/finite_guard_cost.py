"""What the non-finite guard (``TrainerConfig.check_finite``, alf/utils/finite_guard.py) costs
per gradient update: guard on against off, in one process, in interleaved pairs.

    python bench/finite_guard_cost.py                   # ppo_atari.gin and sac_pendulum.gin
    python bench/finite_guard_cost.py --conf sac_pendulum.gin --pairs 20 --updates 400
    python bench/finite_guard_cost.py --device cuda     # the deferred mode (one read/iteration)
    python bench/finite_guard_cost.py --smoke           # tiny settings: runs? (no figures)

For each config: the experiment is built as ``alf.bin.train`` builds it (its shipped
settings; ``--conf_param`` overrides), its replay buffer is filled by acting (not
timed), ``--batches`` mini-batches are sampled once, and then ``--pairs`` pairs of
blocks run, each block ``--updates`` updates (``algorithm.train_on_batch`` on those
batches in turn: ``train_step``, ``calc_loss`` and ``update_with_gradient``, the guard's
three checks included), once with the guard on and once off, the order alternating
between pairs so that drift (thermal, the other processes) falls on both alike. On CUDA
each block ends with the guard's once-per-iteration read (``FiniteGuard.flush``) and a
``torch.cuda.synchronize()``. Reports, per config: us/update on and off (medians over
pairs), the median of the per-pair ratios on/off, the extra us/update, and the
guard's own time (its three checks timed inside the guarded blocks: the A/B difference
is within the noise of a 2-core machine, this is not); writes
``bench/results/finite_guard_cost.json``. No summaries are written (summary iterations
add the optimizer tags, which the guard does not cost).
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

CONFS = ("ppo_atari.gin", "sac_pendulum.gin")
# --smoke: small networks and buffers, a few updates (checks the script, measures nothing)
SMOKE = {
    "ppo_atari.gin": ["create_environment.num_parallel_environments=2",
                      "TrainerConfig.unroll_length=8", "TrainerConfig.mini_batch_size=8"],
    "sac_pendulum.gin": ["TrainerConfig.initial_collect_steps=40",
                         "TrainerConfig.mini_batch_size=16",
                         "TrainerConfig.replay_buffer_length=200",
                         "ActorDistributionNetwork.fc_layer_params=(8,)",
                         "CriticNetwork.fc_layer_params=(8,)"],
}


def build(conf: str, params, device: str, root: str):
    """The Trainer of ``conf`` (nothing is written until ``run``) and its prepared Learner."""
    import gin
    from alf import config as alf_config
    from alf.trainers.trainer import Trainer
    from alf.trainers.trainer_config import TrainerConfig

    gin.clear_config()
    alf_config.parse_config(conf_file=conf, conf_params=[
        "TrainerConfig.evaluate=False", "TrainerConfig.random_seed=0",
        f"TrainerConfig.device='{device}'"] + list(params))
    trainer = Trainer(TrainerConfig(), root, quiet=True)
    trainer.learner.prepare()
    return trainer


def fill_and_sample(learner, num_batches: int):
    """Act until a mini-batch can be sampled (random actions first for SAC), then sample
    ``num_batches`` preprocessed mini-batches ``[B, L]`` to train on in every block."""
    settings = learner.settings
    steps = max(int(settings.unroll_length) or 1, 1)
    need = max(settings.initial_collect_steps // max(learner.unroller.batch_size, 1) + 1,
               learner.replay.sequence_length() + 1)
    for _ in range(max(1, need // steps + 1)):
        learner.collect(steps)
    if not learner.algorithm.uses_regime("whole_replay_buffer_training", settings):
        return [learner.sample() for _ in range(num_batches)]
    # whole-buffer training (PPO): mini-batches of the preprocessed buffer, as the Learner
    # makes them (advantages need the whole unroll)
    from alf.algorithms.replay_training import whole_buffer_mini_batches
    from alf import nest as alf_nest
    experience = learner.algorithm.preprocess_experience(learner.replay.gather())
    length = min(settings.mini_batch_length,
                 alf_nest.flatten(experience.step_type)[0].shape[1])
    batches = list(whole_buffer_mini_batches(experience, settings.mini_batch_size, length, 1))
    return (batches * num_batches)[:max(num_batches, 1)]


def timed_hooks(guard, spent: list):
    """``guard`` with its three checks timed: each call adds its seconds to ``spent[0]``
    (instance attributes shadow the methods; the A/B ratio above is noisier than the
    guard's own time, which this measures directly)."""
    for name in ("after_backward", "before_step", "after_step"):
        method = getattr(guard, name)

        def timed(*args, _method=method, **kwargs):
            t0 = time.perf_counter()
            try:
                return _method(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - t0
        setattr(guard, name, timed)
    return guard


def block(algorithm, batches, updates: int, guard, device: str) -> float:
    """Seconds per update of ``updates`` updates with ``guard`` (None: off)."""
    import torch
    algorithm.context.finite_guard = guard
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(updates):
        algorithm.train_on_batch(batches[i % len(batches)])
    if guard is not None:
        guard.flush()
    if cuda:
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / updates


def measure(conf: str, args) -> dict:
    from alf.utils import precision
    from alf.utils.finite_guard import FiniteGuard

    params = (SMOKE.get(conf, []) if args.smoke else []) + list(args.conf_param)
    with tempfile.TemporaryDirectory(prefix="finite_guard_cost_") as root:
        trainer = build(conf, params, args.device, root)
        try:
            learner, algorithm = trainer.learner, trainer.algorithm
            with precision.autocast_networks(trainer.context.train_dtype):
                batches = fill_and_sample(learner, args.batches)
                block(algorithm, batches, args.updates, None, args.device)  # warm-up
                on, off, ratios, spent = [], [], [], [0.0]
                for pair in range(args.pairs):
                    order = (True, False) if pair % 2 == 0 else (False, True)
                    got = {mode: block(algorithm, batches, args.updates,
                                       timed_hooks(FiniteGuard(), spent) if mode else None,
                                       args.device)
                           for mode in order}
                    on.append(got[True])
                    off.append(got[False])
                    ratios.append(got[True] / got[False])
        finally:
            trainer.close()
    result = {"conf": conf, "device": args.device, "updates_per_block": args.updates,
              "pairs": args.pairs, "us_per_update_on": statistics.median(on) * 1e6,
              "us_per_update_off": statistics.median(off) * 1e6,
              "ratio_on_off": statistics.median(ratios)}
    result["extra_us_per_update"] = result["us_per_update_on"] - result["us_per_update_off"]
    # the guard's own time: its three checks, timed inside the guarded blocks
    result["guard_us_per_update"] = spent[0] / (args.pairs * args.updates) * 1e6
    result["guard_share"] = result["guard_us_per_update"] / result["us_per_update_on"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conf", action="append", help="gin file (repeatable); default: "
                        + ", ".join(CONFS))
    parser.add_argument("--conf_param", action="append", default=[],
                        help="gin binding applied to every config")
    parser.add_argument("--pairs", type=int, default=10, help="on/off block pairs")
    parser.add_argument("--updates", type=int, default=200, help="updates per block")
    parser.add_argument("--batches", type=int, default=8, help="distinct mini-batches")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--smoke", action="store_true", help="tiny settings, 2 pairs of 5 "
                        "updates: checks the script runs (the figures mean nothing)")
    parser.add_argument("--out", default=os.path.join(HERE, "results", "finite_guard_cost.json"))
    args = parser.parse_args()
    if args.smoke:
        args.pairs, args.updates, args.batches = 2, 5, 2
    results = []
    for conf in args.conf or CONFS:
        r = measure(conf, args)
        results.append(r)
        print(f"{conf:20s} {args.device}: guard on {r['us_per_update_on']:9.1f} us/update, "
              f"off {r['us_per_update_off']:9.1f} us/update, on/off {r['ratio_on_off']:.4f} "
              f"(+{r['extra_us_per_update']:.1f} us/update; median of {args.pairs} pairs); "
              f"the checks themselves {r['guard_us_per_update']:.1f} us/update "
              f"({100 * r['guard_share']:.2f}% of an update)",
              flush=True)
    if not args.smoke:
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
