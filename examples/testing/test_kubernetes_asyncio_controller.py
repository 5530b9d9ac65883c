"""Testing a hand-written kubernetes_asyncio controller with kubewire: a list-then-watch loop
over Widgets (``widget-crd.yaml``) that sets each one's ``status.phase`` to Ready, resuming its
watch where it ended and listing again on 410 Gone, as client-go's reflector does.

    pytest examples/testing/test_kubernetes_asyncio_controller.py
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client, config, watch
from kubernetes_asyncio.client.rest import ApiException

from kubewire import Server

GROUP, VERSION, PLURAL = "example.com", "v1", "widgets"
WATCH_SECONDS = 300  # each watch's server-side timeout; the loop then watches again


class WidgetController:
    """Sets ``status.phase: Ready`` on every Widget of one namespace that lacks it."""

    def __init__(self, api: client.CustomObjectsApi, namespace: str) -> None:
        self.api = api
        self.namespace = namespace

    async def run(self) -> None:
        while True:
            listed = await self.api.list_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL)
            for obj in listed["items"]:
                await self.reconcile(obj)
            try:
                await self.watch_from(listed["metadata"]["resourceVersion"])
            except ApiException as err:
                if err.status != 410:
                    raise
                # 410 Gone: the revision to resume from is compacted; list again

    async def watch_from(self, resource_version: str) -> None:
        """Watch from ``resource_version``; when a watch ends, the next resumes after the last
        event it delivered (the Watch object tracks it)."""
        async with watch.Watch() as stream:
            while True:
                async for event in stream.stream(
                        self.api.list_namespaced_custom_object, GROUP, VERSION,
                        self.namespace, PLURAL, resource_version=resource_version,
                        allow_watch_bookmarks=True, timeout_seconds=WATCH_SECONDS):
                    if event["type"] in ("ADDED", "MODIFIED"):
                        await self.reconcile(event["object"])
                resource_version = stream.resource_version or resource_version

    async def reconcile(self, widget: dict[str, Any]) -> None:
        if (widget.get("status") or {}).get("phase") == "Ready":
            return
        # kubernetes_asyncio sends a custom object's patch as a JSON patch (a list of
        # operations) unless told otherwise; this one is a merge patch. (Its type hints leave
        # out the ``_content_type`` it takes.)
        await self.api.patch_namespaced_custom_object_status(  # type: ignore[call-arg]
            GROUP, VERSION, self.namespace, PLURAL, widget["metadata"]["name"],
            {"status": {"phase": "Ready"}}, _content_type="application/merge-patch+json")


def widget(name: str) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name},
            "spec": {"size": 1}}


def ready(obj: dict[str, Any]) -> bool:
    return bool((obj.get("status") or {}).get("phase") == "Ready")


@pytest.mark.kubewire(crds=["widget-crd.yaml"])
async def test_the_controller_makes_widgets_ready(kubewire_server: Server,
                                                  kubewire_kubeconfig: Path,
                                                  kubewire_namespace: str) -> None:
    await config.load_kube_config()  # KUBECONFIG is the plugin's server
    async with client.ApiClient() as api_client:
        api = client.CustomObjectsApi(api_client)
        await api.create_namespaced_custom_object(GROUP, VERSION, kubewire_namespace, PLURAL,
                                                  widget("before"))  # found by the list
        controller = asyncio.create_task(WidgetController(api, kubewire_namespace).run())
        try:
            await kubewire_server.wait_for("widgets.example.com", "before",
                                           namespace=kubewire_namespace, condition=ready)
            await api.create_namespaced_custom_object(GROUP, VERSION, kubewire_namespace,
                                                      PLURAL, widget("watched"))
            await kubewire_server.wait_for("widgets.example.com", "watched",
                                           namespace=kubewire_namespace, condition=ready)
            # its watch ends: the loop must watch again and see what comes next
            assert kubewire_server.faults.drop_watches(resource="widgets") == 1
            await api.create_namespaced_custom_object(GROUP, VERSION, kubewire_namespace,
                                                      PLURAL, widget("after-drop"))
            await kubewire_server.wait_for("widgets.example.com", "after-drop",
                                           namespace=kubewire_namespace, condition=ready)
        finally:
            controller.cancel()
            await asyncio.gather(controller, return_exceptions=True)
    patches = kubewire_server.requests(verb="patch", resource="widgets", subresource="status")
    assert sorted(entry.name for entry in patches) == ["after-drop", "before", "watched"]
    assert {entry.code for entry in patches} == {200}
    watches = kubewire_server.requests(verb="watch", resource="widgets")
    assert len(watches) >= 1  # the dropped one (the open one is recorded when it ends)
    assert kubewire_server.requests(verb="delete", resource="widgets") == []
