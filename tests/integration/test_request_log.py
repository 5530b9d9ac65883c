"""What happened, per request: kube's httplog line at INFO and the ``Audit-Id`` header on every
answer, read after requests from the ``kubernetes`` package, kubectl and raw HTTP."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterator

import pytest
from kubernetes import client, watch

from tests.integration.harness import ServerThread
from tests.integration.kubectl import needs_kubectl, run
from tests.integration.wire import call, wait_for

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
LINE = re.compile(
    r'"HTTP" verb="(?P<verb>[A-Z]+)" URI="(?P<uri>[^"]*)" '
    r'latency="(?P<latency>[0-9.]+(ns|µs|ms|s))" '
    r'userAgent="(?P<agent>[^"]*)" audit-ID="(?P<id>[^"]*)" srcIP="127\.0\.0\.1:\d+" '
    r"(?P<end>resp=\d+|hijacked=true)")


@pytest.fixture
def lines(caplog: pytest.LogCaptureFixture) -> Iterator[Callable[[], list[dict[str, str]]]]:
    caplog.set_level(logging.INFO, logger="kubewire.httplog")

    def parsed() -> list[dict[str, str]]:
        found = []
        for record in caplog.records:
            if record.name == "kubewire.httplog":
                match = LINE.fullmatch(record.getMessage())
                assert match, record.getMessage()
                found.append(match.groupdict())
        return found

    yield parsed


def test_each_request_is_logged_with_its_audit_id(
        server: ServerThread, lines: Callable[[], list[dict[str, str]]]) -> None:
    with client.ApiClient(client.Configuration(host=server.url)) as api:
        core = client.CoreV1Api(api)
        core.create_namespaced_config_map("default", client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="one")))
        _, status, headers = core.read_namespaced_config_map_with_http_info("one", "default")
        assert status == 200 and UUID.fullmatch(headers["Audit-Id"])
        logged = [line for line in lines() if line["uri"].startswith("/api/v1/")]
        assert [(line["verb"], line["uri"], line["end"]) for line in logged] == [
            ("POST", "/api/v1/namespaces/default/configmaps", "resp=201"),
            ("GET", "/api/v1/namespaces/default/configmaps/one", "resp=200")]
        assert logged[1]["id"] == headers["Audit-Id"]
        assert logged[0]["agent"].startswith("OpenAPI-Generator/")
        # the caller's Audit-ID is kept, and echoed; an error answer carries it too
        reply = call(server, "GET", "/api/v1/namespaces/default/configmaps/nope",
                     headers={"Audit-ID": "my-id-1", "User-Agent": "tester/1"})
        assert reply.status == 404 and reply.headers["audit-id"] == "my-id-1"
        assert lines()[-1] == {"verb": "GET", "uri": "/api/v1/namespaces/default/configmaps/nope",
                               "latency": lines()[-1]["latency"], "agent": "tester/1",
                               "id": "my-id-1", "end": "resp=404"}
        health = call(server, "GET", "/readyz?verbose")
        assert UUID.fullmatch(health.headers["audit-id"])
        assert lines()[-1]["uri"] == "/readyz?verbose" and lines()[-1]["end"] == "resp=200"

        # a watch: its head carries the header, and it is logged once, when it ends
        seen: list[str] = []
        done = threading.Event()

        def watching() -> None:
            for event in watch.Watch().stream(core.list_namespaced_config_map, "default",
                                              timeout_seconds=1):
                seen.append(event["type"])
            done.set()

        before = len(lines())
        threading.Thread(target=watching, daemon=True).start()
        assert done.wait(15) and seen == ["ADDED"]
        wait_for(lambda: len(lines()) > before, what="the watch's log line")
        ended = lines()[-1]
        assert ended["verb"] == "WATCH" and ended["end"] == "resp=200"
        assert "watch=true" in ended["uri"] and UUID.fullmatch(ended["id"])
        assert ended["latency"].endswith("s") and not ended["latency"].endswith(("ms", "µs"))


def test_a_watch_head_carries_the_audit_id(server: ServerThread) -> None:
    reply = call(server, "GET", "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1",
                 headers={"Audit-ID": "watch-1"})
    assert reply.status == 200 and reply.headers["transfer-encoding"] == "chunked"
    assert reply.headers["audit-id"] == "watch-1"


def test_nothing_is_logged_below_info(server: ServerThread,
                                      caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="kubewire.httplog")
    reply = call(server, "GET", "/api/v1/namespaces")
    assert reply.status == 200 and UUID.fullmatch(reply.headers["audit-id"])
    assert not [r for r in caplog.records if r.name == "kubewire.httplog"]


@needs_kubectl
def test_kubectl_requests_are_logged(make_server: Callable[..., ServerThread],
                                     lines: Callable[[], list[dict[str, str]]]) -> None:
    server = make_server(insecure_http=False)
    done = run(server, "get", "pods", "-n", "default")
    assert done.returncode == 0, done.stderr
    listed = [line for line in lines() if line["uri"].startswith("/api/v1/namespaces/default/pods")]
    assert len(listed) == 1 and listed[0]["verb"] == "LIST" and listed[0]["end"] == "resp=200"
    assert listed[0]["agent"].startswith("kubectl/v1.32")
