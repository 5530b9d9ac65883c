"""The SQLite writer in its own process: same bytes as the thread, and no hang when it dies."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import msgspec
import pytest

from kubewire.go_json_bytes import go_escaped
from kubewire.storage.base import (
    Create,
    Delete,
    KeyExistsError,
    Retention,
    RevisionMismatchError,
    StorageError,
    Update,
    ValueTooLargeError,
)
from kubewire.storage.sqlite.store import MAX_PENDING_WRITES, SQLiteStore
from kubewire.storage.sqlite.writer import copy_for_write, encode_at
from kubewire.storage.sqlite.writer_child import (
    RESOURCE_VERSION_MARK,
    FrameReader,
    encode_value,
    frame,
)
from kubewire.storage.sqlite.writer_process import ProcessWriter


def _pod(name: str, **labels: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}


async def _script(store: SQLiteStore) -> list[tuple[object, ...]]:
    """Writes whose answers, values and hints both writers must agree on."""
    seen: list[tuple[object, ...]] = []
    created = await store.write(Create("core/pods/ns/a", _pod("a", app="x")))
    updated = await store.write(Update("core/pods/ns/a", _pod("a", app="y"), created.revision))
    for change in (created, updated):
        assert change.obj == msgspec.json.decode(change.value)  # the hint is the value
        seen.append((change.revision, change.type, change.key, change.value, change.prev_value))
    for op in (Create("core/pods/ns/a", _pod("a")),
               Update("core/pods/ns/a", _pod("a"), created.revision)):
        with pytest.raises((KeyExistsError, RevisionMismatchError)) as info:
            await store.write(op)
        seen.append((type(info.value), str(info.value), vars(info.value)))
    deleted = await store.write(Delete("core/pods/ns/a"))
    seen.append((deleted.revision, deleted.type, deleted.value, deleted.prev_value))
    return seen


async def test_the_process_writes_what_the_thread_writes(tmp_path: Path) -> None:
    answers = []
    for name, in_process in (("thread", False), ("process", True)):
        store = SQLiteStore(tmp_path / f"{name}.db", durability="full", writer_process=in_process)
        await store.open()
        try:
            answers.append(await _script(store))
        finally:
            await store.close()
    assert answers[0] == answers[1]


async def test_size_limit_and_group_commit_in_the_process(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "db", durability="normal", writer_process=True)
    store.max_value_bytes = 2_000
    await store.open()
    try:
        with pytest.raises(ValueTooLargeError) as info:
            await store.write(Create("core/pods/ns/big", _pod("big", blob="x" * 3_000)))
        assert info.value.limit == 2_000
        results = await asyncio.gather(
            *(store.write(Create(f"core/pods/ns/p{i}", _pod(f"p{i}"))) for i in range(200)))
        assert sorted(c.revision for c in results) == list(range(1, 201))  # dense, none lost
    finally:
        await store.close()
    reopened = SQLiteStore(tmp_path / "db", durability="normal", writer_process=True)
    await reopened.open()
    try:
        assert reopened.current_revision == 200
        records, _ = await reopened.list("core/pods/ns/")
        assert len(records) == 200
    finally:
        await reopened.close()


async def test_sigterm_does_not_stop_the_writer_process(tmp_path: Path) -> None:
    """pkill or a service manager signals every kubewire process; only EOF stops the writer."""
    store = SQLiteStore(tmp_path / "db", durability="normal", writer_process=True)
    await store.open()
    try:
        writer = store._writer
        assert isinstance(writer, ProcessWriter) and writer._process is not None
        os.kill(writer._process.pid, signal.SIGTERM)
        os.kill(writer._process.pid, signal.SIGINT)
        await asyncio.sleep(0.2)
        change = await asyncio.wait_for(store.write(Create("core/pods/ns/a", _pod("a"))), 10)
        assert change.revision == 1
    finally:
        await store.close()
    assert writer._process.wait(10) == 0


async def test_a_dead_writer_process_fails_writes_instead_of_hanging(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "db", durability="normal", writer_process=True)
    await store.open()
    try:
        await store.write(Create("core/pods/ns/a", _pod("a")))
        writer = store._writer
        assert isinstance(writer, ProcessWriter) and writer._process is not None
        os.kill(writer._process.pid, signal.SIGKILL)
        await asyncio.wait_for(asyncio.shield(writer.stopped), 10)
        with pytest.raises(StorageError):
            await asyncio.wait_for(store.write(Create("core/pods/ns/b", _pod("b"))), 10)
    finally:
        await store.close()


def test_the_writer_process_commits_and_exits_when_its_server_is_killed(tmp_path: Path) -> None:
    """SIGKILL the server: the child sees its input end, commits what it read, and exits."""
    server = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import asyncio, os, sys
        from kubewire.storage.base import Create
        from kubewire.storage.sqlite.store import MAX_PENDING_WRITES, SQLiteStore
        async def main():
            store = SQLiteStore({str(tmp_path / "db")!r}, writer_process=True)
            await store.open()
            await store.write(Create("core/pods/ns/a", {{"metadata": {{"name": "a"}}}}))
            print(store._writer._process.pid, flush=True)
            await asyncio.sleep(60)
        asyncio.run(main())
        """)], stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    with server.stdout:
        child = int(server.stdout.readline())
    server.kill()
    server.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if not _is_running(child):
            break
        time.sleep(0.02)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the writer process outlived its server")


async def test_the_process_keeps_the_retention_it_was_given(tmp_path: Path) -> None:
    """A bound of 0 is a bound (keep only the newest change), not "no bound"."""
    store = SQLiteStore(tmp_path / "db", durability="normal", writer_process=True,
                        retention=Retention(max_changes=0, max_age_s=None))
    await store.open()
    try:
        for i in range(5):
            await store.write(Create(f"core/pods/ns/p{i}", _pod(f"p{i}")))
        assert await store.compact() == 4  # everything but the newest change
    finally:
        await store.close()


def _is_running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's reaper may be slow, or absent in a container)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except FileNotFoundError:
        return False


def test_frames_split_anywhere_are_read_whole() -> None:
    data = b"".join(frame([i, "x" * i]) for i in range(50))
    reader = FrameReader()
    bodies = []
    for start in range(0, len(data), 7):
        bodies.extend(reader.feed(data[start:start + 7]))
    assert [msgspec.msgpack.decode(b) for b in bodies] == [[i, "x" * i] for i in range(50)]


async def test_a_stopped_writer_fails_pings_and_still_commits_what_callers_gave_up_on(
        tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "db", durability="normal", writer_process=True)
    await store.open()
    try:
        assert await store.ping(10)
        writer = store._writer
        assert isinstance(writer, ProcessWriter) and writer._process is not None
        os.kill(writer._process.pid, signal.SIGSTOP)
        try:
            write = asyncio.create_task(store.write(Create("core/pods/ns/a", _pod("a"))))
            assert not await store.ping(0.2)  # no answer, and the write has none either
            assert not write.done()
            write.cancel()  # the caller gives up (a request deadline)
            assert not await store.ping(0.2)  # the same ping, still unanswered: at once
            # the write still holds its place among MAX_PENDING_WRITES: the writer has it
            with pytest.raises(asyncio.CancelledError):
                await write
            assert len(store._slots) == 1
            assert store._pending is not None
            assert store._pending._value == MAX_PENDING_WRITES - 1  # type: ignore[attr-defined]
        finally:
            os.kill(writer._process.pid, signal.SIGCONT)
        assert await store.ping(10)  # the outstanding ping is answered
        assert writer._pending == {}  # every request answered, none left behind
        assert not store._slots  # and the write's place given back
        assert store._pending._value == MAX_PENDING_WRITES  # type: ignore[attr-defined]
        record = await store.get("core/pods/ns/a")
        assert record is not None and record.revision == store.current_revision == 1
        assert (await store.write(Create("core/pods/ns/b", _pod("b")))).revision == 2
    finally:
        await store.close()


async def test_a_writer_process_that_cannot_open_the_database_says_why_once(
        tmp_path: Path, capfd: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    """A full disk, say: the reason reaches the server, which says it in one line (cli.py)."""
    loop = asyncio.get_running_loop()
    writer = ProcessWriter(tmp_path / "missing" / "db", "normal", Retention(), loop,
                           lambda changes, outcomes: None)
    with pytest.raises(StorageError) as info:
        await writer.start()
    path = tmp_path / "missing" / "db"
    assert str(info.value) == (f"the SQLite writer process cannot open {path}: [Errno 2] No "
                               f"such file or directory: '{path}-revision'")
    assert writer._process is not None and writer._process.poll() == 1  # exited, reaped
    assert capfd.readouterr().err == ""  # no traceback from the child
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []  # nor "exited"


def _tricky_objects() -> list[dict[str, object]]:
    """Values whose revision the server's encoding must place exactly (``encode_value``)."""
    escaped = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "e", "namespace": "ns",
                            "annotations": {"a": "<&>\u2028\u2029\x00é"}},
               "spec": {"note": "</script>"}}
    in_the_middle = {"kind": "Pod", "metadata": {"name": "m", "resourceVersion": "7",
                                                 "namespace": "ns", "uid": "u"}, "apiVersion": "v1"}
    mark_in_data = _pod("d", note=RESOURCE_VERSION_MARK)  # the mark's text twice: plain JSON
    no_metadata = {"apiVersion": "v1", "kind": "Pod"}
    return [escaped, in_the_middle, mark_in_data, no_metadata]


@pytest.mark.parametrize("obj", _tricky_objects())
def test_a_value_encoded_by_the_server_is_the_value_the_writer_would_encode(
        obj: dict[str, object]) -> None:
    before = msgspec.json.encode(obj)
    encoded = encode_value(copy_for_write(obj), msgspec.json.encode)
    assert msgspec.json.encode(obj) == before
    # only where the mark's place is ambiguous does the writer get plain JSON
    assert isinstance(encoded, bytes) == (msgspec.json.encode(RESOURCE_VERSION_MARK) in before)
    for revision in (1, 42, 10**12):
        expected = encode_at(copy_for_write(obj), revision)
        if isinstance(encoded, bytes):
            assert msgspec.json.decode(encoded) == obj
            continue
        data, start, end = encoded
        assert go_escaped(data[:start] + str(revision).encode() + data[end:]) == expected


async def test_the_process_stores_tricky_values_as_the_thread_does(tmp_path: Path) -> None:
    answers = []
    for name, in_process in (("thread", False), ("process", True)):
        store = SQLiteStore(tmp_path / f"{name}.db", durability="normal",
                            writer_process=in_process)
        await store.open()
        try:
            seen = []
            for i, obj in enumerate(_tricky_objects()):
                created = await store.write(Create(f"core/pods/ns/{i}", obj))
                updated = await store.write(Update(f"core/pods/ns/{i}", obj, created.revision))
                for change in (created, updated):
                    assert change.obj == msgspec.json.decode(change.value)
                    seen.append((change.revision, change.value, change.prev_value))
            answers.append(seen)
        finally:
            await store.close()
    assert answers[0] == answers[1]


async def test_a_write_the_process_cannot_take_holds_no_place(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "db", durability="normal", writer_process=True)
    await store.open()
    try:
        with pytest.raises(TypeError):  # not JSON: refused before it reaches the writer
            await store.write(Create("core/pods/ns/a", {**_pod("a"), "spec": object()}))
        assert not store._slots and store.writes_in_flight == 0
        assert store._pending is not None
        assert store._pending._value == MAX_PENDING_WRITES  # type: ignore[attr-defined]
        assert (await store.write(Create("core/pods/ns/a", _pod("a")))).revision == 1
    finally:
        await store.close()
