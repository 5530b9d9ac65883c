"""No-op writes do not write, for every served kind (kube's GuaranteedUpdate rule).

kube-apiserver's store (``apiserver/pkg/registry/generic/registry/store.go`` Update through
``storage.GuaranteedUpdate``) skips the write when the updated object encodes to the stored
bytes and answers the stored object: same resourceVersion, same generation, no watch event.
Defaulting runs while decoding, before the strategy compares old and new, so an object that only
lacks its defaults is unchanged too; and server-side apply leaves managedFields (and their
timestamps) alone when nothing changed.

Each kind's object is created, then sent back unchanged every way a client can: PUT of the
returned object, merge patch ``{}``, JSON patch ``[]``, strategic merge patch ``{}`` (built-in
kinds) and server-side apply of one manifest twice. A watch from the create's resourceVersion
must then show no MODIFIED: absence is proven without sleeping by a sentinel object created
last, whose ADDED must be the next event after the applied object's.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.harness import ServerThread
from tests.integration.kinds import ALL_KINDS, GATEWAY, HTTP_ROUTE, Kind, kind_id
from tests.integration.kubectl import needs_kubectl
from tests.integration.kubectl import ok as kubectl
from tests.integration.wire import call, name_of, watch

APPLY = {"Content-Type": "application/apply-patch+yaml"}
SMP = {"Content-Type": "application/strategic-merge-patch+json"}
JSON_PATCH = {"Content-Type": "application/json-patch+json"}
MERGE = {"Content-Type": "application/merge-patch+json"}

# Objects whose schema defaults sit inside list items that apply replaces: the case that
# bumped generation when defaults were filled after the strategy compared old and new.
ROUTE_WITH_RULES = Kind(
    "HTTPRoute", HTTP_ROUTE.api_version, HTTP_ROUTE.plural, True,
    {"spec": {"parentRefs": [{"name": "gw"}], "hostnames": ["a.example.com"],
              "rules": [{"backendRefs": [{"name": "web", "port": 80}]},
                        {"matches": [{"path": {"value": "/api"}}],
                         "backendRefs": [{"name": "api", "port": 8080}]}]}},
    {}, is_custom=True)
GATEWAY_WITH_ROUTES = Kind(
    "Gateway", GATEWAY.api_version, GATEWAY.plural, True,
    {"spec": {"gatewayClassName": "example",
              "listeners": [{"name": "http", "port": 80, "protocol": "HTTP",
                             "allowedRoutes": {"kinds": [{"kind": "HTTPRoute"}]}},
                            {"name": "https", "port": 443, "protocol": "HTTPS",
                             "hostname": "a.example.com",
                             "tls": {"certificateRefs": [{"name": "cert"}]}}]}},
    {}, is_custom=True)
DEFAULTED = (ROUTE_WITH_RULES, GATEWAY_WITH_ROUTES)
CASES = [*ALL_KINDS, *DEFAULTED]


def _case_id(kind: Kind) -> str:
    return kind_id(kind) + ("-defaulted" if kind in DEFAULTED else "")


def _version(obj: dict[str, Any]) -> tuple[str, Any]:
    meta = obj["metadata"]
    return meta["resourceVersion"], meta.get("generation")


def _write(server: ServerThread, method: str, path: str, body: Any,
           headers: dict[str, str]) -> dict[str, Any]:
    reply = call(server, method, path, body, headers, params={"fieldManager": "noop-test"})
    assert reply.status in (200, 201), (method, headers, reply.status, reply.body[:500])
    result: dict[str, Any] = reply.json
    return result


def _settled(server: ServerThread, kind: Kind, written: dict[str, Any]) -> dict[str, Any]:
    """The object once its controller has written its status (kube's quota controller does),
    so that the writes below are the only ones; ``written`` for other kinds."""
    if not kind.controller_status:
        return written
    path = kind.item(written["metadata"]["name"])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        current: dict[str, Any] = call(server, "GET", path).json
        if current.get("status"):
            return current
        time.sleep(0.02)
    raise AssertionError(f"no status written for {path}")


def _no_modified_since(server: ServerThread, kind: Kind, since: str, sentinel: str) -> list[
        tuple[str, str]]:
    """The (type, name) events from ``since`` up to the sentinel's ADDED."""
    with watch(server, kind.collection(), resourceVersion=since) as stream:
        events = stream.events_until(lambda e: e["type"] == "ADDED"
                                     and name_of(e) == sentinel, timeout=10)
    return [(e["type"], name_of(e)) for e in events]


@pytest.mark.parametrize("kind", CASES, ids=_case_id)
def test_unchanged_writes_keep_version_and_send_no_event(server: ServerThread,
                                                         kind: Kind) -> None:
    created = _settled(server, kind, _write(server, "POST", kind.collection(), kind.obj("noop"),
                                            {}))
    before = _version(created)
    item = kind.item("noop")
    answers = {
        "put": _write(server, "PUT", item, created, {}),
        "merge {}": _write(server, "PATCH", item, {}, MERGE),
        "json []": _write(server, "PATCH", item, [], JSON_PATCH),
    }
    if not kind.is_custom:  # custom resources have no strategic merge patch
        answers["strategic {}"] = _write(server, "PATCH", item, {}, SMP)
    for how, answer in answers.items():
        assert _version(answer) == before, how
        assert answer["metadata"].get("managedFields") == created["metadata"].get(
            "managedFields"), how

    _write(server, "POST", kind.collection(), kind.obj("sentinel"), {})
    assert _no_modified_since(server, kind, before[0], "sentinel") == [("ADDED", "sentinel")]

    manifest = kind.obj("applied")
    applied = _settled(server, kind, _write(server, "PATCH", kind.item("applied"),
                                            json.dumps(manifest).encode(), APPLY))
    if kind in DEFAULTED:
        manifest, applied = _apply_with_defaults(server, kind, manifest, applied)
    again = _write(server, "PATCH", kind.item("applied"), json.dumps(manifest).encode(), APPLY)
    assert _version(again) == _version(applied)
    assert again["metadata"].get("managedFields") == applied["metadata"].get("managedFields")
    assert again == applied

    _write(server, "POST", kind.collection(), kind.obj("sentinel-2"), {})
    assert _no_modified_since(server, kind, applied["metadata"]["resourceVersion"],
                              "sentinel-2") == [("ADDED", "sentinel-2")]


def _apply_with_defaults(server: ServerThread, kind: Kind, manifest: dict[str, Any],
                         applied: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A manifest whose atomic lists lack their schema defaults is not a no-op in kube either:
    structured-merge-diff's ``Updater.Apply`` compares the merged object with the live one
    before defaulting, so the applier's managedFields time moves (and the store writes) once
    the clock has passed a second. What never moves is the spec and the generation. The manifest
    that carries its defaults (as the server returned them) is the one a second apply leaves
    alone; it is applied once here, which may give the applier the defaulted fields."""
    again = _write(server, "PATCH", kind.item("applied"), json.dumps(manifest).encode(), APPLY)
    assert again["spec"] == applied["spec"]
    assert again["metadata"]["generation"] == applied["metadata"]["generation"]
    defaulted = {"apiVersion": manifest["apiVersion"], "kind": manifest["kind"],
                 "metadata": manifest["metadata"], "spec": again["spec"]}
    return defaulted, _write(server, "PATCH", kind.item("applied"),
                             json.dumps(defaulted).encode(), APPLY)


@needs_kubectl
@pytest.mark.parametrize("kind", [ROUTE_WITH_RULES, GATEWAY_WITH_ROUTES, ALL_KINDS[4]],
                         ids=_case_id)
@pytest.mark.parametrize("server_side", [False, True], ids=["client-side", "server-side"])
def test_kubectl_apply_twice_writes_once(server: ServerThread, tmp_path: Path, kind: Kind,
                                         server_side: bool) -> None:
    path = tmp_path / "manifest.yaml"
    obj = kind.obj("kubectl")
    obj["metadata"]["namespace"] = "default"
    path.write_text(yaml.safe_dump(obj))
    flags = ["--server-side"] if server_side else []
    kubectl(server, "apply", *flags, "-f", str(path))
    if server_side and kind in DEFAULTED:  # see _apply_with_defaults: carry the defaults
        obj["spec"] = call(server, "GET", kind.item("kubectl")).json["spec"]
        path.write_text(yaml.safe_dump(obj))
        kubectl(server, "apply", *flags, "-f", str(path))
    first = call(server, "GET", kind.item("kubectl")).json
    kubectl(server, "apply", *flags, "-f", str(path))
    second = call(server, "GET", kind.item("kubectl")).json
    assert _version(second) == _version(first)
    assert second == first
    _write(server, "POST", kind.collection(), kind.obj("sentinel"), {})
    assert _no_modified_since(server, kind, first["metadata"]["resourceVersion"],
                              "sentinel") == [("ADDED", "sentinel")]
