"""A comparison as a markdown table (for people: stdout and ``compare.md``) and as JSON
(for programs: ``compare.json``).

Each cell is ``AGGREGATE [LOW, HIGH]``: the aggregate over the group's runs and its
confidence interval. A time to the target that is infinite (not reached within the grid)
is shown as ``∞`` and written to JSON as ``null``.
"""
import math
from typing import Dict, List, Optional

from alf.studies.compare_analysis import Comparison, GroupResult
from alf.studies.compare_curves import X_LABELS
from alf.studies.stats import AGGREGATE_LABELS, Interval


def fmt_number(value: float) -> str:
    """``1,234``, ``487.2``, ``373.0``, ``0.7083`` (4 significant digits below 1,000);
    ``∞`` for infinity."""
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    if abs(value) >= 999.95:  # what would round to 1000.0
        return f"{value:,.0f}"
    text = f"{value:#.4g}"  # '#': keep trailing zeros, so a column's numbers line up
    return text.rstrip(".") if "e" not in text else f"{value:.4g}"


def fmt_interval(interval: Interval) -> str:
    """``point [low, high]``."""
    return (f"{fmt_number(interval.point)} [{fmt_number(interval.low)}, "
            f"{fmt_number(interval.high)}]")


def markdown(comparison: Comparison) -> str:
    """The report: what was compared and how, one row per group, and P(A > B) per pair."""
    s = comparison.settings
    agg = s.aggregate
    x_label = X_LABELS[s.x]
    pct = f"{100 * s.confidence:g}%"
    runs = ", ".join(f"{g.group.name} {len(g.group.run_dirs)} ({_formats(g)})"
                     for g in comparison.groups)
    final_what = ("its last point" if s.final_points == 1 else
                  f"the mean of its last {s.final_points} points")
    lines = [
        f"## {s.metric} vs {x_label}",
        "",
        f"- runs: {runs}",
        f"- grid: {fmt_number(comparison.grid[0])} .. {fmt_number(comparison.grid[-1])} "
        f"{x_label}, {len(comparison.grid)} points; each run's curve linearly interpolated "
        "between its points",
        f"- each cell: {AGGREGATE_LABELS[agg]} over the runs [{pct} percentile bootstrap "
        f"confidence interval; {s.reps:,} resamples of the runs, seed {s.seed}]",
        f"- final: a run's {s.metric} at {final_what} up to the grid's end; AUC: its mean "
        f"{s.metric} over the grid (area / span)",
        "",
    ]
    head = ["group", "runs", f"final {s.metric}", "AUC"]
    if s.target is not None:
        head += [f"{x_label} to {s.metric} ≥ {s.target:g}", "reached"]
    lines += [_row(head), _row(["---"] * len(head))]
    for g in comparison.groups:
        cells = [g.group.name, str(len(g.group.run_dirs)), fmt_interval(g.intervals["final"][agg]),
                 fmt_interval(g.intervals["auc"][agg])]
        if s.target is not None:
            cells += [fmt_interval(g.intervals["to_target"][agg]),
                      f"{g.scores.reached}/{len(g.group.run_dirs)}"]
        lines.append(_row(cells))
    if comparison.improvements:
        lines += ["", f"P(A > B): the probability that a run of A ends with a higher final "
                      f"{s.metric} than a run of B (ties count one half) [{pct} interval]", "",
                  _row(["A", "B", "P(A > B)"]), _row(["---"] * 3)]
        lines += [_row([a, b, fmt_interval(p)]) for a, b, p in comparison.improvements]
    return "\n".join(lines) + "\n"


def to_json(comparison: Comparison) -> Dict:
    """The comparison as JSON-ready data (infinities as ``None``)."""
    s = comparison.settings
    return {
        "metric": s.metric, "x": s.x, "aggregate": s.aggregate, "target": s.target,
        "confidence": s.confidence, "reps": s.reps, "seed": s.seed,
        "final_points": s.final_points,
        "grid": {"start": float(comparison.grid[0]), "end": float(comparison.grid[-1]),
                 "points": len(comparison.grid), "interpolation": "linear"},
        "groups": [_group_json(g) for g in comparison.groups],
        "probability_of_improvement": [dict(a=a, b=b, score="final", **_interval_json(p))
                                       for a, b, p in comparison.improvements],
    }


def _group_json(g: GroupResult) -> Dict:
    sc = g.scores
    runs = []
    for i, (run_dir, fmt) in enumerate(zip(g.group.run_dirs, g.group.formats)):
        run = {"dir": run_dir, "format": fmt, "final": _finite(sc.final[i]),
               "auc": _finite(sc.auc[i])}
        if sc.to_target is not None:
            run["to_target"] = _finite(sc.to_target[i])
        runs.append(run)
    out = {"name": g.group.name, "glob": g.group.pattern, "runs": runs}
    for score, by_agg in g.intervals.items():
        out[score] = {agg: _interval_json(iv) for agg, iv in by_agg.items()}
    if sc.to_target is not None:
        out["reached"] = sc.reached
    return out


def _interval_json(interval: Interval) -> Dict[str, Optional[float]]:
    return {"point": _finite(interval.point), "low": _finite(interval.low),
            "high": _finite(interval.high)}


def _finite(value: float) -> Optional[float]:
    return None if math.isinf(value) or math.isnan(value) else float(value)


def _formats(g: GroupResult) -> str:
    names = sorted(set(g.group.formats))
    return "/".join(names)


def _row(cells: List[str]) -> str:
    return "| " + " | ".join(cells) + " |"
