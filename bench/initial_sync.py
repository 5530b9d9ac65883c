"""Initial sync: 10 000 Pods to a new watcher by a streaming list vs. by a list and a watch.

One ``kubewire serve --insecure-http --durability normal`` holds N ~2 KB Pods in one namespace
(created first, not measured). Per repetition, interleaved, for each way of syncing:

- one kubewire ``Informer`` (decoding every Pod) is timed from start to ``wait_for_sync()``;
  streaming = ``sendInitialEvents=true`` until the ``initial-events-end`` bookmark, reference =
  pages of 500 then a watch from the list's revision (client-go's reflector);
- 100 syncs at once (raw-protocol clients making the same requests, discarding the bytes, in
  two processes): the server's peak RSS growth (``VmHWM`` reset just before) and their time.

    python -m bench.initial_sync [--smoke] [--repeats 5]
"""

from __future__ import annotations

import contextlib
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from bench import report
from bench.servers import (
    ServerProcess,
    kubewire_serve_argv,
    peak_rss_bytes,
    reset_peak_rss,
)
from bench.stats import row, summary
from bench.wire import create_namespace, pod_manifest, pods_path
from bench.worker import Worker, gather_results

NAME = "initial_sync"
TARGET_S = 1.0  # issue 6: streaming initial sync of 10 000 Pods
NAMESPACE = "sync"


@dataclass
class SyncOptions:
    pods: int = 10_000
    informers: int = 100
    client_processes: int = 2
    repeats: int = 5
    timeout_s: float = 300.0


default_options = SyncOptions
SMOKE = SyncOptions(pods=30, informers=4, client_processes=1, repeats=1, timeout_s=60.0)


def missing() -> str:
    """Why this benchmark cannot run here ("" if it can)."""
    try:
        from kubewire.client import Informer  # noqa: F401
    except ImportError as err:
        return f"kubewire.client has no Informer: {err}"
    return ""


def fill(port: int, pods: int) -> None:
    create_namespace(port, NAMESPACE)
    body = msgspec.json.encode(pod_manifest(NAMESPACE, generate_name="sync-"))
    with Worker("bench.load:LoadGenerator") as load:
        load.call("connect", 30.0, port=port, count=32)
        done = load.call("closed_loop", 900.0, path=pods_path(NAMESPACE), body=body,
                         max_requests=pods, duration_s=600.0)
        if done["completed"] != pods or set(done["statuses"]) != {201}:
            raise RuntimeError(f"filling the store: {done}")


def measure(server: ServerProcess, clients: list[Worker], kubeconfig: Path,
            streaming: bool, opts: SyncOptions) -> dict[str, float]:
    informer = clients[0].call("time_informer", opts.timeout_s + 30,
                               kubeconfig=str(kubeconfig), namespace=NAMESPACE,
                               streaming=streaming, timeout_s=opts.timeout_s)
    if informer["objects"] != opts.pods:
        raise RuntimeError(f"informer synced {informer['objects']} of {opts.pods} Pods")
    before = server.rss_bytes()
    reset_peak_rss(server.pid)
    shares = [opts.informers // len(clients) + (i < opts.informers % len(clients))
              for i in range(len(clients))]
    for worker, count in zip(clients, shares, strict=True):
        worker.send("sync_many", port=server.port, namespace=NAMESPACE, count=count,
                    streaming=streaming, timeout_s=opts.timeout_s)
    seconds = max(gather_results(clients, opts.timeout_s + 30))
    return {"informer_s": informer["seconds"], "bulk_s": seconds,
            "peak_growth_mb": (peak_rss_bytes(server.pid) - before) / 2**20}


def run(opts: SyncOptions) -> dict[str, Any]:
    sides: dict[str, list[dict[str, float]]] = {"streaming": [], "list+watch": []}
    with contextlib.ExitStack() as stack:
        data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kw-sync-")))
        server = stack.enter_context(ServerProcess(
            "kubewire", kubewire_serve_argv(data_dir, durability="normal"))).wait_ready()
        fill(server.port, opts.pods)
        clients = [stack.enter_context(Worker("bench.sync_clients:SyncClients"))
                   for _ in range(opts.client_processes)]
        for rep in range(opts.repeats):
            order = ("streaming", "list+watch") if rep % 2 == 0 else ("list+watch", "streaming")
            for side in order:
                sides[side].append(measure(server, clients, data_dir / "kubeconfig",
                                           side == "streaming", opts))
    ours, ref = sides["streaming"], sides["list+watch"]
    informer_s = [s["informer_s"] for s in ours]
    peak = [s["peak_growth_mb"] for s in ours]
    peak_ref = [s["peak_growth_mb"] for s in ref]
    less = summary([a / b if b else float("nan")
                    for a, b in zip(peak, peak_ref, strict=True)])["median"] < 1
    return {"name": NAME, "title": "Initial sync (item 5)",
            "reference": "list (pages of 500) + watch, same server and Pods",
            "command": "python -m bench.initial_sync", "repeats": opts.repeats,
            "rows": [row(f"one Informer syncs {opts.pods} Pods: streaming list", "s",
                         informer_s, [s["informer_s"] for s in ref],
                         target=f"<= {TARGET_S:g} s", met=summary(informer_s)["median"]
                         <= TARGET_S),
                     row(f"{opts.informers} syncs at once: server peak RSS growth, streaming",
                         "MiB", peak, peak_ref, target="< list+watch", met=less,
                         bulk_seconds={side: summary([s["bulk_s"] for s in runs])
                                       for side, runs in sides.items()})],
            "notes": ["kubewire runs with --insecure-http --durability normal; the Pods are "
                      "created before timing. Peak RSS is VmHWM after a clear_refs reset."]}


def main() -> None:
    report.main(__doc__, SMOKE, default_options, run)


if __name__ == "__main__":
    main()
