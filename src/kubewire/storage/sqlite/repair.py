"""Start again from what a damaged SQLite store holds, without ever reusing a revision.

Modelled on ``etcdutl snapshot restore --bump-revision --mark-compacted``: the objects the
database holds are kept as they are; the revision counter moves past the highest revision the
store ever committed (from its record, ``revision_record``) plus ``REPAIR_MARGIN``, and
the whole change log up to the new revision is compacted. Every client that resumes a watch, a
list or a continue token from an older (perhaps lost) revision then gets 410 Gone and relists,
instead of being served a history that was rewritten under it.

Blocking, for the command line; it takes the record's lock exclusively, so it refuses to run
while a server has the store open.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass

from kubewire.storage.base import StorageError
from kubewire.storage.sqlite.revision_record import DamagedRecordError, RevisionRecord
from kubewire.storage.sqlite.schema import (
    connect,
    connect_read_only,
    ensure_schema,
    recover_revision,
    write_meta,
)

# Added to the highest revision known to be committed. The record is not fsynced, so after an
# OS crash it may lag what was acknowledged by the commits of the last writeback interval (the
# kernel writes dirty pages within ~30 s; at the ~3,000 writes/s bench/RESULTS.md measures,
# ~100,000 revisions): this keeps every new revision above any a client could have seen.
REPAIR_MARGIN = 1_000_000


@dataclass(frozen=True, slots=True)
class StoreState:
    """What a store holds, against what its record says it committed."""

    revision: int  # the highest revision the database holds
    recorded: int | None  # the revision record's, None if absent or unreadable
    objects: int

    @property
    def lost(self) -> int:
        """Revisions committed but no longer in the database."""
        return max((self.recorded or 0) - self.revision, 0)


@dataclass(frozen=True, slots=True)
class Repaired:
    before: StoreState
    revision: int  # the new revision, also the new compacted revision


def inspect_store(path: str | os.PathLike[str]) -> StoreState:
    """What the store at ``path`` holds, read without changing anything (its WAL stays as it
    is); raises ``StoreInUseError`` if a server has it open."""
    record = RevisionRecord(path, exclusive=True)
    try:
        conn = connect_read_only(path)
        try:
            _check_integrity(conn, path)
            return _state(conn, record)
        finally:
            conn.close()
    finally:
        record.close()


def repair_store(path: str | os.PathLike[str], margin: int = REPAIR_MARGIN) -> Repaired:
    """Move the store's revision past everything it ever committed and compact its history.

    Raises ``StoreInUseError`` while a server has it open, ``StorageError`` if the database file
    itself is damaged (SQLite's integrity check fails): then only a backup helps.
    """
    record = RevisionRecord(path, exclusive=True)
    try:
        conn = _open(path)
        try:
            before = _state(conn, record)
            revision = max(before.revision, before.recorded or 0) + margin
            _bump(conn, revision)
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the database file alone holds it
        finally:
            conn.close()
        record.write(revision)
        record.sync()
        return Repaired(before, revision)
    finally:
        record.close()


def _open(path: str | os.PathLike[str]) -> sqlite3.Connection:
    conn = connect(path, "full", is_reader=False)
    try:
        ensure_schema(conn)
        _check_integrity(conn, path)
    except BaseException:
        conn.close()
        raise
    return conn


def _check_integrity(conn: sqlite3.Connection, path: str | os.PathLike[str]) -> None:
    problems = [row[0] for row in conn.execute("PRAGMA integrity_check(5)")]
    if problems != ["ok"]:
        raise StorageError(f"{os.fspath(path)} is damaged beyond repair ({problems[0]}): "
                           "restore it from a backup")


def _state(conn: sqlite3.Connection, record: RevisionRecord) -> StoreState:
    try:
        recorded = record.read()
    except DamagedRecordError:
        recorded = None  # the margin is all that is left to go by
    objects = int(conn.execute("SELECT COUNT(*) FROM objects").fetchone()[0])
    return StoreState(recover_revision(conn), recorded, objects)


def _bump(conn: sqlite3.Connection, revision: int) -> None:
    """One transaction: the counter at ``revision``, the log compacted up to it."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("DELETE FROM changes")
        write_meta(conn, "revision", revision)
        write_meta(conn, "compacted_revision", revision)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
