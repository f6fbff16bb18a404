"""The tests' side of ``fork_server.py``: run a ``python -m`` command as a fork of a
process that has imported alf already (see that file for why and what it cannot do)."""
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Dict, List, Mapping, Optional, Tuple

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fork_server.py")

# environment variables a native library or the interpreter reads once, when it loads:
# a fork inherits the server's values, so a command that sets one needs a fresh interpreter
_READ_AT_LOAD = ("OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS_", "LD_", "PYTHON", "MALLOC_",
                 "CUDA_", "TORCH_")


def needs_fresh_interpreter(env: Mapping[str, str], server_env: Mapping[str, str]) -> bool:
    """Whether ``env`` differs from the server's in a variable read at load time."""
    keys = {k for k in set(env) | set(server_env) if k.startswith(_READ_AT_LOAD)}
    return any(env.get(k) != server_env.get(k) for k in keys)


class ForkServer:
    """One ``fork_server.py`` process, started with ``env``; one command at a time.

    ``usable`` is False when importing alf printed something (a fresh interpreter would
    print it in every command): callers then run fresh interpreters instead."""

    def __init__(self, env: Dict[str, str]):
        self.env = dict(env)
        self._log = tempfile.TemporaryFile(mode="w+")
        self._proc = subprocess.Popen([sys.executable, SERVER], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=self._log, text=True,
                                      env=self.env)
        self._lines: "queue.Queue[str]" = queue.Queue()
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        self.import_output = self._answer(timeout=300)["import_output"]
        self.usable = not self.import_output.strip()

    def _read(self) -> None:
        for line in self._proc.stdout:
            self._lines.put(line)
        self._lines.put("")  # the server exited

    def _answer(self, timeout: Optional[float] = None) -> dict:
        line = self._lines.get(timeout=timeout)
        if not line:
            self._log.seek(0)
            raise RuntimeError("fork_server.py exited:\n" + self._log.read()[-3000:])
        return json.loads(line)

    def run(self, module: str, args: List[str], cwd: str, env: Dict[str, str],
            timeout: float) -> Tuple[int, str, bool]:
        """Run ``python -m module args`` in ``cwd`` with ``env``: (exit status, stdout and
        stderr together, whether it was killed at ``timeout`` seconds)."""
        status, out, _, timed_out = self.run_split(module, args, cwd, env, timeout,
                                                   split=False)
        return status, out, timed_out

    def run_split(self, module: str, args: List[str], cwd: str, env: Dict[str, str],
                  timeout: float, split: bool = True) -> Tuple[int, str, str, bool]:
        """As :meth:`run`, with stdout and stderr apart (``split``): (exit status, stdout,
        stderr, timed out)."""
        with self._lock, tempfile.NamedTemporaryFile(mode="r", suffix=".out") as out, \
                tempfile.NamedTemporaryFile(mode="r", suffix=".err") as err:
            request = {"module": module, "args": [str(a) for a in args], "cwd": str(cwd),
                       "env": env, "out": out.name, "err": err.name if split else None}
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()
            pid = self._answer(timeout=60)["pid"]
            timed_out = False
            try:
                status = self._answer(timeout=timeout)["status"]
            except queue.Empty:
                timed_out = True
                try:
                    os.killpg(pid, signal.SIGKILL)  # the command and what it started
                except ProcessLookupError:
                    pass
                status = self._answer(timeout=60)["status"]
            return status, out.read(), err.read() if split else "", timed_out

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._log.close()
