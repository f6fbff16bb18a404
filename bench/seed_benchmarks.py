"""alf's CartPole/Pendulum examples over seeds, beside Stable-Baselines3 where SB3 has the
algorithm, compared with ``alf.bin.compare`` (IQM and 95% bootstrap CIs; issue 21).

    python bench/seed_benchmarks.py --seeds 0 1 2 3 4 --parallel 2
    python bench/seed_benchmarks.py --examples ppo_cart_pole dqn_cart_pole --skip_runs

Per example (``--examples``; a name without a gin file in alf/examples is skipped with
a note):

1. the alf seeds: ``python -m alf.bin.sweep --conf=<example>.gin
   --study_dir=<root>/alf_<example> --seeds=...`` (runs in
   ``<root>/alf_<example>/runs/default/seed_<s>``), with the evaluation settings
   bench/seed_plan.py adds when the example evaluates fewer than 10 times per run
   (``TrainerConfig.evaluate=True``, an ``eval_interval`` giving ~15 evaluations, 10
   episodes each);
2. the SB3 peer, where bench/sb3_peers.py has one: ``python bench/sb3_runs.py --algo
   <example> --out <root>/sb3_<example>``, evaluated at the same env steps;
3. ``python -m alf.bin.compare --metric eval_return --target <target>`` over both groups
   into ``<root>/compare_<example>``; its plots are copied to
   ``docs/images/seeds/<example>/`` and its table to ``bench/results/seeds/<example>.md``
   (``compare.json`` beside it).

Finally one markdown table over the examples (also ``bench/results/seeds/summary.md``):
IQM final evaluation return [95% CI] of alf and SB3, IQM env steps to the target [95% CI]
(a run that never reaches it counts as infinite, so the IQM can be ∞), and P(alf > SB3).

Everything is rerunnable: the sweep keeps its finished runs and resumes stopped ones,
sb3_runs.py skips finished seeds; ``--skip_runs`` only compares what is there.
``--steps N`` shortens every run (e.g. to check the pipeline in a minute); the alf study
then records ``TrainerConfig.num_env_steps=N``, so use another ``--root`` for it.
HalfCheetah SAC/TD3 over 3 seeds at 200k env steps (the examples train for 1M; no SB3
peer here; ~1 CPU-hour per run on the 2-core machine, Ctrl-C and rerun to resume):

    python bench/seed_benchmarks.py --examples sac_halfcheetah td3_halfcheetah --steps 200000 --seeds 0 1 2 --parallel 2 --root runs/seeds_hc
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
from typing import Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from sb3_peers import PEERS  # noqa: E402
from seed_plan import EXAMPLES_DIR, eval_plan  # noqa: E402

DEFAULT_EXAMPLES = ["ppo_cart_pole", "ac_cart_pole", "ppo_lstm_cart_pole", "dqn_cart_pole",
                    "sac_pendulum", "ddpg_pendulum", "appo_cart_pole", "impala_cart_pole"]
# eval_return targets: CartPole's maximum return is 500; the masked-velocity LSTM task's
# bar is 400 and HalfCheetah's are the examples' bars at 200k env steps
# (docs/benchmarks.md); Pendulum's returns are <= 0, -200 is "swung up"
TARGETS = {"ppo_lstm_cart_pole": 400.0, "sac_halfcheetah": 4000.0, "td3_halfcheetah": 3500.0}
PLOTS = ("curves.png", "profile.png", "aggregates.png")


def target_of(example: str) -> float:
    """The eval-return target of ``example`` (see :data:`TARGETS`)."""
    if example in TARGETS:
        return TARGETS[example]
    return -200.0 if "pendulum" in example else 475.0


def _run(cmd: List[str]) -> None:
    """Run ``cmd`` from the repository root; exit naming it if it fails."""
    print("[seed_benchmarks] $ " + " ".join(cmd), flush=True)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    code = subprocess.call(cmd, cwd=ROOT, env=env)
    if code != 0:
        raise SystemExit(f"[seed_benchmarks] failed (exit {code}): {' '.join(cmd)}")


def run_alf(example: str, args) -> None:
    """The alf seeds of ``example`` with ``alf.bin.sweep`` (module docstring, step 1)."""
    plan = eval_plan(f"{example}.gin", args.steps)
    cmd = [sys.executable, "-m", "alf.bin.sweep", f"--conf={example}.gin",
           f"--study_dir={os.path.join(args.root, 'alf_' + example)}",
           f"--seeds={','.join(map(str, args.seeds))}", f"--parallel={args.parallel}"]
    for param in plan.conf_params:
        cmd += ["--conf_param", param]
    _run(cmd)


def run_sb3(example: str, args) -> None:
    """The SB3 peer's seeds (module docstring, step 2)."""
    cmd = [sys.executable, os.path.join(HERE, "sb3_runs.py"), "--algo", example, "--seeds",
           *map(str, args.seeds), "--out", os.path.join(args.root, "sb3_" + example),
           "--parallel", str(args.parallel)]
    if args.steps:
        cmd += ["--steps", str(args.steps)]
    _run(cmd)


def seed_glob(seeds: List[int]) -> str:
    """A glob matching the run directories ``seed_<s>`` of ``seeds`` (all ``seed_*`` when
    a seed has more than one digit)."""
    if all(0 <= s <= 9 for s in seeds):
        return "seed_[" + "".join(str(s) for s in sorted(set(seeds))) + "]"
    return "seed_*"


def compare(example: str, args, with_sb3: bool) -> Dict:
    """``alf.bin.compare`` of the example's groups (module docstring, step 3); its
    ``compare.json``."""
    out_dir = os.path.join(args.root, "compare_" + example)
    runs = seed_glob(args.seeds)
    cmd = [sys.executable, "-m", "alf.bin.compare", "--group",
           f"alf={os.path.join(args.root, 'alf_' + example, 'runs', 'default', runs)}"]
    if with_sb3:
        cmd += ["--group", f"sb3={os.path.join(args.root, 'sb3_' + example, runs)}"]
    cmd += ["--metric", "eval_return", "--target", f"{target_of(example):g}",
            "--out_dir", out_dir]
    _run(cmd)
    images = os.path.join(args.images_dir, example)
    os.makedirs(images, exist_ok=True)
    for plot in PLOTS:
        shutil.copyfile(os.path.join(out_dir, plot), os.path.join(images, plot))
    os.makedirs(args.results_dir, exist_ok=True)
    for name, ext in (("compare.md", ".md"), ("compare.json", ".json")):
        shutil.copyfile(os.path.join(out_dir, name),
                        os.path.join(args.results_dir, example + ext))
    with open(os.path.join(out_dir, "compare.json")) as f:
        return json.load(f)


def _cell(group: Optional[Dict], score: str, agg: str) -> str:
    """``IQM [low, high]`` of ``score`` in a compare.json group (``∞`` for a null: a
    time to the target not reached); ``–`` without the group."""
    if group is None:
        return "–"
    from alf.studies.compare_table import fmt_number
    iv = group[score][agg]
    text = " ".join([fmt_number(float("inf") if iv["point"] is None else iv["point"]),
                     "[" + ", ".join(fmt_number(float("inf") if iv[k] is None else iv[k])
                                     for k in ("low", "high")) + "]"])
    if score == "to_target":
        text += f" ({group['reached']}/{len(group['runs'])})"
    return text


def summary_row(example: str, result: Dict) -> str:
    """One row of the combined table from the example's compare.json."""
    groups = {g["name"]: g for g in result["groups"]}
    agg = result["aggregate"]
    alf, sb3 = groups.get("alf"), groups.get("sb3")
    p = next((x for x in result["probability_of_improvement"]
              if x["a"] == "alf" and x["b"] == "sb3"), None)
    p_text = "–" if p is None else f"{p['point']:.2f} [{p['low']:.2f}, {p['high']:.2f}]"
    cells = [f"{example} (≥ {result['target']:g})", _cell(alf, "final", agg),
             _cell(sb3, "final", agg), _cell(alf, "to_target", agg),
             _cell(sb3, "to_target", agg), p_text]
    return "| " + " | ".join(cells) + " |"


def summary(rows: List[str], notes: List[str], seeds: List[int]) -> str:
    head = ["example (target)", "alf: final eval return", "SB3: final eval return",
            "alf: env steps to target (reached)", "SB3: env steps to target (reached)",
            "P(alf > SB3)"]
    lines = [f"Seeds {', '.join(map(str, seeds))}; each cell: IQM over the seeds [95% "
             "percentile bootstrap CI] (alf.bin.compare); final: the greedy evaluation "
             "return at the end of the runs.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head), *rows]
    return "\n".join(lines + [""] + [f"- {n}" for n in notes]) + "\n"


def parse_args(argv: Optional[List[str]] = None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--examples", nargs="+", default=DEFAULT_EXAMPLES)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--root", default="runs/seeds", help="the runs and comparisons go here")
    p.add_argument("--parallel", type=int, default=2, help="runs at once")
    p.add_argument("--skip_runs", action="store_true", help="only compare existing runs")
    p.add_argument("--steps", type=int, default=None,
                   help="env steps per run (default: each example's num_env_steps)")
    p.add_argument("--images_dir", default=os.path.join(ROOT, "docs", "images", "seeds"))
    p.add_argument("--results_dir", default=os.path.join(ROOT, "bench", "results", "seeds"))
    args = p.parse_args(argv)
    for name in ("root", "images_dir", "results_dir"):
        setattr(args, name, os.path.abspath(getattr(args, name)))
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    rows, notes = [], []
    for example in args.examples:
        if not os.path.isfile(os.path.join(EXAMPLES_DIR, example + ".gin")):
            notes.append(f"{example}: skipped, there is no alf/examples/{example}.gin")
            print(f"[seed_benchmarks] {notes[-1]}", flush=True)
            continue
        with_sb3 = example in PEERS
        if not with_sb3:
            notes.append(f"{example}: alf only (no SB3 peer in bench/sb3_peers.py)")
        if not args.skip_runs:
            run_alf(example, args)
            if with_sb3:
                run_sb3(example, args)
        rows.append(summary_row(example, compare(example, args, with_sb3)))
    text = summary(rows, notes, args.seeds)
    os.makedirs(args.results_dir, exist_ok=True)
    with open(os.path.join(args.results_dir, "summary.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
