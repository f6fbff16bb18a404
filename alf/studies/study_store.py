"""A study's shared state in an Optuna storage: which runs exist, who runs them, results.

Several sweep processes (on one machine or many) work on one study through the same
storage: a journal file (default ``<study_dir>/study.journal``; on a shared filesystem
for several machines) or a database URL (``sqlite:///...``, ``postgresql://...``).
Why Optuna's storage and not a server of our own: ``docs/design/sweeps.md``.

Every trial is one run (a configuration and a seed) and carries user attributes:
``key`` (``<config>/seed_<s>``, unique per run), ``config``, ``seed``, ``run_dir``,
and, while it runs, ``owner`` (host, pid and the pid's start time) and ``heartbeat``.
Coordination rests on one atomic operation every Optuna storage provides: a WAITING
trial is taken (set RUNNING) by exactly one process. On top of it:

- runs to do are enqueued as WAITING trials, each with its ``key``;
- two processes may enqueue the same run at once (both start a study): the duplicate is
  found when taken (another live trial with the key and a smaller number) and dropped;
- a RUNNING trial whose owner is gone (its pid is dead on this host, or its heartbeat is
  older than ``stale_after_s``) is marked failed and enqueued again, so its run resumes
  from its checkpoint; so is a run this process stopped (Ctrl-C).
"""
import json
import os
import socket
import time
from typing import Any, Dict, List, Optional

import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock
from optuna.trial import FrozenTrial, TrialState

from alf.errors import ConfigError, UserError
from alf.studies import rdb_storage

JOURNAL_FILE = "study.journal"
SPEC_ATTR = "alf_study"
STALE_AFTER_S = 600.0  # a remote owner silent this long is gone (heartbeat every 60 s)
HEARTBEAT_S = 60.0
# trials that end this way are not results: a run stopped before its end (resumed by a
# new trial), a duplicate of another trial of the same run, a trial asked for nothing
END_REASONS = ("interrupted", "owner gone", "duplicate", "unused")


def open_storage(study_dir: str, storage_url: Optional[str]) -> Any:
    """The storage: ``storage_url`` (an Optuna database URL) or the journal file in
    ``study_dir``. The journal uses open(O_EXCL) locks, which NFSv3+ honours."""
    if storage_url:
        return rdb_storage.open_database(storage_url)
    os.makedirs(study_dir, exist_ok=True)
    path = os.path.join(study_dir, JOURNAL_FILE)
    return JournalStorage(JournalFileBackend(path, lock_obj=JournalFileOpenLock(path)))


def load_study(storage: Any, name: str, spec: Dict[str, Any], direction: str,
               sampler: optuna.samplers.BaseSampler,
               pruner: optuna.pruners.BasePruner) -> optuna.Study:
    """Create the study, or load it and check it was made with the same ``spec`` (conf,
    parameters, seeds, objective): a study's results only compare runs of one spec.

    Raises:
        UserError: the study exists with another spec (one line naming what differs).
    """
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(storage=storage, study_name=name, direction=direction,
                                sampler=sampler, pruner=pruner, load_if_exists=True)
    saved = study.user_attrs.get(SPEC_ATTR)
    if saved is None:
        study.set_user_attr(SPEC_ATTR, spec)
    elif json.dumps(saved, sort_keys=True) != json.dumps(spec, sort_keys=True):
        differs = sorted(k for k in set(saved) | set(spec) if saved.get(k) != spec.get(k))
        detail = "; ".join(f"{k}: was {saved.get(k)!r}, now {spec.get(k)!r}" for k in differs)
        raise UserError(f"study {name!r} exists with other settings ({detail}): rerun with "
                        "its settings to continue it, or give a new --study_dir")
    return study


def owner_attr() -> Dict[str, Any]:
    """Who runs a trial: this host, this pid and the pid's start time (pids are reused)."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "start": _pid_start(os.getpid())}


def _pid_start(pid: int) -> Optional[int]:
    """The process's start time in clock ticks since boot (``/proc``), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def owner_is_gone(trial: FrozenTrial, now: float, stale_after_s: float = STALE_AFTER_S) -> bool:
    """Whether a RUNNING trial's owner has stopped: on this host its pid is dead (or is
    another process now); elsewhere its heartbeat is older than ``stale_after_s``."""
    owner = trial.user_attrs.get("owner")
    if not owner:  # taken but not yet stamped: judge by when it started
        started = trial.datetime_start.timestamp() if trial.datetime_start else now
        return now - started > stale_after_s
    if owner.get("host") == socket.gethostname():
        pid = int(owner["pid"])
        if pid == os.getpid():
            return False
        start = _pid_start(pid)
        if start is None and owner.get("start") is None:  # no /proc (macOS): ask the kernel
            try:
                os.kill(pid, 0)
                return False
            except ProcessLookupError:
                return True
            except PermissionError:  # alive, another user's
                return False
        return start is None or (owner.get("start") is not None and start != owner["start"])
    beat = float(trial.user_attrs.get("heartbeat", 0.0))
    return now - beat > stale_after_s


def is_result(trial: FrozenTrial) -> bool:
    """A trial that stands for its run (not one ended for one of :data:`END_REASONS`)."""
    return trial.user_attrs.get("ended") not in END_REASONS


def live_keys(study: optuna.Study) -> Dict[str, List[FrozenTrial]]:
    """``key -> trials`` of the trials that are, will be or were a result (waiting,
    running, complete, pruned, or failed for a reason of the run's own)."""
    keys: Dict[str, List[FrozenTrial]] = {}
    for t in study.get_trials(deepcopy=False):
        if "key" in t.user_attrs and is_result(t):
            keys.setdefault(t.user_attrs["key"], []).append(t)
    return keys


def is_duplicate(study: optuna.Study, trial: optuna.Trial) -> bool:
    """Another trial of the same run, taken or finished, has a smaller number (it wins)."""
    key = trial.user_attrs["key"]
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING, TrialState.COMPLETE,
                                                      TrialState.PRUNED)):
        if t.number < trial.number and t.user_attrs.get("key") == key and is_result(t):
            return True
    return False


def claim(study: optuna.Study, trial: optuna.Trial) -> bool:
    """Make a taken trial this process's (owner, first heartbeat), unless it duplicates
    another trial of the same run (then it is ended as ``duplicate``; False)."""
    if is_duplicate(study, trial):
        end_trial(study, trial._trial_id, trial.number, "duplicate")  # pylint: disable=protected-access
        return False
    trial.set_user_attr("owner", owner_attr())
    trial.set_user_attr("heartbeat", time.time())
    return True


def open_study(study_dir: str, storage_url: Optional[str], name: Optional[str],
               spec: Dict[str, Any], direction: str,
               sampler: optuna.samplers.BaseSampler,
               pruner: optuna.pruners.BasePruner) -> "tuple[str, optuna.Study]":
    """``(name, study)``: the study named ``name`` (default: ``study_dir``'s name) in
    ``storage_url`` or the journal of ``study_dir``, created or checked against ``spec``
    (:func:`load_study`)."""
    name = check_storage_name(name or os.path.basename(study_dir))
    storage = open_storage(study_dir, storage_url)
    return name, load_study(storage, name, spec, direction, sampler, pruner)


def end_trial(study: optuna.Study, trial_id: int, number: int, reason: str) -> bool:
    """Mark a RUNNING trial failed for ``reason`` (one of :data:`END_REASONS`), so it is
    neither a result nor run again itself (a re-enqueued trial takes over). False when
    another process finished it first."""
    storage = study._storage  # pylint: disable=protected-access - the only way for others' trials
    try:
        storage.set_trial_user_attr(trial_id, "ended", reason)
        study.tell(number, state=TrialState.FAIL)
        return True
    except (RuntimeError, ValueError, optuna.exceptions.UpdateFinishedTrialError):
        return False  # its owner (or another recovering process) finished it meanwhile


def tell(study: optuna.Study, trial: optuna.Trial, say: Any, tag: str = "sweep",
         **result: Any) -> bool:
    """``study.tell(trial, **result)``; a trial another process already ended (it judged
    this one gone: a stalled heartbeat) is one line through ``say`` (``[<tag>] ...``), not
    a traceback."""
    try:
        study.tell(trial, **result)
        return True
    except (RuntimeError, ValueError, optuna.exceptions.UpdateFinishedTrialError) as e:
        if told_by_us(study, trial._trial_id):  # pylint: disable=protected-access
            return True  # written; what raised came after (a sampler's after_trial, a reread)
        say(f"[{tag}] trial {trial.number}: another process ended it meanwhile (it judged "
            f"this one gone); its run was enqueued again there ({type(e).__name__}: {e})")
        return False


def told_by_us(study: optuna.Study, trial_id: int) -> bool:
    """Whether a trial is finished and no other process ended it (:func:`end_trial` marks
    the trials it ends with ``ended`` before failing them): then a ``tell`` that raised
    had written its result first, as Optuna writes the state in a ``finally``."""
    try:
        stored = study._storage.get_trial(trial_id)  # pylint: disable=protected-access
    except (RuntimeError, ValueError, KeyError):
        return False
    return stored.state.is_finished() and "ended" not in stored.user_attrs


def enqueue_run(study: optuna.Study, params: Dict[str, Any], attrs: Dict[str, Any]) -> None:
    """A WAITING trial for one run (``attrs``: key, config, seed, run_dir, ...)."""
    study.enqueue_trial(params, user_attrs={k: v for k, v in attrs.items()
                                            if k not in ("owner", "heartbeat", "ended")})


def trial_params(trial: FrozenTrial) -> Dict[str, Any]:
    """A trial's parameter values, including the fixed ones of an enqueued trial that
    was taken but has not suggested them yet."""
    return {**trial.system_attrs.get("fixed_params", {}), **trial.params}


def recover_stale(study: optuna.Study, stale_after_s: float = STALE_AFTER_S) -> List[str]:
    """Fail and re-enqueue the RUNNING trials whose owner is gone (a sweep killed with
    SIGKILL, a machine lost); returns their keys. Their runs resume from checkpoints."""
    now = time.time()
    recovered = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if "key" not in t.user_attrs or not owner_is_gone(t, now, stale_after_s):
            continue
        if end_trial(study, t._trial_id, t.number, "owner gone"):  # pylint: disable=protected-access
            enqueue_run(study, trial_params(t), t.user_attrs)  # once, by who ended it
            recovered.append(t.user_attrs["key"])
    return recovered


def check_storage_name(name: str) -> str:
    """A study name (Optuna's key inside a shared database)."""
    if not name or any(c in name for c in "\n\r"):
        raise ConfigError(f"--study_name {name!r}: give a non-empty one-line name")
    return name
