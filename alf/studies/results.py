"""A study's results table: one row per configuration, its score over seeds.

Written to ``<study_dir>/results.md`` (best first) and ``results.csv`` (one row per run)
after every finished run, and printed at the end of a sweep.
"""
import csv
import io
import math
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import optuna
from optuna.trial import TrialState

from alf.studies import study_store as store
from alf.utils.atomic_write import atomic_write_text


@dataclass
class ConfigResult:
    """The runs of one configuration.

    Attributes:
        config: its name (``runs/<config>/``).
        params: parameter name -> value.
        scores: seed -> score of its complete runs.
        pruned: seeds whose run was pruned.
        failed: seeds whose run failed.
        running: seeds running now.
        waiting: seeds enqueued, not started (or stopped, to be resumed).
        errors: seed -> why its run failed (of the seeds in ``failed``).
        run_dirs: seed -> its run directory, relative to the study's.
    """
    config: str
    params: Dict[str, object]
    scores: Dict[int, float] = field(default_factory=dict)
    pruned: List[int] = field(default_factory=list)
    failed: List[int] = field(default_factory=list)
    running: List[int] = field(default_factory=list)
    waiting: List[int] = field(default_factory=list)
    errors: Dict[int, str] = field(default_factory=dict)
    run_dirs: Dict[int, str] = field(default_factory=dict)

    @property
    def runs(self) -> int:
        return (len(self.scores) + len(self.pruned) + len(self.failed) + len(self.running)
                + len(self.waiting))

    @property
    def mean(self) -> float:
        return sum(self.scores.values()) / len(self.scores) if self.scores else math.nan

    @property
    def std(self) -> float:
        if len(self.scores) < 2:
            return math.nan
        m = self.mean
        return math.sqrt(sum((v - m) ** 2 for v in self.scores.values()) / (len(self.scores) - 1))


def collect(study: optuna.Study) -> List[ConfigResult]:
    """Every configuration of the study with its runs' outcomes, in first-seen order."""
    results: Dict[str, ConfigResult] = {}
    for t in study.get_trials(deepcopy=False):
        if "config" not in t.user_attrs or not store.is_result(t):
            continue
        row = results.setdefault(t.user_attrs["config"], ConfigResult(
            t.user_attrs["config"], store.trial_params(t)))
        seed = int(t.user_attrs["seed"])
        row.run_dirs[seed] = t.user_attrs.get("run_dir", "")
        if t.state == TrialState.COMPLETE:
            row.scores[seed] = float(t.value)
        elif t.state == TrialState.PRUNED:
            row.pruned.append(seed)
        elif t.state == TrialState.FAIL:
            row.failed.append(seed)
            row.errors[seed] = t.user_attrs.get("error", "")
        elif t.state == TrialState.WAITING:
            row.waiting.append(seed)
        else:
            row.running.append(seed)
    for row in results.values():  # a failed try that a later one replaced is history
        done = set(row.scores) | set(row.pruned) | set(row.running) | set(row.waiting)
        row.failed = [seed for seed in row.failed if seed not in done]
    return list(results.values())


def ranked(rows: List[ConfigResult], direction: str) -> List[ConfigResult]:
    """Configurations with scores first, best mean first; the rest after."""
    sign = -1.0 if direction == "maximize" else 1.0
    return sorted(rows, key=lambda r: (not r.scores, sign * r.mean if r.scores else 0.0))


def markdown(rows: List[ConfigResult], objective_name: str, direction: str) -> str:
    """The table: rank, parameters, mean +- std over seeds, per-seed scores, other runs."""
    names = list(rows[0].params) if rows else []
    head = ["rank"] + names + [f"{objective_name} (mean ± std)", "seeds: score", "other runs"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for i, r in enumerate(ranked(rows, direction), 1):
        score = f"{r.mean:,.4g} ± {r.std:,.3g}" if len(r.scores) > 1 else (
            f"{r.mean:,.4g}" if r.scores else "–")
        per_seed = ", ".join(f"{s}: {v:,.4g}" for s, v in sorted(r.scores.items())) or "–"
        other = ", ".join(f"{what} {sorted(seeds)}" for what, seeds in (
            ("pruned", r.pruned), ("failed", r.failed), ("running", r.running),
            ("waiting", r.waiting)) if seeds) or "–"
        cells = [str(i)] + [str(r.params.get(n, "")) for n in names] + [score, per_seed, other]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write(study_dir: str, study: optuna.Study, objective_name: str) -> str:
    """Write ``results.md`` and ``results.csv``; returns the markdown."""
    rows = collect(study)
    direction = study.direction.name.lower()
    text = markdown(rows, objective_name, direction)
    atomic_write_text(os.path.join(study_dir, "results.md"),
                      f"# {study.study_name}: {objective_name}\n\n{text}")
    out = io.StringIO(newline="")
    writer = csv.writer(out)
    names = list(rows[0].params) if rows else []
    writer.writerow(["config"] + names + ["seed", "state", "score"])
    for r in rows:
        for seed, value in sorted(r.scores.items()):
            writer.writerow([r.config] + [r.params.get(n) for n in names] + [seed, "complete", value])
        for what, seeds in (("pruned", r.pruned), ("failed", r.failed), ("running", r.running),
                            ("waiting", r.waiting)):
            for seed in seeds:
                writer.writerow([r.config] + [r.params.get(n) for n in names] + [seed, what, ""])
    atomic_write_text(os.path.join(study_dir, "results.csv"), out.getvalue())
    return text


def failure_summary(study: optuna.Study, study_dir: str) -> Optional[str]:
    """One line when runs of the study failed (whose every try failed): how many of all,
    the first one's error and log; None when none did."""
    rows = collect(study)
    failed = [(r, seed) for r in rows for seed in r.failed]
    if not failed:
        return None
    row, seed = failed[0]
    log = os.path.join(study_dir, row.run_dirs.get(seed, ""), "train.log")
    why = row.errors.get(seed) or "see its log"
    why = why if len(why) <= 300 else why[:297] + "..."
    return (f"{len(failed)} of {sum(r.runs for r in rows)} runs failed; the first, "
            f"{row.config}/seed_{seed}: {why} (log: {log})")


def best(rows: List[ConfigResult], direction: str) -> Optional[ConfigResult]:
    """The configuration with the best mean score, or None."""
    scored = ranked(rows, direction)
    return scored[0] if scored and scored[0].scores else None
