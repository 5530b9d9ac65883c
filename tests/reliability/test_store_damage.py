"""A store that lost its newest commits refuses to start, and ``kubewire repair`` brings it back
without reusing a revision (storage/sqlite/revision_record.py, storage/sqlite/repair.py).

Each test runs the real server in a subprocess, kills it and its writer process with SIGKILL
(writer first: a writer that outlives its server checkpoints and removes the WAL on exit), and
damages ``kubewire.db-wal`` the ways a disk, a careless copy or an operator would.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.api_only import API_ONLY
from tests.reliability.proc import HOST, ServerProcess, call, run_cli, writer_pid

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
WAL_HEADER = struct.Struct(">8I")  # magic, version, page size, checkpoint seq, salts, checksums
FRAME_HEADER = struct.Struct(">6I")  # page, db size after commit, salts, checksums


def _fill(port: int, count: int, prefix: str = "c") -> int:
    """Create ``count`` ConfigMaps; the last one's revision."""
    revision = 0
    for i in range(count):
        reply = call(port, "POST", CONFIGMAPS, {"metadata": {"name": f"{prefix}{i}"},
                                                "data": {"k": "v" * 100}})
        assert reply.status == 201, reply
        revision = int(reply.body["metadata"]["resourceVersion"])
    return revision


def _crash(server: ServerProcess) -> None:
    os.kill(writer_pid(server.data_dir), signal.SIGKILL)
    server.kill()


def _current_frames(wal: Path) -> tuple[int, int]:
    """How many frames at the WAL's start belong to its current generation, and the page size."""
    data = wal.read_bytes()
    _, _, page_size, _, salt1, salt2, _, _ = WAL_HEADER.unpack_from(data)
    count, offset = 0, WAL_HEADER.size
    while offset + FRAME_HEADER.size + page_size <= len(data):
        _, _, frame_salt1, frame_salt2, _, _ = FRAME_HEADER.unpack_from(data, offset)
        if (frame_salt1, frame_salt2) != (salt1, salt2):
            break
        count, offset = count + 1, offset + FRAME_HEADER.size + page_size
    return count, page_size


def _delete(wal: Path) -> None:
    wal.unlink()


def _truncate(wal: Path) -> None:
    """Keep the first half of the frames written since the last checkpoint."""
    frames, page_size = _current_frames(wal)
    with open(wal, "r+b") as f:
        f.truncate(WAL_HEADER.size + frames // 2 * (FRAME_HEADER.size + page_size))


def _corrupt(wal: Path) -> None:
    """Overwrite the page of the middle frame written since the last checkpoint."""
    frames, page_size = _current_frames(wal)
    with open(wal, "r+b") as f:
        f.seek(WAL_HEADER.size + frames // 2 * (FRAME_HEADER.size + page_size)
               + FRAME_HEADER.size)
        f.write(b"\xa5" * page_size)


DAMAGE: dict[str, Callable[[Path], None]] = {
    "deleted": _delete, "truncated": _truncate, "corrupted": _corrupt}


def _files(data: Path) -> dict[str, bytes]:
    """The store's files as they are: the -shm index aside (any reader may rebuild it), and an
    empty WAL counted as none (a reader of a store without one may create it)."""
    files = {p.name: p.read_bytes() for p in data.glob("kubewire.db*")
             if not p.name.endswith("-shm")}
    if files.get("kubewire.db-wal") == b"":
        del files["kubewire.db-wal"]
    return files


def _first_event(port: int, revision: int) -> dict[str, object]:
    conn = http.client.HTTPConnection(HOST, port, timeout=30)
    try:
        conn.request("GET", f"/api/v1/configmaps?watch=1&resourceVersion={revision}")
        resp = conn.getresponse()
        assert resp.status == 200
        event: dict[str, object] = json.loads(resp.readline())
        return event
    finally:
        conn.close()


def _starts(server: ServerProcess) -> None:
    """It starts (ServerProcess.start raises with the log otherwise) and answers."""
    server.start()
    assert call(server.port, "GET", "/readyz").status == 200


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_lost_or_damaged_wal_refuses_to_start_until_repaired(tmp_path: Path,
                                                               damage: str) -> None:
    data = tmp_path / "data"
    server = ServerProcess(data)
    server.start()
    try:
        last = _fill(server.port, 200)
        _crash(server)
        DAMAGE[damage](data / "kubewire.db-wal")
        found = _files(data)

        refused = run_cli("serve", *API_ONLY,
                          "--data-dir", str(data), "--port", "0", "--insecure-http")
        assert refused.returncode == 1 and refused.stdout == ""
        [line] = refused.stderr.splitlines()  # one line, no traceback
        assert line.startswith(f"kubewire: cannot start: {data / 'kubewire.db'} holds revisions "
                               "up to "), line
        assert f"but revision {last} was committed" in line
        assert line.endswith(f"run: kubewire repair --data-dir {data} --accept-data-loss")
        held = int(line.split("holds revisions up to ")[1].split(",")[0])
        assert held < last

        report = run_cli("repair", "--data-dir", str(data))  # without consent: a report only
        assert report.returncode == 1
        assert f"revision {last} had been committed: {last - held} revisions" in report.stdout
        assert run_cli("serve", *API_ONLY, "--data-dir", str(data), "--port", "0",
                       "--insecure-http").returncode == 1  # still refused
        assert _files(data) == found  # neither the refusals nor the report changed anything

        repaired = run_cli("repair", "--data-dir", str(data), "--accept-data-loss")
        assert repaired.returncode == 0, repaired.stderr
        _starts(server)
        listed = call(server.port, "GET", CONFIGMAPS)
        assert 0 < len(listed.body["items"]) < 200  # what the database held, no more
        assert int(listed.body["metadata"]["resourceVersion"]) > last
        created = call(server.port, "POST", CONFIGMAPS, {"metadata": {"name": "after"}})
        assert created.status == 201
        assert int(created.body["metadata"]["resourceVersion"]) > last + 1  # never reused
        for revision in (held, last):  # known to the database, or lost with the WAL
            event = _first_event(server.port, revision)
            assert event["type"] == "ERROR"
            assert event["object"]["code"] == 410  # type: ignore[index]
            old = call(server.port, "GET",
                       f"{CONFIGMAPS}?resourceVersion={revision}&resourceVersionMatch=Exact")
            assert old.status == 410, old
    finally:
        server.stop()


def test_kills_shutdowns_compaction_and_repair_raise_no_false_alarm(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = ServerProcess(data, "--history-max-changes", "100")
    server.start()
    try:
        last = _fill(server.port, 1050)  # past 1000 changes: the log is compacted
        _crash(server)  # WAL intact
        _starts(server)
        assert _first_event(server.port, 1)["type"] == "ERROR"  # compacted: 410
        last = _fill(server.port, 20, "k")
        server.kill()  # the writer outlives the server, commits, checkpoints, exits
        _starts(server)
        server.stop()  # a clean shutdown
        _starts(server)
        assert call(server.port, "GET", f"{CONFIGMAPS}/k19").status == 200
        server.stop()
        assert run_cli("repair", "--data-dir", str(data), "--accept-data-loss").returncode == 0
        _starts(server)
        last = _fill(server.port, 5, "r")
        _crash(server)
        _starts(server)
        after = call(server.port, "POST", CONFIGMAPS, {"metadata": {"name": "after"}})
        assert int(after.body["metadata"]["resourceVersion"]) == last + 1
        event = _first_event(server.port, last)  # history since the repair is whole
        assert event["type"] == "ADDED", event
        assert event["object"]["metadata"]["name"] == "after"  # type: ignore[index]
    finally:
        server.stop()
