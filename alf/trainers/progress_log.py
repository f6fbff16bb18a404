"""``progress.csv`` (one row per summary interval) and ``eval.csv`` (one row per
evaluation), consistent across kill and resume.

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
# eval.csv: the greedy policy's evaluation (what sweeps and ``alf.bin.compare`` score):
# mean, standard deviation, min and max of the episode returns, mean length, episodes
EVAL_HEADER = ["iteration", "env_steps", "wall_time_s", "eval_return", "eval_return_std",
               "eval_return_min", "eval_return_max", "eval_episode_length", "eval_episodes"]
PROGRESS_FILE = "progress.csv"
EVAL_FILE = "eval.csv"


class ProgressLog:
    """Append-only CSV of training progress (or, with :data:`EVAL_HEADER`, evaluations).

    Args:
        path: the csv file (created with a header when missing).
        keep_through_iteration: rows with a larger ``iteration`` are dropped first
            (0 for a run starting over keeps only the header).
        header: the column names; the first must be ``iteration``.
    """

    def __init__(self, path: str, keep_through_iteration: int, header: Sequence[str] = HEADER):
        self.path = path
        self.header = list(header)
        self._failed = False
        self.dropped_rows = _truncate(path, keep_through_iteration)
        new = not os.path.exists(path) or os.path.getsize(path) == 0
        try:
            self._file = open(path, "a", newline="")
        except OSError as e:
            raise write_failed(path, e, _WHAT) from None
        self._writer = csv.writer(self._file)
        if new:
            self.write(self.header)

    def write(self, row: Sequence) -> None:
        """Append one row (fields in ``header`` order) and flush it.

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


class RunLogs:
    """A run's ``progress.csv`` and ``eval.csv`` in ``root_dir``, both cut back to the
    restored iteration (rows a killed run wrote after its newest checkpoint are dropped).

    Attributes:
        progress: the training-progress log.
        eval: the evaluation log (``None`` rows are never written: a run that does not
            evaluate leaves a header-only file).
        dropped_rows: ``{file name: rows dropped}`` for the files that lost rows.
    """

    def __init__(self, root_dir: str, keep_through_iteration: int):
        self.progress = ProgressLog(os.path.join(root_dir, PROGRESS_FILE), keep_through_iteration)
        try:
            self.eval = ProgressLog(os.path.join(root_dir, EVAL_FILE), keep_through_iteration,
                                    EVAL_HEADER)
        except BaseException:
            self.progress.close()
            raise
        self.dropped_rows = {name: log.dropped_rows for name, log in
                             ((PROGRESS_FILE, self.progress), (EVAL_FILE, self.eval))
                             if log.dropped_rows}

    def close(self) -> None:
        """Close both files (the first failure is raised after both were tried)."""
        try:
            self.progress.close()
        finally:
            self.eval.close()


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
