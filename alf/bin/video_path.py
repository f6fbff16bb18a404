"""Check a video output path (``play --record_video``) before anything is played or written.

Why: the video writer is opened only after the env, the algorithm and the checkpoint are
loaded, and ffmpeg complains only then, so a path it cannot write used to cost a whole
played episode, a long traceback and, for ``newdir/``, a 0-byte file named ``newdir``.
Everything that can be known from the path alone is checked here, first, and reported as
one :class:`~alf.errors.ConfigError` line that says how to fix it.
"""
import os

from alf.errors import ConfigError

# containers imageio's ffmpeg writer produces with its default codec (libx264); webm
# needs another codec and fails at the first frame
VIDEO_EXTENSIONS = (".mp4", ".mkv", ".mov", ".avi")


def nearest_existing_ancestor(path: str) -> str:
    """``path`` itself if it exists, else its nearest existing parent (what decides
    whether the missing directories below it can be created)."""
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def check_video_path(path: str, flag: str = "--record_video") -> str:
    """Return ``path`` made absolute if a video can be written there, else raise one line.

    Refused: an empty path; a directory (existing, or written with a trailing ``/``); a
    file name without one of :data:`VIDEO_EXTENSIONS`; a path whose nearest existing
    ancestor is a file or is not writable; an existing file that is not writable. Missing
    parent directories are fine: they are created when the video is opened.

    Args:
        path: the flag's value, as the user typed it (messages quote it).
        flag: the flag's name, for messages.
    """
    if not path:
        raise ConfigError(f"{flag} is empty: give a file name such as play.mp4")
    full = os.path.abspath(os.path.expanduser(path))
    seps = tuple(s for s in (os.sep, os.altsep) if s)
    if path.endswith(seps) or os.path.isdir(full):
        example = os.path.join(path, "play.mp4")
        raise ConfigError(f"{flag} {path} is a directory: give a file name such as {example}")
    stem, ext = os.path.splitext(path)
    if ext.lower() not in VIDEO_EXTENSIONS:
        what = f"'{ext}' is not a video format alf writes" if ext else "has no file extension"
        raise ConfigError(f"{flag} {path}: {what}; give a name ending in "
                          f"{', '.join(VIDEO_EXTENSIONS)}, e.g. {stem}.mp4")
    ancestor = nearest_existing_ancestor(os.path.dirname(full))
    if not os.path.isdir(ancestor):
        raise ConfigError(f"{flag} {path} cannot be written: {ancestor} is a file, not a "
                          "directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {path} cannot be written: {ancestor} is not writable")
    if os.path.exists(full) and not (os.path.isfile(full) and os.access(full, os.W_OK)):
        raise ConfigError(f"{flag} {path} exists and cannot be replaced (not a writable "
                          "regular file): choose another name")
    return full
