"""The sweep loop: take runs from the study, run up to K at once, score them, report.

One process runs :meth:`Sweep.run`; any number of processes (here or on other
machines) may run it on the same study at once, sharing its runs (see
:mod:`alf.studies.study_store`). Each run is ``python -m alf.bin.train`` in
``<study_dir>/runs/<config>/seed_<s>`` pinned to a CPU slot
(:mod:`alf.studies.run_process`); its ``eval.csv`` rows are reported to Optuna as they
appear, so a pruner can stop a run that lags the others at the same env steps.

A process that finds nothing left to start while runs of other processes are still
running waits for them (taking any run they leave, e.g. one whose process died), so that
every process ends with the study's final results.

Ctrl-C (or SIGTERM): every running run is asked to stop at its iteration boundary
(it saves a checkpoint), its trial is ended as ``interrupted`` and its run enqueued
again, so rerunning the sweep command resumes it; finished runs are never rerun.
"""
import os
import signal
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

import optuna
from optuna.trial import TrialState

from alf.studies import results as study_results
from alf.studies import study_store as store
from alf.studies.objective import Objective
from alf.studies.run_data import read_rows
from alf.studies.run_process import STOPPED_STATUSES, RunProcess, cpu_slots
from alf.studies.search_space import Param, SearchSpace, run_key
from alf.studies.stop_request import StopRequest
from alf.trainers.progress_log import PROGRESS_FILE

SAMPLERS = ("grid", "random", "tpe")
POLL_S = 1.0
STATUS_EVERY_S = 60.0
MAX_DUPLICATE_SAMPLES = 50


@dataclass
class SweepSettings:
    """What a study is (recorded in it: a rerun must match) and how it is run here.

    Attributes:
        conf: the gin file every run trains.
        space: the swept parameters and the seeds.
        objective: the score of a run.
        sampler: ``grid``, ``random`` or ``tpe``.
        n_trials: configurations to try (random/tpe; the grid is all of its points).
        conf_params: bindings every run gets (before the swept ones).
        prune: stop runs whose evaluations lag (Optuna's median pruner).
        sampler_seed: seeds the sampler (which configurations random/tpe pick).
        parallel: runs at once in this process, each on its share of the CPUs.
    """
    conf: str
    space: SearchSpace
    objective: Objective
    sampler: str = "grid"
    n_trials: Optional[int] = None
    conf_params: Tuple[str, ...] = ()
    prune: bool = False
    sampler_seed: int = 0
    parallel: int = 1

    def spec(self) -> Dict[str, Any]:
        """The study's identity (``parallel`` and ``n_trials`` may change between reruns)."""
        return {"conf": self.conf, "params": [p.spec() for p in self.space.params],
                "seeds": list(self.space.seeds), "objective": self.objective.name,
                "sampler": self.sampler, "conf_params": list(self.conf_params),
                "prune": self.prune}

    def make_sampler(self) -> optuna.samplers.BaseSampler:
        if self.sampler == "tpe":  # constant liar: parallel trials do not pick the same point
            return optuna.samplers.TPESampler(seed=self.sampler_seed, constant_liar=True)
        return optuna.samplers.RandomSampler(seed=self.sampler_seed)  # grid: all fixed

    def make_pruner(self) -> optuna.pruners.BasePruner:
        if not self.prune:
            return optuna.pruners.NopPruner()
        # compare with at least a few finished runs, and never on a run's first evaluation
        return optuna.pruners.MedianPruner(n_startup_trials=max(4, len(self.space.seeds)),
                                           n_warmup_steps=0, n_min_trials=3)


@dataclass
class _Active:
    """A run this process started."""
    trial: optuna.Trial
    key: str
    process: RunProcess
    slot: int
    reported: int = 0
    pruning: bool = False
    last_beat: float = field(default_factory=time.time)


def suggest(trial: optuna.Trial, param: Param) -> Any:
    """The trial's value of ``param`` (fixed for an enqueued trial, else sampled)."""
    if param.is_list:
        return trial.suggest_categorical(param.name, list(param.choices))
    if param.kind in ("int", "logint"):
        return trial.suggest_int(param.name, int(param.low), int(param.high),
                                 log=param.kind == "logint")
    return trial.suggest_float(param.name, param.low, param.high, log=param.kind == "loguniform")


class Sweep:
    """Runs a study's runs from this process until none is left for it.

    Args:
        settings: the study and how many runs at once.
        study: the loaded Optuna study.
        study_dir: where runs go (``runs/<config>/seed_<s>``).
        say: prints one progress line.
    """

    def __init__(self, settings: SweepSettings, study: optuna.Study, study_dir: str,
                 say: Callable[[str], None]):
        self.settings = settings
        self.study = study
        self.study_dir = study_dir
        self._say = say
        self._slots = cpu_slots(settings.parallel)
        self._active: Dict[int, _Active] = {}
        self._stop = StopRequest(say, "")
        self._last_status = time.monotonic()
        self._last_recover = time.monotonic()  # enqueue_missing recovers at the start
        self._duplicates = 0  # sampled configurations in a row that were run already
        self._exhausted_space = False

    # ----- what to run
    def enqueue_missing(self) -> int:
        """Enqueue the grid's runs not yet in the study (all of them the first time) or
        whose every try failed (a rerun retries them, e.g. after a fix); returns how
        many. Random/TPE studies enqueue as they sample."""
        for key in store.recover_stale(self.study):
            self._say(f"[sweep] {key}: its sweep process is gone; enqueued again to resume")
        if self.settings.sampler != "grid":
            return 0
        live = {key: tried for key, tried in store.live_keys(self.study).items()
                if any(t.state != TrialState.FAIL for t in tried)}
        added = 0
        for point in self.settings.space.grid():
            config = self.settings.space.config_name(point)
            for seed in self.settings.space.seeds:
                key = run_key(config, seed)
                if key not in live:
                    store.enqueue_run(self.study, point, self._attrs(config, seed))
                    added += 1
        return added

    def _attrs(self, config: str, seed: int) -> Dict[str, Any]:
        key = run_key(config, seed)
        return {"key": key, "config": config, "seed": seed,
                "run_dir": os.path.join("runs", config, f"seed_{seed}")}

    def _configs_started(self) -> int:
        return len({t.user_attrs.get("config") for t in self.study.get_trials(deepcopy=False)
                    if "config" in t.user_attrs and store.is_result(t)})

    def _has_waiting(self) -> bool:
        return bool(self.study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))

    def _may_sample(self) -> bool:
        s = self.settings
        return (s.sampler != "grid" and not self._exhausted_space
                and self._configs_started() < (s.n_trials or 0))

    def _next_trial(self) -> Optional[Tuple[optuna.Trial, Dict[str, Any]]]:
        """Take a waiting run, or sample a new configuration; None when nothing is left."""
        while self._has_waiting() or self._may_sample():
            trial = self.study.ask()
            values = {p.name: suggest(trial, p) for p in self.settings.space.params}
            if "key" not in trial.user_attrs:  # not enqueued: a newly sampled configuration
                if not self._may_sample():  # another process took the last waiting run
                    store.end_trial(self.study, trial._trial_id, trial.number, "unused")
                    continue
                config = self.settings.space.config_name(values)
                seeds = self.settings.space.seeds
                for key, value in self._attrs(config, seeds[0]).items():
                    trial.set_user_attr(key, value)
                for seed in seeds[1:]:  # the same configuration once per seed
                    store.enqueue_run(self.study, values, self._attrs(config, seed))
            if store.claim(self.study, trial):  # else a duplicate, dropped
                self._duplicates = 0
                return trial, values
            self._duplicates += 1
            if self._duplicates >= MAX_DUPLICATE_SAMPLES:  # the space has no new point left
                self._say(f"[sweep] {self._duplicates} samples in a row were configurations "
                          "already run: the space is exhausted; not sampling more")
                self._exhausted_space = True
        return None

    # ----- running
    def _start(self, slot: int, trial: optuna.Trial, values: Dict[str, Any]) -> None:
        attrs = trial.user_attrs
        run_dir = os.path.join(self.study_dir, attrs["run_dir"])
        params = list(self.settings.conf_params) + \
            self.settings.space.conf_params(values, attrs["seed"])
        os.makedirs(run_dir, exist_ok=True)
        resuming = os.path.isdir(os.path.join(run_dir, "train"))
        process = RunProcess(self.settings.conf, run_dir, params, self._slots[slot],
                             os.path.join(run_dir, "train.log"))
        self._active[slot] = _Active(trial, attrs["key"], process, slot)
        self._say(f"[sweep] trial {trial.number}: {'resuming' if resuming else 'started'} "
                  f"{attrs['key']} on CPU {','.join(map(str, self._slots[slot]))} "
                  f"(pid {process.pid})")

    def _check(self, active: _Active) -> bool:
        """Report new evaluations, prune, heartbeat; True when the run has ended."""
        trial, run_dir = active.trial, active.process.run_dir
        points = self.settings.objective.intermediate(run_dir)
        for step, value in points[active.reported:]:
            trial.report(value, step)
        active.reported = len(points)
        if points and not active.pruning and trial.should_prune():
            active.pruning = True
            self._say(f"[sweep] trial {trial.number}: pruning {active.key} at "
                      f"{points[-1][0]:,} env steps (behind the median)")
            active.process.request_stop()
        if time.time() - active.last_beat > store.HEARTBEAT_S:
            trial.set_user_attr("heartbeat", time.time())
            active.last_beat = time.time()
        status = active.process.poll()
        if status is None:
            return False
        self._finish(active, status)
        return True

    def _finish(self, active: _Active, status: int) -> None:
        trial, key, study = active.trial, active.key, self.study
        objective = self.settings.objective
        stopped = active.process.stop_requested and status in STOPPED_STATUSES
        if active.pruning and (status == 0 or stopped):
            store.tell(study, trial, self._say, state=TrialState.PRUNED)
            return
        if stopped:  # by us (Ctrl-C / SIGTERM); a kill from elsewhere (OOM) is a failure
            store.end_trial(study, trial._trial_id, trial.number, "interrupted")
            store.enqueue_run(study, dict(trial.params), trial.user_attrs)
            self._say(f"[sweep] trial {trial.number}: {key} stopped with its checkpoint; "
                      "rerun the sweep to resume it")
            return
        score = objective.score_run(active.process.run_dir) if status == 0 else None
        if score is None:
            why = (f"exit status {status}: {active.process.log_tail()}" if status else
                   f"it wrote no {objective.metric} point (does the conf evaluate? set "
                   "TrainerConfig.evaluate=True, or use --metric train_return)")
            trial.set_user_attr("error", why[:500])
            store.tell(study, trial, self._say, state=TrialState.FAIL)
            self._say(f"[sweep] trial {trial.number}: {key} failed: {why} "
                      f"(log: {active.process.log_path})")
            return
        if store.tell(study, trial, self._say, values=score):
            self._say(f"[sweep] trial {trial.number}: {key} done: {objective.name} {score:,.4g}")
        study_results.write(self.study_dir, study, objective.name)  # the table as runs finish

    # ----- the loop
    def run(self) -> None:
        """Run until this process finds no run left; Ctrl-C / SIGTERM stop every run with
        a checkpoint, then raise KeyboardInterrupt / Terminated."""
        with StopRequest(self._say, "[sweep] stopping: each running run saves a checkpoint "
                         "first") as self._stop:
            try:
                self._loop()
            finally:
                self._stop_all()
        self._stop.raise_if_stopped()

    def _loop(self) -> None:
        exhausted = False
        waited = False
        while not self._stop.requested:
            for slot in [s for s in range(len(self._slots)) if s not in self._active]:
                if exhausted or self._stop.requested:
                    break
                taken = self._next_trial()
                if taken is None:
                    exhausted = True
                    break
                self._start(slot, *taken)
            if not self._active:
                elsewhere = self._running_elsewhere()
                if not elsewhere:
                    return
                if not waited:
                    waited = True
                    self._say(f"[sweep] nothing left to start here; waiting for {len(elsewhere)} "
                              f"run(s) of other sweep processes ({', '.join(elsewhere[:3])}"
                              f"{', ...' if len(elsewhere) > 3 else ''}) to end with the final "
                              "table (Ctrl-C leaves now)")
                time.sleep(POLL_S)
                self._recover_due()
                exhausted = False  # a run they leave (or a new sample of theirs) is ours
                continue
            time.sleep(POLL_S)
            for slot, active in list(self._active.items()):
                if self._check(active):
                    del self._active[slot]
                    exhausted = False  # a pruned or failed run may free work (tpe)
            if self._recover_due():
                exhausted = False
            self._status()

    def _running_elsewhere(self) -> List[str]:
        """Keys of the study's runs that other processes are running now."""
        return [t.user_attrs["key"] for t in self.study.get_trials(
            deepcopy=False, states=(TrialState.RUNNING,))
            if "key" in t.user_attrs and store.is_result(t)]

    def _recover_due(self) -> bool:
        """Every heartbeat period: re-enqueue the runs of sweep processes that are gone
        (another machine's); True if any was."""
        if time.monotonic() - self._last_recover < store.HEARTBEAT_S:
            return False
        self._last_recover = time.monotonic()
        recovered = store.recover_stale(self.study)
        for key in recovered:
            self._say(f"[sweep] {key}: its sweep process is gone; enqueued again to resume")
        return bool(recovered)

    def _status(self) -> None:
        if time.monotonic() - self._last_status < STATUS_EVERY_S:
            return
        self._last_status = time.monotonic()
        done = len(self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
        parts = []
        for a in self._active.values():
            rows = read_rows(os.path.join(a.process.run_dir, PROGRESS_FILE))
            steps = f"{int(rows[-1]['env_steps']):,} env steps" if rows else "starting"
            parts.append(f"{a.key} {steps}")
        self._say(f"[sweep] {done} run(s) complete; running: {'; '.join(parts)}")

    def _stop_all(self) -> None:
        """Stop every run this process started (each saves a checkpoint; one that does
        not stop in time is killed, named) and end their trials as interrupted."""
        for active in self._active.values():
            active.process.request_stop(self._stop.signum or signal.SIGINT)
        for slot, active in list(self._active.items()):
            status = active.process.wait_stopped()
            if status == -signal.SIGKILL:
                self._say(f"[sweep] {active.key} (pid {active.process.pid}) did not stop "
                          "in time: killed; it resumes from its last checkpoint")
            self._finish(active, status)
            del self._active[slot]
