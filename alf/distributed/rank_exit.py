"""How a ``torchrun`` rank leaves the process: flush, then ``os._exit``.

Why not return from ``main`` and let Python exit: interpreter finalization
destroys torch's C++ objects (gloo's worker threads and the work items and
tensors they still hold) in an order nobody controls, after the Python objects
they refer to are gone. Now and then a destructor meets a thread that is still
joinable and calls ``std::terminate``: the rank aborts ("terminate called without
an active exception", exit status -6) *after* it trained, saved and left the
process group. Its launcher then reports a failure, and the other node's
launcher waits in torchrun's exit barrier (300 s) for a node that will never
arrive. Seen twice in the fresh-clone ``.ci/run`` s of two sessions (once quiet,
once next to two busy loops), in
``tests/distributed/test_torchrun_cli.py::test_two_node_launch_on_localhost_completes_ppo``:
rank 1's stderr read "terminate called without an active exception", then its
only thread with ``<no Python frame>`` (finalization), while rank 0 had saved its
last checkpoint.

By the time :func:`leave_process` runs, alf has done all of its own cleanup in
``finally`` blocks (env workers joined, checkpoints written and fsynced, summary
writers closed, the process group left). What must still happen is what a normal
exit does before finalization: any ``multiprocessing`` child still running (there
should be none; alf reaps its own) is stopped instead of orphaned, and the
``atexit`` handlers run: ``multiprocessing``'s unlinks its named semaphores (else
``/dev/shm/sem.mp-*`` stay behind: seen when ``os._exit`` came first), ``logging``'s
flushes the handlers. Then the standard streams are flushed. Only the interpreter's
finalization (module teardown, C++ static destructors), where the abort happens, is
skipped.
"""
import atexit
import multiprocessing
import os
import sys
from typing import NoReturn

#: seconds a leftover ``multiprocessing`` child gets after SIGTERM before SIGKILL
CHILD_GRACE_S = 3.0


def leave_process(status: int) -> NoReturn:
    """End this rank's process with ``status`` without interpreter finalization.

    Stops any ``multiprocessing`` child still alive (SIGTERM, then SIGKILL after
    :data:`CHILD_GRACE_S`), runs the ``atexit`` handlers, flushes
    ``sys.stdout``/``sys.stderr``, then calls ``os._exit(status)``."""
    for child in multiprocessing.active_children():
        child.terminate()
        child.join(CHILD_GRACE_S)
        if child.is_alive():
            child.kill()
            child.join()
    atexit._run_exitfuncs()  # what exit runs before finalization (semaphores, logging)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed, or the reader is gone: nothing to keep
            pass
    os._exit(status)
