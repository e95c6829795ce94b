"""Opening the small input files a command reads (policies, annotations, ranges, batches).

Only regular files: a FIFO would block the command forever, a device would feed it without
end. The file is opened without blocking, checked on its open descriptor (no race with a
rename), and read up to a size limit.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO

__all__ = ["open_regular", "read_regular"]


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """``path`` opened for binary reading; when it is no regular file, an OSError (errno
    EINVAL) whose ``strerror`` says what it is (a FIFO, a device, a socket or a folder)."""
    name = os.fspath(path)
    descriptor = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            kind = (
                "a folder"
                if stat.S_ISDIR(mode)
                else "a FIFO"
                if stat.S_ISFIFO(mode)
                else "a socket"
                if stat.S_ISSOCK(mode)
                else "a device"
            )
            raise OSError(errno.EINVAL, f"{kind}, not a regular file; give a file", name)
        os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def read_regular(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit + 1`` of them (more than
    ``limit`` says the file is too large); OSError as :func:`open_regular`."""
    with open_regular(path) as stream:
        return stream.read(limit + 1)
