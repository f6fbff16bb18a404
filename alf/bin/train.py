r"""Train an agent described by a gin file.

    python -m alf.bin.train --conf=ppo_cart_pole.gin --root_dir=runs/cp \
        [--conf_param 'TrainerConfig.num_env_steps=50000' ...]

``--conf`` is resolved as given, relative to the cwd, then in ``alf/examples/``.
If ``root_dir`` already holds a run (``config.gin``), training resumes from its
newest valid checkpoint with the saved config (``--conf_param`` may still
override values, e.g. to extend ``num_env_steps``; they are kept in the run's
``config.gin`` for later resumes). A ``root_dir`` with a ``config.gin`` but no
checkpoint starts over (with ``--conf`` when given). A gin ``import my_module``
finds ``my_module.py`` next to the ``--conf`` file from any working directory.
``--rerun=OLD --root_dir=NEW`` starts a new run of run ``OLD``'s exact config (its seed
and its copied user modules included; ``--conf_param`` may override). Each start records
where the run came from in ``root_dir/run_info/`` (docs/run_directory.md).
Exit status: 0 done, 1 failed (e.g. a full disk: one line naming the file; training that
went non-finite: one line naming the loss term or tensor, TrainerConfig.check_finite), 2 bad input
(nothing written), 130 interrupted (Ctrl-C), 143 stopped by SIGTERM (``kill``, ``docker
stop``, Slurm, Kubernetes); both save a checkpoint at the iteration boundary first.
"""
import os
import random
import sys
from typing import List

import gin
from absl import flags

from alf import config as alf_config
from alf.bin import cli, rerun
from alf.bin.video_path import nearest_existing_ancestor
from alf.distributed.rank_exit import leave_process
from alf.distributed.rank_group import RankGroup, launched_by_torchrun
from alf.errors import ConfigError, NonFiniteError, UserError
from alf.trainers.checkpointer import Checkpointer
from alf.trainers.interrupt_guard import InterruptedBeforeTraining, stop_signal
from alf.trainers.resume_overrides import check_resume_overrides
from alf.trainers.trainer import CONFIG_FILE, Trainer
from alf.trainers.trainer_config import TrainerConfig

flags.DEFINE_string("conf", None, "Gin experiment file (bare names are looked up in alf/examples).")
flags.DEFINE_string("root_dir", None, "Directory for checkpoints, summaries and config.gin.")
flags.DEFINE_multi_string("conf_param", [], "Gin binding applied after the files, e.g. "
                          "'TrainerConfig.random_seed=1'")
flags.DEFINE_string("rerun", None, "A run directory whose exact config (config.gin, seed "
                    "included, and its copied user modules) starts a new run in --root_dir; "
                    "--conf_param may still override values, e.g. the seed.")
flags.DEFINE_bool("debug", False, "Show full tracebacks for configuration errors.")
flags.DEFINE_bool("quiet", False, "Do not print the progress, checkpoint and evaluation lines "
                  "(warnings and what a resume restored are still shown).")

FLAGS = flags.FLAGS
PROGRAM = "alf.bin.train"


def _main() -> int:
    group = RankGroup.from_environment()  # torchrun: join the other ranks first
    completed = False
    try:
        try:
            trainer = _build_trainer(group)
        except KeyboardInterrupt as e:
            interrupted = InterruptedBeforeTraining()
            interrupted.signum = stop_signal(e)
            interrupted.alf_silent = getattr(e, "alf_silent", False) or (
                group is not None and not group.is_main)  # rank 0 says it
            raise interrupted from None
        try:
            trainer.run()
        except NonFiniteError as e:
            raise _naming_newest_checkpoint(e, trainer.root_dir) from e.__cause__
        completed = True
    finally:
        if group is not None:
            group.close(completed)
    return 0


def _naming_newest_checkpoint(error: NonFiniteError, root_dir: str) -> NonFiniteError:
    """``error`` with the checkpoint a rerun would resume from named (every checkpoint
    on disk was saved before the run went non-finite, and is finite)."""
    newest = Checkpointer(os.path.join(root_dir, "train")).list_checkpoints()
    kept = (f"The newest checkpoint, {os.path.relpath(newest[0][1], root_dir)} (iteration "
            f"{newest[0][0]:,}), is from before it and finite" if newest else
            "No checkpoint was saved before it")
    named = NonFiniteError(str(error).replace("The newest checkpoint before it is kept", kept))
    named.alf_silent = getattr(error, "alf_silent", False)
    return named


def _build_trainer(group=None):
    """Parse the config (saved one when resuming) and build the experiment; writes nothing.

    Under torchrun rank 0 alone reads ``root_dir`` and the ``--conf`` file and hands
    the resulting config text to the other ranks (so they never race rank 0 writing
    ``config.gin``, and hosts without rank 0's disk need neither)."""
    root_dir = os.path.abspath(os.path.expanduser(FLAGS.root_dir or "."))
    if group is None:
        text, overrides = _read_config()
    else:
        text, overrides = group.rank0_decides(_read_config, "reading the config")
        if not group.is_main:
            alf_config.parse_config(config_text=text, config_name="the config of rank 0")
    return Trainer(TrainerConfig(), root_dir, config_text=text, quiet=FLAGS.quiet,
                   overrides=overrides, rank_group=group)


def _read_config():
    """``(config text, overrides)``: ``--conf`` (new run), ``--rerun``'s saved config (a
    new run of an old one) or ``root_dir``'s saved ``config.gin`` (resume), ``--conf_param``
    applied; the seed is resolved and the config checked (``TrainerConfig()``)."""
    if not FLAGS.root_dir:
        raise ConfigError("--root_dir is required (where checkpoints and summaries go)")
    root_dir = os.path.abspath(os.path.expanduser(FLAGS.root_dir))
    if os.path.exists(root_dir) and not os.path.isdir(root_dir):
        raise UserError(f"--root_dir {root_dir} is an existing file, not a directory: pass a "
                        "new directory (or the directory of a run to resume)")
    _check_root_dir_creatable(root_dir)
    saved = os.path.join(root_dir, CONFIG_FILE)
    params = alf_config.iter_conf_params(FLAGS.conf_param)
    has_checkpoints = bool(Checkpointer(os.path.join(root_dir, "train")).list_checkpoints())
    if FLAGS.rerun:
        import_dirs = rerun.parse_rerun_config(FLAGS.rerun, root_dir, FLAGS.conf, params,
                                               PROGRAM)
        overrides = []
    elif os.path.isfile(saved) and (has_checkpoints or not FLAGS.conf):
        if FLAGS.conf:
            print(f"{PROGRAM}: resuming {root_dir} with its saved config.gin "
                  f"(--conf {FLAGS.conf} is ignored; use --conf_param to override values)",
                  file=sys.stderr)
        with open(saved) as f:
            saved_text = f.read()
        overrides = _changing(saved_text, params, saved)
        check_resume_overrides(overrides)  # one a checkpoint would undo: refused
        alf_config.parse_config(config_text=saved_text, conf_params=params, config_name=saved)
        import_dirs = alf_config.import_dirs_in(saved_text)
    else:
        if not FLAGS.conf:
            raise ConfigError("--conf is required for a new run, e.g. --conf=ppo_cart_pole.gin")
        alf_config.parse_config(conf_file=FLAGS.conf, conf_params=params)
        import_dirs = [os.path.dirname(alf_config.resolve_conf_file(FLAGS.conf))]
        overrides = []
    _resolve_random_seed()
    text = alf_config.import_path_header(import_dirs) + alf_config.config_text()
    TrainerConfig()  # bad values fail here, on rank 0, before any other rank builds
    return text, overrides


def _changing(saved_text: str, params: List[str], saved: str) -> List[str]:
    """The ``params`` that change the saved config: what a resume says it applied (a sweep
    or PBT resume passes every one of its bindings again, most of them saved already)."""
    try:
        alf_config.parse_config(config_text=saved_text, config_name=saved)
        before, changing = gin.config_str(), []
        for param in params:
            gin.parse_config(alf_config.element_binding(param))  # Name.param[i]=v too
            after = gin.config_str()
            if after != before:
                changing.append(param)
            before = after
        return changing
    except Exception:  # noqa: BLE001 - the parse that follows reports a bad binding
        return list(params)


def _check_root_dir_creatable(root_dir: str) -> None:
    """One line now, instead of a traceback from ``os.makedirs`` after the build."""
    ancestor = nearest_existing_ancestor(root_dir)
    if not os.path.isdir(ancestor):
        raise UserError(f"--root_dir {root_dir} cannot be created: {ancestor} is a file, not a "
                        "directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise UserError(f"--root_dir {root_dir} cannot be created: {ancestor} is not writable")


def _resolve_random_seed() -> None:
    """Bind a drawn ``TrainerConfig.random_seed`` when it is None, before the config text is
    captured, so the saved config (and anything rebuilt from it) has the seed the run used."""
    try:
        seed = gin.query_parameter("TrainerConfig.random_seed")
    except ValueError:  # not bound: TrainerConfig's default, None
        seed = None
    if seed is None:
        seed = random.SystemRandom().randrange(2 ** 31)
        gin.bind_parameter("TrainerConfig.random_seed", seed)
        print(f"{PROGRAM}: TrainerConfig.random_seed not set; using {seed} (saved in config.gin)",
              file=sys.stderr)


def main(argv=None) -> int:
    return cli.run_command(_main, PROGRAM, argv)


def console_main() -> int:
    """``python -m alf.bin.train`` and the ``alf-train`` command: :func:`main`, then a
    torchrun rank leaves through :func:`leave_process` (interpreter finalization can
    abort a rank after it finished: alf/distributed/rank_exit.py)."""
    status = main()
    if launched_by_torchrun():
        leave_process(status)
    return status


if __name__ == "__main__":
    sys.exit(console_main())
