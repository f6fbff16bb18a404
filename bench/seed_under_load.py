"""Does a seed name a run on a busy machine? The same command quiet and next to busy loops.

    python bench/seed_under_load.py                       # every case below
    python bench/seed_under_load.py --cases sac --busy 2  # one case, two busy loops
    python bench/seed_under_load.py --cases ppo_atari ppo_rnd_latent  # this session's

For each case this runs the real ``python -m alf.bin.train`` command three times with
the same seed: on a quiet machine, next to ``--busy`` copies of
``python -c "while True: pass"`` (the thread governor then narrows the run's CPUs), and
quiet again with ``TrainerConfig.adapt_threads=False`` (the governor never acts). It
then compares the final checkpoints tensor by tensor (every tensor of the saved
algorithm, optimizers and normalisers included, and the run counters; the wall clock
left out) and prints, per case, how many tensors differ between quiet and busy and
between quiet and pinned, with the wall times. Issue 29's bar: 0 differ everywhere.

The machine must otherwise be quiet (note ``uptime`` next to the figures); results are
written to ``bench/results/seed_under_load.json``.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# name -> (conf, overrides): issue 29's three comparisons
CASES: Dict[str, Tuple[str, List[str]]] = {
    "sac": ("sac_pendulum.gin", ["TrainerConfig.random_seed=3",
                                 "TrainerConfig.num_env_steps=1500"]),
    "ppo_atari": ("ppo_atari.gin", ["TrainerConfig.random_seed=3",
                                    "TrainerConfig.num_iterations=3",
                                    "TrainerConfig.evaluate=False"]),
    "sac_async_det": ("sac_pendulum_async.gin", ["TrainerConfig.random_seed=3",
                                                 "TrainerConfig.num_env_steps=3000",
                                                 "TrainerConfig.async_mode='deterministic'"]),
    # an Agent: PPO with an RND column (one value per column) on a learned latent
    "ppo_rnd_latent": ("ppo_rnd_cart_pole.gin", [
        "TrainerConfig.random_seed=3", "TrainerConfig.num_env_steps=10000",
        "TrainerConfig.evaluate=False", "TrainerConfig.mini_batch_length=2",
        "Agent.representation_learner_cls=@LatentDynamicsLearner",
        "LatentDynamicsLearner.optimizer=@repr/alf.optimizers.Adam()"]),
}
BUSY_LOOP = [sys.executable, "-c", "while True: pass"]


def _flatten(value: Any, prefix: str, out: Dict[str, Any]) -> None:
    import torch  # pylint: disable=import-outside-toplevel
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(v, f"{prefix}/{k}", out)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _flatten(v, f"{prefix}/{i}", out)
    elif isinstance(value, torch.Tensor):
        out[prefix] = value
    elif "wall_time" not in prefix:
        out[prefix] = value


def checkpoint_differences(a_dir: str, b_dir: str) -> Tuple[int, int, List[str]]:
    """(tensors compared, tensors that differ, the first names that differ) between the
    newest checkpoints of two runs."""
    import torch  # pylint: disable=import-outside-toplevel
    ckpts = []
    for root in (a_dir, b_dir):
        found = sorted(glob.glob(os.path.join(root, "train", "ckpt-*.pt")))
        if not found:
            raise SystemExit(f"no checkpoint in {root}/train")
        flat: Dict[str, Any] = {}
        _flatten(torch.load(found[-1], map_location="cpu", weights_only=False), "", flat)
        ckpts.append(flat)
    a, b = ckpts
    names = sorted(set(a) | set(b))
    tensors = [n for n in names if isinstance(a.get(n, b.get(n)), torch.Tensor)]
    differ = []
    for n in names:
        x, y = a.get(n), b.get(n)
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            same = x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y)
        else:
            same = x == y
        if not same:
            differ.append(n)
    return len(tensors), sum(1 for n in differ if n in tensors), differ[:5]


def _train(conf: str, params: Sequence[str], root: str, busy: int) -> float:
    cmd = [sys.executable, "-m", "alf.bin.train", f"--conf={conf}", f"--root_dir={root}"]
    for p in params:
        cmd += ["--conf_param", p]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    hogs = [subprocess.Popen(BUSY_LOOP) for _ in range(busy)]
    try:
        time.sleep(0.5 if busy else 0.0)
        start = time.perf_counter()
        out = subprocess.run(cmd, env=env, capture_output=True, text=True)
        took = time.perf_counter() - start
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    narrowed = "running on 1 of" in out.stderr
    print(f"  {os.path.basename(root)}: {took:.1f}s{' (narrowed)' if narrowed else ''}",
          flush=True)
    return took


def main(argv: Sequence[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", choices=sorted(CASES), default=list(CASES))
    parser.add_argument("--busy", type=int, default=1, help="busy loops next to the busy run")
    args = parser.parse_args(argv)
    work = tempfile.mkdtemp(prefix="alf-seed-load-")
    rows = {}
    try:
        for name in args.cases:
            conf, params = CASES[name]
            print(f"[{name}] {conf} {' '.join(params)}", flush=True)
            roots = {k: os.path.join(work, f"{name}_{k}") for k in ("quiet", "busy", "pinned")}
            times = {"quiet": _train(conf, params, roots["quiet"], 0),
                     "busy": _train(conf, params, roots["busy"], args.busy),
                     "pinned": _train(conf, params + ["TrainerConfig.adapt_threads=False"],
                                      roots["pinned"], 0)}
            n, busy_diff, busy_names = checkpoint_differences(roots["quiet"], roots["busy"])
            _, pin_diff, _ = checkpoint_differences(roots["quiet"], roots["pinned"])
            rows[name] = {"tensors": n, "differ_quiet_vs_busy": busy_diff,
                          "differ_quiet_vs_pinned": pin_diff, "first_differing": busy_names,
                          "seconds": times, "busy_loops": args.busy}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\n| case | tensors | differ quiet vs busy | differ quiet vs adapt_threads=False "
          "| quiet s | busy s |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in rows.items():
        print(f"| {name} | {r['tensors']} | {r['differ_quiet_vs_busy']} | "
              f"{r['differ_quiet_vs_pinned']} | {r['seconds']['quiet']:.1f} | "
              f"{r['seconds']['busy']:.1f} |")
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "seed_under_load.json"), "w") as f:
        json.dump(rows, f, indent=1)
    return 0 if all(r["differ_quiet_vs_busy"] == 0 for r in rows.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
