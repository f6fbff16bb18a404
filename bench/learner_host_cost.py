"""Where one learner iteration's time goes, by phase: host CPU and wall per 1,000 agent
steps, aten ops, and (on CUDA) the calls that make the host wait for the GPU.

    python bench/learner_host_cost.py                       # CPU, appo_atari.gin, [8, 129]
    python bench/learner_host_cost.py --device cuda         # a GPU learner's host work
    python bench/learner_host_cost.py --device cuda --conf_param 'TrainerConfig.mini_batch_size=1024'
    python bench/learner_host_cost.py --profile             # + torch.profiler's top ops

Why: on one H100 with 16 CPUs, async APPO on Breakout was capped by the GPU learner,
host-bound while the GPU was busy 7% of the time: 8,211 agent steps/s, i.e. 0.122 s
of the learner's critical path per 1,000 agent steps. 70,000 frames/s needs at most
0.057 (docs/async.md, "The cost model, checked"). Cutting that starts with knowing
which part of an iteration the host spends it in. Runs take minutes of a lent GPU;
this script answers in one.

What it runs: the training half of the learner's path for one async trajectory batch
(``Learner.store``'s copy to the device, then ``Learner._train_whole_buffer``), on a
synthetic batch of the run's experience spec, laid out as the async unroller hands it
over: time-major ``[unroll_length + 1, envs]`` in host memory, transposed to
``[envs, T + 1]`` after the copy (random ``uint8`` frames, every step MID with discount
1, zero rewards, log-probs and values). The algorithm and its optimizer are built from
the gin file as a run builds them (``alf.experiment.build_algorithm``, role
``learner``, on ``--device``). Left out: reading the trajectories out of the shared
slots (``AsyncUnroller.collect``), the summaries and the weight publication after each
iteration (the publication copies the weights to the host: on CUDA, a sync). Phases,
timed in CPU seconds (``time.process_time``: every thread of the process, so on CUDA
also autograd's device thread, which runs the backward's launches) and wall seconds:

* ``copy``: host to device only (``x.to(device, non_blocking=True)`` from pageable
  memory, as ``Learner.store`` copies; nothing on a CPU learner);
* ``preprocess``: ``algorithm.preprocess_experience`` (APPO: the no-grad forward over
  every ``[B, T+1]`` step and V-trace);
* ``train``: the epochs of mini-batches (``whole_buffer_mini_batches``, then
  ``algorithm.train_on_batch`` on each: forward, loss, backward, clipping, Adam).

On CUDA the host only queues kernels, so a phase's CPU is its host work, plus any
time spent spin-waiting at a sync inside it. With ``--sync_phases``, each phase ends
with ``torch.cuda.synchronize()`` (after its CPU is read), so its wall time also holds
its GPU time. Without that flag, only the iteration's end synchronizes, which is how a
run overlaps them. The calls that synchronize inside an iteration (``.item()``,
``float(tensor)``, a host copy) are counted with
``torch.cuda.set_sync_debug_mode("warn")``, by the alf source line that made them.
Each one makes the host wait for the GPU to finish everything queued. The aten op
count varies a little from run to run (gradient clipping branches on the data).

Output: a table per phase (CPU-s and wall-s per 1,000 agent steps, share of the
iteration's host CPU), the aten op count of one iteration (``TorchDispatchMode``,
the kernels a GPU must launch, roughly), and the sync sites. Also written to
``bench/results/learner_host_cost.json``.
"""
import argparse
import collections
import gc
import json
import os
import sys
import time
import traceback
import warnings
from typing import Any, Callable, Dict, List, Sequence

import torch
from torch.utils._python_dispatch import TorchDispatchMode

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")
PHASES = ("copy", "preprocess", "train")


class OpCounter(TorchDispatchMode):
    """Counts the aten ops dispatched inside it (``count``, and per op in ``by_op``)."""

    def __init__(self):
        super().__init__()
        self.count = 0
        self.by_op: collections.Counter = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += 1
        self.by_op[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))


def build(conf: str, params: Sequence[str], device: str, envs: int) -> Any:
    """The learner's algorithm (optimizers built), a CPU batch ``[T + 1, envs]`` and the
    TrainerConfig."""
    sys.path.insert(0, ROOT)
    # deferred: the sys.path entry above makes this checkout's alf the one imported
    from alf import config as alf_config  # pylint: disable=import-outside-toplevel
    from alf import nest as alf_nest  # pylint: disable=import-outside-toplevel
    from alf.environments import create_environment  # pylint: disable=import-outside-toplevel
    from alf.environments.env_specs import EnvSpecs  # pylint: disable=import-outside-toplevel
    from alf.experiment import build_algorithm  # pylint: disable=import-outside-toplevel
    from alf.data_structures import StepType  # pylint: disable=import-outside-toplevel
    from alf.trainers.trainer_config import TrainerConfig  # pylint: disable=import-outside-toplevel
    alf_config.parse_config(conf_file=conf,
                            conf_params=list(params) + [f"TrainerConfig.device='{device}'"])
    config = TrainerConfig()
    env = create_environment(num_parallel_environments=1, num_threads=1)  # for the specs
    try:
        algorithm = build_algorithm(config, EnvSpecs.of(env), role="learner")
        spec = algorithm.experience_spec(env.time_step_spec())
    finally:
        env.close()
        del env
        gc.collect()  # the vector env's C++ objects, before the interpreter's exit
    if algorithm.on_policy or not algorithm.uses_regime("whole_replay_buffer_training", config):
        raise SystemExit(f"learner_host_cost.py times whole-buffer training on trajectory "
                         f"batches (APPO, IMPALA, PPO); {os.path.basename(conf)} builds "
                         f"{type(algorithm).__name__}, which trains another way")
    algorithm.ensure_optimizers()
    outer = (config.unroll_length + 1, envs)  # time-major, as the async unroller's batch
    batch = alf_nest.map_structure(lambda s: s.zeros(outer), spec)
    obs = alf_nest.map_structure(
        lambda x: torch.randint(0, 256, x.shape, dtype=x.dtype)
        if x.dtype == torch.uint8 else x, batch.time_step.observation)
    time_step = batch.time_step._replace(
        observation=obs, step_type=torch.full_like(batch.time_step.step_type, StepType.MID),
        discount=torch.ones_like(batch.time_step.discount))
    return algorithm, batch._replace(time_step=time_step), config


def iteration(algorithm: Any, batch: Any, config: Any, device: torch.device,
              sync_phases: bool) -> Dict[str, List[float]]:
    """One learner iteration on ``batch``; ``{phase: [CPU s, wall s]}``."""
    # deferred like build's: this checkout's alf
    from alf import nest as alf_nest  # pylint: disable=import-outside-toplevel
    from alf.algorithms.replay_training import whole_buffer_mini_batches  # pylint: disable=import-outside-toplevel
    from alf.utils import precision  # pylint: disable=import-outside-toplevel
    times: Dict[str, List[float]] = {}

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        c0, w0 = time.process_time(), time.perf_counter()
        result = fn()
        cpu = time.process_time() - c0  # before a --sync_phases wait, which may spin
        if sync_phases and device.type == "cuda":
            torch.cuda.synchronize(device)
        times[name] = [cpu, time.perf_counter() - w0]
        return result

    def train(exp: Any) -> None:  # as Learner._train_whole_buffer after preprocessing
        length = min(config.mini_batch_length, alf_nest.flatten(exp.step_type)[0].shape[1])
        for mini in whole_buffer_mini_batches(exp, config.mini_batch_size, length,
                                              config.num_updates_per_train_iter):
            algorithm.train_on_batch(mini)

    # the copy as Learner.store makes it (outside the autocast, as there)
    on_device = timed("copy", lambda: alf_nest.map_structure(
        lambda x: x.to(device, non_blocking=True).transpose(0, 1), batch))
    with precision.autocast_networks(algorithm.context.train_dtype):
        exp = timed("preprocess", lambda: algorithm.preprocess_experience(on_device))
        timed("train", lambda: train(exp))
    return times


def sync_sites(run: Callable[[], Any]) -> collections.Counter:
    """``{alf source line: count}`` of the calls in ``run()`` that synchronize with the
    GPU (``torch.cuda.set_sync_debug_mode("warn")``)."""
    sites: collections.Counter = collections.Counter()
    torch.cuda.set_sync_debug_mode("warn")

    package = os.path.join(ROOT, "alf") + os.sep

    def record(message, category, filename, lineno, file=None, line=None):
        if "synchroniz" not in str(message):
            return
        frames = [f for f in traceback.extract_stack()[:-1] if f.filename.startswith(package)]
        where = (f"{os.path.relpath(frames[-1].filename, ROOT)}:{frames[-1].lineno}" if frames
                 else f"{filename}:{lineno}")
        sites[where] += 1

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = record
            run()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    return sites


def measure(args: argparse.Namespace) -> Dict[str, Any]:
    """Warm-up iterations, then ``--iters`` timed ones; op count and sync sites of one."""
    algorithm, batch, config = build(args.conf, args.conf_param, args.device, args.envs)
    device = torch.device(args.device)
    run = lambda: iteration(algorithm, batch, config, device, args.sync_phases)  # noqa: E731
    for _ in range(args.warmup):
        run()
    totals = {p: [0.0, 0.0] for p in PHASES}
    iter_wall = 0.0
    for _ in range(args.iters):
        w0 = time.perf_counter()
        for phase, (cpu, wall) in run().items():
            totals[phase][0] += cpu
            totals[phase][1] += wall
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        iter_wall += time.perf_counter() - w0
    counter = OpCounter()
    with counter:
        run()
    sites = sync_sites(run) if device.type == "cuda" else collections.Counter()
    profile = profile_table(run, device) if args.profile else None
    steps = args.iters * args.envs * config.unroll_length  # agent steps trained on
    per_1k = 1000.0 / steps
    return {
        "conf": args.conf, "conf_param": args.conf_param, "device": args.device,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch_threads": torch.get_num_threads(), "envs": args.envs,
        "unroll_length": config.unroll_length, "iters": args.iters,
        "sync_phases": args.sync_phases,
        "phases": {p: {"cpu_s_per_1k": c * per_1k, "wall_s_per_1k": w * per_1k}
                   for p, (c, w) in totals.items()},
        "iteration_wall_s_per_1k": iter_wall * per_1k,
        "aten_ops_per_iteration": counter.count,
        "top_ops": counter.by_op.most_common(12),
        "sync_sites_per_iteration": dict(sites.most_common()),
        "profile": profile,
    }


def profile_table(run: Callable[[], Any], device: torch.device) -> str:
    """torch.profiler's table of one ``run()``: the 15 ops with the most self CPU (and,
    on CUDA, the kernels' device time)."""
    from torch.profiler import ProfilerActivity, profile  # pylint: disable=import-outside-toplevel
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        run()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15)


def report(result: Dict[str, Any]) -> str:
    """The markdown table and the counts of :func:`measure`'s result."""
    phases = result["phases"]
    host = sum(p["cpu_s_per_1k"] for p in phases.values())
    lines = [f"learner iteration on {result['device_name']} ({result['conf']}, "
             f"[{result['envs']}, {result['unroll_length'] + 1}] per iteration, "
             f"{result['torch_threads']} torch threads, {result['iters']} timed iterations"
             + (", each phase synchronized)" if result["sync_phases"] else ")"),
             "", "| phase | CPU-s per 1k agent steps (process) | share | wall-s per 1k |",
             "|---|---:|---:|---:|"]
    for name, p in phases.items():
        lines.append(f"| {name} | {p['cpu_s_per_1k']:.4f} | {p['cpu_s_per_1k'] / host:.0%} | "
                     f"{p['wall_s_per_1k']:.4f} |")
    lines += [f"| iteration | {host:.4f} | 100% | {result['iteration_wall_s_per_1k']:.4f} |", "",
              f"aten ops per iteration: {result['aten_ops_per_iteration']:,}; most: "
              + ", ".join(f"{op} {n}" for op, n in result["top_ops"][:6])]
    sites = result["sync_sites_per_iteration"]
    if result["device"].startswith("cuda"):
        lines.append(f"GPU syncs per iteration: {sum(sites.values())}"
                     + "".join(f"\n  {n} x {where}" for where, n in sites.items()))
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--conf", default="appo_atari.gin")
    p.add_argument("--conf_param", action="append", default=[])
    p.add_argument("--device", default="cpu")
    p.add_argument("--envs", type=int, default=8,
                   help="trajectories per iteration: every env of the run (8 in appo_atari.gin, "
                        "96 in the GPU kit's async rows)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--sync_phases", action="store_true",
                   help="synchronize the GPU after each phase (wall then holds its GPU time)")
    p.add_argument("--profile", action="store_true",
                   help="also print torch.profiler's table of one more iteration (top ops by self CPU)")
    p.add_argument("--out", default=os.path.join(RESULTS, "learner_host_cost.json"))
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    result = measure(args)
    print(report(result))
    if args.profile:
        print(result["profile"])
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
