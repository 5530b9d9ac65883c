"""Write-to-watcher latency: p50 and p99 at 1 k writes/s with 100 watchers.

A client process sends Pod creates paced at ``rate`` per second (request i at start + i/rate,
over up to 32 keep-alive connections) and records when each was sent and answered; reader
processes hold 100 watches on the collection and record when each event arrived (by the Pod's
name). Latency = event arrival at a watcher - the write's response at the writer, per
(watcher, event): how long a watcher trails the writer's answer (kubewire answers a write, then
fans it out, as kube-apiserver does; it can be negative: the answer and the event travel on
different connections). Also reported: arrival - request sent (end to end).

kubewire runs ``--insecure-http --durability full``. The reference is the raw-socket server's
``POST /publish``: one pre-serialized line written to every watcher, then the answer.

Each side first runs ``warmup`` unmeasured rounds: the first round after start-up read 1.3-3x
the later rounds' p99 in nearly every run (first-use costs in the server and in the rig's own
processes; bench/FINDINGS.md, 2026-11-27), and the target is about a server under a steady
load.

    python -m bench.latency [--smoke] [--repeats 5]
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
from bench.stats import percentile, row, summary
from bench.wire import create_namespace, pod_manifest, pods_path
from bench.worker import Worker, gather_results

NAME = "latency"
TARGET_P99_MS = 10.0  # issue 6: write -> watcher p99 at 1 k writes/s, 100 watchers
QUIET_S = 2.0  # readers stop this long after the last event (writes may end early, by time)


@dataclass
class LatencyOptions:
    watchers: int = 100
    rate: float = 1000.0
    writes: int = 2000
    connections: int = 32
    reader_processes: int = 2
    repeats: int = 5
    warmup: int = 1  # unmeasured rounds per side first


default_options = LatencyOptions
SMOKE = LatencyOptions(watchers=3, rate=200.0, writes=40, connections=4, reader_processes=1,
                       repeats=1, warmup=1)


class Rig:
    def __init__(self, opts: LatencyOptions, stack: contextlib.ExitStack, data_dir: Path) -> None:
        self.opts = opts
        self.servers = {
            "kubewire": stack.enter_context(ServerProcess(
                "kubewire", kubewire_serve_argv(data_dir, durability="full"))).wait_ready(),
            "raw": stack.enter_context(ServerProcess(
                "raw", reference_argv("bench.raw_server"))).wait_ready()}
        self.readers = [stack.enter_context(Worker("bench.readers:ReaderSet"))
                        for _ in range(opts.reader_processes)]
        self.load = stack.enter_context(Worker("bench.load:LoadGenerator"))
        self.rounds = 0

    def requests(self, side: str) -> tuple[str, list[tuple[int, str, bytes]]]:
        """The watch path and the writes, named ``lat-<i>`` so readers can time each."""
        n = self.opts.writes
        if side == "raw":
            return "/pods?watch=1", [(i, "/publish", b"lat-%d" % i) for i in range(n)]
        namespace = f"lat-{self.rounds}"
        create_namespace(self.servers[side].port, namespace)
        path = pods_path(namespace)
        return path + "?watch=1", [
            (i, path, msgspec.json.encode(pod_manifest(namespace, name=f"lat-{i}")))
            for i in range(n)]

    def round(self, side: str) -> dict[str, Any]:
        self.rounds += 1
        opts = self.opts
        port = self.servers[side].port
        watch_path, writes = self.requests(side)
        shares = [opts.watchers // len(self.readers) + (i < opts.watchers % len(self.readers))
                  for i in range(len(self.readers))]
        active = [r for r, n in zip(self.readers, shares, strict=True) if n]
        for reader, n in zip(active, shares, strict=True):
            reader.send("open", port=port, path=watch_path, count=n, timeout_s=60.0)
        gather_results(active, 90.0)
        self.load.call("connect", 30.0, port=port, count=opts.connections)
        duration = 2 * opts.writes / opts.rate + 5
        for reader in active:
            reader.send("count", expected=opts.writes, timeout_s=duration + 10,
                        record_names=True, quiet_s=QUIET_S)
        sent = self.load.call("paced", duration + 60, requests=writes, rate=opts.rate,
                              duration_s=duration)
        counts = gather_results(active, duration + 60)
        self.load.call("close", 10.0)
        for reader in active:
            reader.call("close", 30.0)
        return latencies(sent, counts)


def latencies(sent: dict[str, Any], counts: list[dict[str, Any]]) -> dict[str, Any]:
    answered = {ident: (t_sent, t_answer) for ident, t_sent, t_answer, status in sent["records"]
                if status in (200, 201)}
    from_response: list[float] = []
    from_request: list[float] = []
    for count in counts:
        for arrivals in count["arrivals"]:
            for ident, t in arrivals:
                if ident in answered:
                    t_sent, t_answer = answered[ident]
                    from_response.append((t - t_answer) * 1000)
                    from_request.append((t - t_sent) * 1000)
    if not from_response:
        raise RuntimeError("no event arrived for an answered write")
    return {"p50_ms": percentile(from_response, 0.5), "p99_ms": percentile(from_response, 0.99),
            "e2e_p50_ms": percentile(from_request, 0.5),
            "e2e_p99_ms": percentile(from_request, 0.99),
            "writes_per_s": len(sent["records"]) / sent["elapsed"],
            "answered": len(answered), "deliveries": len(from_response)}


def run(opts: LatencyOptions) -> dict[str, Any]:
    sides: dict[str, list[dict[str, Any]]] = {"kubewire": [], "raw": []}
    with contextlib.ExitStack() as stack:
        data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kw-latency-")))
        rig = Rig(opts, stack, data_dir)
        for _ in range(opts.warmup):
            for side in ("kubewire", "raw"):
                rig.round(side)
        for rep in range(opts.repeats):
            order = ("kubewire", "raw") if rep % 2 == 0 else ("raw", "kubewire")
            for side in order:
                sides[side].append(rig.round(side))
    ours, ref = sides["kubewire"], sides["raw"]
    p99 = [s["p99_ms"] for s in ours]
    detail = {key: {side: summary([s[key] for s in runs]) for side, runs in sides.items()}
              for key in ("e2e_p50_ms", "e2e_p99_ms", "writes_per_s", "deliveries")}
    case = f"{opts.watchers} watchers, {opts.rate:g} writes/s asked"
    return {"name": NAME, "title": "Write -> watcher latency (item 3)",
            "reference": "raw socket server: publish to every watcher, then answer",
            "command": "python -m bench.latency", "repeats": opts.repeats,
            "rows": [row(f"p50, {case}", "ms", [s["p50_ms"] for s in ours],
                         [s["p50_ms"] for s in ref], **detail),
                     row(f"p99, {case}", "ms", p99, [s["p99_ms"] for s in ref],
                         target=f"<= {TARGET_P99_MS:g} ms",
                         met=summary(p99)["median"] <= TARGET_P99_MS)],
            "notes": [f"{opts.warmup} unmeasured round(s) per side first (start-up's first-use "
                      "costs are not the steady load the target is about).",
                      "Latency is watcher arrival minus the write's response at the writer "
                      "(how long watchers trail the answer); e2e = minus the request's send "
                      "time. writes_per_s is the rate achieved: kubewire below the asked rate "
                      "means its write path could not keep up."]}


def main() -> None:
    report.main(__doc__, SMOKE, default_options, run)


if __name__ == "__main__":
    main()
