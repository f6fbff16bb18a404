"""A torchrun rank leaves through :func:`alf.distributed.rank_exit.leave_process`:
the exit status and every line written survive, a leftover child is stopped, the
``atexit`` handlers run (multiprocessing's unlinks its semaphores), and interpreter
finalization (where torch's C++ destructors can abort a finished rank) does not."""
import os
import subprocess
import sys
import textwrap
import time

from ranks import REPO_ROOT

SCRIPT = textwrap.dedent("""
    import atexit, logging, multiprocessing, sys, time
    from alf.distributed.rank_exit import leave_process

    def sleep_forever():
        time.sleep(1000)

    class Destroyed:
        def __del__(self):  # module teardown: interpreter finalization
            print("DESTROYED", flush=True)

    if __name__ == "__main__":
        keep = Destroyed()
        atexit.register(lambda: print("AT EXIT", flush=True))
        lock = multiprocessing.get_context("spawn").Lock()  # a named semaphore
        print("semaphore", lock._semlock.name)
        child = multiprocessing.get_context("spawn").Process(target=sleep_forever)
        child.start()
        print("child", child.pid)
        logging.basicConfig(stream=sys.stderr, level=logging.INFO)
        logging.getLogger("rank").info("logged line")
        for i in range(2000):  # more than one pipe buffer, block-buffered stdout
            print("line", i)
        leave_process(3)
""")


def test_leave_process_keeps_output_and_status_stops_children_skips_finalization(tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    env.pop("PYTHONUNBUFFERED", None)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=60)
    assert done.returncode == 3, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-2:] == ["line 1999", "AT EXIT"] and len(lines) == 2003
    assert "DESTROYED" not in done.stdout
    assert "INFO:rank:logged line" in done.stderr
    semaphore = lines[0].split()[1]
    assert not os.path.exists("/dev/shm/sem." + semaphore.lstrip("/")), "semaphore left"
    child = int(lines[1].split()[1])
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{child}") and time.monotonic() < deadline:
        time.sleep(0.05)  # reaped by leave_process; /proc entry goes at once
    assert not os.path.exists(f"/proc/{child}"), "the child outlived its rank"
