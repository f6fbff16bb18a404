"""CPU-cost model of Atari training: CPU-seconds per 1,000 agent steps by component,
and the frames/s it projects on 8, 16 and 64 cores, with and without a GPU learner.

    python bench/cpu_cost.py            # sync, async in-worker, async + 1 policy worker
    python bench/cpu_cost.py --policy_workers 2 --conf_param TrainerConfig.env_groups_per_worker=2
    python bench/cpu_cost.py --warmup_iters 1 --iters 1 --summary_interval 1   # smoke
    python bench/cpu_cost.py --conf_param 'TrainerConfig.act_precision="bf16"'  # bf16 acting

Why: throughput on this 2-core machine says little about a 64-core box or a GPU
learner. CPU-seconds per agent step, split by where they go, do: on ``C`` busy cores
a run cannot exceed ``C / (CPU-s per agent step)``, and the parts that cannot spread
(one learner process) cap it further.

Rows (the real command, ``python -m alf.bin.train``, with a fixed iteration count):

* ``sync``: ``--conf=ppo_atari.gin`` (envs, policy and training in one process);
* ``async in-worker``: ``--conf=appo_atari.gin`` with ``TrainerConfig.num_policy_workers=0``
  (an env worker process acts with its own policy copy; pinned, although it is also
  what ``num_policy_workers=None`` picks);
* ``async + policy workers`` (``--policy_workers N``, default 1; 0 drops the row;
  ``--no_sync`` drops the sync row):
  ``appo_atari.gin`` with ``TrainerConfig.num_policy_workers=N`` (inference in separate
  processes). Reported as skipped when this checkout's TrainerConfig does not know the
  parameter.

Measuring a run: the training command runs under a thin launcher (``_launch`` below:
the very ``alf.bin.train`` module, run as ``__main__``) that records the pid and
``multiprocessing`` name of every process the learner starts (``alf-env-worker-*``,
``alf-policy-worker-*``; the OS name of a spawned process is just ``python``) and the
learner process's CPU spent inside ``Learner.collect``. This script watches the run's
``progress.csv``; when the row of the warm-up's last iteration appears it reads
``utime + stime`` from ``/proc/<pid>/stat`` of the learner and all its descendants,
and again at the row ``--iters`` iterations later (one more iteration follows, so no
worker has exited yet). Start-up, the first (slow) iterations and shutdown are outside
the window. Per process group: learner, env workers, policy workers, other (env
subprocesses, the resource tracker). The learner's CPU inside ``Learner.collect`` over
the window's iterations comes from the launcher's per-call running totals.

Components (CPU-s per 1,000 agent steps):

* env stepping: the raw ``AtariVectorEnv`` (``bench/atari_env_rate.py``'s raw path:
  numpy actions, no alf) with random actions, the run's env count per group and
  C++ thread count, process CPU (its threads included) - micro-benchmark;
* inference: ``rollout_step`` of the algorithm built from the same gin
  (``alf.experiment.build_algorithm``, role ``actor``) on a transformed Atari
  time step at the per-group batch size, 1 torch thread, thread CPU -
  micro-benchmark;
* learning: the learner process's CPU outside ``Learner.collect`` (training,
  weight publication, summaries) - measured in the run;
* copies/transport: the residual, total - env - inference - learning. It holds alf's
  TimeStep conversion, frame stacking, slot and replay writes, the learner's copy out
  of the slots, pipes, the unroll loop's Python and anything the micro-benchmarks
  miss (so it can come out slightly negative when they over-estimate).

Writes ``bench/results/cpu_cost.json`` and ``bench/results/cpu_cost.md`` (the table
and its assumptions).
"""
import argparse
import contextlib
import csv
import json
import os
import runpy
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")
FRAME_SKIP = 4  # atari.gin: atari_options.frame_skip
CORES = (8, 16, 64)
CLK_TCK = os.sysconf("SC_CLK_TCK")
POLL_S = 0.05  # progress.csv polling period
ENV_WORKER_PREFIX = "alf-env-worker"
POLICY_WORKER_MARK = "policy-worker"


# ------------------------------------------------------------------ /proc sampling
def proc_cpu_seconds(pid: int, tid: Optional[int] = None) -> Optional[float]:
    """``utime + stime`` of process ``pid`` (all its threads) in seconds, or of its thread
    ``tid`` alone; None if gone. Read from ``/proc`` (psutil is no dependency of alf)."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    try:
        with open(path) as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "; comm may hold spaces
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # fields 14 and 15 of stat(5)


def proc_children(pid: int) -> List[int]:
    """Direct children of ``pid`` (every thread's ``children`` file: a child belongs
    to the thread that started it)."""
    kids: List[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids.extend(int(k) for k in f.read().split())
        except OSError:
            continue
    return kids


def process_tree(root: int) -> Dict[int, int]:
    """``{pid: parent pid}`` of ``root`` and all its descendants (root's parent: 0)."""
    tree, todo = {root: 0}, [root]
    while todo:
        pid = todo.pop()
        for kid in proc_children(pid):
            if kid not in tree:
                tree[kid] = pid
                todo.append(kid)
    return tree


def cpu_snapshot(root: int) -> Dict[int, Tuple[int, float, float]]:
    """``{pid: (parent pid, CPU seconds, main thread's CPU seconds)}`` of the tree under
    ``root`` now. An env worker's main thread acts (the policy forward, the copies, the
    Python of the loop); its other threads are the env engine's (ale-py's C++ threads),
    so the split measures the non-env CPU directly rather than as a residual. It assumes
    ``env_worker_threads == 1`` (with more, torch's OpenMP threads would run part of the
    forward off the main thread and count as env) and an env engine with its own threads
    (ale-py); env subprocesses would count in "other"."""
    snap = {}
    for pid, parent in process_tree(root).items():
        cpu = proc_cpu_seconds(pid)
        main = proc_cpu_seconds(pid, pid)
        if cpu is not None:
            snap[pid] = (parent, cpu, cpu if main is None else main)
    return snap


# ------------------------------------------------------------------ launcher (learner side)
def _record_process_names(pid_file: str) -> None:
    """Append ``pid<TAB>name`` to ``pid_file`` for every ``multiprocessing`` process this
    process starts (env and policy workers), so the parent can attribute their CPU."""
    import multiprocessing.process as mp_process  # pylint: disable=import-outside-toplevel
    original = mp_process.BaseProcess.start

    def start(self) -> None:
        original(self)
        with open(pid_file, "a") as f:
            f.write(f"{self.pid}\t{self.name}\n")

    mp_process.BaseProcess.start = start


def _record_collect_cpu(collect_file: str) -> bool:
    """Accumulate the learner process's CPU (all threads) inside ``Learner.collect`` and
    append the running total to ``collect_file`` after each call (one call per
    iteration for PPO/APPO, so line ``k`` is the total after iteration ``k``'s
    collection). Returns False when this checkout has no ``Learner.collect``."""
    try:
        from alf.trainers.learner import Learner  # pylint: disable=import-outside-toplevel
    except ImportError:
        return False
    original = getattr(Learner, "collect", None)
    if original is None:
        return False
    total = [0.0]
    out = open(collect_file, "w")  # pylint: disable=consider-using-with

    def collect(self, *args, **kwargs):
        t0 = time.process_time()
        try:
            return original(self, *args, **kwargs)
        finally:
            total[0] += time.process_time() - t0
            out.write(f"{total[0]:.6f}\n")
            out.flush()

    Learner.collect = collect
    return True


def _launch(pid_file: str, collect_file: str, train_argv: Sequence[str]) -> None:
    """Run ``python -m alf.bin.train <train_argv>`` in this process with the two recorders
    installed. ``alf.bin.train`` runs as ``__main__`` (``alter_sys``), so spawned workers
    import it as ``python -m`` would have them; ``sys.path[0]`` is the repository root,
    as for ``python -m`` started there."""
    sys.path[0] = ROOT
    _record_process_names(pid_file)
    _record_collect_cpu(collect_file)
    sys.argv = [os.path.join(ROOT, "alf", "bin", "train.py"), *train_argv]
    runpy.run_module("alf.bin.train", run_name="__main__", alter_sys=True)


# ------------------------------------------------------------------ one training run
@dataclass
class RowSpec:
    """One table row: a name, a gin file and its extra bindings."""
    name: str
    conf: str
    params: List[str] = field(default_factory=list)


@dataclass
class Boundary:
    """What was read when a window boundary's ``progress.csv`` row appeared."""
    iteration: int
    env_steps: int
    wall_time_s: float
    cpu: Dict[int, Tuple[int, float, float]]  # pid: (parent, CPU s, main thread's CPU s)


def train_params(spec: RowSpec, args: argparse.Namespace) -> List[str]:
    """The ``--conf_param`` bindings of a measured run: a fixed iteration count (warm-up,
    timed, one more so the end boundary sees live workers), no evaluation, no
    checkpoints inside the run, a ``progress.csv`` row every ``summary_interval``."""
    total = args.warmup_iters + args.iters + 1
    return [f"TrainerConfig.num_iterations={total}", "TrainerConfig.num_env_steps=0",
            "TrainerConfig.evaluate=False", f"TrainerConfig.summary_interval={args.summary_interval}",
            "TrainerConfig.checkpoint_interval=1000000000", "TrainerConfig.random_seed=0",
            *spec.params, *args.conf_param]


def train_argv(spec: RowSpec, args: argparse.Namespace, root_dir: str) -> List[str]:
    """``alf.bin.train``'s arguments for ``spec``."""
    argv = [f"--conf={spec.conf}", f"--root_dir={root_dir}"]
    for p in train_params(spec, args):
        argv += ["--conf_param", p]
    return argv


def shell_command(spec: RowSpec, args: argparse.Namespace) -> str:
    """The plain command a row measures (what the launcher runs), for the report."""
    parts = ["python -m alf.bin.train", f"--conf={spec.conf}", "--root_dir=<fresh dir>"]
    parts += [f"--conf_param '{p}'" for p in train_params(spec, args)]
    return " ".join(parts)


def last_progress_row(path: str) -> Optional[Dict[str, str]]:
    """The newest complete row of ``progress.csv`` (None before the first)."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines = lines[:-1]  # a row being written
    rows = list(csv.DictReader(lines))
    return rows[-1] if rows else None


def collect_cpu_between(path: str, first: int, last: int) -> Optional[float]:
    """Learner CPU seconds inside ``Learner.collect`` in iterations ``first+1 .. last``
    (the launcher's running totals, one line per call); None without them."""
    try:
        with open(path) as f:
            totals = [float(line) for line in f.read().split()]
    except (OSError, ValueError):
        return None
    if len(totals) < last:
        return None
    return totals[last - 1] - (totals[first - 1] if first > 0 else 0.0)


def watch_run(proc: subprocess.Popen, run_dir: str, targets: Sequence[int]) -> List[Boundary]:
    """Poll ``progress.csv`` until the process ends; at the first row whose iteration
    reaches each target, snapshot the CPU of the whole process tree."""
    csv_path = os.path.join(run_dir, "progress.csv")
    found: List[Boundary] = []
    while proc.poll() is None:
        if len(found) < len(targets):
            row = last_progress_row(csv_path)
            if row is not None and int(row["iteration"]) >= targets[len(found)]:
                found.append(Boundary(int(row["iteration"]), int(row["env_steps"]),
                                      float(row["wall_time_s"]), cpu_snapshot(proc.pid)))
        time.sleep(POLL_S)
    return found


def read_names(pid_file: str) -> Dict[int, str]:
    """``{pid: multiprocessing name}`` the launcher recorded."""
    names = {}
    if os.path.exists(pid_file):
        with open(pid_file) as f:
            for line in f:
                pid, _, name = line.rstrip("\n").partition("\t")
                names[int(pid)] = name
    return names


def classify(pid: int, learner: int, names: Dict[int, str]) -> str:
    """Which group a process's CPU counts in: learner, env_workers, policy_workers or
    other (env subprocesses, the resource tracker, anything unnamed)."""
    if pid == learner:
        return "learner"
    name = names.get(pid, "")
    if name.startswith(ENV_WORKER_PREFIX):
        return "env_workers"
    if POLICY_WORKER_MARK in name:
        return "policy_workers"
    return "other"


def cpu_by_group(start: Boundary, end: Boundary, learner: int,
                 names: Dict[int, str]) -> Tuple[Dict[str, float], List[int]]:
    """CPU seconds per group within the window, and the pids that exited inside it
    (their last seconds are missing: a worker restart; the report flags it)."""
    groups = {"learner": 0.0, "env_workers": 0.0, "policy_workers": 0.0, "other": 0.0,
              "env_worker_main_threads": 0.0}
    for pid, (_, cpu, main) in end.cpu.items():
        _, cpu0, main0 = start.cpu.get(pid, (0, 0.0, 0.0))  # born inside the window: from 0
        group = classify(pid, learner, names)
        groups[group] += cpu - cpu0
        if group == "env_workers":  # (a part of env_workers, not another group)
            groups["env_worker_main_threads"] += main - main0
    exited = [pid for pid in start.cpu if pid not in end.cpu]
    return groups, exited


def run_row(spec: RowSpec, args: argparse.Namespace, work: str) -> Dict[str, Any]:
    """Run one row's training command and measure its window (see the module docstring).
    Returns the per-1k-step CPU of each process group, or ``{"skipped": reason}``."""
    run_dir = tempfile.mkdtemp(prefix="run_", dir=work)
    pid_file, collect_file = os.path.join(work, "pids.tsv"), os.path.join(work, "collect.txt")
    for path in (pid_file, collect_file):
        if os.path.exists(path):
            os.remove(path)
    log_path = os.path.join(work, f"{spec.name.replace(' ', '_')}.log")
    cmd = [sys.executable, os.path.abspath(__file__), "_launch", pid_file, collect_file, "--",
           *train_argv(spec, args, run_dir)]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        found = watch_run(proc, run_dir, [args.warmup_iters, args.warmup_iters + args.iters])
    with open(log_path) as f:
        output = f.read()
    if proc.returncode != 0 or len(found) < 2:
        return {"skipped": failure_reason(spec, proc.returncode, output, len(found))}
    collect = collect_cpu_between(collect_file, found[0].iteration, found[1].iteration)
    return window_result(found[0], found[1], proc.pid, read_names(pid_file), collect)


def failure_reason(spec: RowSpec, code: int, output: str, boundaries: int) -> str:
    """One line saying why a row has no numbers (a parameter this checkout lacks, a
    failed run, or a run too short for the window)."""
    tail = [l for l in output.strip().splitlines() if l.strip()][-1:] or ["(no output)"]
    if code == 2 and "num_policy_workers" in output:
        return ("TrainerConfig.num_policy_workers is not available in this checkout "
                f"(exit status 2): {tail[0][:200]}")
    if code != 0:
        return f"{spec.conf} failed (exit status {code}): {tail[0][:300]}"
    return (f"only {boundaries} of 2 window boundaries seen: --warmup_iters and --iters "
            "must be multiples of --summary_interval")


def window_result(start: Boundary, end: Boundary, learner: int, names: Dict[int, str],
                  collect_cpu: Optional[float]) -> Dict[str, Any]:
    """Per-1k-agent-step CPU of each group over the window, the learner's collect share
    and the run's own speed in the window."""
    steps = end.env_steps - start.env_steps
    per_1k = 1000.0 / steps
    groups, exited = cpu_by_group(start, end, learner, names)
    collect = None if collect_cpu is None else collect_cpu * per_1k
    seconds = end.wall_time_s - start.wall_time_s
    return {"window_iterations": [start.iteration, end.iteration], "agent_steps": steps,
            "window_s": seconds, "agent_steps_per_s": steps / seconds,
            "cpu_per_1k": {k: v * per_1k for k, v in groups.items()},
            "learner_collect_cpu_per_1k": collect,
            "processes": {str(pid): classify(pid, learner, names) for pid in end.cpu},
            "exited_in_window": exited,
            "cores_busy": (sum(groups.values()) - groups["env_worker_main_threads"]) / seconds}


# ------------------------------------------------------------------ micro-benchmarks
def _parse_gin(conf: str, params: Sequence[str]) -> Any:
    """Parse ``conf`` + ``params`` as the run does; return its TrainerConfig."""
    sys.path.insert(0, ROOT)
    from alf import config as alf_config  # pylint: disable=import-outside-toplevel
    from alf.trainers.trainer_config import TrainerConfig  # pylint: disable=import-outside-toplevel
    alf_config.parse_config(conf_file=conf, conf_params=list(params))
    return TrainerConfig()


def _cpu_now() -> float:
    """This process's user + system CPU seconds (every thread: ale-py's C++ ones too)."""
    t = os.times()
    return t.user + t.system


def micro_env(conf: str, params: Sequence[str], envs: int, threads: Optional[int],
              steps: int) -> Dict[str, float]:
    """CPU-s per 1k agent steps of the raw Atari vector env of the run (its backend and
    options from the gin) with ``envs`` envs and ``threads`` C++ threads (None: the
    gin's, as in the sync learner), random actions; and the same through alf's
    ``env.step`` (TimeStep conversion), for reference."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    import torch  # pylint: disable=import-outside-toplevel
    _parse_gin(conf, params)
    sys.path.insert(0, HERE)
    from atari_env_rate import _raw_step_fn  # pylint: disable=import-outside-toplevel
    from alf.environments import create_environment  # pylint: disable=import-outside-toplevel
    torch.set_num_threads(1)
    env = create_environment(num_parallel_environments=envs, num_threads=threads)
    try:
        env.reset()
        n_actions = env.action_spec().num_actions
        actions = np.random.default_rng(0).integers(0, n_actions, (steps, envs))
        raw_step = _raw_step_fn(env)
        for a in actions[:50]:
            raw_step(a)
        raw = _cpu_of(raw_step, actions) * 1000.0 / (steps * envs)
        torch_actions = torch.as_tensor(actions)
        alf_cpu = _cpu_of(env.step, torch_actions) * 1000.0 / (steps * envs)
    finally:
        env.close()
    return {"envs": envs, "threads": threads, "raw_env_cpu_per_1k": raw,
            "alf_env_cpu_per_1k": alf_cpu}


def _cpu_of(step: Any, actions: Any) -> float:
    """Process CPU seconds of ``step(a)`` for every ``a`` in ``actions``."""
    c0 = _cpu_now()
    for a in actions:
        step(a)
    return _cpu_now() - c0


def micro_inference(conf: str, params: Sequence[str], batch: int,
                    calls: int) -> Dict[str, float]:
    """Thread CPU-s per 1k agent steps of the algorithm's ``rollout_step`` (built from the
    gin as every actor builds it) at batch size ``batch`` with 1 torch thread; and of the
    data transformer's ``transform_timestep`` (frame stacking, reward clipping), which
    the model counts in copies/transport."""
    import torch  # pylint: disable=import-outside-toplevel
    config = _parse_gin(conf, params)
    from alf.environments import create_environment  # pylint: disable=import-outside-toplevel
    from alf.environments.env_specs import EnvSpecs  # pylint: disable=import-outside-toplevel
    from alf.experiment import build_algorithm  # pylint: disable=import-outside-toplevel
    from alf.tensor_specs import zeros_from_spec  # pylint: disable=import-outside-toplevel
    torch.set_num_threads(1)
    env = create_environment(num_parallel_environments=batch, num_threads=1)
    try:
        env.reset()
        # a mid-episode step, as nearly every step of a run is (an episode start makes the
        # frame stacker build a fresh history)
        raw_ts = env.step(env.action_spec().sample((batch,)))
        alg = build_algorithm(config, EnvSpecs.of(env), role="actor")
    finally:
        env.close()
    transformer = alg.data_transformer
    t_state = zeros_from_spec(transformer.state_spec, batch)
    from alf.utils import precision  # pylint: disable=import-outside-toplevel

    def act():  # one ActStep: the networks autocast in the acting dtype
        with precision.autocast_networks(alg.context.act_dtype):
            return alg.rollout_step(ts, state)
    # as an actor acts between weight refreshes: bf16 weight casts made once, then reused
    # (a checkout from before keep_weight_casts: its actors cast at every step, so do we)
    keep = getattr(precision, "keep_weight_casts", lambda dtype: contextlib.nullcontext())
    with torch.no_grad(), keep(alg.context.act_dtype):
        ts, t_state = transformer.transform_timestep(raw_ts, t_state)
        state = alg.get_initial_rollout_state(batch)
        forward = _thread_cpu_of(act, calls)
        transform = _thread_cpu_of(lambda: transformer.transform_timestep(raw_ts, t_state), calls)
    per_1k = 1000.0 / (calls * batch)
    return {"batch": batch, "inference_cpu_per_1k": forward * per_1k,
            "transform_cpu_per_1k": transform * per_1k}


def _thread_cpu_of(fn: Any, calls: int) -> float:
    """Thread CPU seconds of ``calls`` calls of ``fn`` after ``calls // 10 + 2`` untimed."""
    for _ in range(calls // 10 + 2):
        fn()
    t0 = time.thread_time()
    for _ in range(calls):
        fn()
    return time.thread_time() - t0


def micro_subprocess(kind: str, spec: RowSpec, args: argparse.Namespace,
                     **kw: Any) -> Dict[str, Any]:
    """Run one micro-benchmark in a fresh process (its own gin state and a clean CPU
    count) and return its JSON."""
    cmd = [sys.executable, os.path.abspath(__file__), "_micro", kind, spec.conf,
           json.dumps(list(spec.params) + list(args.conf_param)), json.dumps(kw)]
    out = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"micro-benchmark {kind} of {spec.conf} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _micro_main(kind: str, conf: str, params_json: str, kw_json: str) -> None:
    """Entry of :func:`micro_subprocess`'s child: print one JSON line."""
    params, kw = json.loads(params_json), json.loads(kw_json)
    fn = {"env": micro_env, "inference": micro_inference, "layout": run_layout}[kind]
    print(json.dumps(fn(conf, params, **kw)))


def run_layout(conf: str, params: Sequence[str]) -> Dict[str, Any]:
    """How a run's envs are laid out: env count, async or not, env workers, groups per
    worker (the default lowered to a divisor as alf does), env/learner threads."""
    config = _parse_gin(conf, params)
    import gin  # pylint: disable=import-outside-toplevel
    try:
        envs = int(gin.query_parameter("create_environment.num_parallel_environments"))
    except ValueError:
        envs = 1
    workers = int(getattr(config, "num_env_workers", 1))
    groups = int(getattr(config, "env_groups_per_worker", 1))
    per_worker = max(1, envs // workers)
    while per_worker % groups:
        groups -= 1
    return {"envs": envs, "async": bool(config.async_unroll), "env_workers": workers,
            "groups_per_worker": groups, "group_envs": per_worker // groups,
            "env_worker_threads": int(getattr(config, "env_worker_threads", 1)),
            "learner_threads": int(config.num_threads or 0),
            "policy_workers": int(getattr(config, "num_policy_workers", 0) or 0)}


def measure_micro(spec: RowSpec, args: argparse.Namespace) -> Dict[str, Any]:
    """The layout and the env and inference micro-benchmarks of a row's configuration:
    sync steps all envs on the gin's threads; async steps groups of ``group_envs`` envs
    on ``env_worker_threads`` threads and acts at that batch size."""
    layout = micro_subprocess("layout", spec, args)
    if layout["async"]:
        envs, threads = layout["group_envs"], layout["env_worker_threads"]
    else:
        envs, threads = layout["envs"], None
    env = micro_subprocess("env", spec, args, envs=envs, threads=threads,
                           steps=args.env_steps)
    inference = micro_subprocess("inference", spec, args, batch=envs, calls=args.forward_calls)
    return {"layout": layout, "env": env, "inference": inference}


# ------------------------------------------------------------------ model
def components(run: Dict[str, Any], micro: Dict[str, Any], sync: bool) -> Dict[str, float]:
    """The four components in CPU-s per 1k agent steps (module docstring), plus the
    learner process's share of the transport (the copy out of the slots, async) that
    caps a single learner."""
    g = dict(run["cpu_per_1k"])
    acting_threads = g.pop("env_worker_main_threads", None)  # a part of env_workers
    total = sum(g.values())
    env = micro["env"]["raw_env_cpu_per_1k"]
    inference = micro["inference"]["inference_cpu_per_1k"]
    collect = run["learner_collect_cpu_per_1k"]
    if collect is not None:
        learning = g["learner"] - collect
    else:  # no collect hook: the learner's all (async) or less the acting (sync)
        learning = g["learner"] - (env + inference if sync else 0.0)
    transport = total - env - inference - learning
    if sync:
        learner_transport = transport  # the sync learner process does everything
    else:
        learner_transport = collect or 0.0
    out = {"env": env, "inference": inference, "transport": transport, "learning": learning,
           "total": total, "learner_transport": learner_transport}
    if not sync and acting_threads is not None:
        # measured, not a residual: everything but the env engine's threads and learning
        # (the env workers' acting threads, the policy workers, the learner's collect)
        out["non_env_measured"] = acting_threads + g["policy_workers"] + (collect or 0.0)
        out["env_threads_measured"] = g["env_workers"] - acting_threads
    return out


@dataclass
class ModelParams:
    """The projection's assumed numbers (each stated in the report)."""
    frame_skip: int = FRAME_SKIP
    learner_threads_max: int = 8
    gpu_learner_host_cpu_per_1k: float = 0.05
    gpu_forward_host_ms: float = 0.3


def projected_agent_steps(c: Dict[str, float], kind: str, cores: int, gpu: bool,
                          batch: int, m: ModelParams) -> float:
    """Agent steps/s on ``cores`` cores (see :func:`assumptions`). ``kind``: sync,
    in_worker or policy_workers; ``batch``: envs per policy forward."""
    threads = min(cores, m.learner_threads_max)
    learn = m.gpu_learner_host_cpu_per_1k if gpu else c["learning"]
    gpu_inference = m.gpu_forward_host_ms / batch  # CPU-s per 1k steps = ms per forward / B
    if kind == "sync":  # one process; acting and learning alternate
        if gpu:
            chain = c["env"] / cores + gpu_inference + c["transport"] + learn
        else:
            chain = c["env"] / cores + (c["inference"] + learn) / threads + c["transport"]
        return 1000.0 / chain
    inference = gpu_inference if (gpu and kind == "policy_workers") else c["inference"]
    work = cores * 1000.0 / (c["env"] + inference + c["transport"] + learn)
    learner_cap = 1000.0 / (c["learner_transport"] + (learn if gpu else learn / threads))
    return min(work, learner_cap)


def assumptions(m: ModelParams) -> List[str]:
    """The projection's assumptions, as written into the report."""
    return [
        "Costs are CPU-seconds (user+sys, all threads) per 1,000 agent steps, measured on "
        "this machine over the timed window; start-up, the warm-up iterations and shutdown "
        "are excluded. frames/s = "
        f"{m.frame_skip} x agent steps/s (Atari frame skip {m.frame_skip}).",
        "env = the raw ale-py AtariVectorEnv with random actions at the run's env count per "
        "group and C++ thread count; inference = rollout_step (Nature CNN policy + value "
        "heads + sampling) at the per-group batch size on 1 torch thread; learning = the "
        "learner process's CPU outside Learner.collect; copies/transport = total - the "
        "other three (residual: TimeStep conversion, frame stacking, slot/replay writes, "
        "the learner's copy out of the slots, pipes, the unroll loop's Python).",
        "Every component costs the same CPU per agent step on more cores: env stepping, "
        "inference and transport scale linearly with cores (more envs, env workers and "
        "policy workers are added to fill them); no memory-bandwidth, SMT, turbo or NUMA "
        "effects; the 'async + policy workers' inference is charged at the per-group "
        "batch size (batching several groups per forward only lowers it).",
        f"CPU learner: learning uses at most min(C, {m.learner_threads_max}) torch threads "
        "and scales linearly up to that, so one learner process caps the run at "
        f"1000 / (learner transport + learning / min(C, {m.learner_threads_max})) agent "
        "steps/s (Amdahl: one learner process cannot use more cores than its threads).",
        "Async (CPU and GPU): on C cores agent steps/s = min(C x 1000 / (env + inference + "
        "transport + learning), the learner cap); the learner's transport is its CPU inside "
        "Learner.collect (copying trajectories out of shared memory).",
        "Sync: one process alternates acting and learning, so agent steps/s = 1000 / (env / C "
        "+ (inference + learning) / min(C, " f"{m.learner_threads_max}) + transport) on a CPU; "
        "with a GPU 1000 / (env / C + GPU inference host cost + transport + GPU learner host "
        "cost) (the main thread drives the GPU and the copies alone).",
        f"GPU learner: the GPU's own throughput is not the bound; learning's CPU becomes "
        f"{m.gpu_learner_host_cpu_per_1k} CPU-s per 1k agent steps of host work (kernel "
        "launches of 16 mini-batch updates per 1,024 steps, host-to-device copies), on the "
        "learner's one main thread (cap: 1000 / (learner transport + that)).",
        f"GPU inference (sync on the GPU, and policy workers on the learner's GPU): "
        f"{m.gpu_forward_host_ms} ms of host CPU per forward (launches, observation copy in, "
        "action copy out) divided by the forward's batch, replacing the CPU inference; the "
        "policy workers' other host work is already in the measured transport. Async "
        "in-worker actors keep acting on the CPU with a GPU learner.",
        "Not modelled: evaluation, checkpoints, summaries more often than summary_interval, "
        "policy lag limits (a learner-bound async run waits for free slots, it does not "
        "lose work), and the thread governor lowering threads under contention.",
    ]


# ------------------------------------------------------------------ report
ROW_KIND = {"sync": "sync", "async in-worker": "in_worker",
            "async + policy workers": "policy_workers"}


def project_row(row: Dict[str, Any], m: ModelParams) -> Dict[str, Dict[int, float]]:
    """Projected frames/s of a measured row at each core count, CPU and GPU learner."""
    kind, c = ROW_KIND[row["name"]], row["components"]
    batch = row["micro"]["inference"]["batch"]
    return {which: {n: m.frame_skip * projected_agent_steps(c, kind, n, which == "gpu", batch, m)
                    for n in CORES} for which in ("cpu", "gpu")}


def markdown(rows: List[Dict[str, Any]], m: ModelParams, header: str) -> str:
    """The table (components, measured speed, projections) and its assumptions."""
    cores = " | ".join(f"{n} cores" for n in CORES)
    lines = [header, "",
             "| run | env | inference | copies/transport | learning | total | measured agent "
             f"steps/s | frames/s, CPU learner: {cores} | frames/s, GPU learner: {cores} |",
             "|---|" + "---:|" * (6 + 2 * len(CORES))]
    for row in rows:
        if "skipped" in row:
            lines.append(f"| {row['name']} | skipped: {row['skipped']} |" + " |" * (5 + 2 * len(CORES)))
            continue
        c, p = row["components"], row["projection"]
        cells = [f"{c[k]:.3f}" for k in ("env", "inference", "transport", "learning", "total")]
        cells.append(f"{row['run']['agent_steps_per_s']:,.0f}")
        cells += [f"{p['cpu'][n]:,.0f}" for n in CORES] + [f"{p['gpu'][n]:,.0f}" for n in CORES]
        lines.append(f"| {row['name']} | " + " | ".join(cells) + " |")
    measured = [row for row in rows if "non_env_measured" in row.get("components", {})]
    if measured:
        lines += ["", "Async rows, measured directly (no micro-benchmark, no residual): the env "
                  "engine's threads (ale-py's C++ threads in the env workers) against everything "
                  "else that acts and moves data (the env workers' main threads: policy forward, "
                  "copies, the loop's Python; the policy workers; the learner's "
                  "Learner.collect), CPU-s per 1,000 agent steps:", "",
                  "| run | env engine threads | non-env: acting threads + policy workers + "
                  "learner collect | of which learner collect |", "|---|---:|---:|---:|"]
        for row in measured:
            c = row["components"]
            lines.append(f"| {row['name']} | {c['env_threads_measured']:.3f} | "
                         f"{c['non_env_measured']:.3f} | {c['learner_transport']:.3f} |")
    lines += [f"\n{row['name']}: processes {row['run']['exited_in_window']} exited inside the "
              "window (a worker restart?): their last CPU seconds are missing"
              for row in rows if row.get("run", {}).get("exited_in_window")]
    lines += ["", "CPU columns: CPU-seconds per 1,000 agent steps. Assumptions:", ""]
    lines += [f"{i}. {a}" for i, a in enumerate(assumptions(m), 1)]
    return "\n".join(lines) + "\n"


def row_specs(args: argparse.Namespace) -> List[RowSpec]:
    """The rows to measure: sync, async in-worker (``num_policy_workers=0``) and
    (``--policy_workers N``, N > 0) async with N policy workers."""
    specs = [] if args.no_sync else [RowSpec("sync", args.sync_conf)]
    # pinned, although None (unset) picks in-worker inference too
    specs.append(RowSpec("async in-worker", args.async_conf,
                         ["TrainerConfig.num_policy_workers=0"]))
    if args.policy_workers:
        specs.append(RowSpec("async + policy workers", args.async_conf,
                             [f"TrainerConfig.num_policy_workers={args.policy_workers}"]))
    return specs


def measure_row(spec: RowSpec, args: argparse.Namespace, work: str,
                m: ModelParams) -> Dict[str, Any]:
    """Run, micro-benchmark and model one row (or record why it is skipped)."""
    row: Dict[str, Any] = {"name": spec.name, "command": shell_command(spec, args)}
    run = run_row(spec, args, work)
    if "skipped" in run:
        row["skipped"] = run["skipped"]
        return row
    row["run"] = run
    row["micro"] = measure_micro(spec, args)
    row["components"] = components(run, row["micro"], sync=not row["micro"]["layout"]["async"])
    row["projection"] = project_row(row, m)
    return row


def print_row(row: Dict[str, Any]) -> None:
    """One progress line per measured row (stderr)."""
    if "skipped" in row:
        print(f"{row['name']}: skipped: {row['skipped']}", file=sys.stderr, flush=True)
        return
    c, r = row["components"], row["run"]
    print(f"{row['name']}: {r['agent_steps']} agent steps in {r['window_s']:.1f} s "
          f"({r['agent_steps_per_s']:.0f}/s, {r['cores_busy']:.2f} cores busy); CPU-s/1k "
          f"by process {json.dumps({k: round(v, 3) for k, v in r['cpu_per_1k'].items()})}; "
          f"env {c['env']:.3f} inference {c['inference']:.3f} transport {c['transport']:.3f} "
          f"learning {c['learning']:.3f}"
          + (f"; measured: env threads {c['env_threads_measured']:.3f}, non-env "
             f"{c['non_env_measured']:.3f}" if "non_env_measured" in c else ""),
          file=sys.stderr, flush=True)


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    """Command-line options (``--help``)."""
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sync_conf", default="ppo_atari.gin")
    p.add_argument("--async_conf", default="appo_atari.gin")
    p.add_argument("--no_sync", action="store_true",
                   help="leave out the sync row (the async rows' non-env CPU only)")
    p.add_argument("--policy_workers", type=int, default=1,
                   help="the row with TrainerConfig.num_policy_workers=N (0: no such row)")
    p.add_argument("--warmup_iters", type=int, default=10,
                   help="iterations before the window (a multiple of --summary_interval)")
    p.add_argument("--iters", type=int, default=40,
                   help="timed iterations (a multiple of --summary_interval)")
    p.add_argument("--summary_interval", type=int, default=10,
                   help="TrainerConfig.summary_interval (the gins' 10): progress.csv rows")
    p.add_argument("--env_steps", type=int, default=2000, help="vector steps, env micro-benchmark")
    p.add_argument("--forward_calls", type=int, default=2000,
                   help="rollout_step calls, inference micro-benchmark")
    p.add_argument("--conf_param", action="append", default=[],
                   help="extra gin binding for every run and micro-benchmark")
    p.add_argument("--learner_threads_max", type=int, default=ModelParams.learner_threads_max)
    p.add_argument("--gpu_learner_host_cpu", type=float,
                   default=ModelParams.gpu_learner_host_cpu_per_1k,
                   help="assumed host CPU-s per 1k agent steps of a GPU learner")
    p.add_argument("--gpu_forward_host_ms", type=float, default=ModelParams.gpu_forward_host_ms,
                   help="assumed host CPU ms per GPU policy forward")
    p.add_argument("--out", default=os.path.join(RESULTS, "cpu_cost"),
                   help="output path without extension (.json and .md are written)")
    args = p.parse_args(argv)
    for name in ("warmup_iters", "iters"):
        if getattr(args, name) % args.summary_interval or getattr(args, name) < 1:
            p.error(f"--{name} must be a positive multiple of --summary_interval")
    return args


def git_commit() -> str:
    """The checkout's commit (with ``-dirty`` when files are modified), for the JSON."""
    out = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=40"], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         check=False)
    return out.stdout.strip()


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Measure every row, model it, print and write the table."""
    args = parse_args(argv)
    m = ModelParams(learner_threads_max=args.learner_threads_max,
                    gpu_learner_host_cpu_per_1k=args.gpu_learner_host_cpu,
                    gpu_forward_host_ms=args.gpu_forward_host_ms)
    work = tempfile.mkdtemp(prefix="alf_cpu_cost_")
    rows = []
    try:
        for spec in row_specs(args):
            rows.append(measure_row(spec, args, work, m))
            print_row(rows[-1])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    header = (f"CPU cost per 1,000 agent steps ({os.cpu_count()} CPUs here, "
              f"{args.iters} timed iterations after {args.warmup_iters} warm-up)")
    table = markdown(rows, m, header)
    print(table)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump({"args": vars(args), "commit": git_commit(), "model": asdict(m), "assumptions": assumptions(m),
                   "cpus": os.cpu_count(), "rows": rows}, f, indent=1)
    with open(args.out + ".md", "w") as f:
        f.write(table)
    print(f"wrote {args.out}.json and {args.out}.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_launch":  # the learner (module docstring)
        _launch(sys.argv[2], sys.argv[3], sys.argv[5:])
    elif len(sys.argv) > 1 and sys.argv[1] == "_micro":
        _micro_main(*sys.argv[2:6])
    else:
        sys.exit(main())
