"""Where an output goes and how it replaces what is there.

- An output replaces only a regular file or a missing path. A symlink is followed to its
  final target, which is written (atomically, beside the target; the link stays); devices,
  FIFOs, sockets and folders, also behind a symlink, are refused with an OutputError.
- A replaced file's mode and ownership carry over to the new one (as far as the writer may
  set them); new files get the umask's permissions.
- Temporary names fit the folder's file-name limit (``NAME_MAX``) and say which writer
  made them: ``.<output>.modelprov-<pid>-<writer>-<token>.tmp`` (folders
  ``.modelprov-<pid>-<writer>-<token>``), ``<writer>`` a digest of the boot id and the PID
  namespace. Stale ones (their process gone) are removed only by a writer with the same
  ``<writer>``: a PID means nothing in another namespace or boot.
- A model's external data goes to ``<output>.data``, or under a new name
  ``<output>.<token>.data`` while that one exists, so a new model never overwrites the data
  file the old one reads: the model file's rename is the single commit point, and the data
  files of this output the new model does not name are removed after it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import secrets
import shutil
import stat
import sys
from collections.abc import Iterator

from modelprov.errors import OutputError

__all__ = [
    "check_replaceable",
    "data_file_name",
    "data_files_of",
    "folder_lock",
    "keep_metadata",
    "output_target",
    "remove_stale_temporaries",
    "stat_of",
    "temporary_beside",
    "temporary_name",
    "writer_tag",
]

_DEFAULT_NAME_MAX = 255

_KINDS = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def output_target(path: str | os.PathLike[str]) -> str:
    """The file an output named ``path`` replaces: ``path``, or its symlinks' final target.

    Raises OutputError naming ``path`` when it is (or leads to) anything but a regular file
    or a missing path, or when the target's folder does not exist.
    """
    name = os.fspath(path)
    try:
        mode: int | None = os.stat(name).st_mode  # follows symlinks
    except FileNotFoundError:
        mode = None
    except OSError as error:
        raise OutputError(f"{name}: cannot be written: {error.strerror or error}") from None
    target = os.path.realpath(name) if os.path.islink(name) else name
    link = f" (a symlink to {target})" if target != name else ""
    if mode is not None and stat.S_ISDIR(mode):
        raise OutputError(f"{name}{link}: is a directory; give an output file name")
    if mode is not None and not stat.S_ISREG(mode):
        raise OutputError(
            f"{name}{link}: is {_kind(mode)}; outputs replace only regular files or "
            "missing paths: give a file name"
        )
    folder = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(folder):
        raise OutputError(f"{name}{link}: the output folder {folder} does not exist")
    return target


def check_replaceable(target: str) -> None:
    """Raises OutputError unless ``target`` is (still) a regular file or missing; called
    just before a rename, so a special file put there meanwhile is not replaced either."""
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        raise OutputError(f"{target}: became {_kind(mode)} while being written; not replaced")


def keep_metadata(path: str, old: os.stat_result | None) -> None:
    """Gives ``path`` the owner, group and mode of the file it replaces (``old``); owners
    this process may not set are left as they are (ownership before mode: chown clears
    set-id bits)."""
    if old is None:
        return
    if hasattr(os, "chown"):
        with contextlib.suppress(OSError):
            current = os.stat(path)
            if (current.st_uid, current.st_gid) != (old.st_uid, old.st_gid):
                try:
                    os.chown(path, old.st_uid, old.st_gid)
                except PermissionError:
                    os.chown(path, -1, old.st_gid)  # a group the writer is in
    with contextlib.suppress(OSError):
        os.chmod(path, stat.S_IMODE(old.st_mode))


def stat_of(path: str) -> os.stat_result | None:
    """``os.stat(path)``, or None when there is no such file."""
    try:
        return os.stat(path)
    except OSError:
        return None


# --- temporary files --------------------------------------------------------------------------


@functools.cache
def writer_tag() -> str:
    """8 hex digits naming this machine's boot and this process's PID namespace: a PID in a
    temporary's name is checked only by writers with the same tag."""
    parts = []
    for source in ("/proc/sys/kernel/random/boot_id", "/proc/self/ns/pid"):
        try:
            parts.append(os.readlink(source) if source.endswith("/pid") else _read(source))
        except OSError:
            parts.append("")
    if not any(parts):  # no /proc (macOS): the host and the boot time stand in
        parts = [os.uname().nodename if hasattr(os, "uname") else "", str(_boot_time())]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:8]


def _read(path: str) -> str:
    with open(path, encoding="ascii", errors="replace") as stream:
        return stream.read().strip()


def _boot_time() -> float:
    import time

    return round(time.time() - time.monotonic()) if sys.platform != "win32" else 0.0


def name_max(folder: str) -> int:
    """The longest file name (in bytes) ``folder``'s file system takes."""
    try:
        return int(os.pathconf(folder, "PC_NAME_MAX"))
    except (OSError, ValueError, AttributeError):
        return _DEFAULT_NAME_MAX


def _fit(prefix: str, rest: str, limit: int) -> str:
    """``prefix + rest``, ``prefix`` cut (at a character) so the name's bytes fit ``limit``."""
    room = limit - len(os.fsencode(rest))
    encoded = os.fsencode(prefix)
    while len(encoded) > max(room, 0):
        prefix = prefix[:-1]
        encoded = os.fsencode(prefix)
    return prefix + rest


def temporary_name(folder: str, output: str = "", suffix: str = "") -> str:
    """A new temporary name in ``folder`` for a write of ``output`` (a base name; the part
    of it that fits is kept, for the reader), within the folder's name limit."""
    rest = f"modelprov-{os.getpid()}-{writer_tag()}-{secrets.token_hex(8)}{suffix}"
    if output:
        return "." + _fit(output, f".{rest}.tmp", name_max(folder) - 1)
    return "." + rest


_TEMPORARY = re.compile(
    r"^\.(?:.*\.)?modelprov-(?P<pid>\d+)-(?P<tag>[0-9a-f]{8})-[0-9a-f]{16}"
    r"(?:\.[a-z]+)?(?:\.tmp)?$",
    re.DOTALL,
)


def _process_gone(pid: int) -> bool:
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def remove_stale_temporaries(folder: str) -> list[str]:
    """Removes modelprov's temporary files and folders in ``folder`` made by a process of
    this boot and PID namespace that is gone (killed mid-write); returns their paths.
    Others' files, and temporaries of other namespaces or boots, are never touched."""
    removed: list[str] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    tag = writer_tag()
    for entry in entries:
        match = _TEMPORARY.match(entry.name)
        if match is None or match["tag"] != tag or not _process_gone(int(match["pid"])):
            continue
        with contextlib.suppress(OSError):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
            removed.append(entry.path)
    return removed


@contextlib.contextmanager
def temporary_beside(target: str, suffix: str = "") -> Iterator[str]:
    """A new empty file beside ``target`` (umask permissions), removed unless renamed."""
    folder = os.path.dirname(os.path.abspath(target)) or "."
    if not os.path.isdir(folder):
        raise OutputError(f"{target}: the output folder {folder} does not exist")
    remove_stale_temporaries(folder)
    temporary = os.path.join(folder, temporary_name(folder, os.path.basename(target), suffix))
    try:
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as error:
        raise OutputError(
            f"{target}: cannot write in {folder}: {error.strerror or error}"
        ) from None
    os.close(handle)
    try:
        yield temporary
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


@contextlib.contextmanager
def folder_lock(folder: str) -> Iterator[None]:
    """An exclusive lock on ``folder`` (``flock`` on the folder itself, nothing created)
    while a write commits, so two writers' renames and clean-ups do not interleave."""
    try:
        import fcntl
    except ImportError:  # Windows: no flock; commits are not serialized
        yield
        return
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:
        yield
        return
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)


# --- data files -------------------------------------------------------------------------------


_ONNX_IR_ROOM = 10
"""onnx-ir writes a data file through a folder named ``.<data file>.<8 random characters>``
beside it, so a data file's name must leave this many bytes of the limit free."""


def _data_name_max(folder: str) -> int:
    return name_max(folder) - _ONNX_IR_ROOM


def _alternate_prefix(base: str, limit: int) -> str:
    """The part of ``base`` an alternate data file name keeps (``<prefix>.<token>.data``)."""
    return _fit(base, "", limit - len(".0123456789abcdef.data"))


def data_file_name(target: str) -> str:
    """The base name for the new data file of ``target``: ``<name>.data`` when free and
    short enough, else ``<name>.<token>.data`` (cut to the name limit), which is not there.
    """
    folder = os.path.dirname(os.path.abspath(target))
    base, limit = os.path.basename(target), _data_name_max(folder)
    primary = base + ".data"
    if len(os.fsencode(primary)) <= limit and not os.path.lexists(os.path.join(folder, primary)):
        return primary
    prefix = _alternate_prefix(base, limit)
    while True:
        name = f"{prefix}.{secrets.token_hex(8)}.data"
        if not os.path.lexists(os.path.join(folder, name)):
            return name


def data_files_of(target: str) -> list[str]:
    """The data files modelprov may have written for ``target`` (``<name>.data`` and
    ``<name>.<token>.data``) that are there, as paths; ``<name>.data`` first."""
    folder = os.path.dirname(os.path.abspath(target))
    base = os.path.basename(target)
    pattern = re.compile(
        re.escape(_alternate_prefix(base, _data_name_max(folder))) + r"\.[0-9a-f]{16}\.data",
        re.DOTALL,
    )
    primary = os.path.join(folder, base + ".data")
    found = [primary] if os.path.isfile(primary) else []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return found
    found.extend(
        entry.path
        for entry in sorted(entries, key=lambda e: e.name)
        if pattern.fullmatch(entry.name) and entry.is_file(follow_symlinks=False)
    )
    return found
