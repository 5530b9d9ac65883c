"""The SQLite store's on-disk schema, connection settings and small shared helpers.

Tables (schema version 1):

- ``objects(key, revision, value)``: the current value of every live key.
- ``changes(revision, key, resource, type, value, prev_value, prev_revision, ts)``: the change log,
  one row per committed write, append-only except for compaction, which drops a prefix by revision.
  ``resource`` is the first two key segments (``core/pods``), indexed with ``revision`` so a
  per-kind watch resumes without scanning other kinds' changes.
- ``meta(name, value)``: ``schema_version``, ``revision`` (the highest revision ever assigned,
  written in every write transaction so the counter never depends on which changes are
  retained) and ``compacted_revision``.

Revisions are dense: every revision in ``(compacted_revision, revision]`` has exactly one row in
``changes``. Count-based retention relies on it.
"""

from __future__ import annotations

import os
import pathlib
import sqlite3
from typing import Literal

from kubewire.storage.base import Change, ChangeType, StorageError
from kubewire.storage.sqlite.revision_record import RevisionRecord, check_revision

Durability = Literal["full", "normal"]

SCHEMA_VERSION = 1
# A reader or writer that finds the database locked by another process waits this long.
BUSY_TIMEOUT_MS = 5_000

_DDL = (
    """CREATE TABLE IF NOT EXISTS objects (
        key TEXT PRIMARY KEY, revision INTEGER NOT NULL, value BLOB NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS changes (
        revision INTEGER PRIMARY KEY, key TEXT NOT NULL, resource TEXT NOT NULL,
        type INTEGER NOT NULL, value BLOB NOT NULL, prev_value BLOB, prev_revision INTEGER,
        ts REAL NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS changes_key ON changes (key, revision)",
    "CREATE INDEX IF NOT EXISTS changes_resource ON changes (resource, revision)",
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value) WITHOUT ROWID",
)

CHANGE_COLUMNS = "revision, type, key, value, prev_value, ts"


def connect(path: str | os.PathLike[str], durability: Durability, *,
            is_reader: bool) -> sqlite3.Connection:
    """Open a connection in WAL mode with explicit transactions (``isolation_level=None``).

    ``check_same_thread`` is off because the store closes every connection from the thread
    that shuts it down, after the owning thread has stopped using it.
    """
    conn = sqlite3.connect(os.fspath(path), isolation_level=None, check_same_thread=False,
                           timeout=BUSY_TIMEOUT_MS / 1000)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    if is_reader:
        conn.execute("PRAGMA query_only = 1")
        return conn
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        conn.close()
        raise StorageError(f"cannot enable WAL mode on {os.fspath(path)} (got {mode})")
    conn.execute("PRAGMA synchronous = " + ("FULL" if durability == "full" else "NORMAL"))
    return conn


def connect_read_only(path: str | os.PathLike[str]) -> sqlite3.Connection:
    """A connection that cannot write, not even a checkpoint when it closes."""
    uri = pathlib.Path(path).absolute().as_uri() + "?mode=ro"
    return sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000,
                           check_same_thread=False)


def ensure_schema(conn: sqlite3.Connection) -> None:
    """Create the tables on a new database; refuse a database of another schema version."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in _DDL:
            conn.execute(statement)
        version = read_meta_int(conn, "schema_version", default=-1)
        if version == -1:
            write_meta(conn, "schema_version", SCHEMA_VERSION)
            write_meta(conn, "revision", 0)
            write_meta(conn, "compacted_revision", 0)
        elif version != SCHEMA_VERSION:
            raise StorageError(f"unsupported schema version {version} (want {SCHEMA_VERSION})")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def read_meta_int(conn: sqlite3.Connection, name: str, default: int = 0) -> int:
    """An integer from ``meta``, or ``default`` if the name is not there."""
    row = conn.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
    return default if row is None else int(row[0])


def write_meta(conn: sqlite3.Connection, name: str, value: int) -> None:
    """Set an integer in ``meta`` (inside the caller's transaction)."""
    conn.execute("INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)", (name, value))


def recover_revision(conn: sqlite3.Connection) -> int:
    """The highest revision ever assigned: meta, cross-checked against both tables."""
    meta = read_meta_int(conn, "revision")
    changes = conn.execute("SELECT MAX(revision) FROM changes").fetchone()[0] or 0
    objects = conn.execute("SELECT MAX(revision) FROM objects").fetchone()[0] or 0
    return max(meta, int(changes), int(objects))


def peek_revision(path: str | os.PathLike[str]) -> int:
    """The highest revision the database at ``path`` holds (0 if it has none yet), read without
    writing anything: a read-only connection neither checkpoints nor removes the WAL, so a store
    refused for a damaged WAL is left as it was found."""
    if not os.path.exists(path):
        return 0
    conn = connect_read_only(path)
    try:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
                        ).fetchone() is None:
            return 0
        return recover_revision(conn)
    finally:
        conn.close()


def open_for_writing(path: str | os.PathLike[str], durability: Durability,
                     record: RevisionRecord) -> tuple[sqlite3.Connection, int, int]:
    """The writer's connection, the current revision and the compacted revision, once the
    database is known to hold every revision its record says was committed (the store's
    writer thread or process, and the ``writer_hub``, open it so)."""
    # The record first: a writer process that outlived its server may still be committing,
    # and records only what it has committed, so the database can only be further along.
    # Before anything writes: a refused store keeps its damaged WAL for whoever looks.
    recorded = record.read()
    check_revision(os.fspath(path), peek_revision(path), recorded)
    conn = connect(path, durability, is_reader=False)
    try:
        ensure_schema(conn)
        # Every write transaction updates meta, so this repair never fires unless the file
        # was edited by hand; it keeps revisions strictly increasing even then.
        revision = recover_revision(conn)
        if revision != read_meta_int(conn, "revision"):
            conn.execute("BEGIN IMMEDIATE")
            write_meta(conn, "revision", revision)
            conn.execute("COMMIT")
        record.write(revision)  # a record lagging behind (lost with an OS crash) catches up
        return conn, revision, read_meta_int(conn, "compacted_revision")
    except BaseException:
        conn.close()
        raise


def resource_of(key: str) -> str:
    """The first two segments of a key (``core/pods/ns/name`` -> ``core/pods``), else ``""``."""
    parts = key.split("/", 2)
    return f"{parts[0]}/{parts[1]}" if len(parts) == 3 else ""


def prefix_resource(prefix: str) -> str | None:
    """The resource every key under ``prefix`` belongs to, if the prefix pins one."""
    parts = prefix.split("/", 2)
    return f"{parts[0]}/{parts[1]}" if len(parts) == 3 else None


def prefix_end(prefix: str) -> str | None:
    """The smallest string greater than every string starting with ``prefix`` (None: no bound).

    SQLite compares TEXT as UTF-8 bytes, whose order is code point order, so incrementing the
    last code point bounds the range. Surrogates cannot be encoded, so they are skipped.
    """
    chars = list(prefix)
    while chars:
        code = ord(chars.pop()) + 1
        if code > 0x10FFFF:
            continue
        if 0xD800 <= code <= 0xDFFF:
            code = 0xE000
        return "".join(chars) + chr(code)
    return None


def change_from_row(row: tuple[int, int, str, bytes, bytes | None, float]) -> Change:
    """A ``Change`` from a row selected as ``CHANGE_COLUMNS``."""
    revision, change_type, key, value, prev_value, ts = row
    return Change(revision=revision, type=ChangeType(change_type), key=key, value=bytes(value),
                  prev_value=None if prev_value is None else bytes(prev_value), timestamp=ts)
