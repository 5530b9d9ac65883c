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


async def test_size_counts_the_objects_and_the_history_they_keep() -> None:
    from kubewire.storage.base import Delete, Retention

    store = MemoryStore(retention=Retention(max_changes=None, max_age_s=None))
    await store.open()
    assert store.size_bytes == 0
    created = await store.write(Create("core/configmaps/a/x", {"data": {"k": "v" * 100}}))
    assert store.size_bytes == 2 * len(created.value)  # the object and its ADDED change
    updated = await store.write(Update("core/configmaps/a/x", {"data": {"k": "w" * 300}}))
    history = len(created.value) + len(updated.value) + len(created.value)
    assert store.size_bytes == len(updated.value) + history
    deleted = await store.write(Delete("core/configmaps/a/x"))
    history += len(deleted.value) + len(updated.value)
    assert store.size_bytes == history  # nothing current, the history stays
    store._retention = Retention(max_changes=1, max_age_s=None)
    await store.compact()
    assert store.size_bytes == len(deleted.value) + len(updated.value)  # only the newest change
