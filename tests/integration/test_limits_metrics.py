"""Limits trigger with kube's answers and leave the server healthy; /metrics moves with traffic.

Requests are held in flight for real: a list at a resourceVersion far ahead of the store waits
3 s in the watch cache (then 504), occupying its slot the whole time.
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kubewire.server.access.users import add_token
from kubewire.server.wire.http_messages import Limits
from tests.integration.harness import ServerThread
from tests.integration.kinds import POD
from tests.integration.wire import Reply, call, create, wait_for

FAR_AHEAD = "1000000000"


class Client:
    """HTTPS as one user (token) or as the admin (client certificate)."""

    def __init__(self, server: ServerThread, token: str | None = None) -> None:
        pki = server.config.data_dir / "pki"
        self.ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        if token is None:
            self.ctx.load_cert_chain(pki / "admin.crt", pki / "admin.key")
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.port = server.port

    def request(self, method: str, path: str, body: Any = None) -> Reply:
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=20)
        try:
            data = json.dumps(body).encode() if body is not None else None
            conn.request(method, path, body=data, headers=self.headers)
            resp = conn.getresponse()
            return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
        finally:
            conn.close()


def metrics(client: Client) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    reply = client.request("GET", "/metrics")
    assert reply.status == 200, reply.body
    assert reply.headers["content-type"].startswith("text/plain; version=0.0.4")
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(reply.body.decode()):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def sample(found: dict[str, dict[tuple[tuple[str, str], ...], float]], name: str,
           **labels: str) -> float:
    total = 0.0
    for key, value in found.get(name, {}).items():
        if all((k, v) in key for k, v in labels.items()):
            total += value
    return total


@pytest.fixture
def limited(make_server: Callable[..., ServerThread]) -> ServerThread:
    return make_server(insecure_http=False, limits=Limits(
        max_requests_inflight=1, max_mutating_requests_inflight=1, max_watches_per_user=2))


def user(server: ServerThread, name: str) -> Client:
    return Client(server, add_token(server.config.data_dir / "tokens.csv", name, ()))


def test_requests_over_the_in_flight_limit_get_kubes_429(limited: ServerThread) -> None:
    dev, admin = user(limited, "dev"), Client(limited)
    held: list[Reply] = []
    holder = threading.Thread(target=lambda: held.append(
        dev.request("GET", f"/api/v1/pods?resourceVersion={FAR_AHEAD}")))
    holder.start()
    wait_for(lambda: sample(metrics(admin), "apiserver_current_inflight_requests",
                            request_kind="readOnly") == 1, what="a request held in flight")
    refused = dev.request("GET", "/api/v1/namespaces")
    assert refused.status == 429
    assert refused.body == b"Too many requests, please try again later.\n"
    assert refused.headers["retry-after"] == "1"
    assert refused.headers["content-type"] == "text/plain; charset=utf-8"
    # Mutating requests have their own budget; the admin is never throttled.
    assert dev.request("POST", "/api/v1/namespaces",
                       {"metadata": {"name": "side"}}).status == 201
    assert admin.request("GET", "/api/v1/namespaces").status == 200
    holder.join(20)
    assert held[0].status == 504
    assert json.loads(held[0].body)["message"].startswith(
        f"Timeout: Too large resource version: {FAR_AHEAD}, current: ")
    assert dev.request("GET", "/api/v1/namespaces").status == 200  # healthy again


def open_watches(server: ServerThread, who: Client, path: str, count: int,
                 ) -> list[tuple[http.client.HTTPSConnection, http.client.HTTPResponse]]:
    """``count`` watches of ``path`` as ``who``, each answered 200 and left open."""
    opened = []
    for _ in range(count):
        conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=who.ctx, timeout=20)
        conn.request("GET", path, headers=who.headers)
        resp = conn.getresponse()
        assert resp.status == 200
        opened.append((conn, resp))
    return opened


def test_watches_per_user_are_bounded(limited: ServerThread) -> None:
    dev = user(limited, "dev")
    path = "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=30"
    opened = [conn for conn, _ in open_watches(limited, dev, path, 2)]
    refused = dev.request("GET", path)
    assert refused.status == 429
    status = json.loads(refused.body)
    assert (status["reason"], status["details"]) == ("TooManyRequests", {"retryAfterSeconds": 1})
    assert status["message"] == "too many watches open for user 'dev': the limit is 2"
    assert refused.headers["retry-after"] == "1"
    assert user(limited, "other").request("GET", path.replace("30", "1")).status == 200
    opened.pop().close()  # a closed watch frees its place
    wait_for(lambda: dev.request("GET", path.replace("30", "1")).status == 200,
             what="a freed watch slot")
    for conn in opened:
        conn.close()


@pytest.mark.parametrize("spelling", ["yes", "on", "", "1", "TRUE"])
def test_every_spelling_of_watch_counts_against_the_limit(limited: ServerThread,
                                                          spelling: str) -> None:
    """kube reads ``watch`` as its list options do (anything but 0 and false is true), so every
    request served as a watch is a watch to the limit, however it spells it."""
    dev, admin = user(limited, "dev"), Client(limited)
    assert admin.request("POST", "/api/v1/namespaces/default/pods", {
        "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]},
    }).status == 201
    path = f"/api/v1/namespaces/default/pods?watch={spelling}&timeoutSeconds=30"
    opened = []
    for conn, resp in open_watches(limited, dev, path, 2):
        assert json.loads(resp.readline())["type"] == "ADDED"  # a watch stream, not a list
        opened.append(conn)
    refused = dev.request("GET", path)
    assert refused.status == 429, refused.body
    assert json.loads(refused.body)["reason"] == "TooManyRequests"
    # A GET naming an object is a get whatever ``watch`` says: not refused, not counted.
    named = dev.request("GET", f"/api/v1/namespaces/default/pods/p?watch={spelling}")
    assert named.status == 200 and json.loads(named.body)["kind"] == "Pod"
    for conn in opened:
        conn.close()


def test_metrics_parse_and_move_with_traffic(server: ServerThread) -> None:
    admin_ish = server  # insecure test servers: everyone is admin, /metrics is open
    before_text = call(admin_ish, "GET", "/metrics")
    assert before_text.status == 200
    families = {f.name: f for f in text_string_to_metric_families(before_text.body.decode())}
    for name in ("apiserver_request", "apiserver_request_duration_seconds",
                 "apiserver_registered_watchers", "apiserver_storage_objects",
                 "apiserver_current_inflight_requests"):
        assert name in families, sorted(families)
    for i in range(3):
        create(server, POD.collection(), POD.obj(f"p{i}"))
    assert call(server, "GET", POD.item("missing")).status == 404
    stream = http.client.HTTPConnection(server.url.removeprefix("http://").split(":")[0],
                                        server.port, timeout=10)
    stream.request("GET", POD.collection() + "?watch=true&timeoutSeconds=30")
    assert stream.getresponse().status == 200

    def scrape() -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
        found: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
        for family in text_string_to_metric_families(call(server, "GET", "/metrics")
                                                     .body.decode()):
            for s in family.samples:
                found.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
        return found

    after = scrape()
    assert sample(after, "apiserver_request_total", verb="POST", resource="pods",
                  code="201", scope="namespace") == 3
    assert sample(after, "apiserver_request_total", verb="GET", resource="pods",
                  code="404", scope="resource") == 1
    assert sample(after, "apiserver_request_duration_seconds_count", verb="POST",
                  resource="pods") == 3
    assert sample(after, "apiserver_storage_objects", resource="pods") == 3
    assert sample(after, "apiserver_registered_watchers", kind="Pod") == 1
    assert sample(after, "kubewire_storage_commit_duration_seconds_count") >= 3
    assert sample(after, "apiserver_terminated_watchers_total", resource="pods") == 0
    sent = sample(after, "apiserver_watch_events_total", kind="Pod")
    create(server, POD.collection(), POD.obj("seen"))  # one more event to the open watch
    wait_for(lambda: sample(scrape(), "apiserver_watch_events_total", kind="Pod") == sent + 1,
             what="the watch event to be counted")
    stream.close()
    wait_for(lambda: sample(scrape(), "apiserver_registered_watchers", kind="Pod") == 0,
             what="the watcher to be unregistered")


def test_objects_over_the_size_limit_get_413_and_change_nothing(
        make_server: Callable[..., ServerThread]) -> None:
    server = make_server(limits=Limits(max_object_bytes=4096))
    small = POD.obj("small")
    create(server, POD.collection(), small)
    before = call(server, "GET", POD.collection()).json
    big = POD.obj("big")
    big["metadata"]["annotations"] = {"blob": "x" * 5000}
    refused = call(server, "POST", POD.collection(), big)
    assert refused.status == 413, refused.body
    status = refused.status_object()
    assert status["reason"] == "RequestEntityTooLarge"
    assert status["message"].startswith("Request entity too large: the object is ")
    assert status["message"].endswith(" bytes, the limit is 4096")
    grown = call(server, "PATCH", POD.item("small"), {"metadata": {"labels": {"a": "b"},
                                                       "annotations": {"blob": "y" * 5000}}},
                 {"Content-Type": "application/merge-patch+json"})
    assert grown.status == 413, grown.body
    assert call(server, "GET", POD.collection()).json == before
    assert call(server, "GET", POD.item("small")).status == 200  # the server is fine
