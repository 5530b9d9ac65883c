"""A writer process that stops answering (SIGSTOP) times writes out with kube's 504 and turns the
health checks red; once it answers again (SIGCONT) they turn green by themselves, and the writes
that timed out have committed in order, watch events included (server/app.py,
server/request_timeout.py, SQLiteStore.ping)."""

from __future__ import annotations

import http.client
import json
import os
import signal
import time
from pathlib import Path

from tests.integration.test_health import failed_etcd_lines
from tests.reliability.proc import HOST, Reply, ServerProcess, call, writer_pid

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
REQUEST_TIMEOUT_S = 3.0  # the server's --request-timeout here
SLACK_S = 5.0  # a loaded machine's delay on top of a deadline: a bound, not a speed claim
TIMEOUT_STATUS = {
    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
    "message": "Timeout: request did not complete within requested timeout - context deadline "
               "exceeded",
    "reason": "Timeout", "details": {}, "code": 504}


def _timed_post(port: int, query: str, name: str) -> tuple[Reply, float]:
    started = time.monotonic()
    reply = call(port, "POST", f"{CONFIGMAPS}{query}", {"metadata": {"name": name}})
    return reply, time.monotonic() - started


def _wait_health(port: int, status: int, within_s: float) -> None:
    deadline = time.monotonic() + within_s
    while call(port, "GET", "/healthz").status != status:
        assert time.monotonic() < deadline, f"/healthz did not turn {status} in {within_s} s"
        time.sleep(0.05)


def _events(port: int, since: int, count: int) -> list[tuple[str, str, int]]:
    conn = http.client.HTTPConnection(HOST, port, timeout=30)
    try:
        conn.request("GET", f"{CONFIGMAPS}?watch=1&resourceVersion={since}")
        resp = conn.getresponse()
        events = [json.loads(resp.readline()) for _ in range(count)]
    finally:
        conn.close()
    return [(e["type"], e["object"]["metadata"]["name"],
             int(e["object"]["metadata"]["resourceVersion"])) for e in events]


def test_a_stalled_writer_times_writes_out_and_health_recovers_with_it(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data", "--request-timeout", f"{REQUEST_TIMEOUT_S:g}s")
    server.start()
    try:
        before = call(server.port, "POST", CONFIGMAPS, {"metadata": {"name": "before"}})
        assert before.status == 201
        since = int(before.body["metadata"]["resourceVersion"])
        writer = writer_pid(server.data_dir)
        os.kill(writer, signal.SIGSTOP)
        try:
            reply, seconds = _timed_post(server.port, "?timeout=1s", "asked-1s")
            assert (reply.status, reply.body) == (504, TIMEOUT_STATUS)
            assert 1.0 <= seconds < 1.0 + SLACK_S
            reply, seconds = _timed_post(server.port, "?timeout=1h", "capped")  # the flag caps
            assert (reply.status, reply.body) == (504, TIMEOUT_STATUS)
            assert REQUEST_TIMEOUT_S <= seconds < REQUEST_TIMEOUT_S + SLACK_S
            _wait_health(server.port, 500, 10.0)
            for check in ("healthz", "livez", "readyz"):
                reply = call(server.port, "GET", f"/{check}")
                assert reply.status == 500
                assert reply.body["raw"].splitlines() == failed_etcd_lines(check)
            assert call(server.port, "GET", f"{CONFIGMAPS}/before").status == 200  # reads go on
        finally:
            os.kill(writer, signal.SIGCONT)
        _wait_health(server.port, 200, 10.0)
        after = call(server.port, "POST", CONFIGMAPS, {"metadata": {"name": "after"}})
        assert after.status == 201
        # What timed out was queued: it committed once the writer went on, before "after".
        assert _events(server.port, since, 3) == [
            ("ADDED", "asked-1s", since + 1), ("ADDED", "capped", since + 2),
            ("ADDED", "after", since + 3)]
        for name, revision in (("asked-1s", since + 1), ("capped", since + 2)):
            got = call(server.port, "GET", f"{CONFIGMAPS}/{name}")
            assert int(got.body["metadata"]["resourceVersion"]) == revision
    finally:
        server.stop()


def test_a_delete_that_timed_out_is_still_finished(tmp_path: Path) -> None:
    """A graceful pod delete and a namespace delete answered 504 still commit once the writer
    goes on, and the controllers finish both: they find marked objects in the commit feed, not
    in the handler that timed out."""
    server = ServerProcess(tmp_path / "data", "--request-timeout", "1s", "--pod-grace-cap", "0.2")
    server.start()
    try:
        pods = "/api/v1/namespaces/default/pods"
        pod = {"metadata": {"name": "p"},
               "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
        assert call(server.port, "POST", pods, pod).status == 201
        assert call(server.port, "POST", "/api/v1/namespaces",
                    {"metadata": {"name": "going"}}).status == 201
        writer = writer_pid(server.data_dir)
        os.kill(writer, signal.SIGSTOP)
        try:
            assert call(server.port, "DELETE", f"{pods}/p").status == 504
            assert call(server.port, "DELETE", "/api/v1/namespaces/going").status == 504
        finally:
            os.kill(writer, signal.SIGCONT)
        deadline = time.monotonic() + 15.0
        while (call(server.port, "GET", f"{pods}/p").status != 404
               or call(server.port, "GET", "/api/v1/namespaces/going").status != 404):
            assert time.monotonic() < deadline, "the timed-out deletes were never finished"
            time.sleep(0.1)
    finally:
        server.stop()
