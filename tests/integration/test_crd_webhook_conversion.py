"""A CRD with ``conversion.strategy: Webhook``, against the real server and a real HTTPS webhook.

The webhook runs in the test (``http.server`` over TLS, with a CA of its own given to the CRD as
``caBundle``) and renames ``spec.color`` (v1, the storage version) to ``spec.colour`` (v2).
Expectations from kube-apiserver v1.32 (``webhook_converter.go``; crds.md §6.3, §9.33): reads,
lists, watches and writes in v2 go through the webhook; its failures are HTTP 500 Status
objects without a reason whose message is kube's ``conversion webhook for <gvk> ...`` text.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from kubewire.server.access.pki import PEMPair, issue_serving, make_ca
from tests.integration.harness import ServerThread
from tests.integration.test_crds import CRDS, established
from tests.integration.wire import call, create, get, ok, watch

CRD_NAME = "gadgets.example.com"
V1 = "/apis/example.com/v1/namespaces/default/gadgets"
V2 = "/apis/example.com/v2/namespaces/default/gadgets"
SOURCE = "example.com/v1, Kind=Gadget"


@dataclass
class Webhook:
    """The test's conversion webhook: ``mode`` says how it answers; ``reviews`` what it got."""

    url: str
    ca: PEMPair
    mode: str = "ok"
    reviews: list[dict[str, Any]] = field(default_factory=list)

    def convert(self, obj: dict[str, Any], desired: str) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(json.dumps(obj))
        spec = out.setdefault("spec", {})
        if desired.endswith("/v2") and "color" in spec:
            spec["colour"] = spec.pop("color")
        if desired.endswith("/v1") and "colour" in spec:
            spec["color"] = spec.pop("colour")
        out["apiVersion"] = desired
        out.setdefault("metadata", {}).setdefault("labels", {})["converted"] = "yes"
        return out

    def answer(self, review: dict[str, Any]) -> dict[str, Any]:
        request = review["request"]
        objects = [self.convert(o, request["desiredAPIVersion"]) for o in request["objects"]]
        response: dict[str, Any] = {"uid": request["uid"], "convertedObjects": objects,
                                    "result": {"status": "Success"}}
        if self.mode == "wrong-uid":
            response["uid"] = "not-the-uid"
        elif self.mode == "failed-with-message":
            response["result"] = {"status": "Failure", "message": "cannot convert gadgets"}
        elif self.mode == "failed":
            response["result"] = {"status": "Failure"}
        elif self.mode == "too-few":
            response["convertedObjects"] = []
        elif self.mode == "renamed":
            for obj in objects:
                obj["metadata"]["name"] = "other"
        return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                "response": response}


@pytest.fixture
def webhook(tmp_path: Path) -> Iterator[Webhook]:
    ca = make_ca("webhook-ca")
    serving = issue_serving(ca, ["127.0.0.1"])
    (tmp_path / "tls.crt").write_bytes(serving.cert)
    (tmp_path / "tls.key").write_bytes(serving.key)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    hook: Webhook

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            hook.reviews.append(review)
            body = json.dumps(hook.answer(review)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    hook = Webhook(f"https://127.0.0.1:{httpd.server_address[1]}/convert", ca)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield hook
    httpd.shutdown()
    httpd.server_close()


def gadget_crd(url: str, ca_pem: bytes) -> dict[str, Any]:
    def version(name: str, storage: bool, field_name: str) -> dict[str, Any]:
        return {"name": name, "served": True, "storage": storage, "schema": {"openAPIV3Schema": {
            "type": "object", "properties": {"spec": {"type": "object", "properties": {
                field_name: {"type": "string"}}}}}}}

    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [version("v1", True, "color"), version("v2", False, "colour")],
            "conversion": {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"url": url,
                                 "caBundle": base64.b64encode(ca_pem).decode()}}},
        },
    }


def install(server: ServerThread, url: str, ca_pem: bytes) -> None:
    create(server, CRDS, gadget_crd(url, ca_pem))
    established(server, CRD_NAME)


def gadget(version: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"example.com/{version}", "kind": "Gadget",
            "metadata": {"name": name}, "spec": spec}


def test_reads_lists_watches_and_writes_convert_through_the_webhook(
        server: ServerThread, webhook: Webhook) -> None:
    install(server, webhook.url, webhook.ca.cert)
    created = create(server, V1, gadget("v1", "g1", {"color": "red"}))
    assert webhook.reviews == []  # written in the storage version: nothing to convert
    in_v2 = get(server, f"{V2}/g1")
    assert in_v2["apiVersion"] == "example.com/v2" and in_v2["spec"] == {"colour": "red"}
    assert in_v2["metadata"]["labels"] == {"converted": "yes"}  # the answer's labels are kept
    assert in_v2["metadata"]["uid"] == created["metadata"]["uid"]
    review = webhook.reviews[0]
    assert review["apiVersion"] == "apiextensions.k8s.io/v1"
    assert review["kind"] == "ConversionReview"
    assert review["request"]["desiredAPIVersion"] == "example.com/v2"
    assert [o["spec"] for o in review["request"]["objects"]] == [{"color": "red"}]
    create(server, V1, gadget("v1", "g2", {"color": "green"}))
    listed = get(server, V2)
    assert [(i["apiVersion"], i["spec"]) for i in listed["items"]] == [
        ("example.com/v2", {"colour": "red"}), ("example.com/v2", {"colour": "green"})]
    stream = watch(server, V2)
    initial = stream.events(2, 10)
    assert sorted(e["object"]["spec"]["colour"] for e in initial) == ["green", "red"]
    written = create(server, V2, gadget("v2", "g3", {"colour": "blue"}))
    assert written["apiVersion"] == "example.com/v2" and written["spec"] == {"colour": "blue"}
    added = stream.next_event(10)
    assert added["type"] == "ADDED" and added["object"]["spec"] == {"colour": "blue"}
    stream.close()
    stored = get(server, f"{V1}/g3")
    assert stored["apiVersion"] == "example.com/v1" and stored["spec"] == {"color": "blue"}
    current = get(server, f"{V2}/g1")
    current["spec"]["colour"] = "purple"
    updated = ok(call(server, "PUT", f"{V2}/g1", current), 200)
    assert updated["spec"] == {"colour": "purple"}
    assert get(server, f"{V1}/g1")["spec"] == {"color": "purple"}


@pytest.mark.parametrize(("mode", "detail"), [
    ("wrong-uid", 'failed: expected response.uid="{uid}", got "not-the-uid"'),
    ("failed-with-message", "failed: cannot convert gadgets"),
    ("failed", "failed: response.result.status was 'Failure', not 'Success'"),
    ("too-few", "returned 0 objects, expected 1"),
    ("renamed", "returned invalid object: must have the same name: g1 != other"),
])
def test_webhook_failures_are_500_with_kubes_text(server: ServerThread, webhook: Webhook,
                                                 mode: str, detail: str) -> None:
    """§9.33: each failure of the answer, as kube words it; the GET fails, nothing is kept."""
    install(server, webhook.url, webhook.ca.cert)
    create(server, V1, gadget("v1", "g1", {"color": "red"}))
    webhook.mode = mode
    reply = call(server, "GET", f"{V2}/g1")
    assert reply.status == 500
    uid = webhook.reviews[-1]["request"]["uid"]
    assert reply.status_object() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f"conversion webhook for {SOURCE} " + detail.format(uid=uid), "code": 500}
    assert call(server, "GET", V2).status == 500
    webhook.mode = "ok"
    assert get(server, f"{V2}/g1")["spec"] == {"colour": "red"}


def test_unreachable_and_untrusted_webhooks(server: ServerThread, webhook: Webhook) -> None:
    """Transport failures read as Go's: refused connections, a certificate from another CA."""
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"https://127.0.0.1:{port}/convert"
    install(server, url, webhook.ca.cert)
    create(server, V1, gadget("v1", "g1", {"color": "red"}))
    reply = call(server, "GET", f"{V2}/g1")
    assert reply.status == 500
    assert reply.status_object()["message"] == (
        f'conversion webhook for {SOURCE} failed: Post "{url}": dial tcp 127.0.0.1:{port}: '
        "connect: connection refused")
    crd = get(server, f"{CRDS}/{CRD_NAME}")
    other_ca = make_ca("another-ca").cert
    crd["spec"]["conversion"]["webhook"]["clientConfig"] = {
        "url": webhook.url, "caBundle": base64.b64encode(other_ca).decode()}
    ok(call(server, "PUT", f"{CRDS}/{CRD_NAME}", crd), 200)

    def untrusted() -> str:
        return str(call(server, "GET", f"{V2}/g1").status_object().get("message"))

    from tests.integration.wire import wait_for
    message = wait_for(lambda: "tls:" in untrusted() and untrusted(), 10, "the new CA")
    assert message == (f'conversion webhook for {SOURCE} failed: Post "{webhook.url}": '
                       "tls: failed to verify certificate: x509: certificate signed by "
                       "unknown authority")
    assert webhook.reviews == []


def test_a_failed_conversion_ends_the_watch_with_an_error(server: ServerThread,
                                                          webhook: Webhook) -> None:
    install(server, webhook.url, webhook.ca.cert)
    stream = watch(server, V2)
    webhook.mode = "failed-with-message"
    create(server, V1, gadget("v1", "g1", {"color": "red"}))
    event = stream.next_event(10)
    assert event["type"] == "ERROR"
    assert event["object"]["code"] == 500
    assert event["object"]["message"] == \
        f"conversion webhook for {SOURCE} failed: cannot convert gadgets"
    assert stream.ended(10)
    stream.close()
