"""``/healthz``, ``/livez``, ``/readyz`` as kube-apiserver's healthz package answers them, read
with raw HTTP (exact bytes and headers) and with ``kubectl get --raw``."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

from tests.integration.harness import ServerThread
from tests.integration.kubectl import needs_kubectl, ok, run
from tests.integration.wire import call
from tests.reliability.proc import writer_pid
from tests.storage_choice import sqlite_only

HOOK = "poststarthook/start-system-namespaces-controller"
CRDS_HOOK = "poststarthook/crd-informer-synced"  # before the namespaces hook, as kube lists
# What kube-apiserver v1.32 lists, less the checks of parts kubewire does not have.
CHECKS = {
    "healthz": ["ping", "log", "etcd", CRDS_HOOK, HOOK],
    "livez": ["ping", "log", "etcd", CRDS_HOOK, HOOK],
    "readyz": ["ping", "log", "etcd", "etcd-readiness", "informer-sync", CRDS_HOOK, HOOK,
               "shutdown"],
}
STORE_CHECKS = ("etcd", "etcd-readiness")


def failed_etcd_lines(endpoint: str) -> list[str]:
    """The lines of ``/ENDPOINT`` while the store's writer does not answer."""
    return [f"[-]{name} failed: reason withheld" if name in STORE_CHECKS else f"[+]{name} ok"
            for name in CHECKS[endpoint]] + [f"{endpoint} check failed"]


def test_root_answers_ok_and_verbose_lists_each_check(server: ServerThread) -> None:
    for endpoint, names in CHECKS.items():
        reply = call(server, "GET", f"/{endpoint}")
        assert (reply.status, reply.body) == (200, b"ok")
        assert reply.headers["content-type"] == "text/plain; charset=utf-8"
        assert reply.headers["x-content-type-options"] == "nosniff"
        verbose = call(server, "GET", f"/{endpoint}?verbose")
        assert verbose.status == 200
        assert verbose.body.decode() == "".join(
            f"[+]{name} ok\n" for name in names) + f"{endpoint} check passed\n"


def test_exclude_skips_checks_and_reports_unknown_names(server: ServerThread) -> None:
    reply = call(server, "GET", "/readyz?verbose&exclude=etcd&exclude=shutdown&exclude=nope"
                                "&exclude=also-not")
    assert reply.status == 200
    lines = reply.body.decode().splitlines()
    assert lines[2] == "[+]etcd excluded: ok"
    assert lines[-3] == "[+]shutdown excluded: ok"
    assert lines[-2] == ('warn: some health checks cannot be excluded: no matches for '
                         '"also-not","nope"')
    assert lines[-1] == "readyz check passed"


def test_single_checks_and_unknown_ones(server: ServerThread) -> None:
    for path in ("/livez/ping", "/readyz/etcd", "/healthz/log", f"/readyz/{HOOK}",
                 "/readyz/shutdown", "/readyz/informer-sync"):
        reply = call(server, "GET", path)
        assert (reply.status, reply.body) == (200, b"ok"), path
        assert reply.headers["content-type"] == "text/plain; charset=utf-8"
    for path in ("/livez/shutdown", "/healthz/nope", "/healthz/"):  # shutdown: readyz only
        reply = call(server, "GET", path)
        assert (reply.status, reply.body) == (404, b"404 page not found\n"), path


@sqlite_only("kills SQLite's writer process, which an etcd-backed server has none of")
def test_a_dead_writer_fails_the_store_checks(server: ServerThread) -> None:
    os.kill(writer_pid(server.config.data_dir), signal.SIGKILL)
    deadline = time.monotonic() + 10
    while call(server, "GET", "/readyz").status != 500:
        assert time.monotonic() < deadline, "readyz still passes without a writer"
        time.sleep(0.02)
    for endpoint in CHECKS:
        reply = call(server, "GET", f"/{endpoint}")
        assert reply.status == 500
        assert reply.headers["x-content-type-options"] == "nosniff"
        assert reply.body.decode().splitlines() == failed_etcd_lines(endpoint)
    reply = call(server, "GET", "/readyz/etcd")
    assert reply.status == 500
    assert reply.body == b"internal server error: the store's writer did not answer within 2s\n"
    # the failing check excluded, readyz passes again
    reply = call(server, "GET", "/readyz?exclude=etcd&exclude=etcd-readiness")
    assert (reply.status, reply.body) == (200, b"ok")


@needs_kubectl
def test_kubectl_reads_the_checks(make_server: Callable[..., ServerThread]) -> None:
    server = make_server(insecure_http=False)
    assert ok(server, "get", "--raw", "/livez/ping") == "ok"
    text = ok(server, "get", "--raw", "/readyz?verbose&exclude=log")
    assert "[+]log excluded: ok\n" in text and text.endswith("readyz check passed\n")
    missing = run(server, "get", "--raw", "/readyz/nope")
    assert missing.returncode != 0 and "NotFound" in missing.stderr
