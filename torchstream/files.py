"""Files written safely: unique temporary names, atomic replacement, one writer per path, and
what a path is when it is not a regular file.

- :func:`atomic_write` writes bytes to a temporary file of a unique name beside the target
  (``.<name>.<random>.tmp``), syncs it and renames it over the target: a reader sees the old
  file or the new one, never a mix, and two writers never share a temporary file.
- :class:`PathLock` holds a path for one process at a time: an advisory ``flock`` on a lock file
  (``<file>.lock`` beside a file, ``<dir>/.torchstream.lock`` inside a directory) that names
  its holder (pid, host, start time). The kernel releases the ``flock`` when the holder dies, so
  a lock file left by a killed process is recognised as stale and taken over (and said so).
- :func:`path_kind` says what a path is without opening it (``a FIFO``, ``a directory``, ...).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import stat
import tempfile
import time
from pathlib import Path
from types import TracebackType

__all__ = ["LOCK_NAME", "PathInUseError", "PathLock", "atomic_write", "path_kind"]

#: The lock file of a locked directory (inside it).
LOCK_NAME = ".torchstream.lock"

_UMASK = os.umask(0)
os.umask(_UMASK)

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def path_kind(path: str | os.PathLike[str]) -> str:
    """What ``path`` is, from ``stat`` alone (nothing is opened; symlinks are followed):
    ``"a regular file"``, ``"a directory"``, ``"a FIFO (named pipe)"``, ``"a character
    device"``, ``"a block device"``, ``"a socket"``, ``"a broken symlink"`` or ``"missing"``.

    >>> path_kind("/dev/null")
    'a character device'
    >>> path_kind("/no/such/file")
    'missing'
    """
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return "a broken symlink" if os.path.islink(path) else "missing"
    if stat.S_ISREG(mode):
        return "a regular file"
    for test, words in _KINDS:
        if test(mode):
            return words
    return "not a regular file"


def atomic_write(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` through a uniquely named temporary file in the same folder,
    synced and renamed over ``path`` (the parent folders are made; the file gets the mode a
    plain ``open`` would give it). The temporary file is removed when anything fails.

    >>> import tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "a.txt"
    >>> atomic_write(target, b"one"); atomic_write(target, b"two"); target.read_bytes()
    b'two'
    >>> sorted(p.name for p in target.parent.iterdir())
    ['a.txt']
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), 0o666 & ~_UMASK)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class PathInUseError(OSError):
    """A path held by another process (the message names the holder)."""


class PathLock:
    """Hold ``path`` for this process: an exclusive, non-blocking ``flock`` on a lock file
    that names the holder.

    Parameters
    ----------
    path
        The file or directory to hold.
    what
        How messages name it (e.g. ``"--logdir runs/a"``).
    directory
        ``path`` is a directory: the lock file is ``path/.torchstream.lock`` (the directory is
        made); else ``<path>.lock`` beside the file.

    :meth:`acquire` raises :class:`PathInUseError` naming the holder (pid, host, since when)
    when another process holds the path, and returns a note when it took over a stale lock
    file (its holder ended without removing it: killed, or the machine stopped); :meth:`release`
    removes the lock file. A context manager acquires and releases.

    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> with PathLock(folder, "the folder", directory=True) as lock:
    ...     PathLock(folder, "the folder", directory=True).acquire()
    Traceback (most recent call last):
    ...
    torchstream.files.PathInUseError: the folder is in use by another process (pid ...
    """

    def __init__(self, path: str | os.PathLike[str], what: str, *,
                 directory: bool = False) -> None:
        self.path = Path(path)
        self.what = what
        self.directory = directory
        self.lock_path = (self.path / LOCK_NAME if directory
                          else self.path.with_name(self.path.name + ".lock"))
        self._fd: int | None = None
        #: The note of :meth:`acquire` when it took over a stale lock file, else None.
        self.stale_note: str | None = None

    def acquire(self) -> str | None:
        """Hold the path (see the class); the stale-lock note, or None."""
        if self._fd is not None:
            return self.stale_note
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                os.close(fd)
                raise PathInUseError(f"{self.what} is in use by another process ({holder}); "
                                     "wait for it to end or choose another path") from None
            except BaseException:
                os.close(fd)
                raise
            # the file may have been removed by its former holder between open and flock
            try:
                same = os.stat(self.lock_path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        previous = _read_all(fd)
        if previous.strip():
            info = _parse(previous)
            self.stale_note = (f"{self.what}: took over a stale lock file {self.lock_path} "
                               f"({_describe(info)}, no longer running)")
        record = {"pid": os.getpid(), "host": socket.gethostname(),
                  "since": time.strftime("%Y-%m-%d %H:%M:%S")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode(), 0)
        os.fsync(fd)
        self._fd = fd
        return self.stale_note

    def release(self) -> None:
        """Remove the lock file and let the path go (no-op when not held)."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self.lock_path)
        os.close(self._fd)  # closing the descriptor drops the flock
        self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> PathLock:
        self.acquire()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


def _read_all(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    return os.pread(fd, min(size, 4096), 0) if size else b""


def _parse(data: bytes) -> dict[str, object]:
    try:
        info = json.loads(data.decode("utf-8", "replace"))
    except ValueError:
        return {}
    return info if isinstance(info, dict) else {}


def _describe(info: dict[str, object]) -> str:
    if not info:
        return "holder not recorded"
    return f"pid {info.get('pid')} on host {info.get('host')}, since {info.get('since')}"


def _holder(fd: int) -> str:
    """The holder recorded in a lock file; a holder that has just taken the lock may not have
    written itself yet, so an empty file is read again for up to 0.2 s."""
    for _ in range(20):
        data = _read_all(fd)
        if data.strip():
            return _describe(_parse(data))
        time.sleep(0.01)
    return "holder not recorded"

