"""Two ``EtcdStore``s on one real etcd member (replicas' stores): kube's ``compact_rev_key``
protocol keeps both able to compact, however their compactions interleave.

A store that won the compare learned its own put twice (from the transaction's answer and from
its feed, which can arrive first) and counted the key's version one ahead of etcd's; its every
later compare then failed, and it never compacted again: the replica left alone stopped
compacting.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest

from kubewire.storage.base import Create, Retention, Update
from kubewire.storage.etcd.client import EtcdClient, EtcdConfig
from kubewire.storage.etcd.store import COMPACT_REV_KEY, EtcdStore
from tests.etcd_cluster import ETCD, Cluster, etcd_cluster

pytestmark = pytest.mark.skipif(ETCD is None, reason="no etcd binary (tools/ensure-etcd)")
KEY = "core/configmaps/default/x"
RETAINED = 5


@pytest.fixture(scope="module")
def etcd() -> Iterator[Cluster]:
    with etcd_cluster(1) as cluster:
        yield cluster


@pytest.fixture
async def pair(etcd: Cluster) -> AsyncIterator[list[EtcdStore]]:
    stores = [EtcdStore(EtcdConfig(etcd.endpoints), retention=Retention(max_changes=RETAINED),
                        compaction_interval_s=3600.0) for _ in range(2)]
    for store in stores:
        await store.open()
    yield stores
    for store in stores:
        await store.close()


def _cm(i: int) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "namespace": "default"}, "data": {"i": str(i)}}


async def _compact_rev_key(etcd: Cluster) -> tuple[int, int]:
    async with EtcdClient(EtcdConfig(etcd.endpoints)) as client:
        kv = (await client.range(COMPACT_REV_KEY)).kvs[0]
        return int(kv.version), int(kv.value)


async def test_each_store_still_compacts_after_interleaved_compactions(
        etcd: Cluster, pair: list[EtcdStore]) -> None:
    await pair[0].write(Create(KEY, _cm(0)))
    i = 0
    for _ in range(30):  # both compact at once, again and again: one wins each time
        for _ in range(RETAINED * 2):
            i += 1
            await pair[i % 2].write(Update(KEY, _cm(i)))
        await asyncio.gather(pair[0].compact(), pair[1].compact())
    for store in pair:  # each one alone (the other idle, as if killed) must compact
        version, _ = await _compact_rev_key(etcd)
        for _ in range(RETAINED * 2):
            i += 1
            await store.write(Update(KEY, _cm(i)))
        horizon = store.current_revision - RETAINED
        compacted = await store.compact()
        assert compacted == horizon
        assert await _compact_rev_key(etcd) == (version + 1, compacted)
