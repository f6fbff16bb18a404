"""Write a run's files so that a failure never leaves a half-written file under a real
name or a stray temporary file, and is reported in one line.

A disk that fills up (or a quota, a read-only mount) turns the write of a checkpoint,
``config.gin`` or ``operative_config.gin`` into an ``OSError``; torch reports it as a
``RuntimeError`` ("enforce fail at inline_container.cc") whose context is the
``OSError``. :func:`atomic_write` writes ``<path>.<pid>.tmp`` (its own name per
process: two sweep processes rewrite one study's ``results.md``), flushes, fsyncs
and renames it onto ``path``; on any failure it removes the temporary file, so
``path`` keeps its previous content, and raises :class:`~alf.errors.WriteFailedError`
naming the file, the reason and, for a full disk, how much space is left where.
"""
import errno
import os
import shutil
from typing import BinaryIO, Callable, Optional

from alf.errors import WriteFailedError

#: errors that mean "no space": the message then says how much is left
SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def atomic_write(path: str, write: Callable[[BinaryIO], None], what: str = "",
                 needed: Optional[int] = None) -> None:
    """Write ``path`` through ``write(file)`` all or nothing.

    Args:
        path: the file to (re)place.
        write: writes the content to the binary file object it is given.
        what: a few words for the error message, e.g. ``"checkpoint"``.
        needed: about how many bytes the content takes (said when the disk is full).

    Raises:
        WriteFailedError: the content could not be written (the previous ``path`` is
            intact and no ``<path>.<pid>.tmp`` is left); other errors are re-raised as they
            are, also after removing the temporary file.
    """
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with _open_tmp(tmp) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        remove_quietly(tmp)
        cause = os_error_in(e)
        if cause is None:
            raise
        raise write_failed(path, cause, what, needed) from None


def atomic_write_text(path: str, text: str, what: str = "") -> None:
    """:func:`atomic_write` of ``text`` (UTF-8)."""
    data = text.encode("utf-8")
    atomic_write(path, lambda f: f.write(data), what)


def os_error_in(exc: BaseException) -> Optional[OSError]:
    """The ``OSError`` that caused ``exc`` (``exc`` itself or one in its ``__cause__`` /
    ``__context__`` chain), or None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, OSError) and exc.errno is not None:
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def write_failed(path: str, error: OSError, what: str = "",
                 needed: Optional[int] = None) -> WriteFailedError:
    """The one-line error for ``error`` while writing ``path``: the file, the reason and,
    when the disk is full, the space left (and ``needed``, if known)."""
    reason = error.strerror or str(error)
    text = f"could not write {what + ' ' if what else ''}{path}: {reason}"
    if error.errno in SPACE_ERRNOS:
        text += f" ({space_left(path, needed)})"
    failure = WriteFailedError(text)
    failure.path, failure.what, failure.os_error = path, what, error
    return failure


def space_left(path: str, needed: Optional[int] = None) -> str:
    """E.g. ``"about 1.3 MiB needed, 620.0 KiB free on /mnt/runs"``; with more digits
    where one would print both alike ("5.38 MiB needed, 5.37 MiB free", not 5.4 and 5.4)."""
    free = free_space(path)
    digits = 1
    while (needed and free is not None and needed != free and digits < 4
           and format_bytes(needed, digits) == format_bytes(free, digits)):
        digits += 1
    parts = [f"about {format_bytes(needed, digits)} needed"] if needed else []
    where = mount_point(path)
    parts.append(f"{format_bytes(free, digits)} free on {where}" if free is not None
                 else f"free space on {where} unknown")
    return ", ".join(parts)


def free_space(path: str) -> Optional[int]:
    """Bytes an unprivileged write may still use on the filesystem of ``path`` (or of its
    nearest existing parent); None when the filesystem does not say."""
    try:
        usage = shutil.disk_usage(_existing(path))
    except OSError:
        return None
    return usage.free if usage.total > 0 else None


def mount_point(path: str) -> str:
    """The mount point of the filesystem holding ``path``."""
    here = _existing(path)
    while not os.path.ismount(here) and os.path.dirname(here) != here:
        here = os.path.dirname(here)
    return here


def format_bytes(n: Optional[float], digits: int = 1) -> str:
    """``n`` bytes for a message ("512 B", "2.8 MiB"; ``digits`` after the point);
    None: "unknown"."""
    if n is None:
        return "unknown"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:.{digits}f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024.0
    return f"{n:.{digits}f} TiB"


def remove_quietly(path: str) -> None:
    """Delete ``path`` if it exists (cleanup after a failure: never raises)."""
    try:
        os.remove(path)
    except OSError:
        pass


def _existing(path: str) -> str:
    here = os.path.abspath(path)
    while not os.path.exists(here) and os.path.dirname(here) != here:
        here = os.path.dirname(here)
    return here


def _open_tmp(path: str) -> BinaryIO:
    """Open the temporary file (tests replace this to simulate a full disk)."""
    return open(path, "wb")
