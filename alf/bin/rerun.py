"""``alf.bin.train --rerun=OLD --root_dir=NEW``: the exact experiment of run ``OLD``, anew.

The rerun parses ``OLD/config.gin`` (every value, its seed included, so it is the same
experiment; and the torch thread count ``OLD`` recorded, which float results depend on; ``--conf_param`` may still override, e.g. another seed) and imports the user
modules from ``OLD/run_info/user_modules`` (the code the run used, even if the original
files changed or moved since). A pretrained part must load the checkpoint file ``OLD``
recorded (same path, same sha256): a changed one is refused in one line. Nothing else is taken from ``OLD``: no checkpoint, no log;
``NEW`` is a new run with its own ``run_info/``. When this alf's source differs from the
one ``OLD`` recorded (another commit, or other uncommitted changes), one warning line
names the recorded commit and where its patch is.
"""
import os
import sys
from typing import List, Sequence

from alf import config as alf_config
from alf.algorithms import pretrained_sources
from alf.algorithms.pretrained import checkpoint_files
from alf.errors import UserError
from alf.trainers import run_provenance
from alf.trainers.checkpointer import Checkpointer
from alf.trainers.run_files import CONFIG_FILE
from alf.trainers.user_module_copies import USER_MODULES_DIR


def recorded_thread_count(source: str, params: Sequence[str]) -> List[str]:
    """``["TrainerConfig.num_threads=N"]`` with the torch thread count ``source`` ran
    with (its newest start record), so that the rerun splits every reduction the same
    way on a machine with another CPU count; [] when the record has none or ``params``
    set the count themselves (they come after it and win anyway)."""
    if any(p.split("=", 1)[0].strip().endswith("TrainerConfig.num_threads") for p in params):
        return []
    found = run_provenance.latest_record(source)
    threads = found[0].get("torch_threads") if found else None
    return [f"TrainerConfig.num_threads={int(threads)}"] if threads else []


def parse_rerun_config(source: str, root_dir: str, conf: str, params: Sequence[str],
                       program: str) -> List[str]:
    """Check the request, warn about a changed alf, parse ``source``'s saved config (with
    ``params``) into gin; returns the import folders for the new run's ``config.gin``
    (its own copies first, then ``source``'s, then the ones ``source`` used).

    Raises:
        UserError: ``--conf`` given too, ``source`` is not a run, or ``root_dir`` is
            ``source`` or already holds a run.
    """
    source = os.path.abspath(os.path.expanduser(source))
    if conf:
        raise UserError(f"--rerun and --conf cannot be combined: --rerun {source} takes that "
                        "run's config.gin (change values with --conf_param)")
    saved = os.path.join(source, CONFIG_FILE)
    if not os.path.isfile(saved):
        what = "does not exist" if not os.path.exists(source) else f"holds no {CONFIG_FILE}"
        raise UserError(f"--rerun {source} {what}: pass the --root_dir of an earlier run")
    if os.path.realpath(root_dir) == os.path.realpath(source):
        raise UserError(f"--root_dir is the --rerun directory {source}: pass a new --root_dir "
                        "for the rerun (to resume that run, leave out --rerun)")
    if (os.path.exists(os.path.join(root_dir, CONFIG_FILE))
            or Checkpointer(os.path.join(root_dir, "train")).list_checkpoints()):
        raise UserError(f"--root_dir {root_dir} already holds a run: pass a new directory "
                        "for the rerun (to resume that run, leave out --rerun)")
    with open(saved) as f:
        saved_text = f.read()
    params = recorded_thread_count(source, params) + list(params)
    copies = os.path.join(source, run_provenance.RUN_INFO_DIR, USER_MODULES_DIR)
    own = os.path.join(root_dir, run_provenance.RUN_INFO_DIR, USER_MODULES_DIR)
    dirs = ([own, copies] if os.path.isdir(copies) else []) + [
        d for d in alf_config.import_dirs_in(saved_text) if d not in (own, copies)]
    # the copies go first on sys.path: they win over the modules' original folders
    alf_config.parse_config(config_text=alf_config.import_path_header(dirs) + saved_text,
                            conf_params=params, config_name=saved)
    refuse_changed_pretrained(source)
    changed = source_change(source)
    if changed:
        print(f"{program}: warning: {changed}", file=sys.stderr)
    return dirs


def refuse_changed_pretrained(run_dir: str) -> None:
    """Raise a one-line :class:`UserError` when a pretrained part of ``run_dir`` (as its
    newest start recorded) would now load another file or other bytes: a rerun from
    other weights is another experiment. Called after the config is parsed, before
    anything of the new run is written."""
    found = run_provenance.latest_record(run_dir)
    recorded = (found[0].get("pretrained") or []) if found else []
    changed = pretrained_sources.changed_sources(
        recorded, lambda d: next(iter(checkpoint_files(d)), None))
    if changed:
        first = next(r for r in recorded if changed[0].startswith(r["binding"] + " "))
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        kept = (os.path.isfile(first["file"])
                and pretrained_sources.file_sha256(first["file"]) == first.get("sha256"))
        fix = (f"load that file with --conf_param \"{first['binding']}.checkpoint="
               f"'{first['prefix']}@{first['file']}'\"" if kept else
               f"restore that file (or choose the weights yourself with --conf_param "
               f"\"{first['binding']}.checkpoint='{first['prefix']}@<file>'\")")
        raise UserError(f"--rerun {run_dir}: its pretrained part {changed[0]}{more}, so the "
                        f"rerun would start from other weights: {fix}")


def source_change(run_dir: str) -> str:
    """How this alf's source differs from the one ``run_dir``'s newest start recorded, in
    one sentence; "" when it is the same (same commit and same uncommitted changes, or
    the same version of an installed alf)."""
    found = run_provenance.latest_record(run_dir)
    if found is None:
        return (f"{run_dir} has no run_info record (it was trained before alf kept them): "
                "the alf source it used is unknown, so results may differ")
    record, path = found
    recorded = record.get("alf", {})
    git = recorded.get("git") or {}
    now = run_provenance.current_git_state()
    if git.get("commit") is None or now.commit is None:
        was, version = recorded.get("version"), run_provenance.alf_version()
        if git.get("commit") is None and now.commit is None and was == version:
            return ""
        return (f"{run_dir} was trained with alf {was} ({git.get('commit') or 'no git commit'}"
                f"); this is alf {version} ({now.commit or now.error}): results may differ")
    same_patch = git.get("patch_sha256") == run_provenance.patch_sha256(now)
    if git["commit"] == now.commit and same_patch:
        return ""
    patch = git.get("patch")
    with_patch = (f" plus uncommitted changes saved in "
                  f"{os.path.join(os.path.dirname(path), patch)}" if patch else "")
    now_words = now.commit[:12] + (" with uncommitted changes" if now.dirty else "")
    return (f"{run_dir} was trained with alf commit {git['commit'][:12]}{with_patch}; this "
            f"alf is {now_words}: results may differ")
