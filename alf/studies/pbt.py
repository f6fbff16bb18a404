"""Population-based training on the sweep's engine: members train in segments of
``interval`` env steps; after each generation the bottom members continue from a top
member's checkpoint with perturbed hyper-parameters (:mod:`alf.studies.pbt_population`).

The study (an Optuna storage, as for sweeps) holds two kinds of trials:

- ``segment`` (key ``m<i>/gen_<g>``): member ``i`` trains from ``g * interval`` to
  ``(g + 1) * interval`` env steps: ``alf.bin.train`` resuming ``members/m<i>`` with
  ``TrainerConfig.stop_at_env_steps`` (the schedules keep the whole run's horizon) and its
  hyper-parameters as ``--conf_param``; its value is the segment's score;
- ``decide`` (key ``decide/gen_<g>``): enqueued after generation ``g``'s segments; the
  process that takes it waits for them, then copies checkpoints, enqueues generation
  ``g + 1`` and its ``decide``, and completes it. Taking a waiting trial is atomic in every
  storage, so exactly one process decides; a decider that dies is replaced (stale owner).

So several processes, here or on other machines, run one population, and a population
killed (Ctrl-C, SIGKILL) continues when the command is run again.
"""
import math
import os
import signal
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import optuna
from optuna.trial import TrialState

from alf.errors import RunFailedError
from alf.studies import pbt_population as pop
from alf.studies import study_store as store
from alf.studies.objective import Objective
from alf.studies.pbt_checkpoints import copy_checkpoint
from alf.studies.run_data import read_curve, read_rows
from alf.studies.run_process import STOPPED_STATUSES, RunProcess, cpu_slots
from alf.studies.search_space import SEED_PARAM, SearchSpace
from alf.studies.stop_request import StopRequest
from alf.trainers.progress_log import PROGRESS_FILE

POLL_S = 1.0
RECOVER_EVERY_S = store.HEARTBEAT_S  # also how often running trials' heartbeats are written


@dataclass
class PbtSettings:
    """A population (recorded in the study: a rerun must match) and how it runs here.

    Attributes:
        conf: the gin file every member trains.
        space: the hyper-parameters PBT sets (checked mutable); seeds are not used.
        population: number of members.
        interval: env steps per segment (between two exploit/explore decisions).
        num_env_steps: each member's whole run (the schedules' horizon).
        objective: ``final`` or ``mean`` of ``--metric`` over a segment's points.
        quantile: fraction of members replaced (bottom) and copied from (top).
        resample_probability: explore by resampling instead of scaling by 0.8 / 1.2.
        exploit: False runs the same members without exploit/explore (the baseline).
        copy_replay_buffer: an exploiting member takes the source's replay buffer too.
        conf_params: bindings every member gets.
        seed: seeds the initial values, the decisions and (``1000 * seed + i``) member ``i``.
        parallel: segments at once in this process.
    """
    conf: str
    space: SearchSpace
    population: int
    interval: int
    num_env_steps: int
    objective: Objective
    quantile: float = 0.25
    resample_probability: float = 0.25
    exploit: bool = True
    copy_replay_buffer: bool = False
    conf_params: Tuple[str, ...] = ()
    seed: int = 0
    parallel: int = 1

    @property
    def generations(self) -> int:
        return math.ceil(self.num_env_steps / self.interval)

    def spec(self) -> Dict[str, Any]:
        return {"conf": self.conf, "params": [p.spec() for p in self.space.params],
                "population": self.population, "interval": self.interval,
                "num_env_steps": self.num_env_steps, "objective": self.objective.name,
                "quantile": self.quantile, "resample_probability": self.resample_probability,
                "exploit": self.exploit, "copy_replay_buffer": self.copy_replay_buffer,
                "conf_params": list(self.conf_params), "seed": self.seed}

    def member_seed(self, member: int) -> int:
        return 1000 * self.seed + member


def _score(score: Optional[float]) -> str:
    """A member's score in a progress line (``failed`` for none)."""
    return "failed" if score is None else f"{score:,.4g}"


def segment_attrs(member: int, gen: int, hparams: Dict[str, str], parent: int,
                  event: str) -> Dict[str, Any]:
    return {"kind": "segment", "key": f"m{member}/gen_{gen}", "member": member, "gen": gen,
            "hparams": hparams, "parent": parent, "event": event,
            "run_dir": os.path.join("members", f"m{member}")}


def decide_attrs(gen: int) -> Dict[str, Any]:
    return {"kind": "decide", "key": f"decide/gen_{gen}", "gen": gen}


class Population:
    """Runs a population's segments and decisions from this process until it is done.

    Args:
        settings: the population and how many segments at once.
        study: the loaded Optuna study.
        study_dir: ``members/m<i>`` run dirs and ``lineage.*`` go here.
        say: prints one progress line.
    """

    def __init__(self, settings: PbtSettings, study: optuna.Study, study_dir: str,
                 say: Callable[[str], None]):
        self.settings = settings
        self.study = study
        self.study_dir = study_dir
        self._say = say
        self._slots = cpu_slots(settings.parallel)
        self._active: Dict[int, Tuple[optuna.Trial, RunProcess]] = {}
        self._deciding: List[optuna.Trial] = []
        self._stop = StopRequest(say, "")
        self._last_recover = 0.0

    # ----- the study's trials
    def enqueue_start(self) -> int:
        """Enqueue generation 0 and its decision unless the study has them."""
        live = store.live_keys(self.study)
        added = 0
        s = self.settings
        for i, hparams in enumerate(pop.initial_hparams(s.space.params, s.population, s.seed)):
            attrs = segment_attrs(i, 0, hparams, i, "start")
            if attrs["key"] not in live:
                store.enqueue_run(self.study, {}, attrs)
                added += 1
        if decide_attrs(0)["key"] not in live:
            store.enqueue_run(self.study, {}, decide_attrs(0))
        return added

    def segments(self, gen: int) -> List[optuna.trial.FrozenTrial]:
        """The result trials of generation ``gen``'s segments, by member."""
        found = [t for t in self.study.get_trials(deepcopy=False)
                 if t.user_attrs.get("kind") == "segment" and t.user_attrs.get("gen") == gen
                 and store.is_result(t)]
        return sorted(found, key=lambda t: (t.user_attrs["member"], t.number))

    def finished(self) -> bool:
        last = decide_attrs(self.settings.generations - 1)["key"]
        return any(t.user_attrs.get("key") == last and t.state == TrialState.COMPLETE
                   for t in self.study.get_trials(deepcopy=False))

    def _take(self) -> Optional[optuna.Trial]:
        """A waiting trial taken for this process (duplicates dropped), or None."""
        while self.study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
            trial = self.study.ask()
            if "key" not in trial.user_attrs:  # another process took the last one
                store.end_trial(self.study, trial._trial_id, trial.number, "unused")
                return None
            if store.claim(self.study, trial):
                return trial
        return None

    # ----- segments
    def _start_segment(self, slot: int, trial: optuna.Trial) -> None:
        s, a = self.settings, trial.user_attrs
        run_dir = os.path.join(self.study_dir, a["run_dir"])
        end = min(s.num_env_steps, (a["gen"] + 1) * s.interval)
        params = list(s.conf_params) + [f"{k}={v}" for k, v in a["hparams"].items()] + [
            f"{SEED_PARAM}={s.member_seed(a['member'])}",
            f"TrainerConfig.num_env_steps={s.num_env_steps}",
            f"TrainerConfig.stop_at_env_steps={end}"]
        # where the segment starts: the checkpoint it resumes (written at the last row)
        rows = read_rows(os.path.join(run_dir, PROGRESS_FILE))
        trial.set_user_attr("start_env_steps", int(rows[-1]["env_steps"]) if rows else 0)
        process = RunProcess(s.conf, run_dir, params, self._slots[slot],
                             os.path.join(run_dir, "train.log"), tag="pbt")
        self._active[slot] = (trial, process)
        self._say(f"[pbt] gen {a['gen']} m{a['member']}: training to {end:,} env steps "
                  f"({', '.join(f'{k}={v}' for k, v in a['hparams'].items())}) on CPU "
                  f"{','.join(map(str, self._slots[slot]))}")

    def segment_score(self, run_dir: str, start_env_steps: int) -> Optional[float]:
        """The objective over the points a segment wrote (past ``start_env_steps``, where
        it resumed; a segment ends with an evaluation at its last iteration)."""
        s = self.settings
        curve = read_curve(run_dir, s.objective.metric)
        values = curve.values[curve.env_steps > start_env_steps]
        if not len(values):
            return None
        return float(values[-1] if s.objective.kind == "final" else values.mean())

    def _finish_segment(self, trial: optuna.Trial, process: RunProcess, status: int) -> None:
        a = trial.user_attrs
        name = f"gen {a['gen']} m{a['member']}"
        if process.stop_requested and status in STOPPED_STATUSES:
            store.end_trial(self.study, trial._trial_id, trial.number, "interrupted")
            store.enqueue_run(self.study, {}, a)
            self._say(f"[pbt] {name}: stopped with its checkpoint; rerun to continue")
            return
        score = self.segment_score(process.run_dir, a["start_env_steps"]) if status == 0 else None
        if score is None:
            why = (f"exit status {status}: {process.log_tail()}" if status else
                   f"no {self.settings.objective.metric} point in the segment (set "
                   "TrainerConfig.evaluate=True, or --metric train_return)")
            trial.set_user_attr("error", why[:500])
            store.tell(self.study, trial, self._say, "pbt", state=TrialState.FAIL)
            self._say(f"[pbt] {name} failed: {why} (log: {process.log_path})")
            return
        if store.tell(self.study, trial, self._say, "pbt", values=score):
            self._say(f"[pbt] {name}: {self.settings.objective.name} {score:,.4g}")

    # ----- decisions
    def _try_decide(self, trial: optuna.Trial) -> bool:
        """Make generation ``gen``'s decision once its segments are done; True when made."""
        s, gen = self.settings, trial.user_attrs["gen"]
        done = [t for t in self.segments(gen) if t.state in (TrialState.COMPLETE, TrialState.FAIL)]
        if len({t.user_attrs["member"] for t in done}) < s.population:
            return False
        latest = {t.user_attrs["member"]: t for t in done}  # a retried member: its last
        scores = [latest[i].value if latest[i].state == TrialState.COMPLETE else None
                  for i in range(s.population)]
        if all(x is None for x in scores):
            raise RunFailedError(f"every member failed in generation {gen} (first error: "
                                 f"{latest[0].user_attrs.get('error', '?')})")
        if gen + 1 < s.generations:
            self._next_generation(gen, scores, [latest[i].user_attrs["hparams"]
                                                for i in range(s.population)])
        self.study.tell(trial, gen)  # the scores are the segments' values
        self._say(f"[pbt] gen {gen} decided: scores {', '.join(map(_score, scores))}")
        return True

    def _next_generation(self, gen: int, scores: List[Optional[float]],
                         hparams: List[Dict[str, str]]) -> None:
        s = self.settings
        decisions = pop.decide(scores, hparams, s.space.params, pop.member_rng(s.seed, gen),
                               s.quantile, s.resample_probability, s.exploit)
        live = store.live_keys(self.study)
        started = any(f"m{d.member}/gen_{gen + 1}" in live for d in decisions)
        for d in decisions:
            if d.parent != d.member and not started:  # copies happen before any enqueue
                src = os.path.join(self.study_dir, "members", f"m{d.parent}")
                dst = os.path.join(self.study_dir, "members", f"m{d.member}")
                copy_checkpoint(src, dst, s.copy_replay_buffer)
                self._say(f"[pbt] gen {gen}: m{d.member} ({_score(scores[d.member])}) <- "
                          f"m{d.parent} ({_score(scores[d.parent])}), explore: "
                          f"{', '.join(f'{k}={v}' for k, v in d.hparams.items())}")
        for d in decisions:
            attrs = segment_attrs(d.member, gen + 1, d.hparams, d.parent, d.event)
            if attrs["key"] not in live:
                store.enqueue_run(self.study, {}, attrs)
        if decide_attrs(gen + 1)["key"] not in live:
            store.enqueue_run(self.study, {}, decide_attrs(gen + 1))

    # ----- the loop
    def run(self) -> None:
        """Until the population's last decision is made; Ctrl-C / SIGTERM stop the running
        segments with checkpoints, then raise KeyboardInterrupt / Terminated."""
        with StopRequest(self._say, "[pbt] stopping: each running member saves a checkpoint "
                         "first") as self._stop:
            try:
                while not self._stop.requested and not (self.finished() and not self._active):
                    self._step()
            finally:
                self._stop_all()
        self._stop.raise_if_stopped()

    def _step(self) -> None:
        if time.monotonic() - self._last_recover > RECOVER_EVERY_S:
            self._last_recover = time.monotonic()
            # this process is alive: its trials' heartbeats (what other hosts judge by)
            for trial in [t for t, _ in self._active.values()] + self._deciding:
                trial.set_user_attr("heartbeat", time.time())
            for key in store.recover_stale(self.study):
                self._say(f"[pbt] {key}: its process is gone; enqueued again")
        for slot in [s for s in range(len(self._slots)) if s not in self._active]:
            trial = self._take()
            if trial is None:
                break
            if trial.user_attrs["kind"] == "decide":
                self._deciding.append(trial)
            else:
                self._start_segment(slot, trial)
        self._deciding = [t for t in self._deciding if not self._try_decide(t)]
        time.sleep(POLL_S)
        for slot, (trial, process) in list(self._active.items()):
            status = process.poll()
            if status is not None:
                del self._active[slot]
                self._finish_segment(trial, process, status)

    def _stop_all(self) -> None:
        for _, process in self._active.values():
            process.request_stop(self._stop.signum or signal.SIGINT)
        for slot, (trial, process) in list(self._active.items()):
            status = process.wait_stopped()
            if status == -signal.SIGKILL:
                self._say(f"[pbt] {trial.user_attrs['key']} (pid {process.pid}) did not stop "
                          "in time: killed; it resumes from its last checkpoint")
            self._finish_segment(trial, process, status)
            del self._active[slot]
        for trial in self._deciding:  # another process (or a rerun) decides
            store.end_trial(self.study, trial._trial_id, trial.number, "interrupted")
            store.enqueue_run(self.study, {}, trial.user_attrs)
        self._deciding = []
