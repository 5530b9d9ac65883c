"""Write path: creates/s over HTTP with 1, 8 and 64 concurrent clients, durable commit on.

kubewire (``kubewire serve --insecure-http --durability full``: each commit group is fsynced)
against its own HTTP stack, ``kubewire.server.wire.http.HTTPServer``, answering every request from
an empty handler (``bench.empty_server``). One client process keeps C keep-alive connections
each sending ~2 KB Pod creates (``generateName``) back to back for a fixed time; both servers
get the same request bytes, interleaved per repetition.

    python -m bench.write_path [--smoke] [--repeats 5]
"""

from __future__ import annotations

import contextlib
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from bench import report
from bench.servers import ServerProcess, kubewire_serve_argv, reference_argv
from bench.stats import row
from bench.wire import create_namespace, pod_manifest, pods_path
from bench.worker import Worker

NAME = "write_path"
TARGET_RATIO = 0.5  # issue 6: creates with 8 clients, ratio to the empty handler
TARGET_CLIENTS = 8
NAMESPACE = "bench"


@dataclass
class WriteOptions:
    clients: tuple[int, ...] = (1, 8, 64)
    repeats: int = 5
    duration_s: float = 2.0
    max_requests: int = 200_000


default_options = WriteOptions
SMOKE = WriteOptions(clients=(2,), repeats=1, duration_s=0.3)


def run(opts: WriteOptions) -> dict[str, Any]:
    body = msgspec.json.encode(pod_manifest(NAMESPACE, generate_name="w-"))
    path = pods_path(NAMESPACE)
    samples: dict[int, dict[str, list[float]]] = {}
    with contextlib.ExitStack() as stack:
        data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kw-write-")))
        servers = {
            "kubewire": stack.enter_context(ServerProcess(
                "kubewire", kubewire_serve_argv(data_dir, durability="full"))).wait_ready(),
            "empty": stack.enter_context(ServerProcess(
                "empty", reference_argv("bench.empty_server"))).wait_ready()}
        create_namespace(servers["kubewire"].port, NAMESPACE)
        load = stack.enter_context(Worker("bench.load:LoadGenerator"))
        for clients in opts.clients:
            rates: dict[str, list[float]] = {"kubewire": [], "empty": []}
            for rep in range(opts.repeats):
                order = ("kubewire", "empty") if rep % 2 == 0 else ("empty", "kubewire")
                for side in order:
                    load.call("connect", 30.0, port=servers[side].port, count=clients)
                    done = load.call("closed_loop", opts.duration_s + 60, path=path, body=body,
                                     max_requests=opts.max_requests,
                                     duration_s=opts.duration_s)
                    expected = 201
                    if set(done["statuses"]) != {expected}:
                        raise RuntimeError(f"{side} answered {done['statuses']}")
                    rates[side].append(done["completed"] / done["elapsed"])
            samples[clients] = rates
        load.call("close", 10.0)
    rows = []
    for clients, rates in samples.items():
        is_target = clients == TARGET_CLIENTS
        ratio = row("", "", rates["kubewire"], rates["empty"])["ratio"]["median"]
        rows.append(row(f"C={clients} clients", "creates/s", rates["kubewire"], rates["empty"],
                        target=f">= {TARGET_RATIO}" if is_target else "",
                        met=ratio >= TARGET_RATIO if is_target else None))
    return {"name": NAME, "title": "Write path (item 3)",
            "reference": "kubewire.server.wire.http.HTTPServer with an empty handler",
            "command": "python -m bench.write_path", "repeats": opts.repeats, "rows": rows,
            "notes": [f"{opts.duration_s} s of back-to-back creates per side and repetition, "
                      "durability full (fsync per commit group), one client process."]}


def main() -> None:
    report.main(__doc__, SMOKE, default_options, run)


if __name__ == "__main__":
    main()
