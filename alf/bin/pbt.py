r"""Population-based training: N members of one experiment; every ``--interval`` env steps
the bottom ones continue from a top member's checkpoint with perturbed hyper-parameters.

    python -m alf.bin.pbt --conf=ppo_cart_pole.gin --study_dir=runs/pbt_lr \
        --param 'lr/LinearSchedule.start=loguniform(1e-5, 1e-2)' \
        --population=4 --interval=10000 --parallel=2

Members are ordinary alf runs in ``<study_dir>/members/m<i>`` (TensorBoard, ``alf.bin.play``
work on them). Only parameters that can change mid-run are accepted (learning rates, loss
coefficients, discounts, clip ranges, ...; the list: ``alf/studies/pbt_params.py``; a
researcher's own parameter once its class declares it with
``@alf.configurable(mutable=("name",))``, docs/experiments.md).
``lineage.csv``, ``lineage.md`` and ``lineage.png`` show who copied whom and each member's
hyper-parameters over time. ``--noexploit`` trains the same members without exploit and
explore (the baseline PBT should beat). Ctrl-C stops every member with a checkpoint; the
same command continues the population; other processes and machines join it like a sweep
(``--storage``, or a shared ``--study_dir``). Exit status: 0 done, 1 every member failed
in a generation, 2 bad input (checked before any member starts: nothing written), 130/143
stopped.
"""
import os
import sys
from typing import Annotated, List

import optuna
from absl import flags

from alf import config as alf_config
from alf.bin import cli, flag_ranges
from alf.bin.out_dir import check_out_dir
from alf.config_ranges import NonNegativeInt, PositiveInt, Probability, Range
from alf.errors import ConfigError
from alf.studies import pbt_report
from alf.studies import study_store as store
from alf.studies.config_check import check_runs_can_start
from alf.studies.objective import Objective
from alf.studies.pbt import PbtSettings, Population
from alf.studies.pbt_params import check_mutable
from alf.studies.search_space import SearchSpace

flags.DEFINE_string("conf", None, "Gin experiment file every member trains.")
flags.DEFINE_string("study_dir", None, "Directory of the population: members/, lineage.*.")
flags.DEFINE_multi_string("param", [], "A hyper-parameter PBT sets, NAME=SPACE, e.g. "
                          "'Adam.lr=loguniform(1e-5, 1e-2)' or 'PPOLoss.entropy_regularization="
                          "[0.0, 0.01]'.")
flags.DEFINE_integer("population", 4, "Number of members.")
flags.DEFINE_integer("interval", None, "Env steps between two exploit/explore decisions.")
flags.DEFINE_integer("num_env_steps", None, "Each member's env steps (default: the conf's "
                     "TrainerConfig.num_env_steps).")
flags.DEFINE_multi_string("conf_param", [], "A binding every member gets.")
flags.DEFINE_string("objective", "final", "Score of a segment: final or mean of --metric.")
flags.DEFINE_string("metric", "eval_return", "eval_return (eval.csv) or train_return.")
flags.DEFINE_float("quantile", 0.25, "Fraction of members replaced (bottom) / copied (top).")
flags.DEFINE_float("resample_probability", 0.25, "Explore by resampling a value instead of "
                   "multiplying it by 0.8 or 1.2.")
flags.DEFINE_bool("exploit", True, "--noexploit: the same members without exploit/explore.")
flags.DEFINE_bool("copy_replay_buffer", False, "An exploiting member also takes the other's "
                  "replay buffer (default: it keeps its own experience).")
flags.DEFINE_integer("seed", 0, "Seeds initial values, decisions and member seeds (1000*seed+i).")
flags.DEFINE_integer("parallel", 1, "Members training at once here, the CPUs split between them.")
flags.DEFINE_string("storage", None, "Optuna database URL shared by several machines, e.g. "
                    "postgresql://user@host/db (the [postgres] extra; default: the journal "
                    "file <study_dir>/study.journal).")
flags.DEFINE_string("study_name", None, "Name in the storage (default: the study_dir's name).")
flags.DEFINE_bool("debug", False, "Show full tracebacks for configuration errors.")

FLAGS = flags.FLAGS
PROGRAM = "alf.bin.pbt"
# what each numeric flag may be (alf.bin.flag_ranges)
RANGES = {"population": Annotated[int, Range(2)], "interval": PositiveInt,
          "num_env_steps": PositiveInt,
          "quantile": Annotated[float, Range(0, 0.5, low_open=True)],
          "resample_probability": Probability, "seed": NonNegativeInt,
          "parallel": PositiveInt}
flag_ranges.declare(RANGES)


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def settings_from_flags() -> PbtSettings:
    """The population's settings; every mistake is one ConfigError line."""
    if not FLAGS.conf or not FLAGS.study_dir:
        raise ConfigError("--conf and --study_dir are required")
    if not FLAGS.param:
        raise ConfigError("give at least one --param for PBT to set, e.g. "
                          "--param 'Adam.lr=loguniform(1e-5, 1e-2)'")
    flag_ranges.check(RANGES)
    if FLAGS.interval is None:
        raise ConfigError("--interval (env steps between decisions) is required, e.g. "
                          "--interval=10000")
    check_out_dir("--study_dir", FLAGS.study_dir)
    space = SearchSpace.parse(FLAGS.param, [FLAGS.seed])
    objective = Objective.parse(FLAGS.objective, FLAGS.metric)
    if objective.kind not in ("final", "mean"):
        raise ConfigError(f"--objective={FLAGS.objective}: PBT scores a segment by final or mean")
    conf_params = tuple(alf_config.iter_conf_params(FLAGS.conf_param))
    # first: a misspelled parameter is "unknown, did you mean", not "cannot change mid-run"
    config = check_runs_can_start(FLAGS.conf, conf_params, space, objective.metric)
    for p in space.params:
        check_mutable(p.name)
    total = FLAGS.num_env_steps or config.num_env_steps
    if total < FLAGS.interval:
        raise ConfigError(f"--interval={FLAGS.interval} is longer than the members' run "
                          f"({total:,} env steps): give a shorter interval or --num_env_steps")
    return PbtSettings(FLAGS.conf, space, FLAGS.population, FLAGS.interval, total, objective,
                       quantile=FLAGS.quantile, resample_probability=FLAGS.resample_probability,
                       exploit=FLAGS.exploit, copy_replay_buffer=FLAGS.copy_replay_buffer,
                       conf_params=conf_params, seed=FLAGS.seed, parallel=FLAGS.parallel)


def _main() -> int:
    settings = settings_from_flags()
    study_dir = check_out_dir("--study_dir", FLAGS.study_dir)
    # segments are enqueued with their values: the sampler and pruner are never asked
    name, study = store.open_study(study_dir, FLAGS.storage, FLAGS.study_name, settings.spec(),
                                   "maximize", optuna.samplers.RandomSampler(),
                                   optuna.pruners.NopPruner())
    population = Population(settings, study, study_dir, _say)
    if population.enqueue_start():
        _say(f"[pbt] {name}: {settings.population} members, {settings.generations} "
             f"generations of {settings.interval:,} env steps, {settings.parallel} at once")
    try:
        population.run()
    finally:
        rows = pbt_report.lineage(population, settings.interval, settings.num_env_steps)
        table = pbt_report.write(study_dir, rows)
    cli.print_output(table)
    return 0


def main(argv: List[str] = None) -> int:
    return cli.run_command(_main, PROGRAM, argv)


if __name__ == "__main__":
    sys.exit(main())
