"""SQLite store: what a failing create reports, and that it leaves its batch alone. An existing
key is KeyExistsError even when the value is also too large, a new key with a too-large value is
ValueTooLargeError, and neither consumes a revision or disturbs the other writes of its batch."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kubewire.storage.base import Create, KeyExistsError, Op, Update, ValueTooLargeError
from kubewire.storage.sqlite.store import SQLiteStore

LIMIT = 400


def pod(name: str, pad: int = 0) -> dict[str, object]:
    return {"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": "default",
                         "annotations": {"pad": "x" * pad}}}


def key(name: str) -> str:
    return f"core/pods/default/{name}"


@pytest.fixture(params=[False, True], ids=["thread", "process"])
async def store(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[SQLiteStore]:
    store = SQLiteStore(tmp_path / "db", durability="normal", writer_process=request.param)
    store.max_value_bytes = LIMIT
    await store.open()
    try:
        yield store
    finally:
        await store.close()


async def test_an_existing_key_wins_over_a_too_large_value(store: SQLiteStore) -> None:
    first = await store.write(Create(key("a"), pod("a")))
    with pytest.raises(KeyExistsError):
        await store.write(Create(key("a"), pod("a", pad=LIMIT)))
    with pytest.raises(ValueTooLargeError):
        await store.write(Create(key("b"), pod("b", pad=LIMIT)))
    with pytest.raises(KeyExistsError):
        await store.write(Create(key("a"), pod("a")))
    assert store.current_revision == first.revision
    assert await store.changes_since(0) == [first]


async def test_failed_creates_in_a_batch_leave_the_others_and_dense_revisions(
        store: SQLiteStore) -> None:
    await store.write(Create(key("taken"), pod("taken")))
    ops: list[Op] = [Create(key("taken"), pod("taken")), Create(key("n1"), pod("n1")),
                     Create(key("big"), pod("big", pad=LIMIT)), Create(key("n1"), pod("n1")),
                     Create(key("n2"), pod("n2")), Update(key("n2"), pod("n2"))]
    results = await asyncio.gather(*(store.write(op) for op in ops), return_exceptions=True)
    kinds = [type(r).__name__ for r in results]
    assert kinds == ["KeyExistsError", "Change", "ValueTooLargeError", "KeyExistsError",
                     "Change", "Change"]
    revisions = [c.revision for c in await store.changes_since(0)]
    assert revisions == [1, 2, 3, 4]
    record = await store.get(key("n1"))
    assert record is not None and record.revision == 2
