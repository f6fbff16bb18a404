"""IQL gradient updates per second: alf's ``IqlAlgorithm`` vs d3rlpy's ``IQL``, one run.

    python bench/iql_speed.py                          # synthetic HalfCheetah-shaped data
    python bench/iql_speed.py --dataset data/halfcheetah_medium --threads 1 2 --repeats 3

What is timed, on the same data (obs 17, action 6: a dataset directory in alf's format,
or ``--transitions`` random transitions in 1000-step truncated episodes written as
one), batch 256, 256x256 ReLU MLPs for the actor, the twin critics and V, gamma 0.99,
expectile 0.7, temperature 3.0, weights clipped at 100, target tau 0.005, Adam 3e-4:

* **alf**: the real pure-offline training path as a user runs it: ``Trainer`` with
  ``TrainerConfig.unroll_length=0`` and ``offline_buffer_dir=<dataset>``
  (``num_updates_per_train_iter`` updates per iteration, each one sampling its batch
  from the memory-mapped offline buffer, building n-step transitions and taking one
  gradient step of all networks plus the Polyak target update). Rate = gradient
  updates of the timed iterations / their wall time; the first iterations are warm-up.
* **d3rlpy** (2.8.1, ``IQLConfig(...).create(device="cpu")`` on an ``MDPDataset`` of
  the same transitions): the body of ``QLearningAlgoBase.fitter``'s loop, i.e.
  ``dataset.sample_transition_batch(256)`` + ``algo.update(batch)`` per step, without
  its logger and progress bar (which only make d3rlpy slower).

Both are also timed *without* sampling ("update only": the same gradient step on
batches sampled beforehand), to show where the difference comes from, and in updates
per CPU second of the worker process (``time.process_time``: less sensitive than wall
time to other processes taking the cores; with 1 thread, the rate on an idle core). Each side runs
in its own fresh process (d3rlpy in its own venv: it pins gymnasium 1.0 and needs gym,
which must not enter alf's venv), with ``torch.set_num_threads(--threads)``;
repeats are interleaved (alf, d3rlpy, alf, d3rlpy, ...). Prints a markdown table
(best and median of the repeats, alf/d3rlpy of each) and the parameter counts of both
sides, and writes ``bench/results/iql_speed.json``.

``--d3rlpy_python`` names a python that has d3rlpy; by default the script creates
(once) and reuses ``bench/.venv-d3rlpy`` (``python -m venv`` + ``pip install
torch==<this torch> d3rlpy==2.8.1``).
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_VENV = os.path.join(HERE, ".venv-d3rlpy")
D3RLPY_VERSION = "2.8.1"
BATCH = 256
OBS_DIM, ACT_DIM, EPISODE = 17, 6, 1000


# ------------------------------------------------------------------------- dataset
def write_synthetic_dataset(path: str, transitions: int, seed: int = 0) -> None:
    """``transitions`` random HalfCheetah-shaped transitions as an alf dataset at ``path``:
    rows of one truncated 1000-step episode each (FIRST, 999 MID, LAST; discount 1)."""
    import numpy as np
    import torch

    sys.path.insert(0, ROOT)
    from alf.data_structures import StepType
    from alf.datasets.format import DatasetSteps, write_dataset
    from alf.tensor_specs import BoundedTensorSpec, TensorSpec

    rng = np.random.default_rng(seed)
    rows, length = max(1, math.ceil(transitions / EPISODE)), EPISODE + 1
    step_type = np.full((rows, length), int(StepType.MID), np.int32)
    step_type[:, 0], step_type[:, -1] = int(StepType.FIRST), int(StepType.LAST)
    reward = rng.normal(size=(rows, length)).astype(np.float32)
    reward[:, 0] = 0.0
    steps = DatasetSteps(
        step_type=step_type, reward=reward, discount=np.ones((rows, length), np.float32),
        observation=rng.normal(size=(rows, length, OBS_DIM)).astype(np.float32),
        action=rng.uniform(-1, 1, size=(rows, length, ACT_DIM)).astype(np.float32))
    write_dataset(path, steps, [length] * rows, "HalfCheetah-v5",
                  TensorSpec((OBS_DIM,), torch.float32),
                  BoundedTensorSpec((ACT_DIM,), torch.float32, -1.0, 1.0), TensorSpec(()),
                  source={"kind": "synthetic", "seed": seed})


def read_transitions(path: str):
    """The dataset at ``path`` as d3rlpy's flat episode arrays (numpy and json only: this
    runs in the d3rlpy venv, without alf): ``(obs [N, O], act [N, A], rew [N, 1],
    terminals [N], timeouts [N])``. alf's step ``t`` holds ``r_t`` received on arriving
    there; d3rlpy's holds the reward of its own action, so rewards shift by one. A
    terminated episode drops its LAST step (d3rlpy zeroes the next observation of a
    terminal); a truncated or cut one keeps it as the final ``timeout`` step."""
    import numpy as np

    with open(os.path.join(path, "alf_dataset.json")) as f:
        manifest = json.load(f)
    fields = manifest["fields"]
    for name in ("observation", "action", "reward", "discount"):
        if name not in fields:
            raise SystemExit(f"iql_speed: {path}: field '{name}' is not one array (nested "
                             f"observations/actions are not supported by this bench)")

    def load(name):
        return np.load(os.path.join(path, fields[name]["file"]), mmap_mode="r",
                       allow_pickle=False)

    obs, act, rew, disc = load("observation"), load("action"), load("reward"), load("discount")
    episodes = np.load(os.path.join(path, "episodes.npy"), allow_pickle=False)
    parts = {"o": [], "a": [], "r": [], "t": [], "to": []}
    for row, start, length, complete in episodes.tolist():
        if length < 2:
            continue
        end = start + length
        terminated = bool(complete) and float(disc[row, end - 1]) == 0.0
        n = length - 1 if terminated else length
        r = np.zeros(n, np.float32)
        r[:length - 1] = rew[row, start + 1:end]
        flag = np.zeros(n, np.float32)
        flag[-1] = 1.0
        parts["o"].append(np.asarray(obs[row, start:start + n], np.float32))
        parts["a"].append(np.asarray(act[row, start:start + n], np.float32))
        parts["r"].append(r[:, None])
        parts["t"].append(flag if terminated else np.zeros(n, np.float32))
        parts["to"].append(np.zeros(n, np.float32) if terminated else flag)
    return tuple(np.concatenate(parts[k]) for k in ("o", "a", "r", "t", "to"))


# -------------------------------------------------------------------------- workers
def _numel(module) -> int:
    return int(sum(p.numel() for p in module.parameters()))


def alf_worker(args) -> dict:
    """Train IqlAlgorithm with the pure offline Trainer; time the iterations after warm-up."""
    import torch

    sys.path.insert(0, ROOT)
    import alf.algorithms.iql_algorithm  # noqa: F401 - registers IqlAlgorithm with gin
    from alf import config as alf_config
    from alf.trainers.trainer import Trainer
    from alf.trainers.trainer_config import TrainerConfig

    k = args.updates_per_iter
    warm_iters, timed_iters = math.ceil(args.warmup / k), math.ceil(args.updates / k)
    root = tempfile.mkdtemp(prefix="alf_iql_speed_")
    params = ["TrainerConfig.algorithm_ctor = @IqlAlgorithm",
              f"TrainerConfig.offline_buffer_dir = '{args.dataset}'",
              "TrainerConfig.unroll_length = 0",
              f"TrainerConfig.num_iterations = {warm_iters + timed_iters}",
              f"TrainerConfig.num_updates_per_train_iter = {k}",
              f"TrainerConfig.mini_batch_size = {BATCH}",
              f"TrainerConfig.num_threads = {args.threads}",
              "TrainerConfig.random_seed = 0",
              "TrainerConfig.evaluate = False",
              "TrainerConfig.summary_interval = 100000000",
              "TrainerConfig.checkpoint_interval = 100000000",
              "IqlAlgorithm.gamma = 0.99", "IqlAlgorithm.expectile = 0.7",
              "IqlAlgorithm.temperature = 3.0", "IqlAlgorithm.max_weight = 100.0",
              "IqlAlgorithm.target_update_tau = 0.005", "IqlAlgorithm.num_critics = 2"]
    alf_config.parse_config(conf_params=params)
    trainer = Trainer(TrainerConfig(), root, quiet=True)
    alg, learner, ctx = trainer.algorithm, trainer.learner, trainer.context
    original, stamps, done = learner.train_iter, {}, [0]

    def timed_train_iter():
        if done[0] == warm_iters:
            stamps["t0"], stamps["c0"] = time.perf_counter(), time.process_time()
            stamps["u0"] = ctx.num_updates
        result = original()
        done[0] += 1
        if done[0] == warm_iters + timed_iters:
            stamps["t1"], stamps["c1"] = time.perf_counter(), time.process_time()
            stamps["u1"] = ctx.num_updates
        return result

    learner.train_iter = timed_train_iter
    trainer.run()
    updates = stamps["u1"] - stamps["u0"]
    rate = updates / (stamps["t1"] - stamps["t0"])
    cpu_rate = updates / (stamps["c1"] - stamps["c0"])

    # update only: the same gradient step on batches sampled beforehand
    length = learner.replay.sequence_length()
    batches = [alg.preprocess_experience(learner.replay.sample(BATCH, length,
                                                               learner.offline_buffer))
               for _ in range(16)]
    n = max(1, args.updates // 2)
    for i in range(min(n, 50)):
        alg.train_on_batch(batches[i % len(batches)])
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(n):
        alg.train_on_batch(batches[i % len(batches)])
    update_only = n / (time.perf_counter() - t0)
    update_only_cpu = n / (time.process_time() - c0)

    trainable = {id(p) for opt in alg.optimizers() for g in opt.param_groups
                 for p in g["params"]}
    counts = {"actor": _numel(alg._actor), "critics": _numel(alg._critic),
              "value": _numel(alg._value), "target critics": _numel(alg._target_critic)}
    counts["trainable total"] = int(sum(p.numel() for p in alg.parameters()
                                        if id(p) in trainable))
    return {"rate": rate, "cpu_rate": cpu_rate, "update_only": update_only, "update_only_cpu": update_only_cpu, "updates": updates,
            "threads": torch.get_num_threads(), "params": counts}


def d3rlpy_worker(args) -> dict:
    """d3rlpy IQL on an MDPDataset of the same transitions; time fitter's loop body."""
    import torch
    import d3rlpy

    torch.set_num_threads(args.threads)
    d3rlpy.seed(0)
    obs, act, rew, term, tout = read_transitions(args.dataset)
    dataset = d3rlpy.dataset.MDPDataset(obs, act, rew, term, timeouts=tout)
    algo = d3rlpy.algos.IQLConfig(
        batch_size=BATCH, gamma=0.99, tau=0.005, n_critics=2, expectile=0.7, weight_temp=3.0,
        max_weight=100.0, actor_learning_rate=3e-4, critic_learning_rate=3e-4,
    ).create(device="cpu")
    algo.build_with_dataset(dataset)
    for _ in range(args.warmup):
        algo.update(dataset.sample_transition_batch(BATCH))
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(args.updates):
        batch = dataset.sample_transition_batch(BATCH)
        algo.update(batch)
    rate = args.updates / (time.perf_counter() - t0)
    cpu_rate = args.updates / (time.process_time() - c0)

    batches = [dataset.sample_transition_batch(BATCH) for _ in range(16)]
    n = max(1, args.updates // 2)
    for i in range(min(n, 50)):
        algo.update(batches[i % len(batches)])
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(n):
        algo.update(batches[i % len(batches)])
    update_only = n / (time.perf_counter() - t0)
    update_only_cpu = n / (time.process_time() - c0)

    m = algo.impl.modules
    counts = {"actor": _numel(m.policy), "critics": _numel(m.q_funcs),
              "value": _numel(m.value_func), "target critics": _numel(m.targ_q_funcs)}
    counts["trainable total"] = counts["actor"] + counts["critics"] + counts["value"]
    return {"rate": rate, "cpu_rate": cpu_rate, "update_only": update_only, "update_only_cpu": update_only_cpu,
            "updates": args.updates,
            "threads": torch.get_num_threads(), "params": counts,
            "transitions": int(dataset.transition_count), "d3rlpy": d3rlpy.__version__,
            "torch": torch.__version__}


# ----------------------------------------------------------------------- the driver
def ensure_d3rlpy_python(path: str) -> str:
    """The python to run d3rlpy with: ``path`` if given, else ``bench/.venv-d3rlpy``
    (created on first use with this torch's version pinned)."""
    if path:
        return path
    python = os.path.join(DEFAULT_VENV, "bin", "python")
    probe = [python, "-c", "import d3rlpy"]
    if os.path.exists(python) and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    import torch
    torch_version = torch.__version__.split("+")[0]
    print(f"creating {DEFAULT_VENV} (torch=={torch_version}, d3rlpy=={D3RLPY_VERSION})",
          flush=True)
    subprocess.run([sys.executable, "-m", "venv", DEFAULT_VENV], check=True)
    subprocess.run([python, "-m", "pip", "install", "-q", f"torch=={torch_version}",
                    f"d3rlpy=={D3RLPY_VERSION}"], check=True)
    return python


def run_worker(python: str, side: str, args, threads: int) -> dict:
    cmd = [python, os.path.abspath(__file__), "--_worker", side, "--dataset", args.dataset,
           "--threads", str(threads), "--updates", str(args.updates),
           "--warmup", str(args.warmup), "--updates_per_iter", str(args.updates_per_iter)]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               PYTHONWARNINGS="ignore")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-5000:])
    raise SystemExit(f"iql_speed: the {side} worker failed (exit {proc.returncode})")


def _table(results: Dict[int, Dict[str, List[dict]]]) -> str:
    """Markdown: per thread count and metric, best and median of each side and alf/d3rlpy
    (of the bests, of the medians, and the median of the per-repeat ratios: each repeat's
    alf and d3rlpy runs are neighbours in time, so their ratio is the least affected by
    load that drifts during the bench)."""
    lines = ["| threads | updates/s | alf best | alf median | d3rlpy best | d3rlpy median "
             "| alf/d3rlpy, best | alf/d3rlpy, median | alf/d3rlpy, median of pairs |",
             "|---|---|---|---|---|---|---|---|---|"]
    for threads, sides in results.items():
        for key, label in (("rate", "sampling + update (wall clock)"),
                           ("cpu_rate", "sampling + update (per CPU second)"),
                           ("update_only", "update only (wall clock)"),
                           ("update_only_cpu", "update only (per CPU second)")):
            a = [r[key] for r in sides["alf"]]
            d = [r[key] for r in sides["d3rlpy"]]
            pairs = statistics.median(x / y for x, y in zip(a, d))
            lines.append(f"| {threads} | {label} | {max(a):.1f} | {statistics.median(a):.1f} | "
                         f"{max(d):.1f} | {statistics.median(d):.1f} | "
                         f"**{max(a) / max(d):.2f}x** | "
                         f"{statistics.median(a) / statistics.median(d):.2f}x | {pairs:.2f}x |")
    return "\n".join(lines)


def _params_table(alf_p: dict, d3_p: dict) -> str:
    lines = ["| network | alf | d3rlpy |", "|---|---|---|"]
    for k in alf_p:
        lines.append(f"| {k} | {alf_p[k]:,} | {d3_p.get(k, 0):,} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default=None, help="alf dataset directory (default: "
                   "write --transitions random HalfCheetah-shaped transitions to a temp dir)")
    p.add_argument("--transitions", type=int, default=100_000)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--updates", type=int, default=1000, help="timed updates per run")
    p.add_argument("--warmup", type=int, default=200, help="untimed updates first")
    p.add_argument("--updates_per_iter", type=int, default=100,
                   help="alf: TrainerConfig.num_updates_per_train_iter")
    p.add_argument("--d3rlpy_python", default=None,
                   help=f"python with d3rlpy installed (default: {DEFAULT_VENV}, created "
                        "on first use)")
    p.add_argument("--out", default=os.path.join(HERE, "results", "iql_speed.json"))
    p.add_argument("--_worker", choices=["alf", "d3rlpy"], help=argparse.SUPPRESS)
    args = p.parse_args()
    if args._worker:
        args.threads = args.threads[0]
        import torch
        torch.set_num_threads(args.threads)
        result = (alf_worker if args._worker == "alf" else d3rlpy_worker)(args)
        print("RESULT " + json.dumps(result), flush=True)
        return

    tmp = None
    if args.dataset is None:
        tmp = tempfile.TemporaryDirectory(prefix="iql_speed_data_")
        args.dataset = os.path.join(tmp.name, "halfcheetah_synthetic")
        write_synthetic_dataset(args.dataset, args.transitions)
        print(f"synthetic dataset: {args.transitions:,} transitions (obs {OBS_DIM}, action "
              f"{ACT_DIM}) at {args.dataset}", flush=True)
    args.dataset = os.path.abspath(args.dataset)
    d3_python = ensure_d3rlpy_python(args.d3rlpy_python)
    pythons = {"alf": sys.executable, "d3rlpy": d3_python}
    results: Dict[int, Dict[str, List[dict]]] = {}
    try:
        for threads in args.threads:
            results[threads] = {"alf": [], "d3rlpy": []}
            for r in range(args.repeats):
                for side in ("alf", "d3rlpy"):
                    res = run_worker(pythons[side], side, args, threads)
                    results[threads][side].append(res)
                    print(f"  threads {threads} repeat {r + 1} {side:6s}: {res['rate']:7.1f} "
                          f"updates/s ({res['cpu_rate']:7.1f} per CPU s; update only "
                          f"{res['update_only']:7.1f})", flush=True)
    finally:
        if tmp is not None:
            tmp.cleanup()
    first = results[args.threads[0]]
    alf_p, d3_p = first["alf"][0]["params"], first["d3rlpy"][0]["params"]
    print()
    print(_table(results))
    print()
    print("Parameters (target networks are not trained by gradient):")
    print(_params_table(alf_p, d3_p))
    if alf_p["trainable total"] != d3_p["trainable total"]:
        print(f"WARNING: trainable parameter counts differ: alf {alf_p['trainable total']:,} vs "
              f"d3rlpy {d3_p['trainable total']:,}")
    info = first["d3rlpy"][0]
    print(f"\nd3rlpy {info['d3rlpy']}, torch {info['torch']}; {info['transitions']:,} "
          f"transitions; batch {BATCH}; {args.updates} timed updates after {args.warmup} "
          f"warm-up per run; {args.repeats} interleaved repeats")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"args": vars(args), "results": {str(k): v for k, v in results.items()}},
                  f, indent=1)


if __name__ == "__main__":
    main()
