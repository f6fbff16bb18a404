"""Where a run came from: one record per start in ``root_dir/run_info/``.

Every start of a run (the first and each resume) writes ``run_info/start-NNNN.json``:
the command line and working directory, the start time, alf's version and the git
commit of its source tree, the config's user modules, the installed packages, the host,
the accelerator and the environment variables that matter. Beside the records:

- ``start-NNNN.patch``: that start's uncommitted changes to the alf checkout (``git
  diff HEAD`` plus new files inside ``alf/``), written only when there are any;
- ``requirements.txt``: the latest start's installed packages, ``pip freeze`` style;
- ``"pretrained"`` in each record: the checkpoint file each pretrained part of the run's
  algorithm loaded (path, iteration, sha256; collected from the built algorithm), which
  ``--rerun`` checks;
- ``user_modules/``: the latest start's copies of the modules the config imports
  (:mod:`alf.trainers.user_module_copies`), which ``alf.bin.train --rerun`` imports.

Recording is best effort: a failure (full disk, unreadable file) is one warning line and
the run goes on, since the run itself does not depend on it. Under torchrun only rank 0
records (it alone writes the run's files).
"""
import glob
import hashlib
import json
import os
import re
import shlex
import sys
from typing import Any, Callable, Dict, Optional, Tuple

import gin
import torch

from alf.algorithms.pretrained_sources import loaded_sources
from alf.trainers.checkpointer import Checkpointer
from alf.trainers.user_module_copies import USER_MODULES_DIR, copy_user_modules
from alf.utils import machine_facts
from alf.utils.atomic_write import atomic_write, atomic_write_text
from alf.utils.git_state import GitState, git_state

RUN_INFO_DIR = "run_info"
REQUIREMENTS_FILE = "requirements.txt"
FORMAT_VERSION = 1
ALF_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
_START = re.compile(r"^start-(\d+)\.json$")


def _print_warning(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def record_start(root_dir: str, config_text: str, algorithm: Optional[torch.nn.Module] = None,
                 notice: Callable[[str], None] = _print_warning) -> Optional[str]:
    """Write this start's record into ``root_dir/run_info/``; returns its path, or None
    when it could not be written (after one warning line through ``notice``).

    Args:
        root_dir: the run directory (it exists: ``config.gin`` was just written).
        config_text: the run's config, as saved in ``config.gin`` (its ``import`` lines
            name the user modules to copy).
        algorithm: the run's built algorithm, whose pretrained parts are recorded
            (:func:`~alf.algorithms.pretrained_sources.loaded_sources`); None: no parts.
        notice: how the warning is shown.
    """
    info_dir = os.path.join(root_dir, RUN_INFO_DIR)
    try:
        return _record(root_dir, info_dir, config_text, algorithm)
    except Exception as e:  # noqa: BLE001 - provenance must never stop a run
        reason = getattr(e, "strerror", None) or str(e) or type(e).__name__
        where = getattr(e, "filename", None)
        detail = f"{where}: {reason}" if where and where != info_dir else reason
        notice(f"[alf] warning: could not record this start in {info_dir} ({detail}); "
               "training goes on without it")
        return None


def _record(root_dir: str, info_dir: str, config_text: str,
            algorithm: Optional[torch.nn.Module]) -> str:
    os.makedirs(info_dir, exist_ok=True)
    number = _next_start_number(info_dir)
    stem = f"start-{number:04d}"
    git = git_state(ALF_PACKAGE_DIR)
    if git.patch:
        atomic_write(os.path.join(info_dir, stem + ".patch"), lambda f: f.write(git.patch),
                     "the alf source's uncommitted changes")
    packages = machine_facts.installed_packages()
    atomic_write_text(os.path.join(info_dir, REQUIREMENTS_FILE), "\n".join(packages) + "\n")
    modules = copy_user_modules(config_text, os.path.join(info_dir, USER_MODULES_DIR))
    newest = Checkpointer(os.path.join(root_dir, "train")).list_checkpoints()
    record = {
        "format_version": FORMAT_VERSION,
        "start": number,
        "time": machine_facts.start_time(),
        "command": _command(),
        "resumed_from": os.path.basename(newest[0][1]) if newest else None,
        "config": {"file": "config.gin", "sha256": _sha256(config_text.encode()),
                   "random_seed": _bound("TrainerConfig.random_seed")},
        "alf": {"version": alf_version(), "package_dir": ALF_PACKAGE_DIR,
                "git": _git_record(git, stem + ".patch")},
        "user_modules": modules,
        # the checkpoint files pretrained parts were loaded from (path, iteration, sha256):
        # --rerun refuses one that changed (alf.algorithms.pretrained_sources)
        "pretrained": [] if algorithm is None else loaded_sources(algorithm),
        "packages": packages,
        "host": machine_facts.host_facts(),
        # torch's intra-op thread count, fixed for the run: float results depend on it,
        # so --rerun uses it (alf.bin.rerun); docs/design/thread_budget.md
        "torch_threads": _torch_threads(),
        "device": machine_facts.device_facts(),
        "environment": machine_facts.relevant_environ(),
    }
    path = os.path.join(info_dir, stem + ".json")
    atomic_write_text(path, json.dumps(record, indent=1, default=str) + "\n")
    return path


def _next_start_number(info_dir: str) -> int:
    numbers = [int(m.group(1)) for m in map(_START.match, os.listdir(info_dir)) if m]
    return max(numbers, default=0) + 1


def _command() -> Dict[str, Any]:
    """How the process was started: the interpreter's own argv when Python knows it
    (``python -m alf.bin.train ...``), the script's argv, and the working directory."""
    argv = list(getattr(sys, "orig_argv", None) or [sys.executable] + sys.argv)
    return {"shell": shlex.join(argv), "argv": list(sys.argv), "cwd": os.getcwd(),
            "pid": os.getpid()}


def _torch_threads() -> Optional[int]:
    """The calling thread's torch thread count (the run's: the thread governor set it
    before this record), or None when torch is not loaded."""
    torch = sys.modules.get("torch")
    return None if torch is None else int(torch.get_num_threads())


def _bound(key: str) -> Any:
    try:
        return gin.query_parameter(key)
    except (ValueError, RuntimeError):
        return None


def alf_version() -> str:
    """alf's version from its package metadata ("unknown" when it is not installed)."""
    from importlib import metadata
    try:
        return metadata.version("alf")
    except metadata.PackageNotFoundError:
        return "unknown (alf is not installed; run from a source tree)"


def _git_record(git: GitState, patch_name: str) -> Dict[str, Any]:
    if git.commit is None:
        return {"commit": None, "error": git.error}
    return {"commit": git.commit, "branch": git.branch, "top": git.top, "dirty": git.dirty,
            "patch": patch_name if git.patch else None, "patch_bytes": len(git.patch),
            "patch_sha256": _sha256(git.patch) if git.patch else None,
            "patch_truncated": git.patch_truncated, "untracked_in_alf": git.untracked}


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def latest_record(run_dir: str) -> Optional[Tuple[Dict[str, Any], str]]:
    """``(record, its path)`` of ``run_dir``'s newest start, or None when there is no
    readable one (a run from before alf kept records)."""
    info_dir = os.path.join(run_dir, RUN_INFO_DIR)
    numbered = [(int(m.group(1)), p) for p in glob.glob(os.path.join(info_dir, "start-*.json"))
                for m in [_START.match(os.path.basename(p))] if m]
    for _, path in sorted(numbered, reverse=True):
        try:
            with open(path) as f:
                return json.load(f), path
        except (OSError, ValueError):
            continue
    return None


def current_git_state() -> GitState:
    """The git state of the alf source this process runs."""
    return git_state(ALF_PACKAGE_DIR)


def patch_sha256(git: GitState) -> Optional[str]:
    """The hash a record keeps of ``git``'s patch (None when the tree is clean)."""
    return _sha256(git.patch) if git.patch else None
