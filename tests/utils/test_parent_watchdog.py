"""start_parent_watchdog: reacts once when the parent (or a watched process) is gone."""
import os
import subprocess
import sys
import threading
import time

import pytest

from alf.utils.parent_watchdog import process_exited, start_parent_watchdog

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="re-parenting and /proc are Linux behaviour")

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_process_exited():
    assert not process_exited(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert process_exited(child.pid)  # reaped: no such process
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while not process_exited(zombie.pid) and time.monotonic() < deadline:
        time.sleep(0.02)  # exited but not reaped: a zombie counts as gone
    assert process_exited(zombie.pid)
    zombie.wait()


def test_calls_back_once_when_the_parent_pid_is_not_ours():
    fired = threading.Event()
    calls = []

    def on_exit():
        calls.append(1)
        fired.set()

    # a "parent" that is not our parent: as if we had been re-parented
    thread = start_parent_watchdog(on_exit, parent_pid=os.getppid() + 1_000_000,
                                   period_s=0.01, name="test-watchdog")
    assert thread.daemon and thread.name == "test-watchdog"
    assert fired.wait(5)
    thread.join(5)
    assert calls == [1] and not thread.is_alive()


def test_also_watch_and_quiet_while_everything_lives():
    fired = threading.Event()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    start_parent_watchdog(fired.set, also_watch=child.pid, period_s=0.02)
    assert not fired.wait(0.1)  # parent and child alive
    child.wait()
    assert fired.wait(5)


def test_default_ends_an_orphan_quietly(tmp_path):
    """A grandchild whose parent dies exits by itself, status 0, nothing on stderr."""
    code = f"""
import os, subprocess, sys, time
sys.path.insert(0, {REPO_ROOT!r})
if sys.argv[1] == "parent":
    grandchild = subprocess.Popen([sys.executable, __file__, "child"],
                                  stderr=open({str(tmp_path / 'err')!r}, "w"))
    print(grandchild.pid, flush=True)
    time.sleep(60)
else:
    from alf.utils.parent_watchdog import start_parent_watchdog
    start_parent_watchdog(period_s=0.05)
    open({str(tmp_path / 'ready')!r}, "w").close()
    time.sleep(60)
"""
    script = tmp_path / "w.py"
    script.write_text(code)
    parent = subprocess.Popen([sys.executable, str(script), "parent"], stdout=subprocess.PIPE,
                              text=True)
    grandchild = int(parent.stdout.readline())
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "ready").exists() and time.monotonic() < deadline:
            time.sleep(0.05)  # the watchdog runs (it must see its first parent alive)
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 20
        while not process_exited(grandchild) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert process_exited(grandchild)
        assert (tmp_path / "err").read_text() == ""
    finally:
        if not process_exited(grandchild):
            os.kill(grandchild, 9)
