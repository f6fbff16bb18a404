"""What a PBT population did: its lineage (who copied whom, with which hyper-parameters,
scoring what, per generation), as ``lineage.csv``, a markdown summary and a plot.

Rebuilt from the study's segment trials after every decision, so it is the same whichever
process made the decisions, and a resumed population extends it.
"""
import csv
import io
import os
from dataclasses import dataclass
from typing import Dict, List, Optional

from optuna.trial import TrialState

from alf.utils.atomic_write import atomic_write_text


@dataclass
class SegmentRow:
    """One member's segment: generation ``gen`` from ``start`` to ``end`` env steps."""
    gen: int
    member: int
    start: int
    end: int
    parent: int
    event: str
    score: Optional[float]
    hparams: Dict[str, str]


def lineage(population, interval: int, num_env_steps: int) -> List[SegmentRow]:
    """Every finished segment of the population (the last try of a retried one)."""
    rows: Dict[tuple, SegmentRow] = {}
    for t in population.study.get_trials(deepcopy=False):
        a = t.user_attrs
        if a.get("kind") != "segment" or t.state not in (TrialState.COMPLETE, TrialState.FAIL) \
                or a.get("ended"):
            continue
        gen = int(a["gen"])
        rows[(gen, a["member"])] = SegmentRow(
            gen, int(a["member"]), gen * interval, min(num_env_steps, (gen + 1) * interval),
            int(a["parent"]), a["event"], t.value if t.state == TrialState.COMPLETE else None,
            dict(a["hparams"]))
    return [rows[k] for k in sorted(rows)]


def write(study_dir: str, rows: List[SegmentRow], plot: bool = True) -> str:
    """``lineage.csv``, ``lineage.md`` (and ``lineage.png``); returns the markdown."""
    names = sorted({n for r in rows for n in r.hparams})
    out = io.StringIO(newline="")
    writer = csv.writer(out)
    writer.writerow(["gen", "member", "start_env_steps", "end_env_steps", "parent", "event",
                     "score"] + names)
    for r in rows:
        writer.writerow([r.gen, r.member, r.start, r.end, r.parent, r.event,
                         "" if r.score is None else r.score] + [r.hparams.get(n) for n in names])
    atomic_write_text(os.path.join(study_dir, "lineage.csv"), out.getvalue())
    text = summary(rows, names)
    atomic_write_text(os.path.join(study_dir, "lineage.md"), text)
    if plot and rows:
        plot_lineage(rows, names, os.path.join(study_dir, "lineage.png"))
    return text


def summary(rows: List[SegmentRow], names: List[str]) -> str:
    """Markdown: per generation the median and best score and the exploit events."""
    lines = ["| gen | env steps | median score | best | events |", "|---|---|---|---|---|"]
    for gen in sorted({r.gen for r in rows}):
        this = [r for r in rows if r.gen == gen]
        scores = sorted(r.score for r in this if r.score is not None)
        median = scores[len(scores) // 2] if len(scores) % 2 else (
            (scores[len(scores) // 2 - 1] + scores[len(scores) // 2]) / 2 if scores else None)
        events = "; ".join(f"m{r.member}: {r.event}" for r in this if r.event.startswith("exploit"))
        lines.append(f"| {gen} | {this[0].end:,} | {_fmt(median)} | "
                     f"{_fmt(scores[-1] if scores else None)} | {events or '–'} |")
    last = max((r.gen for r in rows), default=None)
    if last is not None:
        lines += ["", "| member | final score | " + " | ".join(names) + " |",
                  "|---|---|" + "---|" * len(names)]
        for r in sorted((r for r in rows if r.gen == last), key=lambda r: r.member):
            lines.append(f"| m{r.member} | {_fmt(r.score)} | " +
                         " | ".join(r.hparams.get(n, "") for n in names) + " |")
    return "\n".join(lines) + "\n"


def _fmt(x: Optional[float]) -> str:
    return "–" if x is None else f"{x:,.4g}"


def plot_lineage(rows: List[SegmentRow], names: List[str], path: str) -> None:
    """One panel per hyper-parameter (each member's value per segment, log scale when all
    positive) and one of the scores; a marker where a member exploited another."""
    import matplotlib  # deferred: optional plotting package, only when a plot is written
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    members = sorted({r.member for r in rows})
    fig, axes = plt.subplots(len(names) + 1, 1, figsize=(8, 2.6 * (len(names) + 1)),
                             sharex=True, squeeze=False)
    for ax, name in zip(axes[:, 0], names + ["score"]):
        for m in members:
            mine = [r for r in rows if r.member == m]
            ys = [r.score if name == "score" else _number(r.hparams.get(name)) for r in mine]
            xs = [r.end if name == "score" else r.start for r in mine]
            if name == "score":  # a point per segment end
                line, = ax.plot(xs, ys, marker=".", label=f"m{m}")
            else:  # the value held over each segment, to the last one's end
                line, = ax.step(xs + [mine[-1].end], ys + ys[-1:], where="post", marker=".",
                                label=f"m{m}")
            jumps = [(x, y) for r, x, y in zip(mine, xs, ys) if r.event.startswith("exploit")]
            if jumps:
                ax.plot(*zip(*jumps), "v", color=line.get_color())
        values = [v for r in rows for v in [_number(r.hparams.get(name))] if v is not None]
        if name != "score" and values and min(values) > 0:
            ax.set_yscale("log")
        ax.set_ylabel(name.rsplit("/", 1)[-1] if name != "score" else "segment score",
                      fontsize="small")
    axes[-1, 0].set_xlabel("env steps (v: exploited a better member)")
    axes[0, 0].legend(loc="best", fontsize="small", ncol=len(members))
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _number(text) -> Optional[float]:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None
