"""The ``Store`` contract, run against every backend through the protocol only.

Backends are the params of the ``backend`` fixture: SQLite with its writer in a thread or in a
process of its own, or in a writer hub (``serve --workers``: each test's stores share one hub,
beside an observer store on it whose change feed every store's must match, in order, values
and all); the in-memory store, whose "location" is one ``MemoryData`` that a store
opened again finds; etcd, one real member and a real three-member cluster (one per module, each
test under a prefix of its own, so a store opened again on the prefix finds its data).
Revisions are counted from ``backend.base``, the revision the first store of a test opened at:
0 for the embedded stores, etcd's revision for etcd (its revisions are shared by every key).
Each test is named after the guarantee it checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import msgspec
import pytest

from kubewire.storage.base import (
    Change,
    ChangeType,
    CompactedError,
    Create,
    Delete,
    KeyExistsError,
    KeyNotFoundError,
    Op,
    Record,
    Retention,
    RevisionMismatchError,
    StorageError,
    Store,
    Update,
)
from kubewire.storage.etcd.client import EtcdConfig
from kubewire.storage.etcd.store import EtcdStore
from kubewire.storage.memory import MemoryData, MemoryStore
from kubewire.storage.sqlite.store import SQLiteStore
from kubewire.storage.sqlite.writer_hub import HubProcess
from tests.etcd_cluster import ETCD, Cluster, etcd_cluster

KEEP_ALL = Retention(max_changes=None, max_age_s=None)


class FakeClock:
    """Wall-clock seconds that move only when a test says so."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class Backend:
    """Opens stores of one backend on one data location, and closes them at teardown."""

    name: str
    path: Path
    opened: list[Store] = field(default_factory=list)
    memory: MemoryData = field(default_factory=MemoryData)  # the memory backend's "file"
    etcd: Cluster | None = None
    base: int | None = None  # the revision the first store opened at
    hub: HubProcess | None = None  # sqlite-hub: started by the first open, with its retention
    observer: Store | None = None  # sqlite-hub: a store on the hub that writes nothing
    feeds: list[Recorder] = field(default_factory=list)  # sqlite-hub: each store's changes
    observed: Recorder | None = None  # sqlite-hub: the observer's changes

    @property
    def keeps_timestamps(self) -> bool:
        """etcd keeps no commit times: a store opened again stamps history with its own."""
        return self.etcd is None

    async def open(self, retention: Retention = KEEP_ALL,
                   clock: Callable[[], float] = time.time) -> Store:
        store: Store
        if self.name == "sqlite":
            store = SQLiteStore(self.path / "store.db", durability="normal",
                                retention=retention, clock=clock)
        elif self.name == "sqlite-process":
            if clock is not time.time:
                pytest.skip("a writer process keeps its own clock")
            store = SQLiteStore(self.path / "store.db", durability="normal",
                                retention=retention, writer_process=True)
        elif self.name == "sqlite-hub":
            if clock is not time.time:
                pytest.skip("a writer hub keeps its own clock")
            store = SQLiteStore(self.path / "store.db", durability="normal",
                                hub=await self._hub_socket(retention))
        elif self.name == "memory":
            store = MemoryStore(retention=retention, clock=clock, data=self.memory)
        elif self.etcd is not None:
            store = EtcdStore(EtcdConfig(self.etcd.endpoints, timeout=10.0),
                              prefix=f"/{self.path.name}/registry", retention=retention,
                              clock=clock)
        else:
            raise AssertionError(f"unknown backend {self.name}")
        await store.open()
        self.opened.append(store)
        if self.hub is not None:
            self.feeds.append(Recorder())
            store.subscribe(self.feeds[-1])
        if self.base is None:
            self.base = store.current_revision
        return store


    async def _hub_socket(self, retention: Retention) -> str:
        if self.hub is None:
            hub = HubProcess(self.path / "store.db", "normal", retention, 0)
            await asyncio.to_thread(hub.start)
            self.hub = hub
            self.observer = SQLiteStore(self.path / "store.db", durability="normal",
                                        hub=hub.socket_path)
            await self.observer.open()
            self.observer.subscribe(observed := Recorder())
            self.observed = observed
        return self.hub.socket_path

    async def close(self) -> None:
        """Close every store; on a hub, check each store's feed against the observer's."""
        for store in self.opened:
            await store.close()
        if self.hub is None:
            return
        assert self.observer is not None
        await self.observer.close()
        await asyncio.to_thread(self.hub.stop)
        assert self.observed is not None
        everything = {c.revision: c for c in self.observed.changes}
        for feed in self.feeds:  # every batch after the store opened, in order, values and all
            if feed.changes:
                span = range(feed.revisions[0], feed.revisions[-1] + 1)
                assert feed.changes == [everything[r] for r in span]


@pytest.fixture(scope="module")
def etcd_clusters() -> Iterator[Callable[[str], Cluster]]:
    """The real etcd clusters of this module by backend name, each started on first use."""
    with contextlib.ExitStack() as stack:
        clusters: dict[str, Cluster] = {}

        def get(name: str) -> Cluster:
            if name not in clusters:
                if ETCD is None:
                    pytest.skip("no etcd binary: tools/ensure-etcd installs it")
                clusters[name] = stack.enter_context(etcd_cluster(3 if name == "etcd-3" else 1))
            return clusters[name]

        yield get


@pytest.fixture(params=["sqlite", "sqlite-process", "sqlite-hub", "memory", "etcd", "etcd-3"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path,
                  etcd_clusters: Callable[[str], Cluster]) -> AsyncIterator[Backend]:
    b = Backend(request.param, tmp_path)
    if request.param.startswith("etcd"):
        b.etcd = etcd_clusters(request.param)
    yield b
    await b.close()


@pytest.fixture
async def store(backend: Backend) -> Store:
    return await backend.open()


@pytest.fixture
def base(backend: Backend, store: Store) -> int:
    """Where this test's revisions start (see the module docstring)."""
    assert backend.base is not None
    return backend.base


def pod(name: str, ns: str = "default", **spec: object) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns}, "spec": dict(spec)}


def pod_key(name: str, ns: str = "default") -> str:
    return f"core/pods/{ns}/{name}"


def decode(value: bytes) -> dict[str, object]:
    obj = msgspec.json.decode(value)
    assert isinstance(obj, dict)
    return obj


def resource_version(value: bytes) -> str:
    metadata = decode(value)["metadata"]
    assert isinstance(metadata, dict)
    rv = metadata["resourceVersion"]
    assert isinstance(rv, str)
    return rv


class Recorder:
    """A listener that records every change and checks they arrive in revision order."""

    def __init__(self) -> None:
        self.changes: list[Change] = []

    def __call__(self, batch: Sequence[Change]) -> None:
        for change in batch:
            assert not self.changes or change.revision > self.changes[-1].revision
            self.changes.append(change)

    @property
    def revisions(self) -> list[int]:
        return [c.revision for c in self.changes]


# -- revisions and values ------------------------------------------------------------------


async def test_empty_store_is_at_its_base_revision(store: Store, backend: Backend) -> None:
    assert store.current_revision == (0 if backend.etcd is None else backend.base)
    assert await store.list("core/pods/") == ([], store.current_revision)
    assert await store.get(pod_key("a")) is None


async def test_revisions_strictly_increase_across_keys(store: Store, base: int) -> None:
    revisions = []
    for i in range(10):
        change = await store.write(Create(pod_key(f"p{i}", f"ns{i % 3}"), pod(f"p{i}")))
        revisions.append(change.revision)
        assert store.current_revision == change.revision
    assert revisions == sorted(set(revisions))
    assert revisions[0] >= base + 1


async def test_resource_version_embedded_equals_revision(store: Store) -> None:
    created = await store.write(Create(pod_key("a"), pod("a")))
    updated = await store.write(Update(pod_key("a"), pod("a", image="x")))
    for change in (created, updated):
        assert resource_version(change.value) == str(change.revision)
    record = await store.get(pod_key("a"))
    assert record == Record(pod_key("a"), updated.revision, updated.value)
    assert decode(updated.value)["spec"] == {"image": "x"}


async def test_resource_version_is_added_when_metadata_is_missing(store: Store) -> None:
    change = await store.write(Create("core/namespaces/n", {"kind": "Namespace"}))
    assert decode(change.value) == {"kind": "Namespace",
                                    "metadata": {"resourceVersion": str(change.revision)}}


async def test_create_update_delete_changes(store: Store) -> None:
    key = pod_key("a")
    created = await store.write(Create(key, pod("a")))
    assert (created.type, created.key, created.prev_value) == (ChangeType.ADDED, key, None)
    updated = await store.write(Update(key, pod("a", image="y"), created.revision))
    assert updated.type == ChangeType.MODIFIED
    assert updated.prev_value == created.value
    deleted = await store.write(Delete(key, updated.revision))
    assert deleted.type == ChangeType.DELETED
    assert deleted.prev_value == updated.value
    # DELETED carries the last state, stamped with the delete's revision.
    last = decode(updated.value)
    metadata = last["metadata"]
    assert isinstance(metadata, dict)
    metadata["resourceVersion"] = str(deleted.revision)
    assert decode(deleted.value) == last
    assert await store.get(key) is None


async def test_create_on_existing_key_raises_key_exists(store: Store) -> None:
    await store.write(Create(pod_key("a"), pod("a")))
    with pytest.raises(KeyExistsError) as info:
        await store.write(Create(pod_key("a"), pod("a", image="other")))
    assert info.value.key == pod_key("a")


@pytest.mark.parametrize("op", [Update(pod_key("missing"), pod("missing")),
                                Delete(pod_key("missing"))])
async def test_update_or_delete_of_missing_key_raises_key_not_found(store: Store, op: Op) -> None:
    with pytest.raises(KeyNotFoundError):
        await store.write(op)


async def test_revision_mismatch_reports_expected_and_actual(store: Store) -> None:
    created = await store.write(Create(pod_key("a"), pod("a")))
    await store.write(Update(pod_key("a"), pod("a", v=2)))
    for op in (Update(pod_key("a"), pod("a", v=3), created.revision),
               Delete(pod_key("a"), created.revision)):
        with pytest.raises(RevisionMismatchError) as info:
            await store.write(op)
        assert (info.value.expected, info.value.actual) == (created.revision,
                                                            created.revision + 1)


async def test_failed_precondition_changes_nothing_and_consumes_no_revision(
        store: Store, base: int) -> None:
    recorder = Recorder()
    store.subscribe(recorder)
    first = await store.write(Create(pod_key("a"), pod("a")))
    failing: list[Op] = [Create(pod_key("a"), pod("a", v=9)), Update(pod_key("b"), pod("b")),
                         Delete(pod_key("b")), Update(pod_key("a"), pod("a", v=9), 999),
                         Delete(pod_key("a"), 999)]
    for op in failing:
        with pytest.raises(StorageError):
            await store.write(op)
    assert store.current_revision == first.revision
    assert await store.get(pod_key("a")) == Record(pod_key("a"), first.revision, first.value)
    assert await store.changes_since(base) == [first]
    assert recorder.changes == [first]
    second = await store.write(Create(pod_key("b"), pod("b")))
    assert second.revision == first.revision + 1


# -- group commit and subscribers ---------------------------------------------------------


async def test_concurrent_writers_get_unique_consecutive_revisions_seen_before_return(
        store: Store, base: int) -> None:
    recorder = Recorder()
    store.subscribe(recorder)
    seen_at_return: dict[int, bool] = {}

    async def write(op: Op) -> Change | None:
        try:
            change = await store.write(op)
        except KeyExistsError:
            return None
        seen_at_return[change.revision] = change.revision in recorder.revisions
        return change

    ops: list[Op] = [Create(pod_key(f"p{i}", f"ns{i % 7}"), pod(f"p{i}")) for i in range(200)]
    # Duplicates fail inside the same batches without disturbing the others.
    ops += [Create(pod_key(f"p{i}", f"ns{i % 7}"), pod(f"p{i}")) for i in range(0, 200, 10)]
    results = await asyncio.gather(*(write(op) for op in ops))
    changes = [c for c in results if c is not None]
    assert len(changes) == 200
    assert sorted(c.revision for c in changes) == list(range(base + 1, base + 201))
    assert recorder.revisions == list(range(base + 1, base + 201))
    assert sorted(recorder.changes, key=lambda c: c.revision) == sorted(
        changes, key=lambda c: c.revision)
    assert all(seen_at_return.values()) and len(seen_at_return) == 200
    assert store.current_revision == base + 200


async def test_listener_that_raises_does_not_break_the_store(
        store: Store, caplog: pytest.LogCaptureFixture) -> None:
    def broken(batch: Sequence[Change]) -> None:
        raise RuntimeError("listener bug")

    recorder = Recorder()
    store.subscribe(broken)
    store.subscribe(recorder)
    with caplog.at_level(logging.ERROR):
        first = await store.write(Create(pod_key("a"), pod("a")))
        second = await store.write(Create(pod_key("b"), pod("b")))
    assert recorder.changes == [first, second]
    assert "listener bug" in caplog.text


# -- change log -----------------------------------------------------------------------------


async def test_changes_since_is_ordered_filtered_by_prefix_and_limited(store: Store,
                                                                      base: int) -> None:
    written = []
    for i in range(12):
        key = (pod_key(f"p{i}", "ns-a" if i % 2 else "ns-b") if i % 3
               else f"apps/deployments/ns-a/d{i}")
        written.append(await store.write(Create(key, pod(f"p{i}"))))
    assert await store.changes_since(base) == written
    assert await store.changes_since(base + 5) == written[5:]
    assert await store.changes_since(base, "core/pods/") == [
        c for c in written if c.key.startswith("core/pods/")]
    assert await store.changes_since(base + 3, "core/pods/ns-a/") == [
        c for c in written[3:] if c.key.startswith("core/pods/ns-a/")]
    assert await store.changes_since(base, "apps/") == [
        c for c in written if c.key.startswith("apps/")]
    assert await store.changes_since(base, "core/pods/", limit=3) == [
        c for c in written if c.key.startswith("core/pods/")][:3]
    assert await store.changes_since(base + 12) == []
    # "core/pods/ns-a/" must not match a namespace that merely starts the same way.
    await store.write(Create(pod_key("x", "ns-ab"), pod("x")))
    assert all(c.key.startswith("core/pods/ns-a/")
               for c in await store.changes_since(base, "core/pods/ns-a/"))


# -- list -----------------------------------------------------------------------------------


@dataclass
class Model:
    """What the store should hold: per revision, the records that existed then."""

    current: dict[str, Record] = field(default_factory=dict)
    history: dict[int, dict[str, Record]] = field(default_factory=dict)

    def apply(self, change: Change) -> None:
        if change.type == ChangeType.DELETED:
            del self.current[change.key]
        else:
            self.current[change.key] = Record(change.key, change.revision, change.value)
        self.history[change.revision] = dict(self.current)

    def at(self, revision: int, prefix: str) -> list[Record]:
        state = self.history.get(revision, {})
        return [state[k] for k in sorted(state) if k.startswith(prefix)]


async def run_random_workload(store: Store, rng: random.Random, n_ops: int) -> Model:
    """Random creates, updates and deletes over a few kinds and namespaces, mirrored in a model."""
    model = Model()
    keys = [f"{res}/{ns}/o{i}" for res in ("core/pods", "apps/deployments")
            for ns in ("a", "b", "c") for i in range(4)] + ["core/nodes/n1", "core/nodes/n2"]
    for step in range(n_ops):
        key = rng.choice(keys)
        existing = model.current.get(key)
        obj = {"kind": "X", "metadata": {"name": key}, "spec": {"step": step}}
        op: Op
        if existing is None:
            op = Create(key, obj)
        elif rng.random() < 0.3:
            op = Delete(key, existing.revision if rng.random() < 0.5 else None)
        else:
            op = Update(key, obj, existing.revision if rng.random() < 0.5 else None)
        model.apply(await store.write(op))
    return model


PREFIXES = ["", "core/", "core/pods/", "core/pods/b/", "apps/deployments/a/", "core/nodes/"]


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_historical_list_equals_state_recorded_at_that_revision(
        store: Store, base: int, seed: int) -> None:
    rng = random.Random(seed)
    model = await run_random_workload(store, rng, 150)
    current = store.current_revision
    for revision in [*rng.sample(range(base + 1, current), 12), base + 1, current - 1,
                     current]:
        for prefix in PREFIXES:
            records, at = await store.list(prefix, revision=revision)
            assert (records, at) == (model.at(revision, prefix), revision), (revision, prefix)
    assert await store.list("core/", revision=0) == (model.at(current, "core/"), current)


async def test_list_pages_with_start_and_limit_at_current_and_past_revisions(
        store: Store, base: int) -> None:
    model = await run_random_workload(store, random.Random(7), 120)
    for revision in (0, base + 60, base + 100):
        expected = model.at(revision or store.current_revision, "core/pods/")
        pages: list[Record] = []
        start = ""
        while True:
            page, _ = await store.list("core/pods/", revision=revision, start=start, limit=4)
            assert len(page) <= 4
            pages += page
            if len(page) < 4:
                break
            start = page[-1].key + "\x00"  # the smallest key after the last one
        assert pages == expected
        mid = expected[len(expected) // 2].key
        from_mid, _ = await store.list("core/pods/", revision=revision, start=mid)
        assert from_mid == [r for r in expected if r.key >= mid]


async def test_list_above_current_revision_raises(store: Store) -> None:
    await store.write(Create(pod_key("a"), pod("a")))
    with pytest.raises(ValueError):
        await store.list("core/pods/", revision=store.current_revision + 1)


# -- retention and compaction ---------------------------------------------------------------


async def test_retention_by_count_keeps_the_newest_changes(backend: Backend) -> None:
    store = await backend.open(retention=Retention(max_changes=5, max_age_s=None))
    b = backend.base or 0
    model = Model()
    for i in range(20):
        model.apply(await store.write(Create(pod_key(f"p{i}"), pod(f"p{i}"))))
    assert await store.compact() == b + 15
    assert store.compacted_revision == b + 15
    with pytest.raises(CompactedError) as info:
        await store.changes_since(b + 14)
    assert (info.value.requested, info.value.compacted) == (b + 14, b + 15)
    assert [c.revision - b for c in await store.changes_since(b + 15)] == [16, 17, 18, 19, 20]
    with pytest.raises(CompactedError):
        await store.list("core/pods/", revision=b + 14)
    for revision in (b + 15, b + 17, b + 20):
        assert await store.list("core/pods/", revision=revision) == (
            model.at(revision, "core/pods/"), revision)


async def test_retention_by_age_uses_the_store_clock(backend: Backend) -> None:
    clock = FakeClock()
    store = await backend.open(retention=Retention(max_changes=None, max_age_s=5.0), clock=clock)
    b = backend.base or 0
    start = clock.now
    for i in range(10):
        clock.now = start + i
        await store.write(Create(pod_key(f"p{i}"), pod(f"p{i}")))
    # At start+12, the changes written at start+0 .. start+6 are more than 5 s old.
    clock.now = start + 12
    assert await store.compact() == b + 7
    assert [c.revision - b for c in await store.changes_since(b + 7)] == [8, 9, 10]
    assert [c.timestamp for c in await store.changes_since(b + 7)] == [start + 7, start + 8,
                                                                       start + 9]


async def test_compaction_never_drops_the_newest_change(backend: Backend) -> None:
    clock = FakeClock()
    store = await backend.open(retention=Retention(max_changes=1, max_age_s=0.0), clock=clock)
    b = backend.base or 0
    for i in range(5):
        await store.write(Create(pod_key(f"p{i}"), pod(f"p{i}")))
    clock.now += 3600
    assert await store.compact() == b + 4
    assert [c.revision - b for c in await store.changes_since(b + 4)] == [5]
    assert (await store.list("core/pods/", revision=b + 4))[0] == (
        await store.list("core/pods/", revision=b + 5))[0][:4]


async def test_changes_are_compacted_automatically(backend: Backend) -> None:
    store = await backend.open(retention=Retention(max_changes=10, max_age_s=None))
    for batch in range(11):
        await asyncio.gather(*(store.write(Create(pod_key(f"p{batch}-{i}"), pod("p")))
                               for i in range(100)))
    await store.write(Create(pod_key("last"), pod("last")))
    assert store.compacted_revision > (backend.base or 0)
    with pytest.raises(CompactedError):
        await store.changes_since(backend.base or 0)


async def test_writes_after_compaction_continue_the_revision_sequence(backend: Backend) -> None:
    store = await backend.open(retention=Retention(max_changes=1, max_age_s=None))
    b = backend.base or 0
    for i in range(4):
        await store.write(Create(pod_key(f"p{i}"), pod(f"p{i}")))
    for i in range(4):
        await store.write(Delete(pod_key(f"p{i}")))
    assert await store.compact() == b + 7
    # etcd's compaction writes compact_rev_key, a revision of its own; the others' take none
    current = store.current_revision
    assert current == b + 8 + (backend.etcd is not None)
    await store.close()
    reopened = await backend.open(retention=Retention(max_changes=1, max_age_s=None))
    assert (reopened.current_revision, reopened.compacted_revision) == (current, b + 7)
    assert await reopened.list("core/pods/") == ([], current)
    change = await reopened.write(Create(pod_key("p0"), pod("p0")))
    assert change.revision == current + 1


# -- lifecycle ------------------------------------------------------------------------------


async def test_reopen_after_close_keeps_objects_history_and_revisions(backend: Backend) -> None:
    store = await backend.open(retention=Retention(max_changes=50, max_age_s=None))
    model = await run_random_workload(store, random.Random(11), 80)
    await store.compact()
    before = (store.current_revision, store.compacted_revision,
              await store.list(""), await store.changes_since(store.compacted_revision))
    await store.close()
    reopened = await backend.open(retention=Retention(max_changes=50, max_age_s=None))
    after = (reopened.current_revision, reopened.compacted_revision,
             await reopened.list(""), await reopened.changes_since(reopened.compacted_revision))
    if not backend.keeps_timestamps:
        before, after = _without_timestamps(before), _without_timestamps(after)
    assert after == before
    revision = reopened.compacted_revision + 3
    assert await reopened.list("core/", revision=revision) == (model.at(revision, "core/"),
                                                               revision)


def _without_timestamps(state: tuple[Any, ...]) -> tuple[Any, ...]:
    *head, changes = state
    return (*head, [replace(c, timestamp=0.0) for c in changes])


async def test_close_commits_every_queued_write(backend: Backend) -> None:
    store = await backend.open()
    b = backend.base or 0
    recorder = Recorder()
    store.subscribe(recorder)
    tasks = [asyncio.create_task(store.write(Create(pod_key(f"p{i}"), pod(f"p{i}"))))
             for i in range(50)]
    await asyncio.sleep(0)  # let every write reach the store's queue
    await store.close()
    changes = [task.result() for task in tasks]
    assert sorted(c.revision for c in changes) == list(range(b + 1, b + 51))
    assert recorder.revisions == list(range(b + 1, b + 51))
    reopened = await backend.open()
    records, revision = await reopened.list("core/pods/")
    assert (len(records), revision) == (50, b + 50)


async def test_write_after_close_raises_storage_error(store: Store) -> None:
    await store.write(Create(pod_key("a"), pod("a")))
    await store.close()
    with pytest.raises(StorageError):
        await store.write(Create(pod_key("b"), pod("b")))
    await store.close()  # idempotent
