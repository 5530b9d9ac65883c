"""One kubewire process per data directory: an exclusive ``flock`` on ``DIR/kubewire.lock``.

Why: two servers on one directory would each open the store (SQLite lets them), diverge in
their caches and revisions, and overwrite each other's kubeconfig. ``kubewire serve`` and
``kubewire repair`` take this lock for their whole life and write ``PID ROLE`` into the file, so
the one refused can name the process in its way. The kernel releases a ``flock`` when its
holder dies however it dies (SIGKILL included), so a stale file never blocks a start; the file
itself stays (removing it would race with a process that just opened it).

The store's revision record (``storage/sqlite/revision_record.py``) has a lock of its own, on
another file: shared for every process with the store open (the server and its writer
process), exclusive for ``repair``. The two never wait on each other: this one is taken first,
without blocking, and a process that holds it takes the record's next. ``repair`` holds both, so
it still refuses a store some process opened without this lock.
"""

from __future__ import annotations

import fcntl
import os
import time
from dataclasses import dataclass
from pathlib import Path

LOCK_NAME = "kubewire.lock"
_READ_TRIES = 20  # the holder writes its pid right after locking: wait up to ~0.2 s for it


class DataDirInUse(Exception):
    """Another kubewire process holds the data directory."""

    def __init__(self, data_dir: Path, holder: Holder | None) -> None:
        who = (f"kubewire {holder.role} (pid {holder.pid})" if holder
               else "another kubewire process")
        super().__init__(f"{data_dir} is in use by {who}")
        self.holder = holder


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds a data directory: its pid and what it does (``serve``, ``repair``)."""

    pid: int
    role: str


def parse_holder(text: str) -> Holder | None:
    """``PID ROLE`` as the lock file holds it; None for an empty or foreign file."""
    parts = text.split()
    if len(parts) != 2 or not parts[0].isdigit():
        return None
    return Holder(int(parts[0]), parts[1])


class DataDirLock:
    """The lock, held from ``acquire`` to ``release`` (or the process's end)."""

    def __init__(self, data_dir: Path, fd: int) -> None:
        self.data_dir = data_dir
        self._fd = fd

    @classmethod
    def acquire(cls, data_dir: Path, role: str) -> DataDirLock:
        """Lock ``data_dir`` (made if missing) for this process; raises ``DataDirInUse``, or
        ``OSError`` for a directory that cannot be made or written."""
        data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(data_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise DataDirInUse(data_dir, holder) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} {role}\n".encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        return cls(data_dir, fd)

    def release(self) -> None:
        """Empty the file and unlock; idempotent."""
        if self._fd >= 0:
            os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = -1


def holder_of(data_dir: Path) -> Holder | None:
    """The process holding ``data_dir`` now, None if none does (or there is no lock file)."""
    try:
        fd = os.open(data_dir / LOCK_NAME, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_holder(fd) or Holder(0, "unknown")
        return None  # free: our shared lock goes with the close
    finally:
        os.close(fd)


def _read_holder(fd: int) -> Holder | None:
    for _ in range(_READ_TRIES):
        holder = parse_holder(os.pread(fd, 64, 0).decode("ascii", "replace"))
        if holder is not None:
            return holder
        time.sleep(0.01)
    return None
