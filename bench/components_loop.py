"""Where the cluster's components run: a thread's own event loop or the server's (issue 20).

One ``kubewire serve`` process per side (plain HTTP, memory store): ``thread``
(``--components-loop thread``), ``loop`` (``--components-loop loop``) and, for reference,
``none`` (no garbage collector). Each holds one owner ConfigMap with ``dependents`` ConfigMaps
owned by it; a client GETs one unrelated object in a loop on a keep-alive connection while the
owner is deleted in the background (``propagationPolicy: Background``), until the collector has
deleted every dependent (``none``: for as long as ``thread`` took). Reported per side: the
GET's p50/p99 latency during the collection and the collection's duration.

    python -m bench.components_loop [--dependents 2000]
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.servers import ServerProcess, kubewire_serve_argv, without_components

NS = "/api/v1/namespaces/default/configmaps"


def request(conn: http.client.HTTPConnection, method: str, path: str,
            body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    payload = resp.read()
    return resp.status, json.loads(payload) if payload else None


def remaining(conn: http.client.HTTPConnection) -> int:
    _, body = request(conn, "GET", f"{NS}?labelSelector=bench%3Ddependent")
    return len(body["items"])


def side(mode: str, dependents: int, duration_s: float | None) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        argv = [*kubewire_serve_argv(Path(tmp), durability="normal"), "--storage", "memory"]
        argv += ([] if mode == "none"  # kubewire_serve_argv runs no component
                 else [*without_components("garbage-collector-controller"),
                       "--components-loop", mode])
        with ServerProcess(mode, argv).wait_ready() as server:
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
            request(conn, "POST", NS, {"metadata": {"name": "probe"}})
            _, owner = request(conn, "POST", NS, {"metadata": {"name": "owner"}})
            ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                   "uid": owner["metadata"]["uid"]}
            for i in range(dependents):
                request(conn, "POST", NS, {"metadata": {
                    "name": f"dep-{i}", "labels": {"bench": "dependent"},
                    "ownerReferences": [ref]}})
            time.sleep(2.0)  # the collector has seen them
            latencies: list[float] = []
            stop = threading.Event()

            def probe() -> None:
                c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
                while not stop.is_set():
                    started = time.perf_counter()
                    request(c, "GET", f"{NS}/probe")
                    latencies.append(time.perf_counter() - started)
                c.close()

            prober = threading.Thread(target=probe)
            prober.start()
            started = time.monotonic()
            request(conn, "DELETE", f"{NS}/owner", {"propagationPolicy": "Background"})
            if duration_s is None:
                while remaining(conn) and time.monotonic() - started < 120:
                    time.sleep(0.2)
            else:
                time.sleep(duration_s)
            took = time.monotonic() - started
            stop.set()
            prober.join()
            left = remaining(conn)
            conn.close()
    cut = statistics.quantiles(latencies, n=100)
    return {"p50_ms": cut[49] * 1000, "p99_ms": cut[98] * 1000, "gets": len(latencies),
            "seconds": took, "left": left}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dependents", type=int, default=2000)
    args = parser.parse_args()
    thread = side("thread", args.dependents, None)
    results = {"thread": thread, "loop": side("loop", args.dependents, None),
               "none": side("none", args.dependents, thread["seconds"])}
    for name, found in results.items():
        print(f"{name:7} p50 {found['p50_ms']:6.2f} ms  p99 {found['p99_ms']:6.2f} ms  "
              f"GETs {found['gets']:6.0f}  {found['seconds']:5.1f} s  left {found['left']:.0f}")


if __name__ == "__main__":
    main()
