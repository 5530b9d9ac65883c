"""What the in-memory store promises beyond the ``Store`` contract (which
``test_store_contract.py`` checks for it too): the SQLite store's extras, without a writer."""

from __future__ import annotations

import pytest

from kubewire.storage.base import Create, StorageError, Update, ValueTooLargeError
from kubewire.storage.memory import MemoryData, MemoryStore


async def test_value_over_the_limit_is_refused_and_changes_nothing() -> None:
    store = MemoryStore()
    store.max_value_bytes = 200
    await store.open()
    await store.write(Create("core/configmaps/a/x", {"metadata": {"name": "x"}}))
    big = {"metadata": {"name": "x"}, "data": {"k": "v" * 300}}
    for op in (Create("core/configmaps/a/y", big), Update("core/configmaps/a/x", big)):
        with pytest.raises(ValueTooLargeError) as info:
            await store.write(op)
        assert info.value.limit == 200 and info.value.size > 200
    assert store.current_revision == 1
    assert [r.key for r in (await store.list(""))[0]] == ["core/configmaps/a/x"]


async def test_ping_answers_while_open_and_observers_see_each_call() -> None:
    store = MemoryStore()
    requests: list[tuple[str, str]] = []
    commits: list[float] = []
    store.on_request = lambda op, key, seconds: requests.append((op, key))
    store.on_commit = commits.append
    assert not await store.ping(1.0)
    await store.open()
    assert await store.ping(1.0)
    await store.write(Create("core/pods/a/p", {"metadata": {"name": "p"}}))
    await store.get("core/pods/a/p")
    await store.list("core/pods/")
    assert requests == [("create", "core/pods/a/p"), ("get", "core/pods/a/p"),
                        ("list", "core/pods/")]
    assert len(commits) == 1 and commits[0] >= 0
    await store.close()
    assert not await store.ping(1.0)
    with pytest.raises(StorageError):
        await store.get("core/pods/a/p")


async def test_callers_object_is_not_modified_and_data_outlives_the_store() -> None:
    data = MemoryData()
    store = MemoryStore(data=data)
    await store.open()
    obj = {"metadata": {"name": "p", "resourceVersion": "7"}, "spec": {}}
    change = await store.write(Create("core/pods/a/p", obj))
    assert obj == {"metadata": {"name": "p", "resourceVersion": "7"}, "spec": {}}
    assert change.obj is not None and change.obj["metadata"]["resourceVersion"] == "1"
    await store.close()
    with pytest.raises(StorageError):
        await store.open()  # a closed store stays closed; a new one opens its data
    again = MemoryStore(data=data)
    await again.open()
    assert (await again.get("core/pods/a/p")) == (await again.list(""))[0][0]
    assert again.current_revision == 1
