"""What each alf command needs beyond ``install_requires``, and the one-line error when a
package of a missing extra (setup.py's ``extras_require``) is imported.

A command whose extra is not installed must not die with a ``ModuleNotFoundError``
traceback: it prints one line naming the package and the ``pip install -e ".[extra]"``
that brings it, and exits with status 2 (a setup mistake, like every user error).
Two places raise it: an import when the command's module loads (before its ``main`` runs;
:func:`install_hook` catches those in ``sys.excepthook``) and a deferred import while it
runs (``alf.bin.cli.run_main``).

The tables are checked against setup.py and against every import in ``alf/`` by
``tests/test_declared_imports.py``: a module-level import of a command's modules must be
declared by ``install_requires`` or the command's :data:`REQUIRED` extras; a deferred
(function-local) or ``try/except ImportError``-guarded one by those or its
:data:`OPTIONAL` extras (a feature that needs more, e.g. Atari ids).
"""
import importlib.util
import os
import re
import sys
from types import TracebackType
from typing import Dict, Optional, Tuple, Type

# optional features reachable from every command that builds envs or trainers
_ENV_EXTRAS = ("atari", "mujoco", "envpool", "minigrid", "robotics")

#: command module -> the extras it cannot run without (the docs say so too)
REQUIRED: Dict[str, Tuple[str, ...]] = {
    "alf.bin.train": (),
    "alf.bin.play": (),
    "alf.bin.export_dataset": (),
    "alf.bin.minari_dataset": ("offline",),
    "alf.bin.sweep": ("sweep",),
    "alf.bin.pbt": ("sweep",),
    "alf.bin.compare": ("sweep",),
}

#: command module -> extras of optional features (Atari ids, W&B, videos, ...)
OPTIONAL: Dict[str, Tuple[str, ...]] = {
    "alf.bin.train": _ENV_EXTRAS + ("wandb",),
    "alf.bin.play": _ENV_EXTRAS + ("video", "wandb"),
    "alf.bin.export_dataset": _ENV_EXTRAS + ("wandb",),
    "alf.bin.minari_dataset": _ENV_EXTRAS + ("wandb",),
    "alf.bin.sweep": _ENV_EXTRAS + ("wandb", "postgres"),
    "alf.bin.pbt": _ENV_EXTRAS + ("wandb", "postgres"),
    "alf.bin.compare": _ENV_EXTRAS + ("wandb",),
}

#: top-level import name of each optional package alf imports -> the extras that
#: install it, the one to suggest first
PACKAGE_EXTRAS: Dict[str, Tuple[str, ...]] = {
    "optuna": ("sweep",),
    "sqlalchemy": ("sweep", "postgres"),
    # the driver SQLAlchemy uses for --storage=postgresql://... (alf.studies.storage_driver)
    "psycopg": ("postgres",),
    "scipy": ("sweep",),
    "matplotlib": ("plot", "sweep"),
    "minari": ("offline",),
    "h5py": ("offline",),
    "packaging": ("offline",),
    "wandb": ("wandb",),
    "imageio": ("video",),
    "imageio_ffmpeg": ("video",),
    "ale_py": ("atari",),
    "mujoco": ("mujoco",),
    "minigrid": ("minigrid",),
    "gymnasium_robotics": ("robotics",),
    "envpool": ("envpool",),
}


def extra_for(package: str, command: Optional[str]) -> Optional[str]:
    """The extra to install for ``package`` (a top-level import name) when ``command``
    (``alf.bin.*``, or None) needs it: one the command needs if any, else the first that
    installs it; None when no extra does."""
    extras = PACKAGE_EXTRAS.get(package)
    if not extras:
        return None
    wanted = REQUIRED.get(command or "", ()) + OPTIONAL.get(command or "", ())
    return next((e for e in extras if e in wanted), extras[0])


def missing_package_message(error: ModuleNotFoundError, command: Optional[str]) -> Optional[str]:
    """One line for ``error`` (a package of an extra is not installed, or is too old to
    have the submodule imported), naming the ``pip install`` to run; None when the
    missing module is not one an extra installs."""
    name = _missing_name(error) or ""
    package = name.split(".")[0]
    extra = extra_for(package, command)
    if extra is None:
        return None
    install = f'pip install -e ".[{extra}]"'
    who = f"{command} needs" if command else "this needs"
    if name != package and _importable(package):
        return (f"the installed '{package}' has no module '{name}' (too old?); {who} the "
                f"[{extra}] extra: {install}")
    return f"the '{package}' package is not installed; {who} the [{extra}] extra: {install}"


def user_import_message(error: ModuleNotFoundError) -> Optional[str]:
    """One line for a module that the user's own code (an env module, a gin-imported
    file) imports and that is not installed, naming where it is imported; None when the
    import is in alf itself (a missing dependency of alf's: its traceback is the report)
    or cannot be located."""
    frame = _innermost_frame(error.__traceback__)
    name = _missing_name(error)
    if frame is None or not name or name.split(".")[0] == "alf":
        return None
    filename, lineno = frame.tb_frame.f_code.co_filename, frame.tb_lineno
    if filename.startswith("<") or _in_alf(filename):
        return None
    return (f"No module named '{name}' (imported at {filename}:{lineno}): install it "
            f"in this Python ({sys.executable} -m pip install ...), or fix the import; "
            f"--debug shows the traceback")


def _missing_name(error: ModuleNotFoundError) -> Optional[str]:
    """The missing module's name; gin re-raises a proxy of the error without its
    ``name`` attribute, so the message is read when it is not set."""
    found = re.search(r"No module named '([^']+)'", str(error))
    return error.name or (found.group(1) if found else None)


_ALF_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


_IMPORTLIB_DIR = os.path.dirname(os.path.abspath(importlib.__file__))


def _in_alf(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_ALF_DIR + os.sep)


def _innermost_frame(tb: Optional[TracebackType]) -> Optional[TracebackType]:
    """The last traceback entry outside the import machinery (``<frozen importlib...>``
    and ``importlib.import_module``): the ``import`` statement, or the
    ``import_module`` call, that failed."""
    found = None
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not (filename.startswith("<frozen")
                or os.path.abspath(filename).startswith(_IMPORTLIB_DIR + os.sep)):
            found = tb
        tb = tb.tb_next
    return found


def _importable(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def command_of(tb: Optional[TracebackType]) -> Optional[str]:
    """The ``alf.bin.*`` command module whose code the traceback ``tb`` runs through
    (``python -m alf.bin.X`` names its module ``__main__``: its spec has the real name)."""
    while tb is not None:
        module = tb.tb_frame.f_globals
        spec = module.get("__spec__")
        name = getattr(spec, "name", None) or module.get("__name__")
        if name in REQUIRED:
            return name
        tb = tb.tb_next
    return None


def _debug_asked() -> bool:
    """``--debug`` (full tracebacks) is on the command line; flags are not parsed yet."""
    return any(a == "--debug" or a.lower() in ("--debug=true", "--debug=1")
               for a in sys.argv[1:])


def _hook(previous):
    def excepthook(kind: Type[BaseException], error: BaseException,
                   tb: Optional[TracebackType]) -> None:
        command = command_of(tb)
        message = None
        if command and issubclass(kind, ModuleNotFoundError) and not _debug_asked():
            message = missing_package_message(error, command)
        if message is None:
            previous(kind, error, tb)
            return
        print(f"{command}: error: {message}", file=sys.stderr, flush=True)
        sys.exit(2)  # a SystemExit raised by sys.excepthook sets the exit status
    excepthook.alf_missing_extra_hook = True
    return excepthook


def install_hook() -> None:
    """Report an extra's package missing while a command's module loads (its module-level
    imports run before ``main`` can catch anything) in one line, exit status 2."""
    if not getattr(sys.excepthook, "alf_missing_extra_hook", False):
        sys.excepthook = _hook(sys.excepthook)
