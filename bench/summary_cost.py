"""What TensorBoard summaries cost per training iteration: summarised every iteration
(``summary_interval=1``), at the config's own interval, and never.

    python bench/summary_cost.py                                  # the four cases below
    python bench/summary_cost.py --cases ppo sac --iterations 400 --repeats 5
    python bench/summary_cost.py --conf_param 'TrainerConfig.device="cuda"'

Why: the diagnostics (explained variance, value / Q statistics, clip range, learning
rates, gradient norms; docs/quickstart.md, "TensorBoard") are computed only on
summarised iterations, from tensors the update keeps anyway, and read from the device
in one transfer per algorithm. This measures that claim: an iteration that writes no
summaries should cost what it cost without them, and one that does should cost a
small, known amount more.

What it runs: each case's gin file (``alf/examples``) as ``alf.bin.train`` builds it
(``build_learner``: env, algorithm, optimizers, replay buffer, on the config's device),
with the run's own summary writer (``open_summary_writer``, as ``alf.bin.train`` opens it)
in a temporary directory, then ``--warmup`` iterations
(and until the first gradient step: off-policy cases collect random steps first),
then ``--iterations`` timed iterations of ``Learner.run_iteration`` (unroll, train,
the algorithm's summaries; not the Trainer's few episode / speed scalars, checkpoints
or evaluation). Three modes, each from a fresh build with the same seed (the same
work), interleaved over ``--repeats`` rounds (the median is reported):

* ``every``: ``summary_interval = 1``, every iteration summarised;
* ``default``: the config's ``summary_interval`` (ppo_cart_pole.gin: 5);
* ``never``: no summary writer, so no iteration is summarised.

Reported per case: milliseconds per iteration in each mode, the cost of one
summarised iteration (``every - never``, and as a share of ``never``) and the overhead
at the config's interval (``default - never``). On a busy machine the differences are
noise: run it on a quiet one. ``--out`` writes the figures as JSON.
"""
import argparse
import json
import os
import statistics
import tempfile
import time
from typing import Any, Dict, List, Sequence

import torch

#: name -> (gin file, overrides): sync runs of each algorithm family
CASES = {
    "ppo": ("ppo_cart_pole.gin", ["TrainerConfig.evaluate=False"]),
    "ppo_rnd": ("ppo_rnd_cart_pole.gin", ["TrainerConfig.evaluate=False"]),
    "sac": ("sac_pendulum.gin", ["TrainerConfig.evaluate=False",
                                 "TrainerConfig.initial_collect_steps=256"]),
    "dqn": ("dqn_cart_pole.gin", ["TrainerConfig.evaluate=False"]),
}
MODES = ("every", "default", "never")


def build(conf: str, params: Sequence[str], mode: str, total_iterations: int,
          log_dir: str) -> Any:
    """A prepared Learner of ``conf`` whose run context summarises as ``mode`` says."""
    from alf import config as alf_config
    from alf.trainers.learner_builder import build_learner
    from alf.trainers.summary_writer import open_summary_writer
    from alf.trainers.trainer_config import TrainerConfig
    from alf.utils.run_context import RunContext
    from alf.utils.seeding import set_random_seed

    alf_config.parse_config(conf_file=conf, conf_params=list(params))
    config = TrainerConfig()
    set_random_seed(config.random_seed or 0)
    interval = 1 if mode == "every" else config.summary_interval
    context = RunContext(total_iterations, 0, summary_interval=interval,
                         summarize_first_interval=False,
                         summary_writer=None if mode == "never" else open_summary_writer(log_dir))
    return build_learner(config, context, alf_config.config_text())


def time_iterations(learner: Any, warmup: int, iterations: int) -> List[float]:
    """Seconds of each of ``iterations`` iterations after the warm-up (and the first
    gradient step)."""
    ctx = learner.context
    done = 0
    while done < warmup or ctx.num_updates == 0:
        ctx.begin_iteration()
        learner.run_iteration()
        done += 1
        if done > 100_000:
            raise RuntimeError("no gradient step after 100,000 iterations")
    times = []
    for _ in range(iterations):
        ctx.begin_iteration()
        t0 = time.perf_counter()
        learner.run_iteration()
        if learner.algorithm.device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return times


def measure(name: str, conf: str, params: Sequence[str], args: argparse.Namespace) -> Dict:
    """Milliseconds per iteration of each mode (median over rounds) and the costs."""
    import gin
    total = args.warmup + args.iterations + 100_000
    per_mode: Dict[str, List[float]] = {m: [] for m in MODES}
    for _ in range(args.repeats):
        for mode in MODES:
            with tempfile.TemporaryDirectory() as log_dir:
                gin.clear_config()
                built = build(conf, list(params) + list(args.conf_param), mode, total, log_dir)
                try:
                    times = time_iterations(built.learner, args.warmup, args.iterations)
                finally:
                    writer = built.learner.context.summary_writer
                    if writer is not None:
                        writer.close()
                    if built.learner.unroller is not None:
                        built.learner.unroller.close()
                    if built.env is not None:
                        built.env.close()
                    gin.clear_config()
            per_mode[mode].append(1000 * sum(times) / len(times))
    ms = {m: statistics.median(v) for m, v in per_mode.items()}
    never = ms["never"]
    return {"case": name, "conf": conf, "ms_per_iteration": ms, "rounds": per_mode,
            "summarised_iteration_ms": ms["every"] - never,
            "summarised_iteration_share": (ms["every"] - never) / never,
            "default_interval_overhead_share": (ms["default"] - never) / never}


def report(results: List[Dict]) -> str:
    lines = [f"{'case':<9} {'every ms':>9} {'default':>9} {'never':>9} "
             f"{'summary +ms':>12} {'+share':>7} {'at default':>10}"]
    for r in results:
        ms = r["ms_per_iteration"]
        lines.append(f"{r['case']:<9} {ms['every']:>9.2f} {ms['default']:>9.2f} "
                     f"{ms['never']:>9.2f} {r['summarised_iteration_ms']:>12.2f} "
                     f"{r['summarised_iteration_share']:>7.1%} "
                     f"{r['default_interval_overhead_share']:>10.1%}")
    return "\n".join(lines)


def main(argv: Sequence[str] = None) -> List[Dict]:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    p.add_argument("--iterations", type=int, default=200, help="timed iterations per mode")
    p.add_argument("--warmup", type=int, default=10, help="untimed iterations first")
    p.add_argument("--repeats", type=int, default=3, help="rounds of the three modes")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--conf_param", action="append", default=[],
                   help="gin override for every case (repeatable)")
    p.add_argument("--out", default="", help="write the results here as JSON")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    import alf  # noqa: F401  (registers the configurables)
    results = [measure(name, *CASES[name], args) for name in args.cases]
    print(report(results))
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    return results


if __name__ == "__main__":
    main()
