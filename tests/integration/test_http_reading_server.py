"""The real server reading hostile or unusual requests (issue 12), with real clients.

A request with a body and no credentials is answered 401 on its head, the same Status as
without a body, before the body is sent; a body trickled past ``--request-timeout`` gets
kube's 504; a label selector far longer than 64 KiB goes through kubectl and ``kubernetes``.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import time
from collections.abc import Callable

from kubernetes import client

from kubewire.server.wire.http_input import REQUEST_TIMEOUT_BODY
from kubewire.server.wire.http_messages import Limits
from tests.integration.harness import ServerThread
from tests.integration.kinds import CONFIG_MAP
from tests.integration.kubectl import needs_kubectl, run
from tests.integration.wire import create, get, host_port

READ_TIMEOUT_S = 10.0  # no answer within this is a hang


def tls_socket(server: ServerThread) -> ssl.SSLSocket:
    ctx = ssl.create_default_context(cafile=str(server.config.data_dir / "pki/ca.crt"))
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=READ_TIMEOUT_S)
    return ctx.wrap_socket(raw, server_hostname="127.0.0.1")


def read_answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    resp = http.client.HTTPResponse(sock)
    try:
        resp.begin()
        body = resp.read()
    finally:
        resp.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body


def test_a_body_without_credentials_is_refused_before_it_is_sent(
        make_server: Callable[..., ServerThread]) -> None:
    server = make_server(insecure_http=False)
    path = CONFIG_MAP.collection()
    with tls_socket(server) as sock:  # the answer every unauthenticated request gets
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        status, _, unauthorized = read_answer(sock)
    assert status == 401
    with tls_socket(server) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {3 << 20}\r\n\r\n".encode())  # and never the body
        status, headers, body = read_answer(sock)
        assert sock.recv(1) == b""  # closed after the answer
    assert (status, body) == (401, unauthorized)
    assert headers["content-type"] == "application/json"
    assert headers["connection"] == "close"


def test_a_trickled_body_gets_kubes_504_and_changes_nothing(
        make_server: Callable[..., ServerThread]) -> None:
    server = make_server(limits=Limits(request_timeout_s=1.0))
    before = get(server, CONFIG_MAP.collection())["items"]
    started = time.monotonic()
    with socket.create_connection(host_port(server), timeout=READ_TIMEOUT_S) as sock:
        sock.sendall(f"POST {CONFIG_MAP.collection()} HTTP/1.1\r\nHost: x\r\n"
                     "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "1\r\n{\r\n".encode())
        sock.settimeout(0.2)
        answer = b""
        while not answer and time.monotonic() - started < READ_TIMEOUT_S:
            try:
                answer = sock.recv(65536)
            except TimeoutError:
                sock.sendall(b"1\r\n \r\n")  # a byte of whitespace every 0.2 s
        sock.settimeout(READ_TIMEOUT_S)
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 504 Gateway Timeout\r\n"), answer[:200]
    assert b"\r\nContent-Type: text/plain; charset=utf-8\r\n" in head
    assert body == REQUEST_TIMEOUT_BODY
    assert 1.0 <= time.monotonic() - started < 1.0 + 5
    assert get(server, CONFIG_MAP.collection())["items"] == before


def long_selector(values: int) -> str:
    """``app in (v00000,...)``: a valid set selector of ``values`` short values."""
    return "app in (" + ",".join(f"v{i:05d}" for i in range(values)) + ")"


def labelled(server: ServerThread) -> None:
    for name, app in (("match", "v00042"), ("other", "x")):
        create(server, CONFIG_MAP.collection(), CONFIG_MAP.obj(name, {"app": app}))


def test_a_200_kib_label_selector_with_the_kubernetes_client(server: ServerThread) -> None:
    labelled(server)
    selector = long_selector(30_000)
    assert len(selector) > 200 * 1024
    with client.ApiClient(client.Configuration(host=server.url)) as api:
        found = client.CoreV1Api(api).list_namespaced_config_map("default",
                                                                 label_selector=selector)
    assert [item.metadata.name for item in found.items] == ["match"]


@needs_kubectl
def test_a_100_kib_label_selector_with_kubectl(server: ServerThread) -> None:
    labelled(server)
    selector = long_selector(16_000)  # one argument: Linux takes at most 128 KiB
    assert len(selector) > 108 * 1024
    done = run(server, "get", "configmaps", "-l", selector, "-o", "name")
    assert (done.returncode, done.stdout) == (0, "configmap/match\n"), done.stderr[-300:]
