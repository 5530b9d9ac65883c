"""Idle watcher memory: server RSS growth per idle watch at 1000 watches.

Each repetition starts a fresh server (RSS never shrinks back, so reuse would hide growth):
``kubewire serve --insecure-http`` and, interleaved, the raw-socket reference
(``bench.raw_server``). After a warm-up watch opened and closed (lazy imports and first-use
caches are not per-watch costs), RSS is read from ``/proc``; a reader process opens W watches on
one collection and waits for every response head; after a short settle RSS is read again.

    python -m bench.idle_memory [--smoke] [--repeats 5]
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import report
from bench.servers import ServerProcess, kubewire_serve_argv, reference_argv
from bench.stats import row, summary
from bench.wire import create_namespace, pods_path
from bench.worker import Worker

NAME = "idle_memory"
TARGET_BYTES = 4096  # issue 6: <= 4 KB per idle watch
SETTLE_S = 0.5


@dataclass
class IdleOptions:
    watchers: int = 1000
    repeats: int = 5


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


def run(opts: IdleOptions) -> dict[str, Any]:
    ours: list[float] = []
    ref: list[float] = []
    with contextlib.ExitStack() as stack:
        reader = stack.enter_context(Worker("bench.readers:ReaderSet"))
        for rep in range(opts.repeats):
            order = ("kubewire", "raw") if rep % 2 == 0 else ("raw", "kubewire")
            for side in order:
                data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(
                    prefix="kw-idle-")))
                value = measure(side, opts.watchers, reader, data_dir)
                (ours if side == "kubewire" else ref).append(value)
    met = summary(ours)["median"] <= TARGET_BYTES
    return {"name": NAME, "title": "Idle watcher memory (item 2)",
            "reference": "raw uvloop socket server holding the same watches",
            "command": "python -m bench.idle_memory", "repeats": opts.repeats,
            "rows": [row(f"W={opts.watchers} idle watches", "B/watch", ours, ref,
                         target=f"<= {TARGET_BYTES} B", met=met)],
            "notes": ["RSS from /proc/<pid>/statm of a fresh server per repetition, after one "
                      "warm-up watch; the target applies to kubewire's absolute value."]}


def main() -> None:
    report.main(__doc__, SMOKE, default_options, run)


if __name__ == "__main__":
    main()
