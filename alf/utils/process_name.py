"""Name a worker process the way ``ps``, ``top`` and ``/proc/<pid>/comm`` show it.

A spawned worker is otherwise one more ``python -c "from multiprocessing.spawn ..."``:
``alf-env-3`` or ``alf-policy-0`` says which worker is busy, hung or leaking. Linux
only (``prctl(PR_SET_NAME)``, at most 15 bytes); elsewhere a no-op.
"""
import ctypes
import ctypes.util
import sys

PR_SET_NAME = 15


def set_process_name(name: str) -> bool:
    """Set this process's short name (``/proc/self/comm``); True if it was set."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
