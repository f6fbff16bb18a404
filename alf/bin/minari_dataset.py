"""Convert between Minari datasets in the LOCAL Minari cache and alf datasets.

    python -m alf.bin.minari_dataset import --id=ID --out=PATH [--minari_root=DIR] [--overwrite]
    python -m alf.bin.minari_dataset export --dataset=PATH --id=ID [--minari_root=DIR]

`import` turns the Minari dataset ID (or a Minari dataset directory) into an alf dataset
at PATH: one row, every episode in Minari's order, FIRST ... LAST per episode. `export`
writes the complete episodes of the alf dataset PATH as the new Minari dataset ID
(`(namespace/)name-v<version>`); unfinished fragments at a row's start or end are dropped
with a notice. The cache is --minari_root, else $MINARI_DATASETS_PATH, else
~/.minari/datasets; nothing is downloaded (use `minari download ID` first). Needs the
`[offline]` extra: `pip install -e ".[offline]"`. See alf/datasets/minari_io.py.
"""
import os
import sys
from typing import List, Optional

from absl import flags

from alf.bin import cli
from alf.datasets import minari_io
from alf.errors import UserError

PROGRAM = "alf.bin.minari_dataset"
COMMANDS = ("import", "export")

flags.DEFINE_string("id", None, "Minari dataset id, e.g. pendulum/expert-v0 (import: an id "
                    "in the local cache or a Minari dataset directory; export: the new id).")
flags.DEFINE_string("out", None, "import: the alf dataset directory to write.")
flags.DEFINE_string("dataset", None, "export: the alf dataset directory to read.")
flags.DEFINE_string("minari_root", None, "The local Minari cache (default: "
                    "$MINARI_DATASETS_PATH, else ~/.minari/datasets).")
flags.DEFINE_bool("overwrite", False, "import: replace an existing alf dataset at --out.")
flags.DEFINE_bool("debug", False, "Show full tracebacks.")

FLAGS = flags.FLAGS


def _require(*names: str) -> None:
    missing = [f"--{n}" for n in names if not FLAGS[n].value]
    if missing:
        raise UserError(f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} "
                        "required; see --help")


def _run(command: str) -> int:
    if command == "import":
        _require("id", "out")
        info = minari_io.import_minari(FLAGS.id, FLAGS.out, minari_root=FLAGS.minari_root,
                                       overwrite=FLAGS.overwrite)
        out = os.path.abspath(os.path.expanduser(FLAGS.out))
        rows = f"{info.num_rows} row" + ("s" if info.num_rows != 1 else "")
        env = f", env {info.env_name}" if info.env_name else ""
        print(f"wrote alf dataset {out}: {rows}, {info.num_steps} steps, {info.num_episodes} "
              f"episodes (Minari dataset {info.source.get('dataset_id', FLAGS.id)}{env})",
              flush=True)
        return 0
    _require("dataset", "id")
    result = minari_io.export_minari(FLAGS.dataset, FLAGS.id, minari_root=FLAGS.minari_root)
    print(f"wrote Minari dataset {result.dataset_id} ({result.path}): {result.num_episodes} "
          f"episodes, {result.num_steps} steps", flush=True)
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    command = argv[1] if len(argv) > 1 and not argv[1].startswith("-") else None
    if command is not None:
        del argv[1]
    if cli.wants_help(argv) is None:
        if command not in COMMANDS:
            what = "give a command first" if command is None else f"unknown command {command!r}"
            print(f"{PROGRAM}: error: {what}: import (Minari -> alf) or export (alf -> Minari); "
                  "see --help", file=sys.stderr)
            return cli.EXIT_USAGE
    return cli.run_command(lambda: _run(command), PROGRAM, argv)


if __name__ == "__main__":
    sys.exit(main())
