"""The SQLite writer hub (``serve --workers`` on SQLite): stores in several places, one writer.

The hub runs as the real process (``HubProcess``) where the test is about the process, and in
this process (its ``Hub`` and ``Writer`` threads) where a bound must be made small to be
reached: a connection that stops reading is dropped, and the others carry on.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kubewire.storage.base import Change, Create, Retention, StorageError
from kubewire.storage.sqlite import writer_hub
from kubewire.storage.sqlite.revision_record import (
    RevisionLostError,
    RevisionRecord,
    encode_revision,
    record_path,
)
from kubewire.storage.sqlite.schema import open_for_writing
from kubewire.storage.sqlite.store import SQLiteStore
from kubewire.storage.sqlite.writer import StopRequest, Writer
from kubewire.storage.sqlite.writer_hub import Hub, HubProcess


def _cm(name: str, size: int = 10) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns"}, "data": {"k": "x" * size}}


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[HubProcess]:
    process = HubProcess(tmp_path / "store.db", "normal", Retention(), 0)
    process.start()
    yield process
    process.stop()


async def _open(path: Path, hub: str) -> SQLiteStore:
    store = SQLiteStore(path, durability="normal", hub=hub)
    await store.open()
    return store


async def test_a_write_through_one_store_reaches_the_other_without_the_hint(
        hub: HubProcess, tmp_path: Path) -> None:
    one = await _open(tmp_path / "store.db", hub.socket_path)
    other = await _open(tmp_path / "store.db", hub.socket_path)
    seen: list[Change] = []
    other.subscribe(seen.extend)
    try:
        written = await one.write(Create("core/configmaps/ns/a", _cm("a")))
        assert written.obj is not None  # the writer's own change keeps its object
        # the other store's consistent revision covers it, and its feed has it by then
        assert await other.consistent_revision() == written.revision
        assert seen == [written] and seen[0].obj is None
        assert await other.get("core/configmaps/ns/a") is not None
        # and the other way round, continuing the same revisions
        back = await other.write(Create("core/configmaps/ns/b", _cm("b")))
        assert back.revision == written.revision + 1
        assert await one.consistent_revision() == back.revision
    finally:
        await one.close()
        await other.close()


async def test_a_store_whose_hub_dies_says_so_and_refuses_writes(hub: HubProcess,
                                                                 tmp_path: Path) -> None:
    store = await _open(tmp_path / "store.db", hub.socket_path)
    lost = asyncio.Event()
    store.on_writer_lost = lost.set
    try:
        await store.write(Create("core/configmaps/ns/a", _cm("a")))
        assert hub.process is not None
        os.kill(hub.process.pid, signal.SIGKILL)
        await asyncio.wait_for(lost.wait(), 10)
        assert not store.is_writable
        with pytest.raises(StorageError):
            await store.write(Create("core/configmaps/ns/b", _cm("b")))
    finally:
        await store.close()


async def test_closing_a_store_does_not_call_it_lost(hub: HubProcess, tmp_path: Path) -> None:
    store = await _open(tmp_path / "store.db", hub.socket_path)
    called: list[bool] = []
    store.on_writer_lost = lambda: called.append(True)
    await store.write(Create("core/configmaps/ns/a", _cm("a")))
    await store.close()
    assert called == []


def test_the_hub_refuses_a_database_that_lost_revisions(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    Path(record_path(path)).write_bytes(encode_revision(7))  # committed, but not in the file
    with pytest.raises(RevisionLostError) as info:
        HubProcess(path, "normal", Retention(), 0).start()
    assert (info.value.revision, info.value.recorded) == (0, 7)
    assert not any(p.name.endswith(".sock") for p in tmp_path.iterdir())


def test_a_long_data_dir_gets_a_private_socket_directory(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 120)
    deep.mkdir()
    path, private = writer_hub.socket_path_for(deep)
    assert private is not None and path.startswith(private)
    assert os.stat(private).st_mode & 0o777 == 0o700
    os.rmdir(private)


class _InProcessHub:
    """The hub's threads in this process, listening on ``socket_path``."""

    def __init__(self, path: Path) -> None:
        self.record = RevisionRecord(path)
        conn, revision, compacted = open_for_writing(path, "normal", self.record)
        self.hub = Hub(revision)
        self.writer = Writer(conn, self.hub, Retention(), time.time,  # type: ignore[arg-type]
                             self.hub.deliver)
        self.writer.compacted_revision = compacted
        self.writer.record = self.record
        self.hub.writer = self.writer
        self.writer.start()
        self.socket_path = str(path.parent / "hub.sock")
        self.listener = writer_hub._listen(self.socket_path)
        self.accepting = threading.Thread(target=self.hub.accept_loop, args=(self.listener,),
                                          daemon=True)
        self.accepting.start()

    def close(self) -> None:
        self.hub.stopping = True
        self.accepting.join()
        self.listener.close()
        self.writer.submit(StopRequest())
        self.writer.join()
        self.hub.close_all(5.0)
        self.record.close()


def _silent_client(socket_path: str) -> socket.socket:
    """A connection that says nothing and reads nothing."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(socket_path)
    return sock


async def _wait_until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("bound", ["backlog", "timeout"])
async def test_a_connection_that_stops_reading_is_dropped_and_the_others_carry_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bound: str) -> None:
    if bound == "backlog":
        monkeypatch.setattr(writer_hub, "MAX_BACKLOG_BYTES", 256 << 10)
    else:
        monkeypatch.setattr(writer_hub, "SEND_TIMEOUT_S", 0.5)
    hub = _InProcessHub(tmp_path / "store.db")
    store = await _open(tmp_path / "store.db", hub.socket_path)
    silent = _silent_client(hub.socket_path)
    try:
        await _wait_until(lambda: len(hub.hub.clients) == 2)
        for i in range(20):  # ~2 MB of batches, more than a socket buffers
            await asyncio.gather(*(store.write(Create(f"core/configmaps/ns/c{i}-{j}",
                                                      _cm("c", 10_000))) for j in range(10)))
        await _wait_until(lambda: len(hub.hub.clients) == 1)
        assert store.is_writable
        change = await store.write(Create("core/configmaps/ns/last", _cm("last")))
        assert await store.consistent_revision() == change.revision == 201
    finally:
        silent.close()
        await store.close()
        await asyncio.to_thread(hub.close)


async def test_a_consistent_revision_does_not_wait_for_the_commit_in_flight(
        tmp_path: Path) -> None:
    hub = _InProcessHub(tmp_path / "store.db")
    one = await _open(tmp_path / "store.db", hub.socket_path)
    other = await _open(tmp_path / "store.db", hub.socket_path)
    blocker = sqlite3.connect(tmp_path / "store.db", isolation_level=None)
    try:
        done = await one.write(Create("core/configmaps/ns/a", _cm("a")))
        blocker.execute("BEGIN IMMEDIATE")  # the writer's next commit waits for this lock
        stuck = asyncio.ensure_future(one.write(Create("core/configmaps/ns/b", _cm("b"))))
        await asyncio.sleep(0.2)
        assert not stuck.done()
        # answered behind every delivered batch, not behind the writer: at once
        assert await asyncio.wait_for(other.consistent_revision(), 1.0) == done.revision
        assert not await other.ping(0.3)  # a ping waits for the writer
        blocker.execute("ROLLBACK")
        assert (await stuck).revision == done.revision + 1
        assert await other.consistent_revision() == done.revision + 1
    finally:
        blocker.close()
        await one.close()
        await other.close()
        await asyncio.to_thread(hub.close)
