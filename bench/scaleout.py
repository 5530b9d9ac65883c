"""Scale-out: creates/s and watch fan-out on SQLite, on etcd with one replica and with two.

Every side is ``kubewire serve --insecure-http`` fed by the same writer process (64 concurrent
creates of ~2 KB Pods) and read by the same reader processes:

- ``sqlite``: one server on its SQLite file (``--durability normal``), the reference;
- ``etcd-1``: one server on a real etcd member (``--storage-backend etcd3``; the member's data
  on /dev/shm, as in the tests: etcd 3.4 cannot skip its fsync);
- ``etcd-2``: two servers (replicas) on that etcd under one prefix, the writes sent to the
  first, the watchers split between both: what a second replica adds to delivery;
- ``etcd-workers-2``: ``kubewire serve --workers 2`` on that etcd (its own prefix): two
  worker processes behind one port, the kernel spreading the connections (writes and watches)
  between them;
- ``sqlite-workers-2``: ``kubewire serve --workers 2`` on SQLite: the same, both workers
  writing through the parent's writer hub.

Each round holds W watchers on one namespace's Pods and times N creates into it: delivered
events/s (W x N over the time to the last watcher's last event), the creates/s seen meanwhile,
and the servers' CPU per delivered event (all of the side's server processes, from /proc, with
their children, SQLite's writer process; etcd's own CPU is reported apart). W=0 rounds time the
creates alone. Sides are interleaved and rotated per repetition; medians, and each side's ratio
to ``sqlite`` in the same repetition.

    python -m bench.scaleout [--smoke] [--repeats 3] [--watchers 0,100,1000]
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from bench import report
from bench.servers import ServerProcess, kubewire_serve_argv, process_cpu_seconds
from bench.stats import interleaved_rounds, row, summary
from bench.wire import create_namespace, pod_manifest, pods_path
from bench.worker import Worker, gather_results, open_watches

NAME = "scaleout"
SIDES = ("sqlite", "sqlite-workers-2", "etcd-1", "etcd-2", "etcd-workers-2")


@dataclass
class ScaleoutOptions:
    watchers: tuple[int, ...] = (0, 100, 1000)
    repeats: int = 3
    deliveries: int = 100_000  # W x N aimed for per round
    min_events: int = 300
    max_events: int = 2000
    writers: int = 64
    reader_processes: int = 2
    round_timeout_s: float = 180.0

    def events_per_watcher(self, watchers: int) -> int:
        if not watchers:
            return self.max_events
        return max(self.min_events, min(self.max_events, self.deliveries // watchers))


default_options = ScaleoutOptions
SMOKE = ScaleoutOptions(watchers=(0, 3), repeats=1, deliveries=60, min_events=20, max_events=20,
                        writers=4, reader_processes=1, round_timeout_s=60.0)


class Rig:
    """The etcd member, every side's servers, the readers and the writer, for every round."""

    def __init__(self, opts: ScaleoutOptions, stack: contextlib.ExitStack, tmp: Path) -> None:
        from tests.etcd_cluster import etcd_cluster  # the tests' real etcd on /dev/shm

        self.opts = opts
        self.etcd = stack.enter_context(etcd_cluster(1))
        endpoint = self.etcd.endpoints[0]

        def serve(name: str, *extra: str) -> ServerProcess:
            argv = [*kubewire_serve_argv(tmp / name, durability="normal"), *extra]
            return stack.enter_context(ServerProcess(name, argv)).wait_ready()

        etcd_flags = ("--etcd-servers", endpoint, "--etcd-prefix", "/bench/registry")
        self.servers: dict[str, list[ServerProcess]] = {
            "sqlite": [serve("sqlite")],
            "etcd-1": [serve("etcd-a", *etcd_flags)],
        }
        self.servers["etcd-2"] = [self.servers["etcd-1"][0], serve("etcd-b", *etcd_flags)]
        self.servers["etcd-workers-2"] = [serve("etcd-w", "--workers", "2", "--etcd-servers",
                                                endpoint, "--etcd-prefix", "/bench-w/registry")]
        self.servers["sqlite-workers-2"] = [serve("sqlite-w", "--workers", "2")]
        self.readers = [stack.enter_context(Worker("bench.readers:ReaderSet"))
                        for _ in range(opts.reader_processes)]
        self.load = stack.enter_context(Worker("bench.load:LoadGenerator"))
        self.body = msgspec.json.encode(pod_manifest("x", generate_name="so-"))
        self.rounds = 0

    @staticmethod
    def tree_cpu(servers: list[ServerProcess]) -> float:
        """The servers' CPU seconds with their child processes' (SQLite's writer process)."""
        return sum(process_cpu_seconds(pid) for s in servers for pid in _tree(s.pid))

    def etcd_cpu(self) -> float:
        return sum(process_cpu_seconds(m.process.pid) for m in self.etcd.members
                   if m.process is not None)

    def round(self, side: str, watchers: int) -> dict[str, Any]:
        self.rounds += 1
        servers = self.servers[side]
        n = self.opts.events_per_watcher(watchers)
        namespace = f"so-{self.rounds}"
        body = self.body.replace(b'"namespace":"x"', b'"namespace":"%b"' % namespace.encode())
        writer_port = servers[0].port
        create_namespace(writer_port, namespace)
        self.load.call("connect", 30.0, port=writer_port, count=self.opts.writers)
        active: list[Worker] = []
        if watchers:
            share = [watchers // len(servers) + (i < watchers % len(servers))
                     for i in range(len(servers))]
            readers = self.readers
            for i, (server, count) in enumerate(zip(servers, share, strict=True)):
                if not count:
                    continue
                mine = readers[i % len(readers):i % len(readers) + 1] if len(servers) > 1 \
                    else readers
                active += open_watches(mine, server.port, pods_path(namespace) + "?watch=1",
                                       count)
            active = list(dict.fromkeys(active))  # a reader may hold watches on both
            for reader in active:
                reader.send("count", expected=n, timeout_s=self.opts.round_timeout_s)
            time.sleep(0.05)
        cpu_before = self.tree_cpu(servers)
        etcd_before = self.etcd_cpu()
        go = time.monotonic()
        self.load.send("closed_loop", path=pods_path(namespace), body=body, max_requests=n,
                       duration_s=self.opts.round_timeout_s)
        written = self.load.result(self.opts.round_timeout_s + 30)
        if written["completed"] != n:
            raise RuntimeError(f"{side}: writer completed {written} of {n}")
        out: dict[str, Any] = {"creates_per_s": written["completed"] / written["elapsed"]}
        if watchers:
            counts = gather_results(active, self.opts.round_timeout_s + 30)
            for reader in active:
                reader.call("close", 30.0)
            events = sum(c["events"] for c in counts)
            complete = sum(c["complete"] for c in counts)
            if complete < watchers:
                raise RuntimeError(f"{side}: {complete} of {watchers} watchers got {n} events")
            elapsed = max(c["done_at"] for c in counts) - go
            out["events_per_s"] = events / elapsed
            out["cpu_us_per_event"] = (self.tree_cpu(servers) - cpu_before) * 1e6 / events
            out["etcd_cpu_us_per_event"] = (self.etcd_cpu() - etcd_before) * 1e6 / events
        self.load.call("close", 10.0)
        return out


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (from /proc/<pid>/task/*/children)."""
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{current}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
    return out


def run(opts: ScaleoutOptions) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kw-scaleout-")))
        rig = Rig(opts, stack, tmp)
        samples = interleaved_rounds(SIDES, opts.watchers, opts.repeats, rig.round)
    return result(opts, samples)


def result(opts: ScaleoutOptions, samples: dict[int, dict[str, list[dict[str, Any]]]],
           ) -> dict[str, Any]:
    rows = []
    for watchers, sides in samples.items():
        ref = sides["sqlite"]
        for side in SIDES[1:]:
            ours = sides[side]
            if not watchers:
                rows.append(row(f"creates/s alone: {side} vs sqlite", "creates/s",
                                [s["creates_per_s"] for s in ours],
                                [s["creates_per_s"] for s in ref]))
                continue
            case = f"W={watchers}, N={opts.events_per_watcher(watchers)}: {side} vs sqlite"
            rows.append(row(f"{case}, fan-out", "events/s", [s["events_per_s"] for s in ours],
                            [s["events_per_s"] for s in ref]))
            rows.append(row(f"{case}, creates while watched", "creates/s",
                            [s["creates_per_s"] for s in ours],
                            [s["creates_per_s"] for s in ref]))
            rows.append(row(f"{case}, kubewire CPU per delivered event", "µs",
                            [s["cpu_us_per_event"] for s in ours],
                            [s["cpu_us_per_event"] for s in ref],
                            etcd_cpu_us_per_event=summary(
                                [s["etcd_cpu_us_per_event"] for s in ours])))
    return {"name": NAME, "title": "Scale-out: SQLite, etcd, replicas (issue 18)",
            "reference": "one kubewire server on SQLite, same run",
            "command": "python -m bench.scaleout", "repeats": opts.repeats, "rows": rows,
            "notes": ["Every server: kubewire serve --insecure-http; SQLite with --durability "
                      "normal; etcd 3.4.23, one member, data on /dev/shm.",
                      "etcd-2: two replicas on one etcd; the writes go to the first, the "
                      "watchers are split between both; CPU counts both servers (etcd apart).",
                      "etcd-workers-2 / sqlite-workers-2: kubewire serve --workers 2 (on the "
                      "same etcd / on SQLite through the writer hub); CPU counts the parent, the "
                      "hub and both workers.",
                      "Every server on etcd watches etcd's whole keyspace, so each also "
                      "receives (and skips) the other sides' writes.",
                      f"{opts.writers} concurrent creates of ~2 KB Pods drive every round."]}


def main() -> None:
    report.main(__doc__, SMOKE, default_options, run, watchers=True)


if __name__ == "__main__":
    main()
