"""Shared command-line plumbing: flag parsing, help, discovery, user errors -> exit status 2.

A user mistake (typo in a gin file, unknown env, corrupt checkpoint) prints one
line naming the problem and exits with status 2 -- no traceback unless
``--debug``. Ctrl-C exits with 130 after the command has cleaned up; SIGTERM
(``kill``, ``docker stop``, Slurm, Kubernetes) is handled the same way and exits
with 143. A file that cannot be written (full disk) is one line, status 1.

Every command that runs through :func:`run_command` also gets (defined here, so
``alf.bin.train`` and ``alf.bin.play`` share them, and they need no
``--root_dir``/``--conf``):

- ``-h``/``--help``/``--helpshort``: the command's docstring and its own flags;
  ``--helpfull``: every flag, absl's logging flags included (exit 0). absl only
  registers help flags in ``absl.app``, which alf does not use.
- ``--list_examples``, ``--list_configurables``, ``--describe NAME``: what can be
  run and set, from :mod:`alf.config_help`.
"""
import os
import re
import signal
import sys
import threading
from typing import Callable, List, Optional

from absl import flags
from absl import logging as absl_logging

from alf import config as alf_config
from alf import config_help
from alf.bin.extras import missing_package_message, user_import_message
from alf.bin.log_lines import AlfLogFormatter
from alf.config import binding_location, describe_call_error
from alf.errors import ConfigError, RunFailedError, UserError
from alf.trainers.interrupt_guard import (InterruptedBeforeTraining, Terminated,
                                          TrainingInterrupted, exit_status, signal_label,
                                          stop_signal)
from alf.trainers.trainer import CONFIG_FILE
from alf.utils.atomic_write import SPACE_ERRNOS, write_failed
from alf.utils.process_signals import ignore_stop_signals

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT; SIGTERM gives 143 (128 + 15)

HELP_FLAGS = ("help", "helpshort", "helpfull")
_HELP_TOKENS = {f"{dash}{name}" for dash in ("-", "--") for name in HELP_FLAGS} | {"-h", "-?"}
_SHARED_FLAGS = ("list_examples", "list_configurables", "describe") + HELP_FLAGS


def _define_shared_flags() -> None:
    """Help and discovery flags (once per process: absl flags are global)."""
    if "help" not in flags.FLAGS:
        flags.DEFINE_bool("help", False, "Show this command's description and flags, then exit.",
                          short_name="h")
    if "helpshort" not in flags.FLAGS:
        flags.DEFINE_bool("helpshort", False, "Same as --help.")
    if "helpfull" not in flags.FLAGS:
        flags.DEFINE_bool("helpfull", False, "Show every flag, absl's logging flags included.")
    if "list_examples" not in flags.FLAGS:
        flags.DEFINE_bool("list_examples", False, "List the bundled example experiments "
                          "(alf/examples/*.gin, usable as --conf NAME) with their descriptions.")
    if "list_configurables" not in flags.FLAGS:
        flags.DEFINE_bool("list_configurables", False, "List every gin configurable (algorithms, "
                          "networks, TrainerConfig, ...) with a one-line description.")
    if "describe" not in flags.FLAGS:
        flags.DEFINE_multi_string(
            "describe", [], "Show the gin parameters of a configurable with their defaults and "
            "help, e.g. --describe PPOAlgorithm, --describe TrainerConfig.num_env_steps or "
            "--describe PPO (every match). With --conf, the config's values are shown too")


_define_shared_flags()


def invocation(argv0: str, program: str) -> str:
    """How the user started the command: ``alf-train`` (console script) or ``python -m ...``."""
    name = os.path.basename(argv0 or "")
    return name if name.startswith("alf-") else f"python -m {program}"


def parse_flags(argv: List[str], program: str) -> List[str]:
    """Parse absl flags; an unknown/malformed flag is a usage error (exit 2)."""
    try:
        return flags.FLAGS(argv)
    except flags.Error as e:
        print(f"{program}: {e}\nRun `{invocation(argv[0] if argv else '', program)} --help` "
              "for the list of flags.", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def help_text(main_module: str, program: str, argv0: str = "", full: bool = False) -> str:
    """``--help``: the command module's docstring, then its flags and the shared ones.

    Args:
        main_module: ``__module__`` of the command's main function (``__main__`` under
            ``python -m``), which is also the module absl files its flags under.
        program: the command's module path, e.g. ``alf.bin.train``.
        argv0: ``sys.argv[0]``, to say ``alf-train`` when run as the console script.
        full: every registered flag (``--helpfull``).
    """
    module = sys.modules.get(main_module)
    doc = (getattr(module, "__doc__", None) or "").strip().replace("``", "`")  # rST -> terminal
    usage = f"usage: {invocation(argv0, program)} [flags]"
    parts = [usage, "", doc] if doc else [usage]
    by_module = flags.FLAGS.flags_by_module_dict()
    if full:
        parts += ["", flags.FLAGS.get_help().strip()]
    else:
        # absl files flags defined in the ``__main__`` module under sys.argv[0] (a path)
        own_key = sys.argv[0] if main_module == "__main__" else main_module
        own = _render_flags(by_module.get(own_key, []) or by_module.get(main_module, []))
        shared = _render_flags(f for f in by_module.get(__name__, []) if f.name in _SHARED_FLAGS)
        parts += ["", "flags:", own] if own else []
        parts += ["", "help and discovery (no --root_dir or --conf needed):", shared]
        parts += ["", f"Run `{invocation(argv0, program)} --helpfull` for every flag "
                      "(absl logging flags included)."]
    return "\n".join(parts)


def _render_flags(flag_list) -> str:
    """absl's own per-flag help formatting, without its module header line."""
    flag_list = sorted(flag_list, key=lambda f: f.name)
    if not flag_list:
        return ""
    lines: List[str] = []
    flags.FLAGS._render_flag_list(flag_list, lines, "  ")  # pylint: disable=protected-access
    return "\n".join(lines)


def print_output(text: str) -> None:
    """Print ``text`` to stdout; a reader that stops early (``| head``) is not an error."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        # Python would report the pipe again when flushing stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def wants_help(argv: List[str]) -> Optional[str]:
    """``"full"``/``"short"`` when ``argv`` asks for help (before any ``--``), else None.

    Checked before parsing, so help works even next to a flag with a bad value."""
    for token in argv[1:]:
        if token == "--":
            break
        if token in _HELP_TOKENS:
            return "full" if token.endswith("helpfull") else "short"
    return None


def _parse_config_for_describe() -> bool:
    """Parse the config the command line names, so ``--describe`` shows its values (and
    configurables that its ``import`` lines register): ``--conf``, else the saved
    ``config.gin`` of an existing ``--root_dir``, plus ``--conf_param``. False if none."""
    f = flags.FLAGS
    conf = f["conf"].value if "conf" in f else None
    params = alf_config.iter_conf_params(f["conf_param"].value if "conf_param" in f else [])
    root_dir = f["root_dir"].value if "root_dir" in f else None
    if conf:
        alf_config.parse_config(conf_file=conf, conf_params=params)
        return True
    if root_dir:
        saved = os.path.join(os.path.abspath(os.path.expanduser(root_dir)), CONFIG_FILE)
        if os.path.isfile(saved):
            with open(saved) as fh:
                alf_config.parse_config(config_text=fh.read(), conf_params=params,
                                        config_name=saved)
            return True
    if params:
        alf_config.parse_config(conf_params=params)
        return True
    return False


def discover(program: str, argv0: str = "") -> Optional[int]:
    """Run ``--list_examples`` / ``--list_configurables`` / ``--describe`` if given.

    Returns 0 when one of them ran, None when none was asked for. An unknown
    ``--describe`` name raises :class:`UserError` (one line, exit 2)."""
    f = flags.FLAGS
    if not (f.list_examples or f.list_configurables or f.describe):
        return None
    config_help.register_all()
    # the config first: its `import` lines register the user's own configurables
    parsed = bool(f.describe or f.list_configurables) and _parse_config_for_describe()
    show_bound = bool(f.describe) and parsed
    out = []
    if f.list_examples:
        out.append(config_help.format_examples(invocation(argv0, program)))
    if f.list_configurables:
        out.append(config_help.format_configurable_list())
    for query in f.describe:
        out.append(config_help.describe(query, show_bound=show_bound))
    print_output("\n\n".join(out))
    return 0


def setup_logging() -> None:
    """Log records go to stderr as ``[alf] ...`` lines (:mod:`alf.bin.log_lines`)."""
    absl_logging.use_absl_handler()
    absl_logging.set_verbosity(absl_logging.INFO)
    handler = absl_logging.get_absl_handler().python_handler
    handler.stream = sys.stderr
    handler.setFormatter(AlfLogFormatter())


def run_main(main: Callable[[], Optional[int]], program: str, debug: bool = False) -> int:
    """Run ``main`` and map failures to exit codes (1 = failed, 2 = user error or a missing
    extra's package, 130 = Ctrl-C, 143 = SIGTERM).

    SIGINT gets Python's KeyboardInterrupt handler even when this process inherited it
    ignored (a ``&`` job of a non-interactive shell does), so ``kill -INT`` stops every
    alf command the same way, not only training (whose guard installs its own). SIGTERM
    raises :class:`~alf.trainers.interrupt_guard.Terminated`, a KeyboardInterrupt: every
    command cleans up on it as on Ctrl-C instead of dying on the spot."""
    _interrupts_raise()
    try:
        return _run_unless_silent(main, debug)
    except UserError as e:
        if debug:
            raise
        message = user_message(e)
        if isinstance(e, ConfigError):
            message = _with_binding_location(message)
        print(f"{program}: error: {message}", file=sys.stderr)
        return EXIT_USAGE
    except RunFailedError as e:
        if debug:
            raise
        print(f"{program}: error: {e}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt as e:
        _ignore_further_interrupts()  # the command is stopping: a 2nd/3rd Ctrl-C changes nothing
        print(f"{program}: {interrupted_message(e)}", file=sys.stderr)
        return _interrupted_status(e)
    except ModuleNotFoundError as e:
        # a deferred import of a package from an extra that is not installed, or one the
        # user's own code (an env module) imports and nobody installed
        message = missing_package_message(e, program) or user_import_message(e)
        if message is None or debug:
            raise
        print(f"{program}: error: {message}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as e:
        # a write that fails for want of space anywhere not handled where it happened
        if e.errno not in SPACE_ERRNOS or debug:
            raise
        print(f"{program}: error: {write_failed(e.filename or 'a file', e)}", file=sys.stderr)
        return EXIT_FAILED
    except (TypeError, ValueError) as e:
        message = describe_call_error(e)
        if message is None or debug:
            raise
        print(f"{program}: error: {message}", file=sys.stderr)
        return EXIT_USAGE


def _interrupted_status(exc: KeyboardInterrupt) -> int:
    return exit_status(exc)


def _run_unless_silent(main: Callable[[], Optional[int]], debug: bool) -> int:
    """``main()``; an error marked ``alf_silent`` (a data-parallel rank whose error
    another rank prints: rank 0, or the lowest rank with the same message) gives its
    exit status without printing."""
    try:
        return main() or 0
    except BaseException as e:  # noqa: BLE001 - re-raised unless silent
        if isinstance(e, SystemExit) or not getattr(e, "alf_silent", False) or debug:
            raise
        if isinstance(e, KeyboardInterrupt):
            _ignore_further_interrupts()
            return _interrupted_status(e)
        if isinstance(e, UserError) or (isinstance(e, (TypeError, ValueError))
                                        and describe_call_error(e) is not None):
            return EXIT_USAGE
        return EXIT_FAILED


def _interrupts_raise() -> None:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, _raise_terminated)


def _raise_terminated(signum, frame) -> None:  # noqa: ARG001 - signal API
    raise Terminated


def _ignore_further_interrupts() -> None:
    ignore_stop_signals()


def interrupted_message(exc: KeyboardInterrupt) -> str:
    """What a Ctrl-C (or SIGTERM) left behind: "state saved" only when a checkpoint was
    written; a stop nobody asked for (e.g. the launcher exited) says why."""
    signum, cause = stop_signal(exc), getattr(exc, "cause", None)
    verb = ("stopped" if cause else "interrupted" if signum == signal.SIGINT else
            f"stopped by {signal_label(signum)}")
    why = f" because {cause}" if cause else ""
    if isinstance(exc, InterruptedBeforeTraining):
        return f"{verb} before training started{why}; nothing was saved."
    if not isinstance(exc, TrainingInterrupted):
        return f"{verb}{why}."
    if exc.abandoned:
        resume = (f"a rerun resumes from {exc.newest}" if exc.newest else
                  "no checkpoint exists yet, so a rerun starts over")
        return (f"{verb} during iteration {exc.iteration:,}{why}, which was abandoned and not "
                f"saved; all workers stopped. {resume[0].upper() + resume[1:]}.")
    if exc.checkpoint:
        return (f"{verb} at iteration {exc.iteration:,}{why}; state saved in {exc.checkpoint}, "
                "all workers stopped. Rerun the same command to resume.")
    return (f"{verb} at iteration {exc.iteration:,}{why}; its checkpoint was already saved, "
            "all workers stopped. Rerun the same command to resume.")


def user_message(exc: BaseException) -> str:
    """``exc``'s message without the "In call to configurable ..." lines gin appends
    when an exception passes through a configurable (the message names the thing)."""
    lines = [l for l in str(exc).splitlines() if not _GIN_CALL_LINE.match(l)]
    return "\n".join(lines).strip()


_GIN_CALL_LINE = re.compile(r"^\s*In call to configurable '")
# a key not inside a scoped name ("rnd/alf.optimizers.Adam.lr" is another binding than
# the unscoped "alf.optimizers.Adam.lr", whose line would be the wrong one to name)
_BINDING_KEY = re.compile(r"(?<![\w./])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)\b")


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


def run_command(main: Callable[[], Optional[int]], program: str,
                argv: Optional[List[str]] = None) -> int:
    """Parse flags, set up logging and run ``main`` with :func:`run_main`'s exit codes.

    ``--help`` (and its variants) prints help and returns 0 without parsing the
    other flags; the discovery flags run instead of ``main``."""
    argv = list(argv if argv is not None else sys.argv)
    argv0 = argv[0] if argv else ""
    kind = wants_help(argv)
    if kind is None:
        rest = parse_flags(argv, program)
        if len(rest) > 1:
            print(f"{program}: unexpected argument(s) {' '.join(rest[1:])}: every option is a "
                  f"flag (e.g. --conf=ppo_cart_pole.gin); see --help", file=sys.stderr)
            return EXIT_USAGE
        if flags.FLAGS.helpfull:
            kind = "full"
        elif flags.FLAGS.help or flags.FLAGS.helpshort:
            kind = "short"
    if kind is not None:
        print_output(help_text(main.__module__, program, argv0, full=kind == "full"))
        return 0
    setup_logging()
    debug = "debug" in flags.FLAGS and flags.FLAGS.debug
    if any(flags.FLAGS[name].value for name in ("list_examples", "list_configurables", "describe")):
        return run_main(lambda: discover(program, argv0), program, debug=debug)
    return run_main(main, program, debug=flags.FLAGS.debug)
