"""``progress.csv``: one row per summary interval, consistent across kill and resume.

A run killed (``kill -9``, power loss) after its newest checkpoint has already
written rows for iterations it will redo on resume. Opening the log for a run
restored at iteration ``k`` drops every row past ``k`` (atomically: the kept
rows go to a temporary file that replaces the old one), so each iteration
appears once and the file matches what the resumed run computes. Wall time
continues from the checkpoint's (the caller passes the restored offset). A row that
cannot be written (full disk) is one :class:`~alf.errors.WriteFailedError` naming
the file.
"""
import csv
import io
import os
from typing import List, Sequence

from alf.utils.atomic_write import atomic_write_text, write_failed

_WHAT = "the progress log"

HEADER = ["iteration", "env_steps", "wall_time_s", "average_return", "average_episode_length",
          "num_episodes", "fps"]


class ProgressLog:
    """Append-only CSV of training progress.

    Args:
        path: the csv file (created with a header when missing).
        keep_through_iteration: rows with a larger ``iteration`` are dropped first
            (0 for a run starting over keeps only the header).
    """

    def __init__(self, path: str, keep_through_iteration: int):
        self.path = path
        self._failed = False
        self.dropped_rows = _truncate(path, keep_through_iteration)
        new = not os.path.exists(path) or os.path.getsize(path) == 0
        try:
            self._file = open(path, "a", newline="")
        except OSError as e:
            raise write_failed(path, e, _WHAT) from None
        self._writer = csv.writer(self._file)
        if new:
            self.write(HEADER)

    def write(self, row: Sequence) -> None:
        """Append one row (fields in :data:`HEADER` order) and flush it.

        Raises:
            WriteFailedError: the row could not be written (a resume drops a partial row).
        """
        try:
            self._writer.writerow(list(row))
            self._file.flush()
        except OSError as e:
            self._failed = True
            raise write_failed(self.path, e, _WHAT) from None

    def close(self) -> None:
        """Close the file; after a failed write the unwritten rest is dropped quietly (the
        failure was already raised)."""
        try:
            self._file.close()
        except OSError as e:
            if not self._failed:
                raise write_failed(self.path, e, _WHAT) from None


def _truncate(path: str, keep_through_iteration: int) -> int:
    """Drop rows past ``keep_through_iteration``; returns how many were dropped."""
    if not os.path.exists(path):
        return 0
    with open(path, newline="") as f:
        rows: List[List[str]] = list(csv.reader(f))
    if not rows:
        return 0
    header, body = rows[0], rows[1:]
    # a row cut short by a kill mid-write has fewer fields (its iteration may even parse)
    kept = [r for r in body if len(r) == len(header) and _iteration(r) is not None
            and _iteration(r) <= keep_through_iteration]
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        ends_with_newline = f.read(1) == b"\n"
    if len(kept) == len(body) and ends_with_newline:
        return 0
    text = io.StringIO(newline="")
    csv.writer(text).writerows([header] + kept)
    atomic_write_text(path, text.getvalue(), _WHAT)
    return len(body) - len(kept)


def _iteration(row: List[str]):
    try:
        return int(row[0])
    except (ValueError, IndexError):
        return None
