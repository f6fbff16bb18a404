"""``progress.csv``: one row per summary interval, consistent across kill and resume.

A run killed (``kill -9``, power loss) after its newest checkpoint has already
written rows for iterations it will redo on resume. Opening the log for a run
restored at iteration ``k`` drops every row past ``k`` (atomically: the kept
rows go to a temporary file that replaces the old one), so each iteration
appears once and the file matches what the resumed run computes. Wall time
continues from the checkpoint's (the caller passes the restored offset).
"""
import csv
import os
from typing import List, Sequence

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
        self.dropped_rows = _truncate(path, keep_through_iteration)
        new = not os.path.exists(path) or os.path.getsize(path) == 0
        self._file = open(path, "a", newline="")
        self._writer = csv.writer(self._file)
        if new:
            self._writer.writerow(HEADER)
            self._file.flush()

    def write(self, row: Sequence) -> None:
        """Append one row (fields in :data:`HEADER` order) and flush it."""
        self._writer.writerow(list(row))
        self._file.flush()

    def close(self) -> None:
        self._file.close()


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
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        csv.writer(f).writerows([header] + kept)
    os.replace(tmp, path)
    return len(body) - len(kept)


def _iteration(row: List[str]):
    try:
        return int(row[0])
    except (ValueError, IndexError):
        return None
