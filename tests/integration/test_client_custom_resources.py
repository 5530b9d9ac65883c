"""The client on custom resources, against the real server: a generic ``Api`` over
``apiVersion``/``kind`` that finds the kind in discovery, with plain dicts, a user's own
msgspec Struct and dataclass types, and models ``kubewire models`` generates from the CRD.

Gateway and HTTPRoute (``gateway.networking.k8s.io/v1``) are served from the Gateway API CRDs
every kubewire server pre-installs, and the client treats them as it treats any custom
resource: found by discovery, not known.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import random
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import msgspec
import pytest

from kubewire.client import (
    Api,
    Backoff,
    Client,
    ClientConfig,
    Conflict,
    EventType,
    Gone,
    Informer,
    NoKindMatch,
    NotFound,
    PatchType,
    Scale,
    UnsupportedMediaType,
    WatchEvent,
    WatchSettings,
    create_client,
)
from kubewire.client.crd_models import generate_from_yaml
from kubewire.client.discovery import Discovery
from kubewire.client.resource import ResourceInfo
from kubewire.client.scale import ScaleSpec
from kubewire.client.transport import Request
from kubewire.json_types import JSON
from kubewire.models import Deployment, ObjectMeta, Status
from kubewire.storage.base import Retention
from tests.integration.harness import ServerThread
from tests.integration.test_client_watch_faults import FaultProxy

T = TypeVar("T")
GROUP_VERSION = "gateway.networking.k8s.io/v1"
GATEWAY_API = Path("/work/shared/openapi/gateway-api-v1.2.1/standard")
WAIT_S = 30.0  # a bound so that a broken watch fails the test instead of hanging it


@pytest.fixture
async def client(server: ServerThread) -> AsyncIterator[Client]:
    async with await create_client(server.kubeconfig) as c:
        yield c


def gateway(name: str, class_name: str = "example", **labels: str) -> dict[str, JSON]:
    """A Gateway as a user writes it: no apiVersion or kind (the Api fills them)."""
    return {"metadata": {"name": name, "labels": labels or None},
            "spec": {"gatewayClassName": class_name,
                     "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}


def counting(client: Client) -> list[str]:
    """Give ``client`` a fresh discovery cache whose document fetches are recorded."""
    fetched: list[str] = []

    async def request(req: Request) -> bytes:
        fetched.append(req.path)
        return await client.request(req)

    client.discovery = Discovery(request)
    return fetched


async def next_event(stream: AsyncIterator[WatchEvent[T]]) -> WatchEvent[T]:
    return await asyncio.wait_for(anext(stream), WAIT_S)


def seen(event: WatchEvent[dict[str, JSON]]) -> tuple[str, str]:
    assert isinstance(event.object, dict)
    return event.type.value, event.object["metadata"]["name"]


async def eventually(check: Callable[[], bool], what: str) -> None:
    for _ in range(int(WAIT_S / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)
    pytest.fail(f"timed out waiting for {what}")


# --- plain dicts ---------------------------------------------------------------------------


async def test_dict_api_finds_the_kind_in_discovery_once_per_client(client: Client) -> None:
    fetched = counting(client)
    gateways = Api(dict, client=client, api_version=GROUP_VERSION, kind="Gateway")
    routes = Api(dict, client=client, api_version=GROUP_VERSION, kind="HTTPRoute")
    with pytest.raises(RuntimeError, match="discovery"):
        _ = gateways.info
    assert (await gateways.list()).items == []
    # found, but not known to be custom: kubewire's client knows only its built-in kinds
    assert gateways.info == ResourceInfo(GROUP_VERSION, "Gateway", "gateways", True, None)
    await routes.list()
    assert routes.info.plural == "httproutes"
    assert fetched == ["/apis/gateway.networking.k8s.io/v1"]  # one document, cached
    # Known up front (plural and namespaced given): no discovery.
    given = Api(dict, client=client, api_version=GROUP_VERSION, kind="Gateway",
                plural="gateways", namespaced=True)
    assert given.info.custom is None and given.info.plural == "gateways"
    # Built-in kinds are known without asking.
    assert Api(dict, client=client, api_version="v1", kind="ConfigMap").info.custom is False
    assert fetched == ["/apis/gateway.networking.k8s.io/v1"]


@pytest.mark.parametrize(("api_version", "kind", "plural", "message"), [
    ("example.com/v1", "Widget", None, 'no matches for kind "Widget" in version '
                                       '"example.com/v1"'),
    (GROUP_VERSION, "Widget", None, 'no matches for kind "Widget" in version '
                                    '"gateway.networking.k8s.io/v1"'),
    (GROUP_VERSION, None, "widgets", "no matches for gateway.networking.k8s.io/v1, "
                                     "Resource=widgets"),
])
async def test_a_kind_the_server_does_not_serve_is_no_kind_match(
        client: Client, api_version: str, kind: str | None, plural: str | None,
        message: str) -> None:
    widgets = (Api(dict, client=client, api_version=api_version, kind=kind) if kind
               else Api(dict, client=client, api_version=api_version, plural=plural or ""))
    with pytest.raises(NoKindMatch) as err:
        await widgets.get("w")
    assert str(err.value) == message
    with pytest.raises(NoKindMatch):  # asked again: a CRD may have been created meanwhile
        await widgets.list()


async def test_dict_api_every_verb(client: Client) -> None:
    gateways = Api(dict, client=client, api_version=GROUP_VERSION, kind="Gateway")
    created = await gateways.create(gateway("a", tier="web"))
    assert created["apiVersion"] == GROUP_VERSION and created["kind"] == "Gateway"
    assert created["metadata"]["namespace"] == "default" and created["metadata"]["uid"]
    for name in ("b", "c"):
        await gateways.create(gateway(name, tier="db"))
    got = await gateways.get("a")
    assert got["spec"]["gatewayClassName"] == "example"
    pages = [page async for page in gateways.pages(limit=2)]
    assert [len(p) for p in pages] == [2, 1]
    assert sorted(g["metadata"]["name"] for g in await gateways.list(
        label_selector={"tier": "db"})) == ["b", "c"]

    # Patches: merge by default (a custom resource takes no strategic merge), JSON, apply.
    merged = await gateways.patch("a", {"metadata": {"labels": {"x": "1"}}})
    assert merged["metadata"]["labels"] == {"tier": "web", "x": "1"}
    jsoned = await gateways.patch("a", [{"op": "replace", "path": "/spec/gatewayClassName",
                                         "value": "other"}], type=PatchType.JSON)
    assert jsoned["spec"]["gatewayClassName"] == "other"
    applied = await gateways.patch("a", {"metadata": {"name": "a", "annotations": {"by": "me"}},
                                         "spec": {"gatewayClassName": "other", "listeners": [
                                             {"name": "http", "port": 80,
                                              "protocol": "HTTP"}]}},
                                   type=PatchType.APPLY, field_manager="tests", force=True)
    assert applied["metadata"]["annotations"] == {"by": "me"}
    assert any(m["manager"] == "tests" for m in applied["metadata"]["managedFields"])
    # a strategic merge patch is sent (the client cannot tell the kind is custom) and kube's
    # 415 is explained (test_a_strategic_merge_refused_by_the_server_is_explained)
    with pytest.raises(UnsupportedMediaType, match=r"strategic merge patch is not supported "
                                                   r"for custom resources \(gateways.gateway."
                                                   r"networking.k8s.io\)"):
        await gateways.patch("a", {"spec": {"gatewayClassName": "x"}},
                             type=PatchType.STRATEGIC)
    assert (await gateways.get("a"))["spec"]["gatewayClassName"] == "other"

    # Replace: the resourceVersion is a precondition.
    stale = dict(got)
    fresh = await gateways.get("a")
    fresh["spec"]["gatewayClassName"] = "replaced"
    replaced = await gateways.replace(fresh)
    assert replaced["spec"]["gatewayClassName"] == "replaced"
    with pytest.raises(Conflict):
        await gateways.replace(stale)

    # Status: spec and status are written apart.
    conditions = [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "ok",
                   "lastTransitionTime": "2024-01-01T00:00:00Z"}]
    with_status = await gateways.patch_status("a", {"status": {"conditions": conditions},
                                                    "spec": {"gatewayClassName": "ignored"}})
    assert with_status["status"]["conditions"][0]["reason"] == "Accepted"
    assert with_status["spec"]["gatewayClassName"] == "replaced"
    status_view = await gateways.get_status("a")
    status_view["status"]["conditions"][0]["message"] = "still ok"
    put = await gateways.replace_status(status_view)
    assert put["status"]["conditions"][0]["message"] == "still ok"

    # Deletes.
    deleted = await gateways.delete("a")
    assert isinstance(deleted, Status) and deleted.status == "Success"  # kube's, for a CR
    with pytest.raises(NotFound):
        await gateways.get("a")
    gone = await gateways.delete_collection(label_selector="tier=db")
    assert sorted(g["metadata"]["name"] for g in gone) == ["b", "c"]
    assert (await gateways.list()).items == []


async def test_a_strategic_merge_refused_by_the_server_is_explained(client: Client) -> None:
    """A kind the client cannot tell is custom (found by discovery, unknown to kubewire) is
    sent the strategic merge patch, and kube's 415 says what it means."""
    gateways = Api(dict, client=client, api_version=GROUP_VERSION, kind="Gateway")
    await gateways.create(gateway("a"))
    with pytest.raises(UnsupportedMediaType) as err:
        await gateways.patch("a", {"metadata": {"labels": {"x": "1"}}},
                             type=PatchType.STRATEGIC)
    assert err.value.message == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, "
        "application/apply-patch+yaml (strategic merge patch is not supported for custom "
        "resources (gateways.gateway.networking.k8s.io): use PatchType.MERGE, PatchType.JSON "
        "or PatchType.APPLY)")
    # An unknown kind's default patch is a merge patch, which every kind takes.
    patched = await gateways.patch("a", {"metadata": {"labels": {"x": "1"}}})
    assert patched["metadata"]["labels"] == {"x": "1"}


async def test_watch_from_first_use_resumes_and_ends(client: Client) -> None:
    writer = Api(dict, client=client, api_version=GROUP_VERSION, kind="HTTPRoute")
    await writer.create({"metadata": {"name": "r"}, "spec": {"parentRefs": [{"name": "gw"}]}})
    routes = Api(dict, client=client, api_version=GROUP_VERSION, kind="HTTPRoute")
    # The watch is this Api's first use: discovery happens inside it.
    async with aclosing(routes.watch(resource_version="0", allow_bookmarks=True)) as stream:
        events = [seen(await next_event(stream))]  # the initial event
        await writer.patch("r", {"spec": {"hostnames": ["a.example.com"]}})
        await writer.delete("r")
        while len(events) < 3:
            event = await next_event(stream)
            if event.type is not EventType.BOOKMARK:
                events.append(seen(event))
    assert events == [("ADDED", "r"), ("MODIFIED", "r"), ("DELETED", "r")]
    # The caller's timeout ends it.
    async with aclosing(routes.watch(timeout_seconds=1)) as stream:
        assert [e async for e in stream] == []


async def test_watch_resumes_across_a_broken_connection(server: ServerThread) -> None:
    fast = WatchSettings(backoff=Backoff(initial_s=0.05, max_s=0.2, rng=random.Random(3)))
    async with await create_client(server.kubeconfig) as direct, \
            FaultProxy(server.port) as proxy, \
            Client(ClientConfig(server=proxy.url)) as proxied:
        writer = Api(dict, client=direct, api_version=GROUP_VERSION, kind="Gateway")
        watched = Api(dict, client=proxied, api_version=GROUP_VERSION, kind="Gateway")
        since = (await watched.list()).resource_version
        async with aclosing(watched.watch(resource_version=since, settings=fast)) as stream:
            await writer.create(gateway("one"))
            assert seen(await next_event(stream)) == ("ADDED", "one")
            proxy.go_down()
            await writer.create(gateway("two"))
            await writer.delete("one")
            proxy.come_up()
            assert [seen(await next_event(stream)) for _ in range(2)] == [
                ("ADDED", "two"), ("DELETED", "one")]


async def test_watch_from_a_compacted_revision_is_gone(
        make_server: Callable[..., ServerThread]) -> None:
    server = make_server(ring_capacity=8, retention=Retention(max_changes=10, max_age_s=None))
    async with await create_client(server.kubeconfig) as client:
        gateways = Api(dict, client=client, api_version=GROUP_VERSION, kind="Gateway")
        old = (await gateways.list()).resource_version
        for round_ in range(30):
            for i in range(20):
                await gateways.create(gateway(f"g{round_}-{i}"))
                await gateways.delete(f"g{round_}-{i}")
            try:
                async with aclosing(gateways.watch(resource_version=old)) as stream:
                    await asyncio.wait_for(anext(stream), WAIT_S)
            except Gone:
                return
        pytest.fail("the change log was never compacted")


async def test_informer_over_a_dict_api(client: Client) -> None:
    gateways = Api(dict, client=client, api_version=GROUP_VERSION, kind="Gateway")
    await gateways.create(gateway("before"))
    informer = Informer(gateways)
    log: list[tuple[str, str]] = []
    informer.add_handlers(
        on_add=lambda o: log.append(("add", o["metadata"]["name"])),
        on_update=lambda old, new: log.append(("update", new["metadata"]["name"])),
        on_delete=lambda o: log.append(("delete", o["metadata"]["name"])))
    async with informer:
        await asyncio.wait_for(informer.wait_for_sync(), WAIT_S)
        await gateways.create(gateway("after"))
        await gateways.patch("before", {"metadata": {"labels": {"x": "1"}}})
        await gateways.delete("after")
        await eventually(lambda: len(log) == 4, "four handler calls")
    assert log == [("add", "before"), ("add", "after"), ("update", "before"),
                   ("delete", "after")]
    cached = informer.get("before", "default")
    assert cached is not None and cached["metadata"]["labels"] == {"x": "1"}


# --- a user's own types --------------------------------------------------------------------


class Meta(msgspec.Struct, omit_defaults=True, rename="camel"):
    name: str
    namespace: str | None = None
    labels: dict[str, str] | None = None
    resource_version: str | None = None


class Listener(msgspec.Struct):
    name: str
    port: int
    protocol: str


class GatewaySpec(msgspec.Struct, rename="camel"):
    gateway_class_name: str
    listeners: list[Listener]


class MyGateway(msgspec.Struct, omit_defaults=True, rename="camel"):
    """A user's Struct: apiVersion and kind left out, the Api fills them."""

    API_VERSION = GROUP_VERSION
    KIND = "Gateway"

    metadata: Meta
    spec: GatewaySpec
    status: dict[str, Any] | None = None


@dataclasses.dataclass
class RouteDC:
    metadata: dict[str, Any]
    spec: dict[str, Any]
    apiVersion: str | None = None  # the wire's name
    kind: str | None = None


async def test_a_user_struct_type(client: Client) -> None:
    gateways = Api(MyGateway, client=client)
    mine = MyGateway(metadata=Meta(name="s", labels={"a": "b"}),
                     spec=GatewaySpec("example", [Listener("http", 80, "HTTP")]))
    created = await gateways.create(mine)
    assert isinstance(created, MyGateway)
    assert created.metadata.namespace == "default" and created.metadata.resource_version
    assert [x.metadata.name for x in await gateways.list(label_selector="a=b")] == ["s"]
    updated = await gateways.replace(msgspec.structs.replace(
        created, spec=msgspec.structs.replace(created.spec, gateway_class_name="other")))
    assert updated.spec.gateway_class_name == "other"
    applied = await gateways.patch("s", MyGateway(
        metadata=Meta(name="s", labels={"by": "apply"}),
        spec=GatewaySpec("other", [Listener("http", 80, "HTTP")])),
        type=PatchType.APPLY, field_manager="mine", force=True)
    assert applied.metadata.labels == {"a": "b", "by": "apply"}
    async with aclosing(gateways.watch(resource_version="0")) as stream:
        event = await next_event(stream)
        assert isinstance(event.object, MyGateway) and event.object.metadata.name == "s"
    await gateways.delete("s")


async def test_a_user_dataclass_type(client: Client) -> None:
    routes = Api(RouteDC, client=client, api_version=GROUP_VERSION, kind="HTTPRoute")
    created = await routes.create(RouteDC(metadata={"name": "d"},
                                          spec={"parentRefs": [{"name": "gw"}]}))
    assert isinstance(created, RouteDC)
    assert (created.apiVersion, created.kind) == (GROUP_VERSION, "HTTPRoute")
    got = await routes.get("d")
    assert got.spec["parentRefs"][0]["name"] == "gw"
    got.spec["hostnames"] = ["d.example.com"]
    assert (await routes.replace(got)).spec["hostnames"] == ["d.example.com"]
    patched = await routes.patch_status("d", {"status": {"parents": []}})
    assert isinstance(patched, RouteDC)
    await routes.delete("d")


# --- models generated from the CRD ---------------------------------------------------------


@pytest.fixture(scope="module")
def gateway_models(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    if not GATEWAY_API.is_dir():
        pytest.skip("the Gateway API CRDs are not here")
    files = sorted(GATEWAY_API.glob("*.yaml"))
    path = tmp_path_factory.mktemp("models") / "gateway_models.py"
    path.write_text(generate_from_yaml([(p.name, p.read_text()) for p in files]))
    spec = importlib.util.spec_from_file_location("gateway_models", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_generated_models(client: Client, gateway_models: ModuleType) -> None:
    m = gateway_models
    gateways: Api[Any] = Api(m.Gateway, client=client)
    created = await gateways.create(m.Gateway(
        metadata=ObjectMeta(name="g"),
        spec=m.GatewaySpec(gateway_class_name="example", listeners=[
            m.GatewaySpecListeners(name="http", port=80, protocol="HTTP")])))
    assert isinstance(created, m.Gateway) and created.metadata.uid
    assert gateways.info.custom is True  # a model kubewire does not serve: a CRD's
    got = await gateways.get("g")
    replaced = await gateways.replace(msgspec.structs.replace(
        got, spec=msgspec.structs.replace(got.spec, gateway_class_name="other")))
    assert replaced.spec.gateway_class_name == "other"
    merged = await gateways.patch("g", {"metadata": {"labels": {"x": "1"}}})
    assert merged.metadata.labels == {"x": "1"}
    with pytest.raises(ValueError, match="strategic merge"):
        await gateways.patch("g", {}, type=PatchType.STRATEGIC)
    status = await gateways.patch_status("g", {"status": {"conditions": [
        {"type": "Programmed", "status": "False", "reason": "Pending", "message": "wait",
         "lastTransitionTime": "2024-01-01T00:00:00Z"}]}})
    assert status.status.conditions[0].status == "False"
    routes: Api[Any] = Api(m.HTTPRoute, client=client)
    async with aclosing(routes.watch(resource_version="0", allow_bookmarks=True)) as stream:
        await routes.create(m.HTTPRoute(metadata=ObjectMeta(name="r"), spec=m.HTTPRouteSpec(
            parent_refs=[m.HTTPRouteSpecParentRefs(name="g")])))
        event = await next_event(stream)
        while event.type is EventType.BOOKMARK:
            event = await next_event(stream)
    assert event.type is EventType.ADDED and isinstance(event.object, m.HTTPRoute)
    assert event.object.spec.parent_refs[0].name == "g"
    assert [g.metadata.name for g in await gateways.list()] == ["g"]
    await gateways.delete("g")
    with pytest.raises(NotFound):
        await gateways.get("g")


# --- scale ---------------------------------------------------------------------------------


async def test_scale_subresource(client: Client) -> None:
    """Through a dict Api and a typed one alike (no custom resource with /scale is served
    yet; a Deployment's is the same subresource)."""
    deployments = Api(dict, client=client, api_version="apps/v1", kind="Deployment")
    await deployments.create({"metadata": {"name": "d"}, "spec": {
        "replicas": 1, "selector": {"matchLabels": {"app": "d"}},
        "template": {"metadata": {"labels": {"app": "d"}},
                     "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
    scale = await deployments.get_scale("d")
    assert isinstance(scale, Scale) and scale.spec is not None and scale.spec.replicas == 1
    assert (await deployments.scale("d", 3)).spec == ScaleSpec(replicas=3)
    assert (await deployments.get("d"))["spec"]["replicas"] == 3
    scale = await Api(Deployment, client=client).get_scale("d")
    scale.spec = ScaleSpec(replicas=2)
    assert (await deployments.replace_scale("d", scale)).spec == ScaleSpec(replicas=2)
    patched = await deployments.patch_scale("d", [{"op": "replace", "path": "/spec/replicas",
                                                   "value": 4}], type=PatchType.JSON)
    assert patched.spec is not None and patched.spec.replicas == 4
    with pytest.raises(NotFound):
        await Api(dict, client=client, api_version=GROUP_VERSION,
                  kind="Gateway").get_scale("nope")

