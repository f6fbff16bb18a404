"""The docs test's side of ``doc_fork_server.py``: run a ``python -m`` command as a fork
of a process that has imported alf already (see that file for why)."""
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Dict, List, Tuple

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "doc_fork_server.py")


class ForkServer:
    """One ``doc_fork_server.py`` process, started with ``env``; one command at a time."""

    def __init__(self, env: Dict[str, str]):
        self._log = tempfile.TemporaryFile(mode="w+")
        self._proc = subprocess.Popen([sys.executable, SERVER], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=self._log, text=True,
                                      env=env)
        self._lines: "queue.Queue[str]" = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self._proc.stdout:
            self._lines.put(line)
        self._lines.put("")  # the server exited

    def _answer(self, timeout: float = None) -> dict:
        line = self._lines.get(timeout=timeout)
        if not line:
            self._log.seek(0)
            raise RuntimeError("doc_fork_server.py exited:\n" + self._log.read()[-3000:])
        return json.loads(line)

    def run(self, module: str, args: List[str], cwd: str, env: Dict[str, str],
            timeout: float) -> Tuple[int, str, bool]:
        """Run ``python -m module args`` in ``cwd`` with ``env``: (exit status, stdout and
        stderr together, whether it was killed at ``timeout`` seconds)."""
        with tempfile.NamedTemporaryFile(mode="r", suffix=".out") as out:
            request = {"module": module, "args": args, "cwd": cwd, "env": env,
                       "out": out.name}
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
            return status, out.read(), timed_out

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._log.close()
