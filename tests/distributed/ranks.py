"""Start ranks like torchrun does (environment variables, one process each) and wait
for them with a deadline; every process is killed on the way out."""
import os
import socket
import subprocess
import sys
import time
from typing import List, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(rank: int, world_size: int, port: int) -> dict:
    env = dict(os.environ)
    env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size),
               LOCAL_WORLD_SIZE=str(world_size), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(port), OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = REPO_ROOT + (os.pathsep + env["PYTHONPATH"]
                                     if env.get("PYTHONPATH") else "")
    return env


def run_ranks(args_per_rank: Sequence[Sequence[str]], cwd, timeout: float = 240
              ) -> List[subprocess.CompletedProcess]:
    """Run ``rank_worker.py args`` as ranks 0..N-1 of one group; returns each rank's
    completed process (stdout/stderr text). Raises AssertionError past ``timeout``."""
    world, port = len(args_per_rank), free_port()
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, "rank_worker.py"),
                               *map(str, args)], cwd=str(cwd), env=rank_env(r, world, port),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r, args in enumerate(args_per_rank)]
    deadline = time.monotonic() + timeout
    try:
        outs = []
        for p in procs:
            out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            outs.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
        return outs
    except subprocess.TimeoutExpired:
        raise AssertionError(f"ranks still running after {timeout} s") from None
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
