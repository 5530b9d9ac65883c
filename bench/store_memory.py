"""Memory per stored object: server RSS growth per ~2 KB Pod at 10k and 50k Pods (issue 15).

Each repetition starts a fresh ``kubewire serve --insecure-http --durability normal`` for each
size (RSS never shrinks back, so reuse would hide growth; the sizes take turns leading). After a
warm-up (a namespace and ``WARM_UP_PODS`` Pods: lazy imports and first-use caches are not
per-object costs) and a settle, RSS is read from ``/proc``; one client process then creates N
Pods with C keep-alive connections; after a settle RSS is read again.

The reference is the raw size of what is stored: the mean length of a stored Pod's JSON as a GET
answers it (a sample of the created Pods, read after the second RSS reading), so the ratio says
how many bytes of memory each byte of stored JSON costs.

    python -m bench.store_memory [--smoke] [--repeats 3]
"""

from __future__ import annotations

import contextlib
import json
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from bench import report
from bench.servers import ServerProcess, kubewire_serve_argv
from bench.stats import row, summary
from bench.wire import create_namespace, pod_manifest, pods_path, request
from bench.worker import Worker

NAME = "store_memory"
NAMESPACE = "stored"
WARM_UP_PODS = 200
SAMPLE_PODS = 20  # stored Pods read back for their JSON size
SETTLE_S = 1.0


@dataclass
class StoreMemoryOptions:
    objects: tuple[int, ...] = (10_000, 50_000)
    repeats: int = 3
    clients: int = 16
    create_timeout_s: float = 600.0


default_options = StoreMemoryOptions
SMOKE = StoreMemoryOptions(objects=(300,), repeats=1, clients=4, create_timeout_s=60.0)


def create_pods(load: Worker, port: int, body: bytes, count: int, timeout_s: float) -> None:
    done = load.call("closed_loop", timeout_s + 60, path=pods_path(NAMESPACE), body=body,
                     max_requests=count, duration_s=timeout_s)
    if done["statuses"] != {201: count}:
        raise RuntimeError(f"creating {count} Pods: answers {done['statuses']}")


def stored_json_bytes(port: int) -> float:
    """Mean length of a stored Pod's JSON, over a sample read back one GET each."""
    status, body = request(port, "GET", pods_path(NAMESPACE) + f"?limit={SAMPLE_PODS}")
    if status != 200:
        raise RuntimeError(f"listing Pods: {status} {body[:300]!r}")
    names = [item["metadata"]["name"] for item in json.loads(body)["items"]]
    sizes = []
    for name in names:
        status, body = request(port, "GET", f"{pods_path(NAMESPACE)}/{name}")
        if status != 200:
            raise RuntimeError(f"reading {name}: {status} {body[:300]!r}")
        sizes.append(len(body.strip()))
    return statistics.mean(sizes)


def measure(count: int, opts: StoreMemoryOptions, load: Worker, body: bytes,
            data_dir: Path) -> dict[str, float]:
    """RSS bytes per stored Pod and the stored JSON bytes per Pod, for one fresh server."""
    with ServerProcess("kubewire", kubewire_serve_argv(data_dir, durability="normal")) as server:
        server.wait_ready()
        create_namespace(server.port, NAMESPACE)
        load.call("connect", 30.0, port=server.port, count=opts.clients)
        create_pods(load, server.port, body, WARM_UP_PODS, opts.create_timeout_s)
        time.sleep(SETTLE_S)
        before = server.rss_bytes()
        started = time.monotonic()
        create_pods(load, server.port, body, count, opts.create_timeout_s)
        elapsed = time.monotonic() - started
        load.call("close", 10.0)
        time.sleep(SETTLE_S)
        after = server.rss_bytes()
        stored = stored_json_bytes(server.port)
    return {"rss_per_object": (after - before) / count, "json_per_object": stored,
            "creates_per_s": count / elapsed}


def run(opts: StoreMemoryOptions) -> dict[str, Any]:
    body = msgspec.json.encode(pod_manifest(NAMESPACE, generate_name="s-"))
    samples: dict[int, list[dict[str, float]]] = {count: [] for count in opts.objects}
    with contextlib.ExitStack() as stack:
        load = stack.enter_context(Worker("bench.load:LoadGenerator"))
        for rep in range(opts.repeats):
            for count in opts.objects if rep % 2 == 0 else opts.objects[::-1]:
                with tempfile.TemporaryDirectory(prefix="kw-store-mem-") as tmp:
                    samples[count].append(measure(count, opts, load, body, Path(tmp)))
    rows = []
    for count, runs in samples.items():
        rows.append(row(f"{count:,} stored ~2 KB Pods: RSS growth per Pod", "B/object",
                        [s["rss_per_object"] for s in runs],
                        [s["json_per_object"] for s in runs],
                        creates_per_s=summary([s["creates_per_s"] for s in runs])))
    return {"name": NAME, "title": "Memory per stored object (issue 15)",
            "reference": "the stored Pod's JSON size (mean bytes of a GET's answer)",
            "command": "python -m bench.store_memory", "repeats": opts.repeats, "rows": rows,
            "notes": ["RSS from /proc/<pid>/statm of a fresh `kubewire serve --insecure-http "
                      f"--durability normal` per size and repetition, after {WARM_UP_PODS} "
                      f"warm-up Pods and a {SETTLE_S} s settle, before and after the creates "
                      f"({opts.clients} connections); RSS includes SQLite's page cache and "
                      "whatever the allocator kept from the creates' garbage.",
                      "No target in the issue: the ratio says how many bytes of memory each "
                      "stored byte of JSON costs."]}


def main() -> None:
    report.main(__doc__, SMOKE, default_options, run)


if __name__ == "__main__":
    main()
