"""Idle watcher memory: server RSS growth per idle watch at 1000 watches.

Each repetition starts a fresh server (RSS never shrinks back, so reuse would hide growth):
``kubewire serve --insecure-http`` and, interleaved, the raw-socket reference
(``bench.raw_server``). After a warm-up watch opened and closed (lazy imports and first-use
caches are not per-watch costs), RSS is read from ``/proc``; a reader process opens W watches on
one collection and waits for every response head; after a short settle RSS is read again.

The TLS row repeats this over TLS, what a real user runs: ``kubewire serve`` with its default
HTTPS (certificates made in the data dir) and readers presenting the admin client certificate,
against the raw reference serving TLS with a standard server context and the same certificates.

    python -m bench.idle_memory [--smoke] [--repeats 5] [--only plain|tls]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import report
from bench.servers import ServerProcess, kubewire_command, kubewire_serve_argv, reference_argv
from bench.stats import row, summary
from bench.tls_readers import client_context, tls_request
from bench.wire import create_namespace, pods_path
from bench.worker import Worker

NAME = "idle_memory"
TARGET_BYTES = 4096  # issue 6: <= 4 KB per idle watch
SETTLE_S = 0.5


@dataclass
class IdleOptions:
    watchers: int = 1000
    repeats: int = 5
    transports: tuple[str, ...] = ("plain", "tls")


default_options = IdleOptions
SMOKE = IdleOptions(watchers=10, repeats=1)


def measure(side: str, watchers: int, reader: Worker, data_dir: Path) -> float:
    """RSS bytes per idle watch for one fresh server."""
    argv = (kubewire_serve_argv(data_dir) if side == "kubewire"
            else reference_argv("bench.raw_server"))
    with ServerProcess(side, argv) as server:
        server.wait_ready()
        path = "/pods?watch=1"
        if side == "kubewire":
            create_namespace(server.port, "idle")
            path = pods_path("idle") + "?watch=1"
        reader.call("open", 30.0, port=server.port, path=path, count=1, timeout_s=20.0)
        reader.call("close", 10.0)
        time.sleep(SETTLE_S)
        before = server.rss_bytes()
        reader.call("open", 120.0, port=server.port, path=path, count=watchers, timeout_s=100.0)
        time.sleep(SETTLE_S)
        after = server.rss_bytes()
        reader.call("close", 30.0)
    return (after - before) / watchers


def tls_argv(side: str, data_dir: Path) -> list[str]:
    """``kubewire serve`` with its default HTTPS, or the raw reference serving TLS."""
    if side == "kubewire":
        return [*kubewire_command(), "serve", "--data-dir", str(data_dir), "--port", "0",
                "--durability", "full", "--log-level", "WARNING"]
    from kubewire.server.access.pki import ensure_server_pki

    pki = ensure_server_pki(data_dir / "pki")
    return [*reference_argv("bench.raw_server"), "--tls-cert", str(pki.serving_cert),
            "--tls-key", str(pki.serving_key), "--client-ca", str(pki.ca_cert)]


def measure_tls(side: str, watchers: int, data_dir: Path) -> float:
    """RSS bytes per idle TLS watch for one fresh server (readers use the admin certificate)."""
    with ServerProcess(side, tls_argv(side, data_dir)) as server, contextlib.ExitStack() as stack:
        server.wait_ready()
        pki = data_dir / "pki"
        files = {"ca": str(pki / "ca.crt"), "cert": str(pki / "admin.crt"),
                 "key": str(pki / "admin.key")}
        reader = stack.enter_context(Worker("bench.tls_readers:TLSReaderSet", **files))
        path = "/pods?watch=1"
        if side == "kubewire":
            status, body = tls_request(server.port, client_context(**files), "POST",
                                       "/api/v1/namespaces",
                                       {"apiVersion": "v1", "kind": "Namespace",
                                        "metadata": {"name": "idle"}})
            if status not in (201, 409):
                raise RuntimeError(f"creating namespace idle: {status} {body[:300]!r}")
            path = pods_path("idle") + "?watch=1"
        reader.call("open", 30.0, port=server.port, path=path, count=1, timeout_s=20.0)
        reader.call("close", 10.0)
        time.sleep(SETTLE_S)
        before = server.rss_bytes()
        reader.call("open", 180.0, port=server.port, path=path, count=watchers,
                    timeout_s=150.0)
        time.sleep(SETTLE_S)
        after = server.rss_bytes()
        reader.call("close", 30.0)
    return (after - before) / watchers


def run(opts: IdleOptions) -> dict[str, Any]:
    samples: dict[str, tuple[list[float], list[float]]] = {t: ([], []) for t in opts.transports}
    with contextlib.ExitStack() as stack:
        reader = stack.enter_context(Worker("bench.readers:ReaderSet"))
        for rep in range(opts.repeats):
            order = ("kubewire", "raw") if rep % 2 == 0 else ("raw", "kubewire")
            for transport in opts.transports:
                ours, ref = samples[transport]
                for side in order:
                    with tempfile.TemporaryDirectory(prefix="kw-idle-") as tmp:
                        value = (measure(side, opts.watchers, reader, Path(tmp))
                                 if transport == "plain"
                                 else measure_tls(side, opts.watchers, Path(tmp)))
                    (ours if side == "kubewire" else ref).append(value)
    rows = []
    for transport, (ours, ref) in samples.items():
        met = summary(ours)["median"] <= TARGET_BYTES
        case = f"W={opts.watchers} idle watches" + (", TLS" if transport == "tls" else "")
        rows.append(row(case, "B/watch", ours, ref, target=f"<= {TARGET_BYTES} B", met=met))
    return {"name": NAME, "title": "Idle watcher memory (item 2)",
            "reference": "raw uvloop socket server holding the same watches (TLS row: "
                         "serving TLS with a standard context and the same certificates)",
            "command": "python -m bench.idle_memory", "repeats": opts.repeats,
            "rows": rows,
            "notes": ["RSS from /proc/<pid>/statm of a fresh server per repetition, after one "
                      "warm-up watch; the target applies to kubewire's absolute value.",
                      "TLS row: `kubewire serve` with its default HTTPS; readers present the "
                      "admin client certificate from the data dir's pki folder."]}


def main() -> None:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--only", choices=("plain", "tls"))
    known, rest = parser.parse_known_args()
    sys.argv[1:] = rest  # the common flags (--smoke, --repeats, --out) are report's

    def options(base: IdleOptions) -> IdleOptions:
        if known.only:
            base.transports = (known.only,)
        return base

    report.main(__doc__, options(SMOKE), lambda: options(default_options()), run)


if __name__ == "__main__":
    main()
