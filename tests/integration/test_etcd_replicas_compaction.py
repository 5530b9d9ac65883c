"""Compaction across replicas: two ``kubewire serve`` replicas on one etcd, each with a 1 s
``--etcd-compaction-interval`` and a short history (``--history-max-changes``), coordinate
through kube's ``compact_rev_key`` transaction.

Checked from etcd itself: its compacted revision moves (a range at an old revision is refused),
every compaction etcd performed is one increment of ``compact_rev_key``'s version (counted in
the member's log), the value only grows; the replicas' change feeds do not break (both stay
ready, watchers on both see every write in order); with either replica killed, the other keeps
compacting. A write storm over three replicas compacting every second leaves every feed whole.
"""

from __future__ import annotations

import asyncio
import random
import re
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from kubewire.storage.etcd.client import CompactedError, EtcdClient, EtcdConfig
from tests.etcd_cluster import ETCD, Member, etcd_cluster
from tests.etcd_replicas import Replicas
from tests.reliability.crash import KINDS, NAMESPACES, Writer, _follow, _write_sentinels
from tests.reliability.proc import MARKER, Seen, ServerProcess, WatchReader, call, list_revision

pytestmark = pytest.mark.skipif(ETCD is None, reason="no etcd binary (tools/ensure-etcd)")

PATH = "/api/v1/namespaces/default/configmaps"
RETAINED = 20


def _compact_key(endpoints: Sequence[str]) -> tuple[int, int, bool]:
    """``compact_rev_key``'s (version, value), and whether revision 2 is compacted away."""
    async def read() -> tuple[int, int, bool]:
        async with EtcdClient(EtcdConfig(endpoints, timeout=10)) as client:
            found = await client.range(b"compact_rev_key")
            kv = found.kvs[0] if found.kvs else None
            try:
                await client.range(b"/registry/", b"/registry0", revision=2, limit=1)
                gone = False
            except CompactedError:
                gone = True
            return (int(kv.version), int(kv.value), gone) if kv else (0, 0, gone)
    return asyncio.run(read())


def _etcd_compactions(member: Member) -> list[int]:
    """The revisions etcd logged compacting to (``finished scheduled compaction``)."""
    assert member.log is not None
    text = member.log.read_text(errors="replace")
    return [int(m.group(1)) for line in text.splitlines()
            if "finished scheduled compaction" in line
            and (m := re.search(r'"compact-revision":\s*(\d+)', line))]


def _write_for(servers: Sequence[ServerProcess], seconds: float, tag: str) -> list[Seen]:
    """Create and patch configmaps on the servers in turn; the events the answers promise."""
    promised: list[Seen] = []
    deadline = time.monotonic() + seconds
    i = 0
    while time.monotonic() < deadline:
        port = servers[i % len(servers)].port
        name = f"{tag}-{i % 7}"
        marker = f"{tag}-{i}"
        if i < 7:
            reply = call(port, "POST", PATH, {"metadata": {"name": name,
                                                           "annotations": {MARKER: marker}}})
        else:
            reply = call(port, "PATCH", f"{PATH}/{name}",
                         {"metadata": {"annotations": {MARKER: marker}}},
                         "application/merge-patch+json")
        assert reply.status in (200, 201), reply
        promised.append(Seen(int(reply.body["metadata"]["resourceVersion"]),
                             "ADDED" if i < 7 else "MODIFIED", f"default/{name}", marker))
        i += 1
        time.sleep(0.01)
    return promised


def _keeps_compacting(endpoints: Sequence[str], survivor: ServerProcess, tag: str) -> None:
    version, value, _ = _compact_key(endpoints)
    deadline = time.monotonic() + 15  # two compactions come within ~3 s; slower on a busy machine
    rounds = 0
    while True:
        _write_for([survivor], 1.0, f"{tag}{rounds}")
        rounds += 1
        after_version, after_value, _ = _compact_key(endpoints)
        if after_version >= version + 2 or time.monotonic() > deadline:
            break
    assert after_version >= version + 2, (version, after_version, survivor.log_tail())
    assert after_value > value
    assert call(survivor.port, "GET", "/readyz").status == 200


def test_replicas_compact_in_turn_and_their_feeds_go_on(tmp_path: Path) -> None:
    extra = ["--etcd-compaction-interval", "1s", "--history-max-changes", str(RETAINED)]
    with etcd_cluster(1) as etcd, Replicas(tmp_path, etcd.endpoints, 2, extra=extra) as replicas:
        a, b = replicas.servers
        member = etcd.members[0]
        start = int(call(a.port, "GET", PATH).body["metadata"]["resourceVersion"])
        readers = [WatchReader(lambda s=s: s.port, PATH, start,
                               until=lambda evs: evs[-1].marker == "sentinel")
                   for s in replicas.servers]
        promised = _write_for(replicas.servers, 5.0, "both")
        reply = call(b.port, "POST", PATH, {"metadata": {"name": "sentinel",
                                                         "annotations": {MARKER: "sentinel"}}})
        assert reply.status == 201
        promised.append(Seen(int(reply.body["metadata"]["resourceVersion"]), "ADDED",
                             "default/sentinel", "sentinel"))
        for reader in readers:
            assert reader.wait(30), reader.errors
            reader.stop()
            assert reader.errors == []
            assert reader.events == promised  # every write, in order, on both replicas
        version, value, gone = _compact_key(etcd.endpoints)
        assert gone and version >= 3
        assert start < value < promised[-1].revision - RETAINED + 1
        for server in replicas.servers:
            assert call(server.port, "GET", "/readyz").status == 200

        a.kill()  # the other one keeps compacting
        _keeps_compacting(etcd.endpoints, b, "b-alone")
        a.start()
        b.kill()
        _keeps_compacting(etcd.endpoints, a, "a-alone")
        b.start()

        # Each compaction etcd made is one version of compact_rev_key, to a growing revision.
        # The replicas go on compacting every second, and each puts the key just before it
        # asks etcd to compact: read the two between compactions. A replica SIGKILLed between
        # its put and its Compact call (twice above) leaves a version with no compaction.
        deadline = time.monotonic() + 15
        while True:
            version, value, _ = _compact_key(etcd.endpoints)
            compactions = _etcd_compactions(member)
            settled = bool(compactions) and compactions[-1] == value
            if (settled and len(compactions) == version) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert settled, (compactions, value)
        assert version - 2 <= len(compactions) <= version, (compactions, version)
        assert compactions == sorted(set(compactions))


def test_a_write_storm_on_three_compacting_replicas_keeps_every_feed_whole(
        tmp_path: Path) -> None:
    """Eight writers over three replicas for six seconds while the replicas compact every
    second to the last 50 changes: every replica stays ready, no write is answered 5xx, and the
    watchers of each kind on the three replicas see the same events, every acknowledged write
    among them."""
    extra = ["--etcd-compaction-interval", "1s", "--history-max-changes", "50"]
    with etcd_cluster(1) as etcd, Replicas(tmp_path, etcd.endpoints, 3, extra=extra) as replicas:
        first = replicas[0].port
        for namespace in NAMESPACES:
            assert call(first, "POST", "/api/v1/namespaces",
                        {"metadata": {"name": namespace}}).status == 201
        start = list_revision(first, "/api/v1/configmaps")
        version, _, _ = _compact_key(etcd.endpoints)
        followers = [_follow(lambda s=s: s.port, kind, None, start, f"{r} {kind.plural}")
                     for r, s in enumerate(replicas.servers) for kind in KINDS]
        stop = threading.Event()
        rng = random.Random(18)
        writers = [Writer(i, lambda p=replicas[i % 3].port: p,
                          [(KINDS[(i + k) % 3], NAMESPACES[k % 3], f"w{i}-{k}")
                           for k in range(9)], stop, rng.randrange(1 << 30)) for i in range(8)]
        for writer in writers:
            writer.start()
        time.sleep(6)
        stop.set()
        for writer in writers:
            writer.join(60)
        _write_sentinels(first)
        for _, _, _, reader in followers:
            assert reader.wait(30), reader.errors
            reader.stop()
            assert reader.errors == []
        assert _compact_key(etcd.endpoints)[0] >= version + 3
        for server in replicas.servers:
            assert call(server.port, "GET", "/readyz").status == 200
        ops = [op for writer in writers for op in writer.ops]
        assert ops and all(op.status < 500 for op in ops)
        for kind in KINDS:
            streams = [reader.events for _, k, _, reader in followers if k is kind]
            assert streams[1] == streams[0] and streams[2] == streams[0]
            revisions = [seen.revision for seen in streams[0]]
            assert revisions == sorted(set(revisions))
            acked = {op.revision for op in ops if op.plural == kind.plural
                     and op.outcome == "ok" and op.revision is not None}
            assert acked <= set(revisions)
