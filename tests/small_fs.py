"""A small real filesystem to fill up (a tmpfs of a given size), as in
``tests/bin/test_full_disk.py``: mounting needs root (CI runs as root); elsewhere the
tests that use it are skipped."""
import contextlib
import shutil
import subprocess
from typing import Iterator

import pytest


@contextlib.contextmanager
def small_fs(path, size: str) -> Iterator:
    """Mount a tmpfs of ``size`` (e.g. ``"1m"``, ``"64k"``) on the new directory ``path``
    for the ``with`` block; skips the test when that is not possible."""
    path.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command to make a small filesystem to fill")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip("cannot mount a small tmpfs to fill up (needs root): "
                    f"{done.stderr.strip() or done.returncode}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)
