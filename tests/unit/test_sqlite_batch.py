"""One group commit holding several writes to the same keys: each write sees the ones before it
in the batch, failed writes change nothing, and the rows left are each key's last state (the
writer applies a batch in memory and writes its rows with one statement per table)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec
import pytest

from kubewire.storage.base import (
    ChangeType,
    Create,
    Delete,
    KeyExistsError,
    KeyNotFoundError,
    Retention,
    RevisionMismatchError,
    Update,
)
from kubewire.storage.sqlite.store import SQLiteStore


def obj(name: str, v: int) -> dict[str, Any]:
    return {"kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": "ns"}, "data": {"v": str(v)}}


async def test_a_batch_of_writes_to_the_same_keys(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "db.sqlite", durability="normal",
                        retention=Retention(max_changes=None, max_age_s=None))
    await store.open()
    a, b, c = "core/configmaps/ns/a", "core/configmaps/ns/b", "core/configmaps/ns/c"
    await store.write(Create(c, obj("c", 0)))  # revision 1, before the batch
    ops = [Create(a, obj("a", 1)), Update(a, obj("a", 2), 2), Create(a, obj("a", 3)),
           Update(b, obj("b", 1)), Delete(a), Create(a, obj("a", 4)), Update(a, obj("a", 5), 3),
           Create(b, obj("b", 2)), Update(c, obj("c", 1), 1), Delete(c), Delete(c),
           Update(a, obj("a", 6), 5)]
    # queued in one loop turn: they reach the writer together (one or a few groups, in order)
    results = await asyncio.gather(*(store.write(op) for op in ops), return_exceptions=True)
    kinds = [type(r).__name__ if isinstance(r, Exception) else r.type.name for r in results]
    assert kinds == ["ADDED", "MODIFIED", "KeyExistsError", "KeyNotFoundError", "DELETED",
                     "ADDED", "RevisionMismatchError", "ADDED", "MODIFIED", "DELETED",
                     "KeyNotFoundError", "MODIFIED"]
    assert isinstance(results[2], KeyExistsError)
    assert isinstance(results[3], KeyNotFoundError)
    assert isinstance(results[6], RevisionMismatchError)
    revisions = [r.revision for r in results if not isinstance(r, Exception)]
    assert revisions == list(range(2, 10))
    logged = await store.changes_since(1)
    assert logged == [r for r in results if not isinstance(r, Exception)]
    assert [c.type for c in logged if c.key == a] == [
        ChangeType.ADDED, ChangeType.MODIFIED, ChangeType.DELETED, ChangeType.ADDED,
        ChangeType.MODIFIED]
    by_rev = {c.revision: c for c in logged}
    assert by_rev[3].prev_value == by_rev[2].value and by_rev[4].prev_value == by_rev[3].value
    assert by_rev[5].prev_value is None  # the re-create
    records, _ = await store.list("core/configmaps/")
    assert [(r.key, r.revision) for r in records] == [(a, 9), (b, 6)]
    assert msgspec.json.decode(records[0].value)["data"] == {"v": "6"}
    await store.close()
    reopened = SQLiteStore(tmp_path / "db.sqlite", durability="normal")
    await reopened.open()
    assert reopened.current_revision == 9
    assert [(r.key, r.revision) for r in (await reopened.list("core/configmaps/"))[0]] == [
        (a, 9), (b, 6)]
    # the log's prev_revision column: a historical list at revision 5 sees a at 5's state
    old, _ = await reopened.list("core/configmaps/", revision=5)
    assert [(r.key, r.revision) for r in old] == [(a, 5), (c, 1)]
    await reopened.close()


@pytest.mark.parametrize("keys", [1, 700, 1100])
async def test_batches_wider_than_one_lookup(tmp_path: Path, keys: int) -> None:
    store = SQLiteStore(tmp_path / "db.sqlite", durability="normal")
    await store.open()
    names = [f"core/configmaps/ns/k{i:05d}" for i in range(keys)]
    await asyncio.gather(*(store.write(Create(k, obj(k[-6:], 0))) for k in names[::2]))
    results = await asyncio.gather(*(store.write(Create(k, obj(k[-6:], 1))) for k in names),
                                   return_exceptions=True)
    assert [isinstance(r, KeyExistsError) for r in results] == [i % 2 == 0
                                                              for i in range(keys)]
    records, _ = await store.list("core/configmaps/")
    assert len(records) == keys
    await store.close()


async def test_writes_in_flight_are_those_whose_batch_is_not_published(tmp_path: Path) -> None:
    # The watch cache's flush waits for them (storage/cache.py): at each published batch the
    # store counts exactly the writes handed to its writer that no batch has answered yet.
    store = SQLiteStore(tmp_path / "db.sqlite", durability="normal",
                        retention=Retention(max_changes=None, max_age_s=None))
    await store.open()
    seen: list[tuple[int, int]] = []  # (changes published so far, writes still in flight)
    published = 0

    def listener(changes: Any) -> None:
        nonlocal published
        published += len(changes)
        seen.append((published, store.writes_in_flight))

    store.subscribe(listener)
    assert store.writes_in_flight == 0
    n = 40
    await asyncio.gather(*(store.write(Create(f"core/configmaps/ns/c{i}", obj(f"c{i}", i)))
                           for i in range(n)))
    assert [done + left for done, left in seen] == [n] * len(seen)
    assert seen[-1] == (n, 0) and store.writes_in_flight == 0
    with pytest.raises(KeyExistsError):  # a failed write is answered too
        await store.write(Create("core/configmaps/ns/c0", obj("c0", 0)))
    assert store.writes_in_flight == 0
    await store.close()
