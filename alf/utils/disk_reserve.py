"""Reserve disk space for files before writing them through a memory map.

A write through ``mmap`` into a file whose blocks the filesystem cannot allocate (a full
disk, tmpfs or quota) is not an error the program can catch: the kernel kills it with
SIGBUS ("Bus error", exit status 135) and the files are left behind. Allocating the blocks
first with ``posix_fallocate`` turns that into an ``OSError`` (ENOSPC) before anything is
written. Where the filesystem cannot allocate ahead (no ``posix_fallocate`` on this
platform, or ``EOPNOTSUPP``), the free space is checked instead, which catches everything
but another writer filling the disk at the same time.
"""
import errno
import os
from typing import Sequence, Tuple

from alf.utils.atomic_write import free_space, mount_point

# posix_fallocate's "this filesystem (or file) cannot allocate ahead"
_UNSUPPORTED = (errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EINVAL)


def reserve_files(files: Sequence[Tuple[str, int]]) -> None:
    """Allocate the first ``size`` bytes of each existing file ``(path, size)`` on disk.

    Raises:
        OSError: ENOSPC (or EDQUOT) naming the first file that does not fit, when the
            filesystem cannot hold them all; any other error of ``posix_fallocate``.
            Space already allocated to the files stays theirs: delete them to free it.
    """
    unreserved = [(path, size) for path, size in files if size > 0 and not _fallocate(path, size)]
    if not unreserved:
        return
    needed = sum(max(0, size - _allocated(path)) for path, size in unreserved)
    free = free_space(unreserved[0][0])
    if free is not None and free < needed:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), unreserved[0][0])


def _allocated(path: str) -> int:
    """Bytes of disk ``path`` already holds (a sparse file: fewer than its size)."""
    return getattr(os.stat(path), "st_blocks", 0) * 512


def _fallocate(path: str, size: int) -> bool:
    """``posix_fallocate`` of ``path``'s first ``size`` bytes; False where unsupported."""
    allocate = getattr(os, "posix_fallocate", None)
    if allocate is None:
        return False
    fd = os.open(path, os.O_RDWR)
    try:
        allocate(fd, 0, size)
    except OSError as e:
        if e.errno in _UNSUPPORTED:
            return False
        raise OSError(e.errno, e.strerror, path) from None
    finally:
        os.close(fd)
    return True



def block_size(path: str) -> int:
    """The allocation unit of the filesystem that holds (or would hold) ``path``: every
    file takes a whole number of them (4 KiB pages on tmpfs and ext4); 1 where unknown."""
    try:
        st = os.statvfs(mount_point(path))
    except (OSError, AttributeError):  # AttributeError: no statvfs on this platform
        return 1
    return max(1, int(st.f_frsize or st.f_bsize or 1))


def on_disk(size: int, block: int) -> int:
    """Bytes a file of ``size`` bytes takes on a filesystem of ``block``-byte blocks."""
    return -(-int(size) // block) * block
