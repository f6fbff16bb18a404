"""Compare groups of runs across seeds: does A beat B, and how sure can we be?

    python -m alf.bin.compare --group 'ppo=runs/ppo_seed*' --group 'sb3=runs/sb3_ppo_*' \\
        --metric eval_return --target 475 --out_dir runs/compare

Each ``--group NAME=GLOB`` is one method; its glob matches the run directories of its
seeds: alf runs (``eval.csv``, ``progress.csv``) or Stable-Baselines3 logs (``*monitor.csv``,
``progress.csv``, ``evaluations.npz``). Their curves of ``--metric`` go on one grid of
``--x`` (env steps or wall-clock seconds) up to the shortest run's end, linearly
interpolated between each run's points. Per group the table gives the final score, the
area under the curve (the curve's mean over the grid) and, with ``--target``, the env
steps (or seconds) to first reach it and how many runs did, each as an aggregate over the
runs (``--aggregate``: IQM, the interquartile mean, by default) with its 95% percentile
bootstrap confidence interval, as recommended by Agarwal et al. (2021), "Deep RL at the
Edge of the Statistical Precipice" (rliable); below it, P(A > B) for each pair of groups.

The table goes to stdout; ``--out_dir`` also gets ``compare.md``, ``compare.json`` and the
plots ``curves.png``, ``profile.png`` and ``aggregates.png``. See docs/compare.md.
"""
import json
import os
import sys
from typing import Annotated, Optional

from absl import flags

from alf.bin import cli, flag_ranges
from alf.bin.out_dir import check_out_dir
from alf.config_ranges import NonNegativeInt, Positive, PositiveInt, Range
from alf.errors import ConfigError
from alf.studies.compare_analysis import Settings, compare, short_curves_warning
from alf.studies.compare_curves import X_AXES
from alf.studies.compare_plots import write_plots
from alf.studies.compare_runs import load_groups
from alf.studies.compare_table import markdown, to_json
from alf.studies.run_data import METRICS
from alf.studies.stats import AGGREGATES
from alf.utils.atomic_write import atomic_write_text

# other commands define flags of these names too (metric, seed, debug); allow_override
# lets them share one process (tests import several commands) in either import order
_SHARED = dict(allow_override=True)
flags.DEFINE_multi_string("group", [], "A group of runs NAME=GLOB (repeatable), the glob "
                          "matching its run directories, e.g. --group 'ppo=runs/ppo_seed*'.")
flags.DEFINE_string("metric", "eval_return", "Curve to compare: eval_return (alf's eval.csv; "
                    "SB3's evaluations.npz) or train_return (progress.csv; SB3's monitor "
                    "files).", **_SHARED)
flags.DEFINE_string("x", "env_steps", "x axis of the curves: env_steps or wall_time.")
flags.DEFINE_string("aggregate", "iqm", "Aggregate over runs: iqm (interquartile mean), "
                    "mean or median.")
flags.DEFINE_float("target", None, "Report the env steps (or seconds) at which each run "
                   "first reaches this value of the metric.")
flags.DEFINE_integer("max_steps", None, "End the grid here (env steps) at the latest; "
                     "default: the shortest run's end.")
flags.DEFINE_float("max_seconds", None, "With --x wall_time: end the grid here (seconds).")
flags.DEFINE_integer("points", 100, "Points of the common grid.")
flags.DEFINE_integer("final_points", 1, "A run's final score is the mean of its last this "
                     "many points.")
flags.DEFINE_integer("reps", 2000, "Bootstrap resamples per confidence interval (rliable "
                     "uses 50,000 for papers).")
flags.DEFINE_float("confidence", 0.95, "Coverage of the confidence intervals.")
flags.DEFINE_integer("seed", 0, "Seed of the bootstrap resampling.", **_SHARED)
flags.DEFINE_string("out_dir", None, "Directory for compare.md, compare.json and the plots "
                    "(created; default: print the table only).")
flags.DEFINE_bool("debug", False, "Show full tracebacks.", **_SHARED)

FLAGS = flags.FLAGS
PROGRAM = "alf.bin.compare"
# what each numeric flag may be (alf.bin.flag_ranges); any --target is a value to reach
RANGES = {"target": float, "max_steps": PositiveInt, "max_seconds": Positive,
          "points": Annotated[int, Range(2)], "final_points": PositiveInt,
          "reps": Annotated[int, Range(100)],
          "confidence": Annotated[float, Range(0, 1, low_open=True, high_open=True)],
          "seed": NonNegativeInt}
flag_ranges.declare(RANGES)


def _choice(flag: str, value: str, choices) -> str:
    if value not in choices:
        raise ConfigError(f"--{flag} {value!r} is not one of {', '.join(choices)}")
    return value


def _settings() -> Settings:
    """The flags as :class:`Settings` (each bad value one :class:`ConfigError`)."""
    metric = _choice("metric", FLAGS.metric, METRICS)
    x = _choice("x", FLAGS.x, X_AXES)
    aggregate = _choice("aggregate", FLAGS.aggregate, AGGREGATES)
    if FLAGS.max_steps is not None and x != "env_steps":
        raise ConfigError("--max_steps caps env steps: with --x wall_time use --max_seconds")
    if FLAGS.max_seconds is not None and x != "wall_time":
        raise ConfigError("--max_seconds caps wall-clock time: add --x wall_time, or use "
                          "--max_steps")
    flag_ranges.check(RANGES)
    max_x = FLAGS.max_steps if x == "env_steps" else FLAGS.max_seconds
    return Settings(metric=metric, x=x, aggregate=aggregate, target=FLAGS.target,
                    max_x=None if max_x is None else float(max_x), points=FLAGS.points,
                    final_points=FLAGS.final_points, reps=FLAGS.reps,
                    confidence=FLAGS.confidence, seed=FLAGS.seed)


def _main() -> int:
    settings = _settings()
    out_dir = check_out_dir("--out_dir", FLAGS.out_dir) if FLAGS.out_dir else None
    groups = load_groups(FLAGS.group, settings.metric)
    comparison = compare(groups, settings)
    if settings.max_x is not None and comparison.grid[-1] < settings.max_x:
        print(f"{PROGRAM}: the shortest run ends at {comparison.grid[-1]:,.0f}, before "
              f"{settings.max_x:,.0f}: the grid ends there", file=sys.stderr)
    warning = short_curves_warning(comparison)
    if warning:
        print(f"{PROGRAM}: warning: {warning}", file=sys.stderr)
    text = markdown(comparison)
    cli.print_output(text.rstrip("\n"))
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        atomic_write_text(os.path.join(out_dir, "compare.md"), text)
        atomic_write_text(os.path.join(out_dir, "compare.json"),
                          json.dumps(to_json(comparison), indent=1) + "\n")
        write_plots(comparison, out_dir)
        print(f"{PROGRAM}: wrote compare.md, compare.json, curves.png, profile.png and "
              f"aggregates.png to {out_dir}", file=sys.stderr)
    return 0


def main(argv: Optional[list] = None) -> int:
    return cli.run_command(_main, PROGRAM, argv)


if __name__ == "__main__":
    sys.exit(main())
