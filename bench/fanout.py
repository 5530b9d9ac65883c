"""Fan-out: W watchers on one collection, ~2 KB events; kubewire vs. the raw-socket limit.

kubewire (``kubewire serve --insecure-http --durability normal``: the store's fsync is the
write path's concern, not fan-out's) gets its events from a writer process creating Pods with
64 connections; the raw server (``bench.raw_server``) publishes the same number of
pre-serialized lines as fast as the readers take them, each kubewire's ADDED line for the same
Pod byte for byte (captured from a watch at the start of the run: the readers' cost per byte
depends on the bytes, so the limit is measured on the very bytes kubewire sends). The same reader
processes hold the W watches for both. Delivered events/s = W x N / (last watcher complete -
go); server CPU per delivered event from ``/proc/<pid>/stat``, writes included for kubewire.

``--server-workers N`` adds a side, interleaved with the others in the same run: ``kubewire serve
--workers N`` (issue 18: N server processes on one port over the same SQLite store, each with its
own watch cache fed by the store's change feed; the kernel gives each watch and each writer's
connection to one of them), so the fan-out can use the second core; its CPU is the process
tree's (the hub and the workers).

``--src OTHER/src`` adds the side "base": another checkout's ``kubewire serve`` (e.g. a ``git
worktree`` of main), with the same creates and watches, interleaved with the others, for an A/B
of a change in one run (rows: this tree against it, in events/s and in server CPU per delivered
event, which is the steadier figure on a loaded machine).

    python -m bench.fanout [--smoke] [--repeats 5] [--watchers 10,100,1000] [--server-workers 2]
                           [--src OTHER/src]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from bench import report
from bench.servers import (
    ServerProcess,
    kubewire_serve_argv,
    reference_argv,
    tree_without_components,
)
from bench.stats import interleaved_rounds, row, summary
from bench.wire import (
    create_namespace,
    current_revision,
    pod_manifest,
    pods_path,
    request,
    watched_line,
)
from bench.worker import Worker, gather_results, open_watches

NAME = "fanout"
SIDES = ("kubewire", "raw", "raw+creates")  # interleaved, rotated per repetition
WORKERS_SIDE = "kubewire-workers"  # with --server-workers N
BASE_SIDE = "base"  # with --src: another tree's kubewire serve
TARGET_RATIO = 0.85  # issue 6: fan-out at W=1000, ratio to the raw limit


@dataclass
class FanoutOptions:
    watchers: tuple[int, ...] = (10, 100, 1000)
    repeats: int = 5
    deliveries: int = 200_000  # W x N aimed for per round
    min_events: int = 200
    max_events: int = 2000
    writers: int = 64  # kubewire's write concurrency; the raw server publishes this many per turn
    reader_processes: int = 2
    round_timeout_s: float = 120.0
    server_workers: int = 0  # > 1: the "kubewire-workers" side, ``kubewire serve --workers N``
    base_src: str = ""  # another checkout's src: the "base" side
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def sides(self) -> tuple[str, ...]:
        return (*SIDES, *((WORKERS_SIDE,) if self.server_workers > 1 else ()),
                *((BASE_SIDE,) if self.base_src else ()))

    def events_per_watcher(self, watchers: int) -> int:
        return max(self.min_events, min(self.max_events, self.deliveries // watchers))


default_options = FanoutOptions
SMOKE = FanoutOptions(watchers=(3,), repeats=1, deliveries=60, min_events=20, max_events=20,
                      writers=4, reader_processes=1, round_timeout_s=30.0)


class Rig:
    """Both servers, the reader processes and the writer process, for every round."""

    def __init__(self, opts: FanoutOptions, stack: contextlib.ExitStack, data_dir: Path) -> None:
        self.opts = opts
        self.kubewire = stack.enter_context(ServerProcess(
            "kubewire", kubewire_serve_argv(data_dir, durability="normal"))).wait_ready()
        self.workers: ServerProcess | None = None
        if opts.server_workers > 1:
            from bench.workers import ProcessTree  # it imports this module
            self.workers = stack.enter_context(ProcessTree(WORKERS_SIDE, [
                *kubewire_serve_argv(data_dir / "workers", durability="normal"),
                "--workers", str(opts.server_workers)])).wait_ready()
        self.base: ServerProcess | None = None
        if opts.base_src:
            self.base = stack.enter_context(ServerProcess(
                BASE_SIDE, base_serve_argv(opts.base_src, data_dir / "base"))).wait_ready()
        self.raw = stack.enter_context(ServerProcess(
            "raw", reference_argv("bench.raw_server"))).wait_ready()
        self.readers = [stack.enter_context(Worker("bench.readers:ReaderSet"))
                        for _ in range(opts.reader_processes)]
        self.load = stack.enter_context(Worker("bench.load:LoadGenerator"))
        self.body = msgspec.json.encode(pod_manifest("x", generate_name="fan-"))
        self.line = self.capture_line()
        self.rounds = 0

    def capture_line(self) -> bytes:
        """kubewire's ADDED line for one of the round's Pods, as its watchers get it (the stored
        Pod gains kube's defaults, the service-account volume and managedFields, so it is larger
        than the manifest): what the raw server publishes."""
        port = self.kubewire.port
        create_namespace(port, "fan-probe")
        revision = current_revision(port, "fan-probe")
        body = self.body.replace(b'"namespace":"x"', b'"namespace":"fan-probe"')
        status, answer = request(port, "POST", pods_path("fan-probe"), msgspec.json.decode(body))
        if status != 201:
            raise RuntimeError(f"probe create: {status} {answer[:300]!r}")
        name = msgspec.json.decode(answer)["metadata"]["name"]
        line = watched_line(port, "fan-probe", name, revision)
        if not line.startswith(b'{"type":"ADDED"'):
            raise RuntimeError(f"expected an ADDED event, read {line[:200]!r}")
        return line

    def open_watches(self, port: int, path: str, watchers: int) -> None:
        self.active = open_watches(self.readers, port, path, watchers)

    def round(self, side: str, watchers: int) -> dict[str, Any]:
        """One round on ``side``: "kubewire" (its own creates feed its watchers), "raw" (the
        limit), "raw+creates" (the raw server's fan-out while the same creates are served
        by kubewire beside it, to a namespace nobody watches: the most a server that must
        also serve these creates could deliver on this machine), "kubewire-workers" (as
        "kubewire", served by ``--workers N``) or "base" (as "kubewire", served by the
        ``--src`` tree)."""
        self.rounds += 1
        n = self.opts.events_per_watcher(watchers)
        kubewire = side in {"kubewire", WORKERS_SIDE, BASE_SIDE}
        writer = {WORKERS_SIDE: self.workers, BASE_SIDE: self.base}.get(side) or self.kubewire
        server = writer if kubewire else self.raw
        creating = side != "raw"
        namespace = f"fan-{self.rounds}"
        body = self.body.replace(b'"namespace":"x"', b'"namespace":"%b"' % namespace.encode())
        if creating:
            create_namespace(writer.port, namespace)
            self.load.call("connect", 30.0, port=writer.port, count=self.opts.writers)
        if kubewire:
            self.open_watches(server.port, pods_path(namespace) + "?watch=1", watchers)
        else:
            self.open_watches(server.port, "/pods?watch=1", watchers)
        timeout = self.opts.round_timeout_s

        def start() -> None:
            if creating:
                self.load.send("closed_loop", path=pods_path(namespace), body=body,
                               max_requests=n, duration_s=timeout)
            if not kubewire:
                request(server.port, "POST", f"/go?n={n}&batch={self.opts.writers}", self.line)

        counted = counted_round(self.active, server, (watchers, n), timeout, start)
        creates_per_s = float("nan")
        if creating:
            written = self.load.result(timeout + 30)
            if written["completed"] != n:
                raise RuntimeError(f"writer completed {written} of {n}")
            creates_per_s = written["completed"] / written["elapsed"]
            self.load.call("close", 10.0)
        return {**counted, "creates_per_s": creates_per_s}


def counted_round(readers: list[Worker], server: ServerProcess, size: tuple[int, int],
                  timeout_s: float, start: Callable[[], None]) -> dict[str, Any]:
    """One fan-out round once the watches are open (``size``: watchers, events each): the
    readers count ``n`` events each, ``start()`` sets the writes going, and the server's CPU is
    read around it; the readers' watches are closed after. ``measure``'s figures and the
    events per send (per chunk the readers received)."""
    watchers, n = size
    for reader in readers:
        reader.send("count", expected=n, timeout_s=timeout_s)
    time.sleep(0.05)  # the readers' loops are running before the first event
    cpu_before = server.cpu_seconds()
    go = time.monotonic()
    start()
    counts = gather_results(readers, timeout_s + 30)
    cpu = server.cpu_seconds() - cpu_before
    for reader in readers:
        reader.call("close", 30.0)
    chunks = sum(c["chunks"] for c in counts)
    return {**measure(counts, go, watchers, n, cpu),
            "events_per_send": sum(c["events"] for c in counts) / chunks if chunks
            else float("nan")}


def measure(counts: list[dict[str, Any]], go: float, watchers: int, n: int,
            cpu_s: float) -> dict[str, Any]:
    events = sum(c["events"] for c in counts)
    complete = sum(c["complete"] for c in counts)
    if complete < watchers:
        raise RuntimeError(f"only {complete} of {watchers} watchers received {n} events "
                           f"({sum(c['closed'] for c in counts)} closed)")
    elapsed = max(c["done_at"] for c in counts) - go
    return {"events_per_s": events / elapsed, "elapsed_s": elapsed,
            "cpu_us_per_event": cpu_s * 1e6 / events,
            "bytes_per_event": sum(c["bytes"] for c in counts) / events}


def run(opts: FanoutOptions) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kw-fanout-")))
        rig = Rig(opts, stack, data_dir)
        samples = interleaved_rounds(opts.sides, opts.watchers, opts.repeats, rig.round)
    return result(opts, samples)


def result(opts: FanoutOptions, samples: dict[int, dict[str, list[dict[str, Any]]]],
           ) -> dict[str, Any]:
    rows = []
    for watchers, sides in samples.items():
        ours = [s["events_per_s"] for s in sides["kubewire"]]
        ref = [s["events_per_s"] for s in sides["raw"]]
        ratio = summary([a / b for a, b in zip(ours, ref, strict=True)])["median"]
        is_target = watchers == 1000
        case = f"W={watchers}, N={opts.events_per_watcher(watchers)} events/watcher"
        rows.append(row(
            case, "events/s", ours, ref, target=f">= {TARGET_RATIO}" if is_target else "",
            met=(ratio >= TARGET_RATIO) if is_target else None, watchers=watchers,
            bytes_per_event={side: summary([s["bytes_per_event"] for s in runs])
                             for side, runs in sides.items()},
            kubewire_creates_per_s=summary([s["creates_per_s"] for s in sides["kubewire"]]),
            events_per_send={side: summary([s["events_per_send"] for s in runs])
                             for side, runs in sides.items()}))
        rows.append(row(f"{case}: server CPU per delivered event", "µs",
                        [s["cpu_us_per_event"] for s in sides["kubewire"]],
                        [s["cpu_us_per_event"] for s in sides["raw"]]))
        loaded = [s["events_per_s"] for s in sides["raw+creates"]]
        rows.append(row(f"{case}: vs the raw limit with the same creates served beside it",
                        "events/s", ours, loaded))
        rows.append(row(f"{case}: raw limit with the creates beside it (left) vs alone",
                        "events/s", loaded, ref))
        if WORKERS_SIDE in sides:
            rows += workers_rows(opts, case, sides)
        if BASE_SIDE in sides:
            rows += base_rows(case, sides)
    return {"name": NAME, "title": "Fan-out (item 1)", "reference": "raw uvloop socket server",
            "command": "python -m bench.fanout", "repeats": opts.repeats, "rows": rows,
            "notes": ["kubewire runs with --insecure-http --durability normal; its events come "
                      f"from {opts.writers} concurrent creates, so its CPU includes the writes.",
                      "The raw server publishes pre-serialized lines with no storage, each "
                      "kubewire's event line for the same Pod, byte for byte: the limit.",
                      "Events per send = events / chunks received by the readers.",
                      "raw+creates: the raw server's fan-out while kubewire serves the same "
                      "creates to a namespace nobody watches, in parallel (another process): "
                      "what the raw limit becomes on this machine once those creates are "
                      "paid for, a bound on any server that must serve them."]
            + ([f"kubewire --workers {opts.server_workers}: kubewire serve --workers "
                f"{opts.server_workers} on its own SQLite store, the same creates and watches "
                "(spread over the workers by the kernel); CPU is the hub's and the workers'."]
               if opts.server_workers > 1 else [])
            + ([f"base: kubewire serve from {opts.base_src}, the same creates and watches."]
               if opts.base_src else [])}


def base_serve_argv(src: str, data_dir: Path) -> list[str]:
    """``kubewire serve`` from another checkout's ``src``, flagged as this tree's is."""
    return ["/usr/bin/env", f"PYTHONPATH={src}", sys.executable, "-m", "kubewire.cli", "serve",
            "--data-dir", str(data_dir), "--port", "0", "--insecure-http", "--durability",
            "normal", "--log-level", "WARNING", *tree_without_components(src)]


def base_rows(case: str, sides: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """This tree against the ``--src`` tree: events/s and server CPU per delivered event."""
    base = sides[BASE_SIDE]
    return [
        row(f"{case}: this tree (left) vs base tree", "events/s",
            [s["events_per_s"] for s in sides["kubewire"]], [s["events_per_s"] for s in base],
            events_per_send=summary([s["events_per_send"] for s in base]),
            creates_per_s=summary([s["creates_per_s"] for s in base])),
        row(f"{case}: server CPU per delivered event, this tree vs base tree", "µs",
            [s["cpu_us_per_event"] for s in sides["kubewire"]],
            [s["cpu_us_per_event"] for s in base]),
    ]


def workers_rows(opts: FanoutOptions, case: str,
                 sides: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The ``--workers N`` side against the raw limit, against the one-process server, and
    its CPU per delivered event."""
    n = opts.server_workers
    served = [s["events_per_s"] for s in sides[WORKERS_SIDE]]
    return [
        row(f"{case}: kubewire --workers {n} vs raw limit", "events/s", served,
            [s["events_per_s"] for s in sides["raw"]],
            events_per_send=summary([s["events_per_send"] for s in sides[WORKERS_SIDE]]),
            creates_per_s=summary([s["creates_per_s"] for s in sides[WORKERS_SIDE]])),
        row(f"{case}: kubewire --workers {n} (left) vs one process", "events/s", served,
            [s["events_per_s"] for s in sides["kubewire"]]),
        row(f"{case}: server CPU per delivered event, --workers {n} (process tree) vs one "
            "process", "µs", [s["cpu_us_per_event"] for s in sides[WORKERS_SIDE]],
            [s["cpu_us_per_event"] for s in sides["kubewire"]]),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--server-workers", type=int, default=0)
    parser.add_argument("--src", default="", help="another checkout's src: the base side")
    known, rest = parser.parse_known_args()
    sys.argv[1:] = rest  # the common flags are report's

    def options() -> FanoutOptions:
        return FanoutOptions(server_workers=known.server_workers, base_src=known.src)

    smoke = SMOKE
    smoke.server_workers = known.server_workers
    smoke.base_src = known.src
    report.main(__doc__, smoke, options, run, watchers=True)


if __name__ == "__main__":
    main()
