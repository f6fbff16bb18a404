r"""Sweep gin parameters and seeds of one experiment: grid, random search or Optuna's TPE.

    python -m alf.bin.sweep --conf=ppo_cart_pole.gin --study_dir=runs/sweep_lr \
        --param 'Adam.lr=[1e-3, 3e-4]' --param 'PPOLoss.entropy_regularization=[0.0, 0.01]' \
        --seeds=0,1 --parallel=2

Every run is an ordinary alf run in ``<study_dir>/runs/<config>/seed_<s>`` (TensorBoard,
resume and ``alf.bin.play`` work on it); its score (``--objective`` of ``--metric``) goes
to ``<study_dir>/results.md`` and ``results.csv`` as runs finish.

Spaces (``--param NAME=SPACE``, repeatable): a list ``[a, b]`` (a grid axis), or a range
``uniform(lo, hi)``, ``loguniform(lo, hi)``, ``int(lo, hi)``, ``logint(lo, hi)`` (random
search and TPE). ``--sampler`` defaults to ``grid`` when every space is a list, else
``tpe`` with ``--n_trials`` configurations; each configuration runs once per seed.

``--parallel K`` runs K at once, each pinned to its share of the CPUs (torch, env and
worker threads sized for it). Ctrl-C stops every run with a checkpoint; rerunning the same
command keeps finished runs and resumes stopped ones. Other sweep processes, here or on
other machines, join the same study with the same command (a shared ``--study_dir``, or
``--storage`` a database URL); a process with nothing left to start waits for the runs
the others are running, so each prints the study's final table. Exit status: 0 done, 1
some runs failed (the error line says how many), 2 bad input (checked before any run
starts: nothing written), 130/143 stopped.
"""
import os
import sys
from typing import Annotated, List, Sequence

from absl import flags

from alf import config as alf_config
from alf.bin import cli, flag_ranges
from alf.bin.out_dir import check_out_dir
from alf.config_ranges import NonNegativeInt, PositiveInt, Range
from alf.errors import ConfigError, RunFailedError
from alf.studies import results as study_results
from alf.studies import study_store as store
from alf.studies.config_check import check_runs_can_start
from alf.studies.objective import Objective
from alf.studies.search_space import SearchSpace
from alf.studies.sweep import SAMPLERS, Sweep, SweepSettings

flags.DEFINE_string("conf", None, "Gin experiment file every run trains (as for alf.bin.train).")
flags.DEFINE_string("study_dir", None, "Directory of the study: runs/, results.md, the journal.")
flags.DEFINE_multi_string("param", [], "A swept parameter NAME=SPACE, e.g. 'Adam.lr=[1e-3, 3e-4]' "
                          "or 'Adam.lr=loguniform(1e-4, 1e-2)'.")
flags.DEFINE_list("seeds", ["0"], "Seeds every configuration runs with, e.g. --seeds=0,1,2.")
flags.DEFINE_multi_string("conf_param", [], "A binding every run gets, e.g. "
                          "'TrainerConfig.num_env_steps=50000'.")
flags.DEFINE_string("objective", "final", "Score of a run: final, mean, auc or steps_to:X.")
flags.DEFINE_string("metric", "eval_return", "Curve the objective reads: eval_return (eval.csv) "
                    "or train_return (progress.csv).")
flags.DEFINE_string("sampler", None, "grid, random or tpe (default: grid if every space is a "
                    "list, else tpe).")
flags.DEFINE_integer("n_trials", None, "Configurations random/tpe try (each once per seed).")
flags.DEFINE_integer("parallel", 1, "Runs at once on this machine, the CPUs split between them.")
flags.DEFINE_bool("prune", False, "Stop runs whose evaluations lag the median of the others at "
                  "the same env steps (Optuna's MedianPruner).")
flags.DEFINE_integer("sampler_seed", 0, "Seed of the random/tpe sampler.")
flags.DEFINE_string("storage", None, "Optuna database URL shared by several machines, e.g. "
                    "postgresql://user@host/db (the [postgres] extra; default: the journal "
                    "file <study_dir>/study.journal).")
flags.DEFINE_string("study_name", None, "Name of the study in the storage (default: the "
                    "study_dir's name).")
flags.DEFINE_bool("debug", False, "Show full tracebacks for configuration errors.")

FLAGS = flags.FLAGS
PROGRAM = "alf.bin.sweep"
# what each numeric flag may be (alf.bin.flag_ranges); seeds are TrainerConfig.random_seed
RANGES = {"seeds": Sequence[NonNegativeInt], "n_trials": PositiveInt,
          "parallel": PositiveInt,
          "sampler_seed": Annotated[int, Range(0, 2 ** 32 - 1)]}  # numpy's seed range
flag_ranges.declare(RANGES)


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def settings_from_flags() -> SweepSettings:
    """The study's settings from the command line; every mistake is a ConfigError."""
    if not FLAGS.conf or not FLAGS.study_dir:
        raise ConfigError("--conf and --study_dir are required, e.g. --conf=ppo_cart_pole.gin "
                          "--study_dir=runs/my_sweep")
    try:
        seeds = [int(s) for s in FLAGS.seeds]
    except ValueError:
        raise ConfigError(f"--seeds={','.join(FLAGS.seeds)}: give whole numbers, e.g. "
                          "--seeds=0,1,2") from None
    flag_ranges.check(RANGES, {"seeds": seeds})
    space = SearchSpace.parse(FLAGS.param, seeds)
    sampler = FLAGS.sampler or ("grid" if space.is_grid else "tpe")
    if sampler not in SAMPLERS:
        raise ConfigError(f"--sampler={sampler}: choose one of {', '.join(SAMPLERS)}")
    if sampler == "grid" and not space.is_grid:
        ranged = [p.name for p in space.params if not p.is_list]
        raise ConfigError(f"--sampler=grid needs a list for every --param; {', '.join(ranged)} "
                          "is a range: give a list, or use --sampler=tpe/random")
    if sampler != "grid" and FLAGS.n_trials is None:
        raise ConfigError(f"--sampler={sampler} needs --n_trials (how many configurations)")
    return SweepSettings(conf=FLAGS.conf, space=space,
                         objective=Objective.parse(FLAGS.objective, FLAGS.metric),
                         sampler=sampler, n_trials=FLAGS.n_trials,
                         conf_params=tuple(alf_config.iter_conf_params(FLAGS.conf_param)),
                         prune=FLAGS.prune, sampler_seed=FLAGS.sampler_seed,
                         parallel=FLAGS.parallel)


def _main() -> int:
    settings = settings_from_flags()
    study_dir = check_out_dir("--study_dir", FLAGS.study_dir)
    check_runs_can_start(settings.conf, settings.conf_params, settings.space,
                         settings.objective.metric)
    name, study = store.open_study(study_dir, FLAGS.storage, FLAGS.study_name, settings.spec(),
                                   settings.objective.direction, settings.make_sampler(),
                                   settings.make_pruner())
    sweep = Sweep(settings, study, study_dir, _say)
    added = sweep.enqueue_missing()
    if added:
        _say(f"[sweep] {name}: {added} run(s) to do, {settings.parallel} at once "
             f"(results: {os.path.join(study_dir, 'results.md')})")
    try:
        sweep.run()
    finally:  # re-read from the study: the other processes' runs are in it too
        table = study_results.write(study_dir, study, settings.objective.name)
    cli.print_output(table)
    failed = study_results.failure_summary(study, study_dir)
    if failed:
        raise RunFailedError(failed)
    return 0


def main(argv: List[str] = None) -> int:
    return cli.run_command(_main, PROGRAM, argv)


if __name__ == "__main__":
    sys.exit(main())
