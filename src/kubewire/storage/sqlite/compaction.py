"""Compaction of the SQLite change log: drop a prefix of it, one bounded chunk at a time.

Changes are dropped in revision order only, so ``compacted_revision`` (the highest dropped
revision) splits the log cleanly: every change above it is retained. A change is outside the
retention policy when it is not among the newest ``max_changes`` or is older than ``max_age_s``;
the newest change is never dropped. Age is judged in revision order and stops at the first
young change, so a wall clock that steps backwards makes compaction keep more, never less.
"""

from __future__ import annotations

import sqlite3

from kubewire.storage.base import Retention
from kubewire.storage.sqlite.schema import read_meta_int, write_meta

# Changes dropped per transaction: small enough that a writer batch waits only milliseconds.
COMPACT_CHUNK_CHANGES = 10_000


def plan_chunk(conn: sqlite3.Connection, retention: Retention, now: float) -> tuple[int, int]:
    """The horizon of the next chunk and the chunk's upper limit: ``(horizon, upper)``.

    Everything in ``(compacted_revision, horizon]`` may be dropped now; compaction is finished
    when ``horizon < upper`` (the policy stopped it inside the chunk) or nothing is left.
    """
    compacted = read_meta_int(conn, "compacted_revision")
    current = read_meta_int(conn, "revision")
    upper = min(compacted + COMPACT_CHUNK_CHANGES, current - 1)
    if upper <= compacted:
        return compacted, compacted
    horizon = compacted
    if retention.max_changes is not None:
        # Revisions are dense: the newest max_changes are (current - max_changes, current].
        horizon = max(horizon, min(upper, current - retention.max_changes))
    if retention.max_age_s is not None:
        row = conn.execute(
            "SELECT revision FROM changes WHERE revision > ? AND revision <= ? AND ts >= ?"
            " ORDER BY revision LIMIT 1", (compacted, upper, now - retention.max_age_s),
        ).fetchone()
        horizon = max(horizon, upper if row is None else row[0] - 1)
    return horizon, upper


def compact_chunk(conn: sqlite3.Connection, retention: Retention, now: float) -> tuple[int, bool]:
    """Drop one chunk of changes outside ``retention`` in one transaction.

    Returns the new ``compacted_revision`` and whether compaction is complete.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        compacted = read_meta_int(conn, "compacted_revision")
        horizon, upper = plan_chunk(conn, retention, now)
        if horizon > compacted:
            conn.execute("DELETE FROM changes WHERE revision > ? AND revision <= ?",
                         (compacted, horizon))
            write_meta(conn, "compacted_revision", horizon)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return horizon, horizon < upper or horizon == compacted
