"""Check a directory a command will write (``--study_dir``, ``--out_dir``) before it does
anything.

Why: ``os.makedirs`` reports a path that is a file only when the command gets to it, as a
``FileExistsError`` traceback, after a sweep checked its runs and after ``compare``
printed its whole report. What can be known from the path alone is one
:class:`~alf.errors.UserError` line first (exit status 2, nothing written).
"""
import os

from alf.bin.video_path import nearest_existing_ancestor
from alf.errors import UserError


def check_out_dir(flag: str, path: str) -> str:
    """``path`` (``~`` expanded) made absolute if it is a directory or can be created.

    Args:
        flag: how messages name it, e.g. ``--study_dir``.

    Raises:
        UserError: it is a file, its nearest existing ancestor is a file, or that
            ancestor is not writable.
    """
    path = os.path.abspath(os.path.expanduser(path))
    if os.path.exists(path) and not os.path.isdir(path):
        raise UserError(f"{flag} {path} is an existing file, not a directory: give a "
                        "directory (a new one is created)")
    ancestor = nearest_existing_ancestor(path)
    if not os.path.isdir(ancestor):
        raise UserError(f"{flag} {path} cannot be created: {ancestor} is a file, not a "
                        "directory")
    if not os.path.isdir(path) and not os.access(ancestor, os.W_OK | os.X_OK):
        raise UserError(f"{flag} {path} cannot be created: {ancestor} is not writable")
    return path


__all__ = ["check_out_dir"]
