"""How each kind of answer ends, byte for byte, as kube-apiserver v1.32 writes it.

kube's JSON serializer writes through Go's ``json.Encoder``, which ends every value with
``\\n``: objects, lists, Tables, Status errors, discovery. ``/version`` (``WriteRawJSON``,
indented) and OpenAPI (kube-openapi: ``json.Marshal`` bytes) end at ``}``. The table of
sources is in ``kubewire.server.wire.encoding``'s docstring.

Bodies are read from a raw socket to the connection's end, so a ``Content-Length`` that does
not count the newline (or counts one not sent) fails here rather than in a later request.
"""

from __future__ import annotations

import gzip
import json
import socket
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, utils

from tests.integration.harness import ServerThread
from tests.integration.test_access import https, issue
from tests.integration.wire import create, host_port

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


@dataclass(frozen=True)
class Raw:
    status: int
    headers: dict[str, str]
    body: bytes


def raw(server: ServerThread, method: str, path: str, body: bytes | None = None,
        headers: dict[str, str] | None = None) -> Raw:
    """One request with ``Connection: close``; the answer read to EOF, its Content-Length
    checked against the bytes that came."""
    hdrs = {"Host": "x", "Connection": "close", **(headers or {})}
    if body is not None:
        hdrs.setdefault("Content-Type", "application/json")
        hdrs["Content-Length"] = str(len(body))
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items())
    with socket.create_connection(host_port(server), timeout=10) as sock:
        sock.sendall(head.encode() + b"\r\n" + (body or b""))
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head_bytes, _, rest = data.partition(b"\r\n\r\n")
    lines = head_bytes.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers_out = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    if method != "HEAD":
        assert int(headers_out["content-length"]) == len(rest), (headers_out, rest[-40:])
    return Raw(status, headers_out, rest)


def ends_as_go_encoder(body: bytes) -> bool:
    """One JSON value, then exactly one ``\\n`` (``json.Encoder.Encode``)."""
    return body.endswith(b"\n") and not body.endswith(b"\n\n") and bool(json.loads(body))


def pod(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}


def dumps(value: Any) -> bytes:
    return json.dumps(value).encode()


PODS = "/api/v1/namespaces/default/pods"


def test_objects_lists_and_writes_end_with_one_newline(server: ServerThread) -> None:
    created = raw(server, "POST", PODS, dumps(pod("a")))
    assert created.status == 201 and ends_as_go_encoder(created.body)
    got = raw(server, "GET", f"{PODS}/a")
    assert got.status == 200 and ends_as_go_encoder(got.body)
    assert got.body == created.body  # the stored bytes, with the same ending
    listed = raw(server, "GET", PODS)
    assert listed.status == 200 and ends_as_go_encoder(listed.body)
    assert listed.body.endswith(b"]}\n")
    replaced = raw(server, "PUT", f"{PODS}/a", dumps({**json.loads(got.body),
                                                      "metadata": {"name": "a", "labels": {}}}))
    assert replaced.status == 200 and ends_as_go_encoder(replaced.body)
    patched = raw(server, "PATCH", f"{PODS}/a", b'{"metadata":{"labels":{"x":"y"}}}',
                  {"Content-Type": "application/merge-patch+json"})
    assert patched.status == 200 and ends_as_go_encoder(patched.body)
    dry = raw(server, "POST", f"{PODS}?dryRun=All", dumps(pod("b")))
    assert dry.status == 201 and ends_as_go_encoder(dry.body)
    head = raw(server, "HEAD", f"{PODS}/a")
    assert int(head.headers["content-length"]) == len(raw(server, "GET", f"{PODS}/a").body)
    deleted = raw(server, "DELETE", f"{PODS}/a")
    assert deleted.status == 200 and ends_as_go_encoder(deleted.body)
    collection = raw(server, "DELETE", PODS)
    assert collection.status == 200 and ends_as_go_encoder(collection.body)


def test_delete_success_status_and_scale_end_with_one_newline(server: ServerThread) -> None:
    create(server, "/api/v1/namespaces/default/configmaps",
           {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}})
    deleted = raw(server, "DELETE", "/api/v1/namespaces/default/configmaps/cm")
    assert deleted.status == 200 and json.loads(deleted.body)["status"] == "Success"
    assert ends_as_go_encoder(deleted.body)
    create(server, "/apis/apps/v1/namespaces/default/deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
            "metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
    scale = raw(server, "GET", "/apis/apps/v1/namespaces/default/deployments/d/scale")
    assert scale.status == 200 and ends_as_go_encoder(scale.body)


def test_tables_end_with_one_newline(server: ServerThread) -> None:
    create(server, PODS, pod("a"))
    for path in (PODS, f"{PODS}/a"):
        table = raw(server, "GET", path, headers={"Accept": TABLE})
        assert table.status == 200 and json.loads(table.body)["kind"] == "Table"
        assert ends_as_go_encoder(table.body)


@pytest.mark.parametrize(("method", "path", "body", "headers", "code"), [
    ("GET", f"{PODS}/missing", None, {}, 404),
    ("POST", PODS, b"{not json", {}, 400),
    ("POST", PODS, dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}}), {},
     422),
    ("POST", f"{PODS}/x", dumps(pod("x")), {}, 405),
    ("GET", PODS, None, {"Accept": "application/vnd.kubernetes.protobuf"}, 406),
    ("POST", PODS, dumps(pod("x")), {"Content-Type": "text/plain"}, 415),
    ("GET", "/api/v1/namespaces?timeout=1ns", None, {}, 504),
    ("GET", "/apis/apps/v1/nothings", None, {}, 404),
])
def test_status_errors_end_with_one_newline(server: ServerThread, method: str, path: str,
                                            body: bytes | None, headers: dict[str, str],
                                            code: int) -> None:
    answer = raw(server, method, path, body, headers)
    assert answer.status == code
    assert json.loads(answer.body)["kind"] == "Status"
    assert ends_as_go_encoder(answer.body)


def test_conflict_and_too_large_end_with_one_newline(server: ServerThread) -> None:
    create(server, PODS, pod("a"))
    conflict = raw(server, "POST", PODS, dumps(pod("a")))
    assert conflict.status == 409 and ends_as_go_encoder(conflict.body)
    # answered on the head, over the 3 MiB body bound
    too_large = raw(server, "POST", PODS, headers={"Content-Type": "application/json",
                                                   "Content-Length": str(4 << 20)})
    assert too_large.status == 413 and ends_as_go_encoder(too_large.body)


def test_401_and_403_end_with_one_newline(make_server: Callable[..., ServerThread],
                                          tmp_path: Path) -> None:
    policy = tmp_path / "abac.jsonl"
    policy.write_text(json.dumps({
        "apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy",
        "spec": {"user": "bob", "namespace": "a", "resource": "*", "apiGroup": "*"}}) + "\n")
    secure = make_server(insecure_http=False, authorization_policy_file=policy)
    unauthorized = https(secure, "GET", "/api/v1/pods", token="wrong")
    assert unauthorized.status == 401 and ends_as_go_encoder(unauthorized.body)
    kubeconfig = yaml.safe_load(issue(secure, "bob", token=True).read_text())
    token = kubeconfig["users"][0]["user"]["token"]
    forbidden = https(secure, "GET", "/api/v1/namespaces/b/pods", token=token)
    assert forbidden.status == 403 and ends_as_go_encoder(forbidden.body)


@pytest.mark.parametrize(("path", "accept"), [
    ("/api", ""), ("/apis", ""), ("/apis/apps", ""), ("/api/v1", ""), ("/apis/apps/v1", ""),
    ("/api", AGGREGATED), ("/apis", AGGREGATED),
])
def test_discovery_ends_with_one_newline(server: ServerThread, path: str, accept: str) -> None:
    answer = raw(server, "GET", path, headers={"Accept": accept} if accept else {})
    assert answer.status == 200 and ends_as_go_encoder(answer.body)


def test_version_is_indented_json_without_a_final_newline(server: ServerThread) -> None:
    answer = raw(server, "GET", "/version")
    assert answer.status == 200
    assert answer.headers["content-type"] == "application/json"
    info = json.loads(answer.body)
    # Go's json.MarshalIndent(info, "", "  "), as WriteRawJSON writes it
    assert answer.body == ("{\n" + ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}"
                                              for k, v in info.items()) + "\n}").encode()
    assert list(info)[:3] == ["major", "minor", "gitVersion"]


@pytest.mark.parametrize("path", ["/openapi/v3", "/openapi/v3/api/v1"])
def test_openapi_v3_ends_without_a_newline(server: ServerThread, path: str) -> None:
    answer = raw(server, "GET", path)
    assert answer.status == 200 and answer.body.endswith(b"}") and json.loads(answer.body)


def test_a_gzipped_list_holds_the_newline(server: ServerThread) -> None:
    for i in range(40):
        big = pod(f"p{i}")
        big["metadata"]["annotations"] = {"a": "x" * 4096}
        create(server, PODS, big)
    plain = raw(server, "GET", PODS)
    zipped = raw(server, "GET", PODS, headers={"Accept-Encoding": "gzip"})
    assert zipped.headers["content-encoding"] == "gzip"
    assert gzip.decompress(zipped.body) == plain.body
    assert ends_as_go_encoder(plain.body)


MULTI = textwrap.dedent("""\
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: one
    data:
      a: b
    ---
    apiVersion: v1
    kind: Service
    metadata:
      name: two
    spec:
      ports:
      - port: 80
    ---
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: three
    spec:
      selector:
        matchLabels: {app: three}
      template:
        metadata:
          labels: {app: three}
        spec:
          containers:
          - name: c
            image: nginx
    """)


def _already_exists(resource: str, name: str, group: str = "") -> str:
    """``FailToCreateError``'s text for one 409: the reason, then kube's body as it came."""
    qualified = f"{resource}.{group}" if group else resource
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
              "message": f'{qualified} "{name}" already exists', "reason": "AlreadyExists",
              "details": {"name": name, **({"group": group} if group else {}), "kind": resource},
              "code": 409}
    return f"Error from server (Conflict): {json.dumps(status, separators=(',', ':'))}\n"


def test_create_from_yaml_reports_several_conflicts_as_kube_does(server: ServerThread,
                                                                  tmp_path: Path) -> None:
    """The ``kubernetes`` package's own e2e case: objects that already exist give one
    FailToCreateError whose text joins each 409's body, newline included."""
    manifest = tmp_path / "multi.yaml"
    manifest.write_text(MULTI)
    with client.ApiClient(client.Configuration(host=server.url)) as api:
        utils.create_from_yaml(api, str(manifest), namespace="default")
        with pytest.raises(utils.FailToCreateError) as failed:
            utils.create_from_yaml(api, str(manifest), namespace="default")
    assert str(failed.value) == (_already_exists("configmaps", "one")
                                 + _already_exists("services", "two")
                                 + _already_exists("deployments", "three", "apps"))
