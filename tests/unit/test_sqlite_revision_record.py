"""The revision record beside the SQLite store, and ``repair_store``: a store that lost revisions
does not open; a repaired one never gives an old revision out again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kubewire.storage.base import CompactedError, Create
from kubewire.storage.sqlite.repair import REPAIR_MARGIN, inspect_store, repair_store
from kubewire.storage.sqlite.revision_record import (
    DamagedRecordError,
    RevisionLostError,
    StoreInUseError,
    decode_revision,
    encode_revision,
    record_path,
)
from kubewire.storage.sqlite.store import SQLiteStore


def _cm(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}


async def _fill(path: Path, count: int, *, writer_process: bool = False) -> int:
    store = SQLiteStore(path, durability="normal", writer_process=writer_process)
    await store.open()
    try:
        for i in range(count):
            await store.write(Create(f"core/configmaps/ns/c{i}", _cm(f"c{i}")))
        return store.current_revision
    finally:
        await store.close()


def test_the_record_is_one_fixed_width_line() -> None:
    assert encode_revision(204) == b"00000000000000000204\n"
    assert decode_revision(encode_revision(2**63 - 1)) == 2**63 - 1
    assert decode_revision(b"") is None
    for bad in (b"204\n", b"0000000000000000020x\n", b"00000000000000000204", b"\0" * 21):
        with pytest.raises(ValueError, match="not a revision record"):
            decode_revision(bad)


@pytest.mark.parametrize("writer_process", [False, True])
async def test_every_commit_is_recorded(tmp_path: Path, writer_process: bool) -> None:
    revision = await _fill(tmp_path / "db", 3, writer_process=writer_process)
    assert revision == 3
    assert Path(record_path(tmp_path / "db")).read_bytes() == encode_revision(3)


async def test_a_store_below_its_record_does_not_open(tmp_path: Path) -> None:
    await _fill(tmp_path / "db", 3)
    Path(record_path(tmp_path / "db")).write_bytes(encode_revision(7))  # as if 4-7 were lost
    store = SQLiteStore(tmp_path / "db")
    with pytest.raises(RevisionLostError) as info:
        await store.open()
    assert (info.value.revision, info.value.recorded) == (3, 7)
    assert str(info.value) == (f"{tmp_path / 'db'} holds revisions up to 3, but revision 7 was "
                               "committed")
    Path(record_path(tmp_path / "db")).write_bytes(b"garbage")
    with pytest.raises(DamagedRecordError):
        await SQLiteStore(tmp_path / "db").open()


async def test_a_record_behind_the_store_catches_up(tmp_path: Path) -> None:
    """After an OS crash the record may lag: that is no loss, and it is brought up to date."""
    await _fill(tmp_path / "db", 3)
    os.truncate(record_path(tmp_path / "db"), 0)
    assert await _fill(tmp_path / "db", 0) == 3
    assert Path(record_path(tmp_path / "db")).read_bytes() == encode_revision(3)


async def test_repair_moves_past_the_record_and_compacts_everything_before(
        tmp_path: Path) -> None:
    await _fill(tmp_path / "db", 3)
    Path(record_path(tmp_path / "db")).write_bytes(encode_revision(7))
    state = inspect_store(tmp_path / "db")
    assert (state.revision, state.recorded, state.objects, state.lost) == (3, 7, 3, 4)
    done = repair_store(tmp_path / "db")
    assert done.revision == 7 + REPAIR_MARGIN
    store = SQLiteStore(tmp_path / "db")
    await store.open()
    try:
        assert (store.current_revision, store.compacted_revision) == (done.revision,) * 2
        records, _ = await store.list("core/configmaps/")
        assert [r.key for r in records] == [f"core/configmaps/ns/c{i}" for i in range(3)]
        change = await store.write(Create("core/configmaps/ns/new", _cm("new")))
        assert change.revision == done.revision + 1
        for old in (3, 7):
            with pytest.raises(CompactedError):
                await store.changes_since(old)
        assert [c.revision for c in await store.changes_since(done.revision)] == [
            change.revision]
    finally:
        await store.close()


async def test_repair_refuses_while_a_store_is_open(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "db")
    await store.open()
    try:
        with pytest.raises(StoreInUseError, match="stop the server first"):
            repair_store(tmp_path / "db")
    finally:
        await store.close()
    repair_store(tmp_path / "db")  # closed: it may
