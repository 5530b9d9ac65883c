"""Hostile input against the API, property-based: bodies, patches, selectors, query parameters.

Every answer is either a success or a well-formed Status with a 4xx code matching its reason —
never a 500, never a hang (every socket has a timeout) — and a rejected request (or any read)
leaves the store as it was: lists of several kinds, global resourceVersion included, are equal
before and after. One server serves a whole module (hypothesis runs many examples against it);
seeded objects named ``existing`` make fully valid creates answer 409, so most examples reach
deep into the write path without growing the store.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubewire.server.context import ServerConfig
from tests.integration.harness import ServerThread
from tests.integration.kinds import CONFIG_MAP, DEPLOYMENT, GATEWAY, NAMESPACE, NODE, POD, Kind
from tests.integration.wire import Session, create, host_port
from tests.reliability.strategies import (
    HOSTILE,
    JSON_PATCHES,
    MEDIA_TYPES,
    MERGE_PATCHES,
    QUERY_VALUES,
    SELECTOR_TEXT,
    STRATEGIC_PATCHES,
    apply_documents,
    check_status_body,
    query_strings,
    request_bodies,
)

TIMEOUT_S = 15.0  # a hung server fails the example instead of the whole run
KINDS = [POD, CONFIG_MAP, DEPLOYMENT, GATEWAY]
SNAPSHOT = [*(k.collection(None) for k in KINDS), NAMESPACE.collection(), NODE.collection()]
BODY_TYPES = ["application/json", "application/json", "application/yaml",
              "application/vnd.kubernetes.protobuf", ""]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    data_dir: Path = tmp_path_factory.mktemp("hostile")
    server = ServerThread(ServerConfig(data_dir=data_dir, host="127.0.0.1", port=0,
                                       insecure_http=True)).start()
    try:
        for kind in KINDS:
            create(server, kind.collection(), kind.obj("existing", labels={"app": "web"}))
        yield server
    finally:
        server.stop()


# --- helpers ------------------------------------------------------------------------------------

def snapshot(server: ServerThread) -> list[Any]:
    with Session(server) as session:
        lists = [session.call("GET", path) for path in SNAPSHOT]
    assert all(r.status == 200 for r in lists), [r.body[:200] for r in lists]
    return [r.json for r in lists]


def exchange(server: ServerThread, method: str, path: str, body: bytes | None = None,
             headers: dict[str, str] | None = None) -> tuple[int, str, bytes]:
    """One request on a fresh connection; a streamed (watch) answer is closed after its head."""
    host, port = host_port(server)
    conn = http.client.HTTPConnection(host, port, timeout=TIMEOUT_S)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        content_type = resp.getheader("Content-Type", "")
        if resp.getheader("Transfer-Encoding", "") == "chunked":
            assert 200 <= resp.status < 300, resp.status  # only watches stream
            return resp.status, content_type, b""
        data = resp.read()
        return resp.status, content_type, data
    finally:
        conn.close()


def check(server: ServerThread, method: str, path: str, body: bytes | None = None,
          headers: dict[str, str] | None = None) -> int:
    """Send, check the answer, and check a rejected request (or a read) changed nothing."""
    before = snapshot(server)
    status, content_type, data = exchange(server, method, path, body, headers)
    note = f"{method} {path} {headers} {(body or b'')[:300]!r}"
    assert status < 500, f"{status} {data[:500]!r} for {note}"
    if status >= 300:
        try:
            check_status_body(status, content_type, data)
        except AssertionError as exc:
            raise AssertionError(f"{exc} for {note}") from None
    if status >= 300 or method == "GET":
        assert snapshot(server) == before, f"store changed by a rejected request: {note}"
    return status


def url(path: str, pairs: list[tuple[str, str]]) -> str:
    if not pairs:
        return path
    return path + "?" + urlencode(pairs, quote_via=quote)


# --- bodies -------------------------------------------------------------------------------------

@HOSTILE
@given(data=st.data())
def test_create_bodies(hostile: ServerThread, data: st.DataObject) -> None:
    kind: Kind = data.draw(st.sampled_from(KINDS))
    body = data.draw(request_bodies(kind.obj("existing")))
    content_type = data.draw(st.sampled_from(BODY_TYPES))
    headers = {"Content-Type": content_type} if content_type else {}
    check(hostile, "POST", kind.collection(), body, headers)


@HOSTILE
@given(data=st.data())
def test_update_bodies(hostile: ServerThread, data: st.DataObject) -> None:
    kind: Kind = data.draw(st.sampled_from(KINDS))
    body = data.draw(request_bodies(kind.obj("existing")))
    content_type = data.draw(st.sampled_from(BODY_TYPES))
    headers = {"Content-Type": content_type} if content_type else {}
    check(hostile, "PUT", kind.item("existing"), body, headers)


_DELETE_OPTIONS = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                   "preconditions": {"uid": "u", "resourceVersion": "1"},
                   "propagationPolicy": "Background", "dryRun": ["All"]}


@HOSTILE
@given(data=st.data())
def test_delete_options_bodies(hostile: ServerThread, data: st.DataObject) -> None:
    """DeleteOptions bodies on a delete of a missing object and on a delete-collection whose
    selector matches nothing: a body either parses (then 404 / an empty list) or is a 400."""
    kind: Kind = data.draw(st.sampled_from(KINDS))
    body = data.draw(request_bodies(_DELETE_OPTIONS))
    path = data.draw(st.sampled_from([kind.item("missing-object"),
                                      kind.collection() + "?labelSelector=app%3Dnone-such"]))
    check(hostile, "DELETE", path, body, {"Content-Type": "application/json"})


# --- patches ------------------------------------------------------------------------------------

PATCH_TYPES = {
    "application/json-patch+json": lambda kind: JSON_PATCHES,
    "application/merge-patch+json": lambda kind: MERGE_PATCHES,
    "application/strategic-merge-patch+json": lambda kind: STRATEGIC_PATCHES,
    "application/apply-patch+yaml": lambda kind: apply_documents(kind.obj("existing")),
}


@HOSTILE
@given(data=st.data())
def test_patch_documents(hostile: ServerThread, data: st.DataObject) -> None:
    kind: Kind = data.draw(st.sampled_from(KINDS))
    patch_type = data.draw(st.sampled_from(sorted(PATCH_TYPES)))
    body = data.draw(PATCH_TYPES[patch_type](kind))
    pairs = [("fieldManager", "fuzz")] if data.draw(st.integers(0, 4)) else []
    if data.draw(st.booleans()):
        pairs.append(("force", data.draw(st.sampled_from(["true", "false", "x"]))))
    check(hostile, "PATCH", url(kind.item("existing"), pairs), body,
          {"Content-Type": patch_type})


def test_json_patch_copy_bomb_is_refused(hostile: ServerThread) -> None:
    """Each copy of a map into itself doubles it: the accumulated copy size is bounded."""
    ops = [{"op": "copy", "from": "/metadata/labels", "path": f"/metadata/labels/x{i}"}
           for i in range(64)]
    status = check(hostile, "PATCH", CONFIG_MAP.item("existing"), json.dumps(ops).encode(),
                   {"Content-Type": "application/json-patch+json"})
    assert status == 422


@pytest.mark.parametrize("depth", [250, 600, 5000, 100_000])
@pytest.mark.parametrize("how", ["create", "merge", "strategic", "apply", "json-patch",
                                 "delete-options"])
def test_deep_nesting_is_a_bad_request(hostile: ServerThread, depth: int, how: str) -> None:
    """Deep documents are refused with 400, not a RecursionError deep in the write path."""
    nested = '{"a":' * depth + "1" + "}" * depth
    obj = (f'{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"existing",'
           f'"annotations":{nested}}}}}')
    cases = {
        "create": ("POST", CONFIG_MAP.collection(), obj, "application/json"),
        "merge": ("PATCH", CONFIG_MAP.item("existing"), f'{{"metadata":{nested}}}',
                  "application/merge-patch+json"),
        "strategic": ("PATCH", CONFIG_MAP.item("existing"), f'{{"metadata":{nested}}}',
                      "application/strategic-merge-patch+json"),
        "apply": ("PATCH", CONFIG_MAP.item("existing") + "?fieldManager=fuzz", obj,
                  "application/apply-patch+yaml"),
        "json-patch": ("PATCH", CONFIG_MAP.item("existing"),
                       f'[{{"op":"add","path":"/metadata/labels","value":{nested}}}]',
                       "application/json-patch+json"),
        "delete-options": ("DELETE", CONFIG_MAP.item("existing"),
                           f'{{"preconditions":{nested}}}', "application/json"),
    }
    method, path, body, content_type = cases[how]
    assert check(hostile, method, path, body.encode(), {"Content-Type": content_type}) == 400


# --- selectors and query parameters -------------------------------------------------------------

@HOSTILE
@given(kind=st.sampled_from(KINDS), label=SELECTOR_TEXT, field=SELECTOR_TEXT,
       which=st.sampled_from(["label", "field", "both"]), watch=st.booleans(),
       namespaced=st.booleans())
def test_selectors(hostile: ServerThread, kind: Kind, label: str, field: str, which: str,
                   watch: bool, namespaced: bool) -> None:
    pairs = []
    if which in ("label", "both"):
        pairs.append(("labelSelector", label))
    if which in ("field", "both"):
        pairs.append(("fieldSelector", field))
    if watch:
        pairs += [("watch", "true"), ("timeoutSeconds", "1")]
    collection = kind.collection() if namespaced else kind.collection(None)
    check(hostile, "GET", url(collection, pairs))


@HOSTILE
@given(kind=st.sampled_from(KINDS), pairs=query_strings(),
       target=st.sampled_from(["list", "get", "create", "update", "patch", "delete",
                               "watch", "watch-item"]))
def test_query_parameters(hostile: ServerThread, kind: Kind, pairs: list[tuple[str, str]],
                          target: str) -> None:
    existing = json.dumps(kind.obj("existing")).encode()
    requests: dict[str, tuple[str, str, bytes | None, dict[str, str]]] = {
        "list": ("GET", kind.collection(), None, {}),
        "get": ("GET", kind.item("existing"), None, {}),
        "create": ("POST", kind.collection(), existing, {"Content-Type": "application/json"}),
        "update": ("PUT", kind.item("missing-object"), existing,
                   {"Content-Type": "application/json"}),
        "patch": ("PATCH", kind.item("existing"), b'{"metadata":{"labels":{"app":"web"}}}',
                  {"Content-Type": "application/merge-patch+json"}),
        "delete": ("DELETE", kind.item("missing-object"), None, {}),
        "watch": ("GET", kind.collection(), None, {}),
        "watch-item": ("GET", kind.collection(), None, {}),
    }
    method, path, body, headers = requests[target]
    if target == "watch":
        pairs = [("watch", "true"), *pairs]
    elif target == "watch-item":
        pairs = [("watch", "1"), ("fieldSelector", "metadata.name=existing"), *pairs]
    if target.startswith("watch") and not any(k == "timeoutSeconds" for k, _ in pairs):
        pairs.append(("timeoutSeconds", "1"))
    check(hostile, method, url(path, pairs), body, headers)


@HOSTILE
@given(kind=st.sampled_from(KINDS), token=QUERY_VALUES["continue"],
       limit=st.one_of(st.none(), QUERY_VALUES["limit"]),
       rv=st.one_of(st.none(), QUERY_VALUES["resourceVersion"]))
def test_continue_tokens_and_resource_versions(hostile: ServerThread, kind: Kind, token: str,
                                               limit: str | None, rv: str | None) -> None:
    pairs = [("continue", token)]
    if limit is not None:
        pairs.append(("limit", limit))
    if rv is not None:
        pairs.append(("resourceVersion", rv))
    check(hostile, "GET", url(kind.collection(None), pairs))


# --- negotiated headers -------------------------------------------------------------------------

@HOSTILE
@given(kind=st.sampled_from(KINDS), content_type=MEDIA_TYPES, accept=MEDIA_TYPES,
       method=st.sampled_from(["GET", "POST", "PUT", "PATCH", "LIST", "WATCH"]))
def test_content_type_and_accept(hostile: ServerThread, kind: Kind, content_type: str,
                                 accept: str, method: str) -> None:
    body = json.dumps(kind.obj("existing")).encode()
    headers = {"Content-Type": content_type, "Accept": accept}
    if method == "GET":
        check(hostile, "GET", kind.item("existing"), None, {"Accept": accept})
    elif method == "LIST":
        check(hostile, "GET", kind.collection(), None, {"Accept": accept})
    elif method == "WATCH":
        check(hostile, "GET", kind.collection() + "?watch=true&timeoutSeconds=1", None,
              {"Accept": accept})
    elif method == "PATCH":
        check(hostile, "PATCH", kind.item("existing") + "?fieldManager=fuzz",
              b'{"metadata":{"labels":{"app":"web"}}}', headers)
    elif method == "PUT":
        check(hostile, "PUT", kind.item("missing-object"), body, headers)
    else:
        check(hostile, "POST", kind.collection(), body, headers)


def test_warning_naming_a_non_latin1_field_is_answered(hostile: ServerThread) -> None:
    """A Warning header quoting a field name outside latin-1 used to fail to encode after the
    write had committed: the client never got an answer (found by test_patch_documents)."""
    body = json.dumps({"metadata": {"labels": {"app": "web"}}, "\ucf40": 1}).encode()
    host, port = host_port(hostile)
    conn = http.client.HTTPConnection(host, port, timeout=TIMEOUT_S)
    try:
        conn.request("PATCH", CONFIG_MAP.item("existing") + "?fieldValidation=Warn", body,
                     {"Content-Type": "application/merge-patch+json"})
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 200
        warning = resp.getheader("Warning", "").encode("latin-1").decode("utf-8")
        assert "\ucf40" in warning, warning
    finally:
        conn.close()
