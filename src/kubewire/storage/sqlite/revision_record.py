"""The revision record: the last revision the SQLite store committed, kept outside SQLite.

Why: in WAL mode a database holds its newest commits only in ``<db>-wal`` until a checkpoint
copies them into the main file. If that file is lost or damaged (deleted, truncated, corrupted,
left out of a copy), SQLite opens the database as of an older checkpoint without an error:
objects vanish, the revision counter goes back, and new writes would reuse revisions clients
have already seen (a watch from one of them would silently miss everything since). The record
(``<db>-revision``) lives beside the database: the writer rewrites it in place after every commit
group, before the group's writes are acknowledged, and opening refuses a database whose revision
is below it (``RevisionLostError``). ``repair`` is the way out.

What it covers: any process death (SIGKILL of server and writer, OOM) followed by the loss,
truncation or corruption of the WAL, since a ``pwrite`` is in the page cache once it returns. It
is not fsynced: that would add a second device flush to each commit group's one (measured in
bench/FINDINGS.md, "Revision record") for the single case of a WAL lost *together with* an OS
crash, which can go unnoticed; after an OS crash the record may lag the database by the last
commits, and ``repair``'s margin allows for that. It never runs ahead of a ``full``
database (it is written after the commit's fsync). With ``--durability normal`` a power loss can
leave it ahead: the last acknowledged commits were lost, as ``normal`` allows, and the start is
refused too, since their revisions would otherwise be given out again.

Format: the revision as 20 decimal digits and a newline, written with one ``pwrite`` at offset
0: one sector, whole or absent. Locking: every process that has the store open holds a shared
``flock`` on the record; ``repair`` takes it exclusively, so it never runs beside a server.
"""

from __future__ import annotations

import fcntl
import os

from kubewire.storage.base import StorageError

RECORD_SUFFIX = "-revision"
_WIDTH = 20  # digits: any int64 revision
_SIZE = _WIDTH + 1


class StoreInUseError(StorageError):
    """Another process holds the store in a way that excludes this one (a repair, or a server
    while repairing)."""


class RevisionLostError(StorageError):
    """The database ends below a revision it had committed: its newest commits were lost."""

    def __init__(self, path: str, revision: int, recorded: int) -> None:
        super().__init__(f"{path} holds revisions up to {revision}, but revision {recorded} "
                         "was committed")
        self.path = path
        self.revision = revision
        self.recorded = recorded


class DamagedRecordError(StorageError):
    """The revision record holds something other than a revision."""


def record_path(db_path: str | os.PathLike[str]) -> str:
    return os.fspath(db_path) + RECORD_SUFFIX


def encode_revision(revision: int) -> bytes:
    return b"%0*d\n" % (_WIDTH, revision)


def decode_revision(data: bytes) -> int | None:
    """The recorded revision; None for an empty (new) record. Raises ``ValueError``."""
    if not data:
        return None
    digits = data[:_WIDTH]
    if len(data) != _SIZE or data[_WIDTH:] != b"\n" or not digits.isdigit():
        raise ValueError(f"not a revision record: {data[:40]!r}")
    return int(digits)


def check_revision(path: str, revision: int, recorded: int | None) -> None:
    """Raise ``RevisionLostError`` if the database's ``revision`` is below ``recorded``."""
    if recorded is not None and revision < recorded:
        raise RevisionLostError(path, revision, recorded)


class RevisionRecord:
    """An open revision record, locked shared (a store) or exclusively (a repair)."""

    def __init__(self, db_path: str | os.PathLike[str], *, exclusive: bool = False) -> None:
        self.path = record_path(db_path)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(self._fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
                        | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise StoreInUseError(
                f"{os.fspath(db_path)} is in use by another kubewire process"
                f"{' (stop the server first)' if exclusive else ' (a repair)'}") from None
        except BaseException:
            os.close(self._fd)
            raise

    def read(self) -> int | None:
        """The recorded revision, None if nothing was recorded yet; raises
        ``DamagedRecordError`` if the file holds anything else."""
        data = os.pread(self._fd, _SIZE + 1, 0)
        try:
            return decode_revision(data)
        except ValueError as exc:
            raise DamagedRecordError(f"{self.path} is damaged: {exc}") from None

    def write(self, revision: int) -> None:
        """Record ``revision`` (in place; in the page cache when this returns)."""
        os.pwrite(self._fd, encode_revision(revision), 0)

    def sync(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        """Close (and so unlock); idempotent."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
