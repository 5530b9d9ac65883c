"""Read queries of the SQLite store: get, list (current or historical) and changes since.

Each function runs on a reader thread with that thread's connection and reads inside one
transaction, so the revision it reports and the rows it returns come from the same WAL snapshot.

Historical list (``revision`` R with ``compacted_revision <= R < current``): for each key under
the prefix, its value at R is the newest change with revision <= R (absent if that change is a
DELETE); if the key has none, its oldest change > R decides: ADDED means it did not exist at R,
MODIFIED or DELETED carry the value at R as ``prev_value``; a key with no retained change at all
has not been written since the horizon, so its current row is its value at R.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from kubewire.storage.base import Change, ChangeType, CompactedError, Record
from kubewire.storage.sqlite.schema import (
    CHANGE_COLUMNS,
    change_from_row,
    prefix_end,
    prefix_resource,
    read_meta_int,
)

# Keys examined per query when reconstructing a historical list: bounds the rows held at once.
HISTORY_KEY_CHUNK = 512

_HistoryRow = tuple[str, int | None, int | None, bytes | None, int | None, bytes | None,
                    int | None, int | None, bytes | None]


@contextmanager
def read_transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One consistent snapshot for every statement inside."""
    conn.execute("BEGIN")
    try:
        yield
    finally:
        conn.execute("COMMIT")


def read_record(conn: sqlite3.Connection, key: str) -> Record | None:
    """The current record of ``key`` (one statement: a snapshot by itself)."""
    row = conn.execute("SELECT revision, value FROM objects WHERE key = ?", (key,)).fetchone()
    return None if row is None else Record(key=key, revision=row[0], value=bytes(row[1]))


def _key_range(column: str, prefix: str) -> tuple[str, list[str]]:
    """SQL condition and parameters restricting ``column`` to keys starting with ``prefix``."""
    end = prefix_end(prefix)
    if end is None:
        return f"{column} >= ?", [prefix]
    return f"{column} >= ? AND {column} < ?", [prefix, end]


def read_list(conn: sqlite3.Connection, prefix: str, revision: int, start: str,
              limit: int) -> tuple[list[Record], int]:
    """Records under ``prefix`` at ``revision`` (0 = current); see the module docstring.

    Raises ``CompactedError`` below the compaction horizon and ``ValueError`` for a revision
    newer than the store's current revision.
    """
    with read_transaction(conn):
        current = read_meta_int(conn, "revision")
        if revision in (0, current):
            return _list_current(conn, prefix, start, limit), current
        if revision > current:
            raise ValueError(f"revision {revision} is newer than the current revision {current}")
        compacted = read_meta_int(conn, "compacted_revision")
        if revision < compacted:
            raise CompactedError(revision, compacted)
        return _list_historical(conn, prefix, revision, start, limit), revision


def _list_current(conn: sqlite3.Connection, prefix: str, start: str,
                  limit: int) -> list[Record]:
    condition, params = _key_range("key", prefix)
    rows = conn.execute(
        f"SELECT key, revision, value FROM objects WHERE {condition} AND key >= ?"
        " ORDER BY key LIMIT ?", (*params, start, limit if limit > 0 else -1))
    return [Record(key=key, revision=rev, value=bytes(value)) for key, rev, value in rows]


def _list_historical(conn: sqlite3.Connection, prefix: str, revision: int, start: str,
                     limit: int) -> list[Record]:
    records: list[Record] = []
    after = ""  # keys are never empty, so "> ''" excludes nothing at first
    while True:
        rows = _history_chunk(conn, prefix, revision, start, after)
        for row in rows:
            record = _record_at(row)
            if record is not None:
                records.append(record)
                if len(records) == limit:
                    return records
        if len(rows) < HISTORY_KEY_CHUNK:
            return records
        after = rows[-1][0]


def _history_chunk(conn: sqlite3.Connection, prefix: str, revision: int, start: str,
                   after: str) -> list[_HistoryRow]:
    """The next ``HISTORY_KEY_CHUNK`` keys after ``after`` with what decides their value."""
    key_range, range_params = _key_range("key", prefix)
    sql = f"""
        WITH keys(key) AS (
            SELECT key FROM (SELECT key FROM objects WHERE {key_range} AND key >= ? AND key > ?
                             ORDER BY key LIMIT ?)
            UNION
            SELECT key FROM (SELECT DISTINCT key FROM changes
                             WHERE {key_range} AND key >= ? AND key > ? ORDER BY key LIMIT ?)
            ORDER BY key LIMIT ?
        ), bounds AS (
            SELECT key,
                (SELECT revision FROM changes c WHERE c.key = keys.key AND c.revision <= ?
                 ORDER BY c.revision DESC LIMIT 1) AS le,
                (SELECT revision FROM changes c WHERE c.key = keys.key AND c.revision > ?
                 ORDER BY c.revision LIMIT 1) AS gt
            FROM keys
        )
        SELECT b.key, le.type, le.revision, le.value, gt.type, gt.prev_value, gt.prev_revision,
               o.revision, CASE WHEN b.le IS NULL AND b.gt IS NULL THEN o.value END
        FROM bounds b
        LEFT JOIN changes le ON le.revision = b.le
        LEFT JOIN changes gt ON gt.revision = b.gt
        LEFT JOIN objects o ON o.key = b.key
        ORDER BY b.key"""
    n = HISTORY_KEY_CHUNK
    params = (*range_params, start, after, n, *range_params, start, after, n, n, revision, revision)
    return list(conn.execute(sql, params))


def _record_at(row: _HistoryRow) -> Record | None:
    """Apply the reconstruction rule of the module docstring to one key's row."""
    key, le_type, le_rev, le_value, gt_type, gt_prev, gt_prev_rev, obj_rev, obj_value = row
    if le_type is not None:
        if le_type == ChangeType.DELETED or le_rev is None or le_value is None:
            return None
        return Record(key=key, revision=le_rev, value=bytes(le_value))
    if gt_type is not None:
        if gt_type == ChangeType.ADDED or gt_prev is None or gt_prev_rev is None:
            return None
        return Record(key=key, revision=gt_prev_rev, value=bytes(gt_prev))
    if obj_rev is None or obj_value is None:
        return None
    return Record(key=key, revision=obj_rev, value=bytes(obj_value))


def read_changes(conn: sqlite3.Connection, revision: int, prefix: str,
                 limit: int) -> list[Change]:
    """Retained changes after ``revision`` under ``prefix``, ascending.

    A prefix naming a resource (``core/pods/`` or ``core/pods/ns/``) uses the
    ``(resource, revision)`` index; shorter prefixes scan the log by revision.
    Raises ``CompactedError`` if ``revision < compacted_revision``.
    """
    with read_transaction(conn):
        compacted = read_meta_int(conn, "compacted_revision")
        if revision < compacted:
            raise CompactedError(revision, compacted)
        # "+key" keeps the planner off the key index: the scan must run in revision order.
        condition, params = _key_range("+key", prefix)
        resource = prefix_resource(prefix)
        if resource is not None:
            condition = f"resource = ? AND {condition}"
            params = [resource, *params]
        rows = conn.execute(
            f"SELECT {CHANGE_COLUMNS} FROM changes WHERE {condition} AND revision > ?"
            " ORDER BY revision LIMIT ?", (*params, revision, limit if limit > 0 else -1))
        return [change_from_row(row) for row in rows]
