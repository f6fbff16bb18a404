"""PPO with per-key observation encoders on TwoCameraBandit: the learning curve.

    python bench/two_cameras_learning.py --seeds 0 1 2 [--steps 30000]

For each seed runs ``python -m alf.bin.train --conf=ppo_two_cameras.gin`` (a CnnEncoder
per camera, an MlpEncoder for the proprioception vector, concatenated; see
alf/examples/two_camera_env.py) one after the other and prints the run's
``progress.csv`` curve: env steps vs the mean training return of the recent episodes
(random play 0.125; a policy that ignores either camera or the vector at most 0.5;
the entropy bonus keeps the sampled policy a little below 1). Also writes
``bench/results/two_cameras_learning.json``.
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run(seed: int, steps: int) -> list:
    """``[(env_steps, average_return), ...]`` of one training run."""
    with tempfile.TemporaryDirectory() as d:
        cmd = [sys.executable, "-m", "alf.bin.train", "--conf=ppo_two_cameras.gin",
               f"--root_dir={d}/run", "--quiet",
               "--conf_param", f"TrainerConfig.random_seed={seed}",
               "--conf_param", f"TrainerConfig.num_env_steps={steps}"]
        subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        with open(os.path.join(d, "run", "progress.csv")) as f:
            return [(int(r["env_steps"]), float(r["average_return"]))
                    for r in csv.DictReader(f) if r["average_return"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--steps", type=int, default=30000)
    args = parser.parse_args()
    curves = {seed: run(seed, args.steps) for seed in args.seeds}
    marks = sorted({s for curve in curves.values() for s, _ in curve})
    print("env steps  " + "  ".join(f"seed {s}" for s in args.seeds))
    shown = marks[::max(1, len(marks) // 12)]
    for step in shown + [m for m in marks[-1:] if m not in shown]:
        row = [dict(curves[s]).get(step) for s in args.seeds]
        print(f"{step:9d}  " + "  ".join(f"{v:6.2f}" if v is not None else "     -"
                                         for v in row))
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "two_cameras_learning.json"), "w") as f:
        json.dump({"steps": args.steps, "curves": curves}, f)


if __name__ == "__main__":
    main()
