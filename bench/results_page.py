"""Write docs/results.md (and its plots) from docs/results.csv and the kept curves.

    python bench/results_page.py --collect   # copy the runs' curves, then as below
    python bench/results_page.py             # recompute the figures, write csv, plots, page
    python bench/results_page.py --check     # exit 1 when the page or the csv is stale

``--collect`` copies, for every row, each seed's ``progress.csv`` and ``eval.csv`` from
the run directories its ``runs`` column names (a glob, relative to the repository root,
over ``.../seed_<s>`` directories: what ``alf.bin.sweep`` or ``--root_dir=.../seed_<s>``
makes) into ``docs/results_data/<key>/seed_<s>/``, with the host facts of the run's first
start and the alf commit of each start (``run_info/start-*.json``) as ``machine.json``. Run it while long runs go on:
the page then lists the seeds still running and the env steps they have reached, and the
curves committed so far survive the machine. The figures and the page are computed from
those kept files only (``bench/results_rows.py`` says how), so ``--check`` (and
``tests/docs/test_results_page.py``) can tell whether the page, the csv and the curves
agree without any run directory.
"""
import argparse
import glob
import json
import os
import shutil
import sys
from typing import Dict, List, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from results_rows import (CSV_PATH, DATA_DIR, FAMILIES, MACHINE_FILE,  # noqa: E402
                          REPO_ROOT, measure, read_rows, read_seed, seed_dirs, write_rows)

PAGE_PATH = os.path.join(REPO_ROOT, "docs", "results.md")
IMAGE_DIR = os.path.join(REPO_ROOT, "docs", "images", "results")
CURVE_FILES = ("progress.csv", "eval.csv")

INTRO = """# Results at the field's standard budgets

alf's stock examples trained at the budgets the field reports, over several seeds, next to
the published figures of [CleanRL](https://docs.cleanrl.dev/) (mean ± std over 3 seeds,
from each algorithm's page of its docs) and
[rl-baselines3-zoo](https://github.com/DLR-RM/rl-baselines3-zoo/blob/master/benchmark.md)
(its benchmark table). This page is generated: `python bench/results_page.py` writes it
from [results.csv](results.csv) (one row per algorithm, env and budget) and the seeds'
curves kept in `docs/results_data/`; do not edit it by hand. The measurements behind
everything else (speed, systems, shorter learning checks) are in the lab notebook,
[benchmarks.md](benchmarks.md).

**How to read a row.** *alf* is the interquartile mean (IQM) over the seeds that reached
the budget, with its 95% percentile bootstrap confidence interval (Agarwal et al. 2021,
"Deep RL at the Edge of the Statistical Precipice"), under the peer's protocol: CleanRL
reports the return of the *training* episodes of the stochastic policy, so alf's figure
is the same, a seed's score being the mean of its training return (the last 20 episodes)
over the last 5% of the budget. *alf greedy* is the deterministic policy's evaluation
return over the same window (rl-zoo's protocol). Seeds still running are listed with the
env steps they have reached and are never averaged in. *Minutes* is the median training
wall time of a finished seed (the Trainer's clock, summed over resumes) on the machine
named, usually beside another run.

**Differences from the peers, for every row.** alf's MuJoCo examples use the v5 envs
(CleanRL v4, rl-zoo v3: v5 fixes model bugs; the reward structure is the same), bootstrap
time-limit truncations (CleanRL treats them as terminal), and run PPO on 8 envs of 256
steps (CleanRL 1 env of 2048: the same 2048 samples per update). alf's Atari examples
use `ALE/<Game>-v5` with sticky actions off (`repeat_action_probability=0`, as the
NoFrameskip-v4 ids CleanRL uses), the full action set off, a life loss as a zero
discount with the episode going on (CleanRL's `EpisodicLifeEnv` ends the episode for the
learner), and count a game's return over all its lives (as CleanRL's recorded
`episodic_return`). Each example's gin file lists its settings and sources.
"""


def collect(rows: Sequence[Dict[str, str]], data_dir: str = DATA_DIR) -> List[str]:
    """Copy each row's seeds' curves (and machine facts) into ``data_dir``; the seed
    directories it copied."""
    copied = []
    for row in rows:
        for run_dir in sorted(glob.glob(os.path.join(REPO_ROOT, row["runs"]))):
            name = os.path.basename(os.path.normpath(run_dir))
            if not name.startswith("seed_") or not name[5:].isdigit():
                continue
            dest = os.path.join(data_dir, row["key"], name)
            os.makedirs(dest, exist_ok=True)
            for f in CURVE_FILES:
                if os.path.exists(os.path.join(run_dir, f)):
                    shutil.copyfile(os.path.join(run_dir, f), os.path.join(dest, f))
            facts = run_facts(run_dir)
            if facts:
                with open(os.path.join(dest, MACHINE_FILE), "w") as f:
                    json.dump(facts, f, indent=1, sort_keys=True)
                    f.write("\n")
            copied.append(dest)
    return copied


def run_facts(run_dir: str) -> Dict[str, object]:
    """The host of a run's first start (``run_info/start-*.json``: CPU model, CPUs it
    could use, CPUs of the machine) and the alf commit of every start (``+`` marks a
    start with uncommitted changes: the patch is beside its record); ``{}`` when the run
    recorded none."""
    starts = sorted(glob.glob(os.path.join(run_dir, "run_info", "start-*.json")))
    records = []
    for path in starts:
        with open(path) as f:
            records.append(json.load(f))
    if not records:
        return {}
    host = records[0].get("host", {})
    facts: Dict[str, object] = {k: host.get(k) for k in ("cpu_model", "usable_cpus",
                                                          "cpu_count")}
    commits = []
    for r in records:
        git = (r.get("alf") or {}).get("git") or {}
        if git.get("commit"):
            commits.append(git["commit"][:7] + ("+" if git.get("dirty") else ""))
    facts["commits"] = sorted(set(commits), key=commits.index)
    return facts


def _num(text: str) -> str:
    """``text`` (a number as the csv has it) with thousands separators, its decimals kept
    as written (a published figure keeps its own precision)."""
    whole, dot, decimals = text.partition(".")
    return f"{int(whole):,}{dot}{decimals}"


def _cell(row: Dict[str, str], prefix: str) -> str:
    if not row[f"{prefix}_iqm"]:
        return "running" if row["running"] else "not started"
    return (f"**{float(row[f'{prefix}_iqm']):,.0f}** "
            f"[{float(row[f'{prefix}_ci_low']):,.0f}, {float(row[f'{prefix}_ci_high']):,.0f}]")


def _peer(row: Dict[str, str], prefix: str) -> str:
    if not row[f"{prefix}_mean"]:
        return "-"
    std = f" ± {_num(row[f'{prefix}_std'])}" if row[f"{prefix}_std"] else ""
    return f"{_num(row[f'{prefix}_mean'])}{std}"


def _seeds(row: Dict[str, str]) -> str:
    done = f"{row['seeds_done']} of {row['seeds']}"
    return done + (f" ({row['running']})" if row["running"] else "")


def render(rows: Sequence[Dict[str, str]]) -> str:
    """The page for ``rows`` (measured already)."""
    out = [INTRO]
    for family in FAMILIES:
        family_rows = [r for r in rows if r["family"] == family]
        if not family_rows:
            continue
        out.append(f"## {family}\n")
        out.append("| algorithm | env | budget (env steps) | seeds done | alf | alf greedy | "
                   "CleanRL | rl-zoo (greedy) | minutes per run |")
        out.append("|---|---|---:|---|---:|---:|---:|---:|---:|")
        for r in family_rows:
            out.append(f"| {r['algorithm']} | {r['env']} | {int(r['env_steps']):,} | "
                       f"{_seeds(r)} | {_cell(r, 'alf')} | {_cell(r, 'alf_eval')} | "
                       f"{_peer(r, 'peer')} | {_peer(r, 'zoo')} | "
                       f"{r['minutes_per_run'] or '-'} |")
        out.append("")
        for r in family_rows:
            out.append(f"### {r['algorithm']} {r['env']}, {int(r['env_steps']):,} env steps\n")
            out.append("Reproduce (Ctrl-C stops it with a checkpoint; the same command "
                       "resumes it):\n")
            out.append(f"    {r['command']}\n")
            if r["alf_per_seed"]:
                out.append(f"Per seed ({r['alf_metric']}): {r['alf_per_seed']}.")
            if r["running"]:
                out.append(f"Still running: {r['running']}.")
            out.append(f"Peers: CleanRL {_peer(r, 'peer')} ({r['peer_source']}); "
                       f"rl-zoo {_peer(r, 'zoo')} ({r['zoo_source'] or '-'}).")
            if r["machine"]:
                out.append(f"Machine: {r['machine']}.")
            if r["notes"]:
                out.append(f"Notes: {r['notes']}")
            out.append(f"\n![{r['algorithm']} {r['env']}](images/results/{r['key']}.png)\n")
    return "\n".join(out).rstrip() + "\n"


def main(argv: Sequence[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--collect", action="store_true",
                        help="copy the runs' curves into docs/results_data first")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when the csv or the page is stale")
    args = parser.parse_args(argv)
    rows = read_rows()
    if args.collect:
        for d in collect(rows):
            print(f"kept {os.path.relpath(d, REPO_ROOT)}")
    measured = [measure(r) for r in rows]
    page = render(measured)
    if args.check:
        stale = [r["key"] for r, m in zip(rows, measured) if r != m]
        with open(PAGE_PATH) as f:
            page_stale = f.read() != page
        if stale or page_stale:
            print(f"stale: csv rows {stale}, page {page_stale}: run python "
                  f"bench/results_page.py", file=sys.stderr)
            return 1
        return 0
    write_rows(measured)
    from results_plots import plot_row
    for r in measured:
        seeds = [read_seed(d) for d in seed_dirs(r["key"])]
        plot_row(r, seeds, os.path.join(IMAGE_DIR, f"{r['key']}.png"))
    with open(PAGE_PATH, "w") as f:
        f.write(page)
    print(f"wrote {os.path.relpath(CSV_PATH, REPO_ROOT)}, "
          f"{os.path.relpath(PAGE_PATH, REPO_ROOT)} and {len(measured)} plots")
    return 0


if __name__ == "__main__":
    sys.exit(main())
