"""Train an agent described by a gin file.

    python -m alf.bin.train --conf=ppo_cart_pole.gin --root_dir=runs/cp \
        [--conf_param 'TrainerConfig.num_env_steps=50000' ...]

``--conf`` is resolved as given, relative to the cwd, then in ``alf/examples/``.
If ``root_dir`` already holds a run (``config.gin``), training resumes from its
newest valid checkpoint with the saved config (``--conf_param`` may still
override values, e.g. to extend ``num_env_steps``). Exit status: 0 done,
2 bad input (nothing written), 130 interrupted (checkpoint saved).
"""
import os
import sys

from absl import flags

flags.DEFINE_string("conf", None, "Gin experiment file (bare names are looked up in alf/examples).")
flags.DEFINE_string("root_dir", None, "Directory for checkpoints, summaries and config.gin.")
flags.DEFINE_multi_string("conf_param", [], "Gin binding applied after the files, e.g. "
                          "'TrainerConfig.random_seed=1'. Repeatable.")
flags.DEFINE_bool("debug", False, "Show full tracebacks for configuration errors.")
flags.DEFINE_bool("quiet", False, "Do not print the progress line.")

FLAGS = flags.FLAGS
PROGRAM = "alf.bin.train"


def _main() -> int:
    from alf import config as alf_config
    from alf.errors import ConfigError
    from alf.trainers.trainer import CONFIG_FILE, Trainer
    from alf.trainers.trainer_config import TrainerConfig

    if not FLAGS.root_dir:
        raise ConfigError("--root_dir is required (where checkpoints and summaries go)")
    root_dir = os.path.abspath(os.path.expanduser(FLAGS.root_dir))
    saved = os.path.join(root_dir, CONFIG_FILE)
    params = alf_config.iter_conf_params(FLAGS.conf_param)
    if os.path.isfile(saved):
        if FLAGS.conf:
            print(f"{PROGRAM}: resuming {root_dir} with its saved config.gin "
                  f"(--conf {FLAGS.conf} is ignored; use --conf_param to override values)",
                  file=sys.stderr)
        with open(saved) as f:
            text = f.read()
        alf_config.parse_config(config_text=text, conf_params=params, config_name=saved)
    else:
        if not FLAGS.conf:
            raise ConfigError("--conf is required for a new run, e.g. --conf=ppo_cart_pole.gin")
        alf_config.parse_config(conf_file=FLAGS.conf, conf_params=params)
    text = alf_config.config_text()
    trainer = Trainer(TrainerConfig(), root_dir, config_text=text, quiet=FLAGS.quiet)
    trainer.run()
    return 0


def main(argv=None) -> int:
    from alf.bin import cli
    return cli.run_command(_main, PROGRAM, argv)


if __name__ == "__main__":
    sys.exit(main())
