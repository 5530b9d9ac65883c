"""PATCH-driven fan-out: W watchers, 16 writers merge-patching ~2.5 KB Pods (issue 15).

Events per send decide fan-out: kubewire answers a write only after its flush to the watchers,
so with 16 writers each flush can carry at most ~16 events, where ``bench.fanout``'s 64 creators
give it more. Three servers, interleaved in every repetition, the same reader processes holding
the W watches of each:

- kubewire (``kubewire serve --insecure-http --durability normal``, as ``bench.fanout``): one
  writer process keeps ``writers`` keep-alive connections, each merge-patching its own Pod (an
  annotation set to a new value every time), until N PATCHes were answered;
- the ideal server (``bench.ideal_server``): kubewire's HTTP stack with no storage, answering
  each write after its flush to the watchers, sending the very event line kubewire sent for
  such a PATCH (captured at set-up); the same writer process and request bytes drive it. It is
  what the "answered after its flush" contract allows at best;
- the raw limit (``bench.raw_server``): that same captured line, pre-serialized, ``writers`` per
  send, as fast as the readers take them (a fast writer with no HTTP in front of it).

Delivered events/s = W x N / (last watcher complete - go). Events per send = events / chunks
the readers received (each send to a watcher is one chunk). Server CPU per delivered event from
``/proc/<pid>/stat``, writes included for kubewire and the ideal server.

    python -m bench.patch_fanout [--smoke] [--repeats 5] [--watchers 100,1000]
"""

from __future__ import annotations

import contextlib
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import report
from bench.fanout import counted_round
from bench.servers import ServerProcess, kubewire_serve_argv, reference_argv
from bench.stats import interleaved_rounds, row, summary
from bench.wire import (
    PATCHED_POD_PAD_BYTES,
    create_namespace,
    current_revision,
    pod_manifest,
    pods_path,
    request,
    watched_line,
)
from bench.worker import Worker, open_watches

NAME = "patch_fanout"
TARGET_IDEAL = 0.9  # issue 15: PATCH-driven fan-out at W=1000, ratio to the ideal server
TARGET_RAW = 0.5  # issue 15: ... and to the raw limit
TARGET_WATCHERS = 1000
NAMESPACE = "patch"
SIDES = ("kubewire", "ideal", "raw")


@dataclass
class PatchFanoutOptions:
    watchers: tuple[int, ...] = (TARGET_WATCHERS,)
    repeats: int = 5
    deliveries: int = 400_000  # W x N aimed for per round
    min_events: int = 200
    max_events: int = 2000
    writers: int = 16  # concurrent merge PATCHes; the raw server sends this many per send
    reader_processes: int = 2
    round_timeout_s: float = 120.0

    def events_per_watcher(self, watchers: int) -> int:
        return max(self.min_events, min(self.max_events, self.deliveries // watchers))


default_options = PatchFanoutOptions
SMOKE = PatchFanoutOptions(watchers=(3,), repeats=1, deliveries=60, min_events=20,
                           max_events=20, writers=4, reader_processes=1, round_timeout_s=30.0)


def pod_names(writers: int) -> list[str]:
    return [f"patched-{i}" for i in range(writers)]


def capture_event_line(port: int, name: str) -> bytes:
    """The MODIFIED line kubewire sends its watchers for one merge PATCH of Pod ``name``."""
    revision = current_revision(port, NAMESPACE)
    status, body = request(port, "PATCH", f"{pods_path(NAMESPACE)}/{name}",
                           {"metadata": {"annotations": {"bench/seq": "0"}}})
    if status != 200:
        raise RuntimeError(f"patching {name}: {status} {body[:300]!r}")
    line = watched_line(port, NAMESPACE, name, revision)
    if not line.startswith(b'{"type":"MODIFIED"'):
        raise RuntimeError(f"expected a MODIFIED event, read {line[:200]!r}")
    return line


class Rig:
    """The three servers, the reader processes and the writer process, for every round."""

    def __init__(self, opts: PatchFanoutOptions, stack: contextlib.ExitStack,
                 data_dir: Path) -> None:
        self.opts = opts
        kubewire = stack.enter_context(ServerProcess(
            "kubewire", kubewire_serve_argv(data_dir / "kubewire", durability="normal")))
        kubewire.wait_ready()
        create_namespace(kubewire.port, NAMESPACE)
        self.paths = []
        for name in pod_names(opts.writers):
            manifest = pod_manifest(NAMESPACE, name=name, pad_bytes=PATCHED_POD_PAD_BYTES)
            status, body = request(kubewire.port, "POST", pods_path(NAMESPACE), manifest)
            if status != 201:
                raise RuntimeError(f"creating {name}: {status} {body[:300]!r}")
            self.paths.append(f"{pods_path(NAMESPACE)}/{name}")
        self.line = capture_event_line(kubewire.port, pod_names(opts.writers)[0])
        event_file = data_dir / "event.json"
        event_file.write_bytes(self.line)
        ideal = stack.enter_context(ServerProcess("ideal", [
            *reference_argv("bench.ideal_server"), "--event-file", str(event_file)]))
        raw = stack.enter_context(ServerProcess("raw", reference_argv("bench.raw_server")))
        self.servers = {"kubewire": kubewire, "ideal": ideal.wait_ready(),
                        "raw": raw.wait_ready()}
        self.readers = [stack.enter_context(Worker("bench.readers:ReaderSet"))
                        for _ in range(opts.reader_processes)]
        self.load = stack.enter_context(Worker("bench.load:LoadGenerator"))

    def open_watches(self, port: int, path: str, watchers: int) -> None:
        self.active = open_watches(self.readers, port, path, watchers)

    def round(self, side: str, watchers: int) -> dict[str, Any]:
        n = self.opts.events_per_watcher(watchers)
        server = self.servers[side]
        timeout = self.opts.round_timeout_s
        if side == "raw":
            self.open_watches(server.port, "/pods?watch=1", watchers)
        else:
            self.load.call("connect", 30.0, port=server.port, count=self.opts.writers)
            path = pods_path(NAMESPACE) + "?watch=1"
            if side == "kubewire":
                path += f"&resourceVersion={current_revision(server.port, NAMESPACE)}"
            self.open_watches(server.port, path, watchers)

        def start() -> None:
            if side == "raw":
                request(server.port, "POST", f"/go?n={n}&batch={self.opts.writers}", self.line)
            else:
                self.load.send("patch_loop", paths=self.paths, max_requests=n,
                               duration_s=timeout)

        counted = counted_round(self.active, server, (watchers, n), timeout, start)
        patches_per_s = float("nan")
        if side != "raw":
            written = self.load.result(timeout + 30)
            if written["statuses"] != {200: n}:
                raise RuntimeError(f"{side}: writer answers {written['statuses']}, {n} asked")
            patches_per_s = written["completed"] / written["elapsed"]
            self.load.call("close", 10.0)
        return {**counted, "patches_per_s": patches_per_s}


def run(opts: PatchFanoutOptions) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kw-patch-")))
        rig = Rig(opts, stack, data_dir)
        samples = interleaved_rounds(SIDES, opts.watchers, opts.repeats, rig.round)
        event_bytes = len(rig.line)
    return result(opts, samples, event_bytes)


def per_side(sides: dict[str, list[dict[str, Any]]], key: str,
             names: tuple[str, ...] = SIDES) -> dict[str, dict[str, float]]:
    return {side: summary([s[key] for s in sides[side]]) for side in names}


def target_row(rate: dict[str, list[float]], against: str, target: float,
               case: str) -> dict[str, Any]:
    """kubewire's events/s against the side ``against``, held to ``target`` (0: none)."""
    ratio = summary([a / b for a, b in zip(rate["kubewire"], rate[against],
                                           strict=True)])["median"]
    return row(case, "events/s", rate["kubewire"], rate[against],
               target=f">= {target}" if target else "", met=(ratio >= target) if target else None)


def result(opts: PatchFanoutOptions, samples: dict[int, dict[str, list[dict[str, Any]]]],
           event_bytes: int) -> dict[str, Any]:
    rows = []
    for watchers, sides in samples.items():
        rate = {side: [s["events_per_s"] for s in runs] for side, runs in sides.items()}
        is_target = watchers == TARGET_WATCHERS
        case = f"W={watchers}, {opts.writers} writers, N={opts.events_per_watcher(watchers)}"
        rows.append({**target_row(rate, "ideal", TARGET_IDEAL if is_target else 0.0,
                                  f"{case}: vs ideal server"),
                     "watchers": watchers,
                     "events_per_send": per_side(sides, "events_per_send"),
                     "patches_per_s": per_side(sides, "patches_per_s", ("kubewire", "ideal")),
                     "bytes_per_event": per_side(sides, "bytes_per_event")})
        rows.append(target_row(rate, "raw", TARGET_RAW if is_target else 0.0,
                               f"{case}: vs raw limit"))
        rows.append(row(f"{case}: ideal server (left) vs raw limit", "events/s", rate["ideal"],
                        rate["raw"]))
        rows.append(row(f"{case}: events per send, vs ideal server", "events",
                        [s["events_per_send"] for s in sides["kubewire"]],
                        [s["events_per_send"] for s in sides["ideal"]],
                        raw=summary([s["events_per_send"] for s in sides["raw"]])))
        rows.append(row(f"{case}: server CPU per delivered event, vs ideal server", "µs",
                        [s["cpu_us_per_event"] for s in sides["kubewire"]],
                        [s["cpu_us_per_event"] for s in sides["ideal"]],
                        raw=summary([s["cpu_us_per_event"] for s in sides["raw"]])))
    return {"name": NAME, "title": "PATCH-driven fan-out (issue 15)",
            "reference": "the ideal server (bench.ideal_server: kubewire's HTTP stack, no "
                         "storage, answers after its flush) and the raw limit "
                         "(bench.raw_server), per row",
            "command": "python -m bench.patch_fanout", "repeats": opts.repeats, "rows": rows,
            "notes": [f"kubewire runs with --insecure-http --durability normal; {opts.writers} "
                      "keep-alive connections each merge-patch their own Pod (one annotation, "
                      f"a new value each time); a MODIFIED line is ~{event_bytes} bytes.",
                      "The ideal server gets the same PATCH requests and sends the MODIFIED "
                      "line kubewire sent, answering each PATCH after the flush that carried "
                      "it; the raw server sends that same line, "
                      f"{opts.writers} per send, with no HTTP writer in front (a fast writer).",
                      "Events per send = events / chunks received by the readers."]}


def main() -> None:
    report.main(__doc__, SMOKE, default_options, run, watchers=True)


if __name__ == "__main__":
    main()
