"""The server's writer process: health checks tell when it is gone, and writes fail fast."""

from __future__ import annotations

import os
import signal
import time

from tests.integration.harness import ServerThread
from tests.integration.test_health import failed_etcd_lines
from tests.integration.wire import call, create, get
from tests.reliability.proc import writer_pid
from tests.storage_choice import sqlite_only

PODS = "/api/v1/namespaces/default/pods"
pytestmark = sqlite_only("SQLite's writer process; an etcd-backed server has none")


def _pod(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}


def test_health_fails_and_writes_fail_fast_when_the_writer_process_dies(
        server: ServerThread) -> None:
    create(server, PODS, _pod("before"))
    for path in ("/healthz", "/livez", "/readyz"):
        assert call(server, "GET", path).body == b"ok"
    os.kill(writer_pid(server.config.data_dir), signal.SIGKILL)
    deadline = time.monotonic() + 10
    while call(server, "GET", "/readyz").status != 500:
        assert time.monotonic() < deadline, "readyz still passes without a writer"
        time.sleep(0.02)
    for check in ("healthz", "livez", "readyz"):
        reply = call(server, "GET", f"/{check}")
        assert reply.status == 500
        assert reply.body.decode().splitlines() == failed_etcd_lines(check)
    started = time.monotonic()
    reply = call(server, "POST", PODS, _pod("after"))
    assert reply.status >= 500 and reply.json["kind"] == "Status", reply.body
    assert time.monotonic() - started < 5  # an answer, not a hang
    assert get(server, f"{PODS}/before")["metadata"]["name"] == "before"  # reads still work
