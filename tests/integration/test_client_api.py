"""``Api[T]`` against the real server: every verb, typed results, typed errors, dict mode."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest

from kubewire.client.api import Api
from kubewire.client.client import Client, create_client
from kubewire.client.errors import AlreadyExists, Conflict, Invalid, NotFound
from kubewire.client.resource import PatchType, PropagationPolicy
from kubewire.models import ConfigMap, Namespace, ObjectMeta, Pod, Status
from kubewire.models.core_v1 import Container, PodSpec, PodStatus
from tests.integration.harness import ServerThread


@pytest.fixture
async def client(server: ServerThread) -> AsyncIterator[Client]:
    async with await create_client(server.kubeconfig) as c:
        yield c


def new_pod(name: str, namespace: str | None = None, **labels: str) -> Pod:
    return Pod(metadata=ObjectMeta(name=name, namespace=namespace, labels=labels or None),
               spec=PodSpec(containers=[Container(name="c", image="nginx:1.27")]))


async def make_namespace(client: Client, name: str) -> None:
    await Api(Namespace, client=client).create(Namespace(metadata=ObjectMeta(name=name)))


async def test_create_then_get_returns_typed_objects(client: Client) -> None:
    pods = Api(Pod, client=client, namespace="default")
    created = await pods.create(new_pod("web", app="web"))
    assert isinstance(created, Pod)
    assert created.metadata is not None and created.metadata.uid
    assert created.metadata.namespace == "default"
    got = await pods.get("web")
    assert got.metadata is not None and got.metadata.labels == {"app": "web"}
    assert got.spec is not None and got.spec.containers is not None
    assert got.spec.containers[0].image == "nginx:1.27"
    with pytest.raises(NotFound) as missing:
        await pods.get("nope")
    assert missing.value.to_status()["details"]["name"] == "nope"
    with pytest.raises(AlreadyExists):
        await pods.create(new_pod("web"))


async def test_create_invalid_object_raises_invalid(client: Client) -> None:
    pods = Api(Pod, client=client)
    with pytest.raises(Invalid) as bad:
        await pods.create(Pod(metadata=ObjectMeta(name="Bad_Name"), spec=PodSpec(
            containers=[Container(name="c", image="i")])))
    assert bad.value.code == 422


async def test_list_follows_pages_and_reports_the_snapshot(client: Client) -> None:
    pods = Api(Pod, client=client)
    for i in range(7):
        await pods.create(new_pod(f"p{i}", tier="a" if i % 2 else "b"))
    pages = [page async for page in pods.pages(limit=3)]
    assert [len(p) for p in pages] == [3, 3, 1]
    assert len({p.resource_version for p in pages}) == 1
    everything = await pods.list(limit=2)
    assert sorted(p.metadata.name for p in everything if p.metadata) == [f"p{i}" for i in
                                                                        range(7)]
    assert everything.resource_version == pages[0].resource_version
    by_dict = await pods.list(label_selector={"tier": "a"})
    by_str = await pods.list(label_selector="tier=a")
    names = sorted(p.metadata.name for p in by_dict if p.metadata)
    assert names == ["p1", "p3", "p5"]
    assert names == sorted(p.metadata.name for p in by_str if p.metadata)
    one = await pods.list(field_selector={"metadata.name": "p4"})
    assert [p.metadata.name for p in one if p.metadata] == ["p4"]


async def test_namespace_none_lists_all_namespaces(client: Client) -> None:
    await make_namespace(client, "team")
    await Api(Pod, client=client, namespace="team").create(new_pod("a"))
    await Api(Pod, client=client).create(new_pod("b"))
    # An object naming its namespace is created there even from a default-namespace Api.
    await Api(Pod, client=client).create(new_pod("c", namespace="team"))
    everywhere = await Api(Pod, client=client, namespace=None).list()
    assert sorted((p.metadata.namespace, p.metadata.name) for p in everywhere if p.metadata) \
        == [("default", "b"), ("team", "a"), ("team", "c")]
    per_call = await Api(Pod, client=client).list(namespace="team")
    assert len(per_call) == 2


async def test_replace_with_stale_resource_version_conflicts(client: Client) -> None:
    maps = Api(ConfigMap, client=client)
    created = await maps.create(ConfigMap(metadata=ObjectMeta(name="cm"), data={"k": "1"}))
    updated = await maps.replace(msgspec.structs.replace(created, data={"k": "2"}))
    assert updated.data == {"k": "2"}
    assert updated.metadata is not None and created.metadata is not None
    assert updated.metadata.resource_version != created.metadata.resource_version
    with pytest.raises(Conflict):
        await maps.replace(msgspec.structs.replace(created, data={"k": "3"}))


async def test_patch_strategic_merge_and_json(client: Client) -> None:
    pods = Api(Pod, client=client)
    await pods.create(new_pod("p", app="web"))
    # A pod may change only its images: the patch's container merges into "c" by name.
    strategic = await pods.patch("p", {"spec": {"containers": [
        {"name": "c", "image": "busybox"}]}})
    assert strategic.spec is not None and strategic.spec.containers is not None
    [container] = strategic.spec.containers
    assert (container.name, container.image) == ("c", "busybox")
    assert container.termination_message_policy == "File"  # the rest of "c" is kept
    merged = await pods.patch("p", {"metadata": {"labels": {"tier": "x"}}},
                              type=PatchType.MERGE)
    assert merged.metadata is not None and merged.metadata.labels == {"app": "web", "tier": "x"}
    jsonp = await pods.patch("p", [{"op": "remove", "path": "/metadata/labels/app"}],
                             type=PatchType.JSON)
    assert jsonp.metadata is not None and jsonp.metadata.labels == {"tier": "x"}


async def test_patch_apply_with_field_manager(client: Client) -> None:
    maps = Api(ConfigMap, client=client)
    applied = await maps.patch(
        "applied", ConfigMap(metadata=ObjectMeta(name="applied"), data={"a": "1"}),
        type=PatchType.APPLY, field_manager="tester", force=True)
    assert applied.data == {"a": "1"}
    assert applied.metadata is not None and applied.metadata.managed_fields
    assert applied.metadata.managed_fields[0].manager == "tester"


async def test_apply_without_field_manager_is_refused_before_sending(client: Client) -> None:
    with pytest.raises(ValueError, match="field_manager"):
        await Api(ConfigMap, client=client).patch("x", {}, type=PatchType.APPLY)


async def test_status_subresource(client: Client) -> None:
    pods = Api(Pod, client=client)
    created = await pods.create(new_pod("s"))
    status_obj = await pods.get_status("s")
    assert status_obj.metadata is not None and status_obj.metadata.name == "s"
    replaced = await pods.replace_status(msgspec.structs.replace(
        created, status=PodStatus(phase="Running"), spec=PodSpec(containers=[
            Container(name="ignored", image="i")])))
    assert replaced.status is not None and replaced.status.phase == "Running"
    assert replaced.spec is not None and replaced.spec.containers is not None
    assert replaced.spec.containers[0].name == "c"  # status PUT leaves spec as stored
    patched = await pods.patch_status("s", {"status": {"phase": "Succeeded"}})
    assert patched.status is not None and patched.status.phase == "Succeeded"


async def test_delete_returns_object_or_status_and_honours_options(client: Client) -> None:
    maps = Api(ConfigMap, client=client)
    created = await maps.create(ConfigMap(metadata=ObjectMeta(name="gone")))
    assert created.metadata is not None
    with pytest.raises(Conflict):
        await maps.delete("gone", preconditions={"uid": "not-the-uid"})
    dry = await maps.delete("gone", dry_run=True)
    assert isinstance(dry, Status | ConfigMap)
    await maps.get("gone")  # dry run deleted nothing
    result = await maps.delete("gone", propagation_policy=PropagationPolicy.BACKGROUND,
                               preconditions={"uid": created.metadata.uid or ""})
    assert isinstance(result, Status) and result.status == "Success"
    with pytest.raises(NotFound):
        await maps.get("gone")
    pods = Api(Pod, client=client)
    scheduled = new_pod("graceful")
    assert scheduled.spec is not None
    scheduled.spec.node_name = "node-1"  # unscheduled pods are deleted at once (kube)
    await pods.create(scheduled)
    marked = await pods.delete("graceful", grace_period_seconds=30)
    assert isinstance(marked, Pod)  # graceful: the object comes back marked
    assert marked.metadata is not None and marked.metadata.deletion_timestamp
    assert marked.metadata.deletion_grace_period_seconds == 30


async def test_delete_collection_by_selector(client: Client) -> None:
    pods = Api(Pod, client=client)
    for name, team in (("a", "x"), ("b", "x"), ("c", "y")):
        await pods.create(new_pod(name, team=team))
    deleted = await pods.delete_collection(label_selector={"team": "x"})
    assert sorted(p.metadata.name for p in deleted if p.metadata) == ["a", "b"]
    left = await pods.list(label_selector="team")
    assert [p.metadata.name for p in left if p.metadata] == ["c"]


async def test_dict_mode_by_kind_and_by_plural(client: Client) -> None:
    by_kind: Api[dict[str, Any]] = Api(dict, client=client, api_version="apps/v1",
                                       kind="Deployment")
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                  "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
                      "metadata": {"labels": {"a": "b"}},
                      "spec": {"containers": [{"name": "c", "image": "i"}]}}}}
    created = await by_kind.create(deployment)
    assert created["metadata"]["namespace"] == "default"
    by_plural = Api(dict, client=client, api_version="apps/v1", plural="deployments")
    listed = await by_plural.list()
    assert [d["metadata"]["name"] for d in listed] == ["d"]
    patched = await by_plural.patch("d", {"spec": {"replicas": 3}}, type=PatchType.MERGE)
    assert patched["spec"]["replicas"] == 3
    nodes = Api(dict, client=client, api_version="v1", kind="Node")
    assert nodes.namespace == "default" and nodes.info.namespaced is False
    await nodes.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    assert (await nodes.get("n1"))["metadata"]["name"] == "n1"
