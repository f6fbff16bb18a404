"""What a test left in ``/dev/shm``, robust to the neighbours (other tests in parallel, other
jobs on the machine) whose segments come and go while it runs."""
import os
import time
from typing import Set


def shm_entries() -> Set[str]:
    """The names in ``/dev/shm`` now (empty where there is none)."""
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


def shm_left_since(before: Set[str], settle_s: float = 2.0) -> Set[str]:
    """The entries that appeared since ``before`` and are still there ``settle_s`` seconds
    later. What a test's processes leave behind stays; what a neighbour creates for a
    moment (torch maps and unlinks its segments at once, a semaphore lives a call) is
    gone by then, so it is not blamed on the test."""
    new = shm_entries() - before
    deadline = time.monotonic() + settle_s
    while new and time.monotonic() < deadline:
        time.sleep(0.1)
        new &= shm_entries()
    return new
