"""``/openapi/v2`` on a running server: raw HTTP (JSON, kubectl's protobuf read back with an
independent wire reader, ETag and 304, gzip, 406) and kubectl 1.32's v2 consumers (``explain
--output=plaintext-openapiv2``; ``apply``/``create`` of an unknown kind, whose client-side
validation reads v2 before the REST mapping fails with kube's message)."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

from tests.gnostic_wire import Doc
from tests.integration.harness import ServerThread
from tests.integration.kubectl import needs_kubectl, ok, run
from tests.integration.wire import call

KUBECTL_ACCEPT = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
PROTOBUF_CONTENT_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
UNKNOWN_KIND = """\
apiVersion: example.com/v1
kind: Foo
metadata:
  name: x
"""


def test_json_answer(server: ServerThread) -> None:
    reply = call(server, "GET", "/openapi/v2")
    assert reply.status == 200
    assert reply.headers["content-type"] == "application/json"
    assert reply.headers["etag"] == f'"{hashlib.sha512(reply.body).hexdigest().upper()}"'
    assert reply.headers["cache-control"] == "no-cache, private"
    assert reply.headers["last-modified"].endswith(" GMT")
    assert not reply.body.endswith(b"\n")
    doc = reply.json
    assert (doc["swagger"], doc["info"]["title"]) == ("2.0", "Kubernetes")
    pods = doc["paths"]["/api/v1/namespaces/{namespace}/pods"]
    assert pods["get"]["operationId"] == "listCoreV1NamespacedPod"
    assert doc["definitions"]["io.k8s.api.core.v1.Pod"]["x-kubernetes-group-version-kind"] == [
        {"group": "", "kind": "Pod", "version": "v1"}]


def test_protobuf_answer_as_kubectl_asks_for_it(server: ServerThread) -> None:
    as_json = call(server, "GET", "/openapi/v2")
    reply = call(server, "GET", "/openapi/v2", headers={"Accept": KUBECTL_ACCEPT})
    assert reply.status == 200
    assert reply.headers["content-type"] == PROTOBUF_CONTENT_TYPE
    assert reply.headers["etag"] == as_json.headers["etag"]  # one ETag for both forms
    proto = Doc(reply.body)
    assert (proto.swagger, proto.title) == ("2.0", "Kubernetes")
    assert list(proto.paths) == list(as_json.json["paths"])
    patch = proto.operation("/apis/apps/v1/namespaces/{namespace}/deployments/{name}", "patch")
    assert Doc.operation_id(patch) == "patchAppsV1NamespacedDeployment"
    assert Doc.operation_extensions(patch)["x-kubernetes-group-version-kind"] == {
        "group": "apps", "kind": "Deployment", "version": "v1"}
    assert "fieldValidation" in Doc.query_parameter_names(patch)
    deployment = proto.definitions["io.k8s.api.apps.v1.Deployment"]
    assert Doc.schema_extensions(deployment)["x-kubernetes-group-version-kind"] == [
        {"group": "apps", "kind": "Deployment", "version": "v1"}]


def test_etag_and_not_modified(server: ServerThread) -> None:
    first = call(server, "GET", "/openapi/v2", headers={"Accept": KUBECTL_ACCEPT})
    again = call(server, "GET", "/openapi/v2",
                 headers={"Accept": KUBECTL_ACCEPT, "If-None-Match": first.headers["etag"]})
    assert (again.status, again.body) == (304, b"")
    assert again.headers["etag"] == first.headers["etag"]
    since = call(server, "GET", "/openapi/v2",
                 headers={"If-Modified-Since": first.headers["last-modified"]})
    assert since.status == 304
    stale = call(server, "GET", "/openapi/v2", headers={"If-None-Match": '"0"'})
    assert (stale.status, stale.body) == (200, call(server, "GET", "/openapi/v2").body)


def test_gzip_and_not_acceptable(server: ServerThread) -> None:
    plain = call(server, "GET", "/openapi/v2", headers={"Accept": KUBECTL_ACCEPT})
    packed = call(server, "GET", "/openapi/v2",
                  headers={"Accept": KUBECTL_ACCEPT, "Accept-Encoding": "gzip"})
    assert packed.headers["content-encoding"] == "gzip"
    assert gzip.decompress(packed.body) == plain.body
    refused = call(server, "GET", "/openapi/v2", headers={"Accept": "application/yaml"})
    assert (refused.status, refused.body) == (406, b"")
    assert call(server, "GET", "/openapi/v2/").status == 404


@needs_kubectl
def test_kubectl_explain_reads_openapi_v2(server: ServerThread) -> None:
    out = ok(server, "explain", "pods.spec.containers", "--output=plaintext-openapiv2")
    assert "KIND:     Pod" in out
    assert "RESOURCE: containers <[]Object>" in out
    assert "name\t<string> -required-" in out
    out = ok(server, "explain", "deployments.spec.replicas", "--output=plaintext-openapiv2")
    assert "FIELD:    replicas <integer>" in out
    out = ok(server, "explain", "httproutes.spec", "--output=plaintext-openapiv2")
    assert "VERSION:  gateway.networking.k8s.io/v1" in out


@needs_kubectl
def test_kubectl_apply_and_create_of_an_unknown_kind_say_no_matches(
        server: ServerThread, tmp_path: Path) -> None:
    manifest = tmp_path / "foo.yaml"
    manifest.write_text(UNKNOWN_KIND)
    for verb in ("apply", "create"):
        done = run(server, verb, "-f", str(manifest))
        assert done.returncode == 1, (done.stdout, done.stderr)
        assert "could not find the requested resource" not in done.stderr
        assert ('resource mapping not found for name: "x" namespace: "" from '
                f'"{manifest}": no matches for kind "Foo" in version "example.com/v1"'
                ) in done.stderr, done.stderr
        assert "ensure CRDs are installed first" in done.stderr


@needs_kubectl
def test_kubectl_apply_with_validation_still_works(server: ServerThread, tmp_path: Path) -> None:
    manifest = tmp_path / "cm.yaml"
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": "c", "namespace": "default"},
                                    "data": {"a": "b"}}))
    out = ok(server, "apply", "--validate=true", "-f", str(manifest))
    assert "configmap/c created" in out


@needs_kubectl
def test_kubectl_explain_finds_create_only_bindings(server: ServerThread) -> None:
    """kubectl explain's v3 template finds the GVK on the resource's path: bindings has a POST
    alone (before it was documented: ``GVR (/v1, Resource=bindings) not found``)."""
    out = ok(server, "explain", "bindings.target")
    assert "KIND:       Binding" in out
    assert "FIELD: target <ObjectReference>" in out
    out = ok(server, "explain", "bindings.target", "--output=plaintext-openapiv2")
    assert "RESOURCE: target <Object>" in out
