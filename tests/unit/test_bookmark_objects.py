"""A BOOKMARK's object is the watched kind's Go zero value carrying the revision
(watch-protocol.md §5.3): built-in kinds as encoding/json writes their zero struct, custom kinds
(unstructured) with nothing but what is set."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from kubewire.client.events import decode_bookmark
from kubewire.resources import REGISTRY, Resource
from kubewire.storage.cached import bookmark_line
from tests.gateway_api import gateway_registry, gateway_resource


def _resource(resource_id: str) -> Resource:
    resource = REGISTRY.by_id(resource_id)
    assert resource is not None
    return resource


def test_pod_bookmark_is_what_kube_apiserver_sends() -> None:
    # The line observed from real servers, as recorded in watch-protocol.md §5.3.
    assert bookmark_line(_resource("core/pods"), 12746) == (
        b'{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":'
        b'{"resourceVersion":"12746","creationTimestamp":null},"spec":{"containers":null},'
        b'"status":{}}}\n')


def test_custom_kind_bookmark_carries_only_what_is_set() -> None:
    line = json.loads(bookmark_line(gateway_resource("gateways"), 12746))
    assert line["object"] == {"kind": "Gateway", "apiVersion": "gateway.networking.k8s.io/v1",
                              "metadata": {"resourceVersion": "12746"}}


def test_initial_events_end_annotations_follow_the_zero_metadata() -> None:
    line = json.loads(bookmark_line(_resource("core/pods"), 13519, initial_events_end=True))
    meta = line["object"]["metadata"]
    assert list(meta) == ["resourceVersion", "creationTimestamp", "annotations"]
    assert meta["annotations"]["k8s.io/initial-events-end"] == "true"


@pytest.mark.parametrize("resource", list(gateway_registry()),
                         ids=lambda r: f"{r.api_version}/{r.kind}")
def test_every_bookmark_is_a_resume_point_for_clients(resource: Resource) -> None:
    """Whatever the shell, the object names the kind and carries the revision, and the
    client's Bookmark decoder reads it."""
    line = bookmark_line(resource, 42)
    event: dict[str, Any] = json.loads(line)
    obj = event["object"]
    assert (obj["kind"], obj["apiVersion"]) == (resource.kind, resource.api_version)
    assert obj["metadata"]["resourceVersion"] == "42"
    raw = msgspec.json.decode(line, type=dict[str, msgspec.Raw])["object"]
    assert decode_bookmark(raw).metadata.resource_version == "42"
