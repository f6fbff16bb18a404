"""Shared command-line plumbing: flag parsing and turning user errors into exit status 2.

A user mistake (typo in a gin file, unknown env, corrupt checkpoint) prints one
line naming the problem and exits with status 2 -- no traceback unless
``--debug``. Ctrl-C exits with 130 after the command has cleaned up.
"""
import logging
import re
import sys
from typing import Callable, List, Optional

from absl import flags
from absl import logging as absl_logging

from alf.config import binding_location, describe_call_error
from alf.errors import ConfigError, UserError

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def parse_flags(argv: List[str], program: str) -> List[str]:
    """Parse absl flags; an unknown/malformed flag is a usage error (exit 2)."""
    try:
        return flags.FLAGS(argv)
    except flags.Error as e:
        print(f"{program}: {e}\nRun `python -m {program} --helpfull` for the list of flags.",
              file=sys.stderr)
        sys.exit(EXIT_USAGE)


def setup_logging() -> None:
    absl_logging.use_absl_handler()
    absl_logging.set_verbosity(absl_logging.INFO)
    absl_logging.get_absl_handler().python_handler.stream = sys.stderr


def run_main(main: Callable[[], Optional[int]], program: str, debug: bool = False) -> int:
    """Run ``main`` and map failures to exit codes (2 = user error, 130 = Ctrl-C)."""
    try:
        return main() or 0
    except UserError as e:
        if debug:
            raise
        message = user_message(e)
        if isinstance(e, ConfigError):
            message = _with_binding_location(message)
        print(f"{program}: error: {message}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"{program}: interrupted; state saved, all workers stopped.", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (TypeError, ValueError) as e:
        message = describe_call_error(e)
        if message is None or debug:
            raise
        print(f"{program}: error: {message}", file=sys.stderr)
        return EXIT_USAGE


def user_message(exc: BaseException) -> str:
    """``exc``'s message without the "In call to configurable ..." lines gin appends
    when an exception passes through a configurable (the message names the thing)."""
    lines = [l for l in str(exc).splitlines() if not _GIN_CALL_LINE.match(l)]
    return "\n".join(lines).strip()


_GIN_CALL_LINE = re.compile(r"^\s*In call to configurable '")
_BINDING_KEY = re.compile(r"\b([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)\b")


def _with_binding_location(message: str) -> str:
    """A bad *value* is found when its configurable is called, after parsing; name the
    file and line (or --conf_param) that set the first binding the message mentions."""
    if message.startswith("Config error ("):  # parse errors already say where
        return message
    for key in _BINDING_KEY.findall(message):
        where = binding_location(key)
        if where:
            return f"{message} (set in {where})"
    return message


def silence_noisy_loggers() -> None:
    for name in ("matplotlib", "PIL"):
        logging.getLogger(name).setLevel(logging.WARNING)


def run_command(main: Callable[[], Optional[int]], program: str,
                argv: Optional[List[str]] = None) -> int:
    """Parse flags, set up logging and run ``main`` with :func:`run_main`'s exit codes."""
    parse_flags(list(argv if argv is not None else sys.argv), program)
    setup_logging()
    return run_main(main, program, debug=flags.FLAGS.debug)
