"""kubewire's etcd v3 client (``kubewire.storage.etcd.client``) against real etcd processes
(Debian's 3.4.23, started by ``tests/etcd_cluster.py``): ranges at old revisions, kube's txn
patterns, watches (prev_kv, resume, compaction, progress), leases, TLS, a three-member cluster
losing a member, and bounded calls when etcd is gone."""

from __future__ import annotations

import asyncio
import itertools
import socket
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from kubewire.storage.etcd.client import (
    DELETE,
    PUT,
    CompactedError,
    EtcdClient,
    EtcdConfig,
    EtcdUnavailable,
    FutureRevisionError,
    Watch,
    WatchResponse,
    prefix_end,
)
from tests.etcd_cluster import ETCD, Cluster, etcd_cluster, free_port

pytestmark = pytest.mark.skipif(ETCD is None, reason="no etcd binary (tools/ensure-etcd installs "
                                                      "Debian's etcd-server)")
PROGRESS_INTERVAL = "1s"
_names = itertools.count()


@pytest.fixture(scope="module")
def single() -> Iterator[Cluster]:
    with etcd_cluster(1, ["--experimental-watch-progress-notify-interval",
                          PROGRESS_INTERVAL]) as cluster:
        yield cluster


@pytest.fixture
async def client(single: Cluster) -> AsyncIterator[EtcdClient]:
    async with EtcdClient(EtcdConfig(single.endpoints, timeout=5)) as c:
        yield c


@pytest.fixture
def prefix() -> bytes:
    """A fresh key prefix per test (the single member is shared by the module)."""
    return f"/registry/t{next(_names)}/".encode()


async def next_response(watch: Watch, timeout: float = 5) -> WatchResponse:
    return await asyncio.wait_for(watch.__anext__(), timeout)


async def next_events(watch: Watch, timeout: float = 5) -> WatchResponse:
    """The next response with events, skipping progress notifications."""
    deadline = time.monotonic() + timeout
    while True:
        response = await next_response(watch, deadline - time.monotonic())
        if response.events:
            return response


async def test_range_at_an_old_revision_with_limit_and_count(client: EtcdClient,
                                                              prefix: bytes) -> None:
    for name in (b"a", b"b", b"c", b"d", b"e"):
        await client.put(prefix + name, b"old-" + name)
    then = (await client.range(prefix, prefix_end(prefix))).revision
    await client.put(prefix + b"a", b"new-a")
    await client.put(prefix + b"f", b"new-f")
    page = await client.range(prefix, prefix_end(prefix), revision=then, limit=2)
    assert [kv.key for kv in page.kvs] == [prefix + b"a", prefix + b"b"]
    assert [kv.value for kv in page.kvs] == [b"old-a", b"old-b"]
    assert (page.count, page.more) == (5, True)
    assert page.revision == then + 2  # the header is the store's revision, not the one read
    rest = await client.range(prefix + b"b\x00", prefix_end(prefix), revision=then)
    assert [kv.key for kv in rest.kvs] == [prefix + n for n in (b"c", b"d", b"e")]
    assert not rest.more
    count = await client.range(prefix, prefix_end(prefix), count_only=True)
    assert (count.count, list(count.kvs)) == (6, [])
    keys = await client.range(prefix, prefix_end(prefix), keys_only=True, limit=1)
    assert keys.kvs[0].value == b"" and keys.kvs[0].mod_revision == then + 1
    with pytest.raises(FutureRevisionError, match="future revision"):
        await client.range(prefix, prefix_end(prefix), revision=page.revision + 100)


async def test_kube_transactions_with_mod_revision_preconditions(client: EtcdClient,
                                                                  prefix: bytes) -> None:
    key = prefix + b"ns/cm"
    created = await client.create(key, b"v1")
    assert created.succeeded
    again = await client.create(key, b"other")
    assert not again.succeeded
    assert (await client.range(key)).kvs[0].value == b"v1"
    stale = await client.update(key, b"v2", created.revision - 1)
    assert not stale.succeeded
    current = stale.range_kvs()
    assert [(kv.value, kv.mod_revision) for kv in current] == [(b"v1", created.revision)]
    updated = await client.update(key, b"v2", current[0].mod_revision)
    assert updated.succeeded
    got = (await client.range(key)).kvs[0]
    assert (got.value, got.mod_revision, got.create_revision) == (b"v2", updated.revision,
                                                                  created.revision)
    assert not (await client.delete(key, created.revision)).succeeded
    deleted = await client.delete(key, updated.revision)
    assert deleted.succeeded and deleted.revision == updated.revision + 1
    assert (await client.range(key)).count == 0
    gone = await client.update(key, b"v3", updated.revision)
    assert not gone.succeeded and gone.range_kvs() == []


async def test_watch_with_prev_kv_in_order_and_resumed(client: EtcdClient,
                                                       prefix: bytes) -> None:
    end = prefix_end(prefix)
    async with client.watch(prefix, end) as watch:
        first = await client.put(prefix + b"x", b"1")
        second = await client.put(prefix + b"x", b"2")
        _, third = await client.delete_range(prefix + b"x")
        seen = []
        while len(seen) < 3:
            seen += (await next_events(watch)).events
    assert [(e.type, e.kv.mod_revision) for e in seen] == [(PUT, first), (PUT, second),
                                                           (DELETE, third)]
    assert not seen[0].HasField("prev_kv")
    assert seen[1].prev_kv.value == b"1"
    assert (seen[2].prev_kv.value, seen[2].prev_kv.mod_revision) == (b"2", second)
    assert seen[2].kv.value == b""  # a DELETE's kv has no data: kube uses prev_kv
    async with client.watch(prefix, end, start_revision=second) as resumed:
        again = (await next_events(resumed)).events
        while len(again) < 2:
            again += (await next_events(resumed)).events
    assert [e.kv.mod_revision for e in again] == [second, third]


async def test_watch_below_the_compacted_revision_fails_with_it(client: EtcdClient,
                                                                prefix: bytes) -> None:
    old = await client.put(prefix + b"k", b"1")
    newer = await client.put(prefix + b"k", b"2")
    await client.compact(newer)
    with pytest.raises(CompactedError) as failed:
        async with client.watch(prefix, prefix_end(prefix), start_revision=old) as watch:
            await next_response(watch)
    assert failed.value.compact_revision == newer
    with pytest.raises(CompactedError):
        await client.range(prefix, prefix_end(prefix), revision=old)
    async with client.watch(prefix, prefix_end(prefix), start_revision=newer) as watch:
        assert [e.kv.value for e in (await next_events(watch)).events] == [b"2"]


async def test_periodic_progress_notification_on_a_quiet_watch(client: EtcdClient,
                                                                prefix: bytes) -> None:
    async with client.watch(prefix, prefix_end(prefix)) as watch:
        await client.put(b"/elsewhere/" + prefix, b"moves the store revision")
        current = (await client.range(prefix)).revision
        deadline = time.monotonic() + 5
        while True:  # etcd sends one per interval (1 s here) to synced watchers
            response = await next_response(watch, deadline - time.monotonic())
            assert response.progress and not response.events
            if response.revision >= current:
                break
    assert response.revision == current


async def test_requested_progress_notification(client: EtcdClient, prefix: bytes) -> None:
    async with client.watch(prefix, prefix_end(prefix), progress_notify=False) as watch:
        revision = await client.put(prefix + b"k", b"1")
        assert (await next_events(watch)).revision == revision
        moved = await client.put(b"/elsewhere/" + prefix, b"x")
        reader = asyncio.create_task(next_response(watch, 2))  # already reading the stream
        await asyncio.sleep(0.1)
        await watch.request_progress()  # answered with watch id -1 and fanned out to us
        response = await reader
    assert response.progress and response.revision == moved
    assert response.watch_id == -1  # etcd 3.4/3.5 answer the whole stream


async def test_a_watch_ends_with_an_error_when_its_member_stops() -> None:
    with etcd_cluster(1) as cluster:
        async with (EtcdClient(EtcdConfig(cluster.endpoints, timeout=2)) as c,
                    c.watch(b"/registry/", prefix_end(b"/registry/")) as watch):
            cluster.members[0].stop()
            start = time.monotonic()
            with pytest.raises(EtcdUnavailable):
                await next_response(watch, 10)
            assert time.monotonic() - start < 5


async def test_lease_expiry_is_a_delete_event(client: EtcdClient, prefix: bytes) -> None:
    lease, ttl = await client.lease_grant(30)
    assert ttl == 30
    key = prefix + b"ev"
    created = await client.create(key, b"event", lease=lease)
    assert (await client.range(key)).kvs[0].lease == lease
    async with client.watch(prefix, prefix_end(prefix), start_revision=created.revision + 1,
                            progress_notify=False) as watch:
        await client.lease_revoke(lease)
        event = (await next_events(watch)).events[0]
    assert (event.type, event.prev_kv.value) == (DELETE, b"event")


async def test_status_reports_the_member_version(client: EtcdClient) -> None:
    status = await client.status()
    assert status.version == "3.4.23" and status.leader == status.member_id
    assert status.db_size > 0 and status.revision > 0


async def test_calls_are_bounded_when_etcd_is_gone() -> None:
    async with EtcdClient(EtcdConfig([f"http://127.0.0.1:{free_port()}"], timeout=0.5,
                                     dial_timeout=0.5)) as c:
        start = time.monotonic()
        with pytest.raises(EtcdUnavailable):
            await c.range(b"/registry/x")
        with pytest.raises(EtcdUnavailable):
            await c.create(b"/registry/x", b"v")
        with pytest.raises(EtcdUnavailable):
            async with c.watch(b"/registry/"):
                pass
        with pytest.raises(EtcdUnavailable):
            await c.connect()
        assert time.monotonic() - start < 4


def _tls_files(directory: Path) -> dict[str, Path]:
    from kubewire.server.access import pki

    ca = pki.make_ca("etcd-test-ca")
    serving = pki.issue_serving(ca, ["127.0.0.1", "localhost"])
    client = pki.issue_client(ca, "kube-apiserver-etcd-client")
    files = {"ca": ca.cert, "cert": serving.cert, "key": serving.key,
             "client_cert": client.cert, "client_key": client.key}
    paths = {}
    for name, data in files.items():
        paths[name] = directory / f"{name}.pem"
        paths[name].write_bytes(data)
    return paths


async def test_tls_with_client_certificates(tmp_path: Path) -> None:
    files = _tls_files(tmp_path)
    extra = ["--cert-file", str(files["cert"]), "--key-file", str(files["key"]),
             "--trusted-ca-file", str(files["ca"]), "--client-cert-auth"]
    with etcd_cluster(1, extra) as cluster:
        assert cluster.endpoints[0].startswith("https://")
        config = EtcdConfig(cluster.endpoints, ca_file=str(files["ca"]),
                            cert_file=str(files["client_cert"]),
                            key_file=str(files["client_key"]), timeout=5)
        async with EtcdClient(config) as c:
            created = await c.create(b"/registry/tls/k", b"v")
            assert created.succeeded
            assert (await c.range(b"/registry/tls/k")).kvs[0].value == b"v"
        # Without a client certificate the member refuses the handshake.
        no_cert = EtcdConfig(cluster.endpoints, ca_file=str(files["ca"]), timeout=1)
        async with EtcdClient(no_cert) as c:
            with pytest.raises(EtcdUnavailable):
                await c.range(b"/registry/tls/k")


async def test_three_members_survive_losing_one() -> None:
    with etcd_cluster(3) as cluster:
        async with EtcdClient(EtcdConfig(cluster.endpoints, timeout=5)) as c:
            created = await c.create(b"/registry/ha/k", b"v1")
            assert created.succeeded
            async with c.watch(b"/registry/ha/", prefix_end(b"/registry/ha/"),
                               start_revision=created.revision) as watch:
                assert (await next_events(watch)).events[0].kv.value == b"v1"
            # pick_first talks to the first endpoint: stop that member.
            first = (await c.status()).member_id
            cluster.members[0].stop()
            # A write on the connection to the stopped member may fail in flight ("Stream
            # removed"), applied or not: as EtcdUnavailable says, re-read, and let the
            # mod_revision compare decide a repeat (writes are never retried blindly).
            for _attempt in range(3):
                try:
                    updated = await c.update(b"/registry/ha/k", b"v2", created.revision)
                except EtcdUnavailable:
                    if (await c.range(b"/registry/ha/k")).kvs[0].value == b"v2":
                        break
                    continue
                if not updated.succeeded:  # an earlier attempt was applied after all
                    assert updated.range_kvs()[0].value == b"v2"
                break
            got = await c.range(b"/registry/ha/k")
            assert got.kvs[0].value == b"v2"
            assert (await c.create(b"/registry/ha/k2", b"x")).succeeded
            status = await c.status()
            assert status.member_id not in (0, first) and status.leader not in (0, first)
            cluster.restart(cluster.members[0])
            assert (await c.range(b"/registry/ha/", prefix_end(b"/registry/ha/"))).count == 2
            # Without quorum, writes and linearizable reads fail within the deadline (never
            # hang); a serializable read still answers from the member's own copy.
            cluster.members[1].stop()
            cluster.members[2].stop()
            start = time.monotonic()
            with pytest.raises(EtcdUnavailable):
                await c.create(b"/registry/ha/k3", b"x")
            with pytest.raises(EtcdUnavailable):
                await c.range(b"/registry/ha/k", timeout=1)
            assert time.monotonic() - start < 9
            alone = await c.range(b"/registry/ha/k", serializable=True)
            assert alone.kvs[0].value == b"v2"


def test_fixture_processes_are_stopped() -> None:
    with etcd_cluster(1) as cluster:
        process = cluster.members[0].process
        assert process is not None and process.poll() is None
    assert process.poll() is not None
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", cluster.members[0].client_port), timeout=1)
