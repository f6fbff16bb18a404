"""Soak an async training run: resident memory and FPS over time, for the whole process tree.

    python bench/async_soak.py --minutes 20 -- --conf=appo_atari.gin --root_dir=runs/appo_soak
    python bench/async_soak.py --minutes 40 --stop_at_env_steps 500000 -- --conf=appo_atari.gin ...

Starts ``python -m alf.bin.train <args after -->``, samples every ``--period`` seconds
the resident memory (RSS, from ``/proc``) of the learner and of every process below it
(env workers, their env subprocesses) and the run's env steps (``progress.csv``), and
stops the run with Ctrl-C (SIGINT: checkpoint saved) after ``--minutes`` or once
``--stop_at_env_steps`` is reached. Writes ``<root_dir>/soak.csv`` (time, env steps,
learner RSS, total RSS, FPS over the last period) and prints the summary the soak bar
asks for: RSS growth after warm-up (first ``--warmup_minutes``) and FPS in the first vs
the last quarter of the run after warm-up.
"""
import argparse
import csv
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _tree(pid: int):
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [pid], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _env_steps(root: str) -> int:
    try:
        with open(os.path.join(root, "progress.csv")) as f:
            rows = list(csv.DictReader(f))
        return int(rows[-1]["env_steps"]) if rows else 0
    except (OSError, KeyError, ValueError):
        return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--warmup_minutes", type=float, default=3.0)
    parser.add_argument("--period", type=float, default=30.0)
    parser.add_argument("--stop_at_env_steps", type=int, default=0)
    args = parser.parse_args(argv[:split])
    train_args = argv[split + 1:]
    root = next(a.split("=", 1)[1] for a in train_args if a.startswith("--root_dir="))
    os.makedirs(root, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=ROOT)
    log = open(os.path.join(root, "soak_stderr.log"), "w")
    proc = subprocess.Popen([sys.executable, "-m", "alf.bin.train", *train_args], env=env,
                            stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    rows = []
    start = time.monotonic()
    last_t, last_steps = start, 0
    try:
        while proc.poll() is None:
            time.sleep(args.period)
            now = time.monotonic()
            pids = _tree(proc.pid)
            steps = _env_steps(root)
            fps = (steps - last_steps) / (now - last_t)
            rows.append({"minutes": round((now - start) / 60, 2), "env_steps": steps,
                         "learner_rss_mib": round(_rss_kib(proc.pid) / 1024, 1),
                         "total_rss_mib": round(sum(_rss_kib(p) for p in pids) / 1024, 1),
                         "processes": len(pids), "fps": round(fps, 1)})
            print(rows[-1], flush=True)
            last_t, last_steps = now, steps
            if (now - start) / 60 >= args.minutes or (
                    args.stop_at_env_steps and steps >= args.stop_at_env_steps):
                break
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()
    with open(os.path.join(root, "soak.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["minutes"])
        writer.writeheader()
        writer.writerows(rows)
    after = [r for r in rows if r["minutes"] >= args.warmup_minutes]
    if len(after) >= 4:
        q = max(1, len(after) // 4)
        first, last = after[:q], after[-q:]
        rss0, rss1 = after[0]["total_rss_mib"], max(r["total_rss_mib"] for r in after)
        fps0 = sum(r["fps"] for r in first) / q
        fps1 = sum(r["fps"] for r in last) / q
        print(f"RSS after warm-up: {rss0:.0f} -> max {rss1:.0f} MiB ({100 * (rss1 / rss0 - 1):+.1f}%); "
              f"learner {after[0]['learner_rss_mib']:.0f} -> {after[-1]['learner_rss_mib']:.0f} MiB")
        print(f"FPS first quarter {fps0:.0f}, last quarter {fps1:.0f} ({100 * (fps1 / fps0 - 1):+.1f}%)")
    print(f"exit status {proc.returncode}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
