"""Testing an informer-based kubewire.client controller with kubewire: for each Widget
(``widget-crd.yaml``) it creates a ConfigMap the Widget owns, then sets the Widget's
``status.phase`` to Ready. Failed reconciles are retried with per-key backoff, which the test
exercises with an injected 503; a dropped watch is resumed by the informer.

    pytest examples/testing/test_kubewire_client_controller.py
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import suppress
from typing import Any

import pytest

from kubewire import Server
from kubewire.client import (
    AlreadyExists,
    Api,
    Client,
    Informer,
    NotFound,
    QueueShutDown,
    StatusError,
    WorkQueue,
)
from kubewire.models import ConfigMap, ObjectMeta
from kubewire.models.meta_v1 import OwnerReference


class WidgetController:
    """Informer on Widgets -> work queue of keys -> one worker reconciling from the cache."""

    def __init__(self, client: Client, namespace: str) -> None:
        self.widgets = Api(dict, client=client, api_version="example.com/v1", kind="Widget",
                           namespace=namespace)
        self.config_maps = Api(ConfigMap, client=client, namespace=namespace)
        self.informer = Informer(self.widgets)
        self.queue: WorkQueue[str] = WorkQueue()
        self.informer.add_handlers(on_add=self.enqueue,
                                   on_update=lambda old, new: self.enqueue(new))

    async def enqueue(self, widget: dict[str, Any]) -> None:
        await self.queue.add(self.informer.key_of(widget))

    async def work(self) -> None:
        with suppress(QueueShutDown):
            while True:
                key = await self.queue.get()
                try:
                    await self.reconcile(key)
                    self.queue.forget(key)
                except StatusError:  # a 5xx, say: again after this key's backoff
                    self.queue.add_rate_limited(key)
                finally:
                    await self.queue.done(key)

    async def reconcile(self, key: str) -> None:
        namespace, name = key.split("/")
        widget: dict[str, Any] | None = self.informer.get(name, namespace)
        if widget is None or (widget.get("status") or {}).get("phase") == "Ready":
            return
        meta = widget["metadata"]
        owner = OwnerReference(api_version="example.com/v1", kind="Widget", name=name,
                               uid=meta["uid"], controller=True)
        with suppress(AlreadyExists):  # made by an earlier try
            await self.config_maps.create(ConfigMap(
                metadata=ObjectMeta(name=f"{name}-config", owner_references=[owner]),
                data={"size": str(widget["spec"]["size"])}))
        with suppress(NotFound):
            await self.widgets.patch_status(name, {"status": {"phase": "Ready"}})


@pytest.fixture
async def controller(kubewire_client: Client,
                     kubewire_namespace: str) -> AsyncIterator[WidgetController]:
    running = WidgetController(kubewire_client, kubewire_namespace)
    async with running.informer:
        worker = asyncio.create_task(running.work())
        await running.informer.wait_for_sync()
        yield running
        await running.queue.shut_down()
        await worker


def widget(name: str, namespace: str, size: int) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "spec": {"size": size},
            "metadata": {"name": name, "namespace": namespace}}


def ready(obj: dict[str, Any]) -> bool:
    return bool((obj.get("status") or {}).get("phase") == "Ready")


@pytest.mark.kubewire(crds=["widget-crd.yaml"])
async def test_widgets_get_their_config_and_become_ready(
        kubewire_server: Server, kubewire_namespace: str,
        controller: WidgetController) -> None:
    server, namespace = kubewire_server, kubewire_namespace
    # The first ConfigMap create fails with 503: the controller must retry it.
    server.faults.inject_error(503, count=1, verb="create", resource="configmaps")
    await server.apply(widget("small", namespace, 1))
    await server.wait_for("widgets.example.com", "small", namespace=namespace, condition=ready)
    # The informer's watch ends; it resumes and sees the next Widget.
    assert server.faults.drop_watches(resource="widgets") == 1
    await server.apply(widget("large", namespace, 9))
    await server.wait_for("widgets.example.com", "large", namespace=namespace, condition=ready)

    config = await server.wait_for("configmaps", "large-config", namespace=namespace)
    assert config is not None and config["data"] == {"size": "9"}
    assert config["metadata"]["ownerReferences"][0]["name"] == "large"
    creates = server.requests(verb="create", resource="configmaps")
    assert [(entry.code, entry.fault) for entry in creates] == [
        (503, "error-503"), (201, None), (201, None)]  # small's failed try, small, large
    patched = Counter(entry.name for entry in server.requests(
        verb="patch", resource="widgets", subresource="status", code=200))
    assert patched == {"small": 1, "large": 1}
    assert server.requests(verb="delete") == []
