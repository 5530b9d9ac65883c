"""Creates and merge PATCHes per second, and loop CPU per request, at C=16 (issue 15).

One client process keeps C keep-alive connections sending ~2.5 KB Pod creates
(``generateName``), then merge PATCHes (connection i patches its own ~2.5 KB Pod, one
annotation set to a new value each time), back to back for a fixed time after a warm-up.
Server CPU comes from ``/proc`` as in ``bench.write_cpu``: the loop thread's
(``/proc/<pid>/task/<pid>/stat``, the thread serving HTTP, handlers and watchers: the issue's
"loop CPU") and the whole process's (storage thread included) per answered request.

Reference, interleaved per repetition with the same request bytes:

- by default, kubewire's own HTTP stack answering from an empty handler (``bench.empty_server``):
  the HTTP floor of a request;
- with ``--base SRC``, ``kubewire serve`` run from another checkout's ``src`` (e.g. a
  ``git worktree`` of ``issue15-base``): the A/B the issue's CPU targets are stated in (loop CPU
  per merge PATCH <= 0.6x, per create <= 0.75x); the rows then carry those targets.

    python -m bench.request_cpu [--smoke] [--repeats 5] [--base ../wt-base/src]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from bench import report
from bench.servers import REPO_ROOT, ServerProcess, kubewire_serve_argv, process_cpu_seconds
from bench.servers import reference_argv as reference_server_argv
from bench.stats import row, summary
from bench.wire import PATCHED_POD_PAD_BYTES, create_namespace, pod_manifest, pods_path, request
from bench.worker import Worker

NAME = "request_cpu"
NAMESPACE = "bench"
DURABILITY = "full"  # what ``kubewire serve`` runs by default
TARGETS = {"create": 0.75, "patch": 0.6}  # issue 15: loop CPU per request, A/B to issue15-base
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class RequestCPUOptions:
    clients: int = 16
    repeats: int = 5
    duration_s: float = 2.0
    warm_up_s: float = 0.5
    max_requests: int = 200_000
    base_src: str = ""  # another checkout's src: the reference (A/B) instead of the empty handler


default_options = RequestCPUOptions
SMOKE = RequestCPUOptions(clients=2, repeats=1, duration_s=0.3, warm_up_s=0.1)
OPERATIONS = {"create": ("creates/s", 201), "patch": ("merge PATCHes/s", 200)}


def loop_cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid``'s main thread (where the event loop runs)."""
    with open(f"/proc/{pid}/task/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def tree_serve_argv(src: str, data_dir: Path) -> list[str]:
    """``kubewire serve`` from the checkout whose package directory is ``src``."""
    return ["/usr/bin/env", f"PYTHONPATH={src}", sys.executable, "-m", "kubewire.cli", "serve",
            "--data-dir", str(data_dir), "--port", "0", "--insecure-http",
            "--durability", DURABILITY, "--log-level", "WARNING"]


def start(side: str, opts: RequestCPUOptions, data_dir: Path,
          stack: contextlib.ExitStack) -> ServerProcess:
    if side == "empty":
        argv = reference_server_argv("bench.empty_server")
    elif opts.base_src:
        argv = tree_serve_argv(opts.base_src if side == "base" else str(REPO_ROOT / "src"),
                               data_dir / side)
    else:
        argv = kubewire_serve_argv(data_dir / side, durability=DURABILITY)
    server = stack.enter_context(ServerProcess(side, argv)).wait_ready()
    if side != "empty":
        create_namespace(server.port, NAMESPACE)
    return server


def patch_paths(server: ServerProcess, count: int, seed: bool) -> list[str]:
    """``count`` ~2.5 KB Pods to patch, one per connection (created if ``seed``)."""
    paths = []
    for i in range(count):
        name = f"patched-{i}"
        if seed:
            manifest = pod_manifest(NAMESPACE, name=name, pad_bytes=PATCHED_POD_PAD_BYTES)
            status, body = request(server.port, "POST", pods_path(NAMESPACE), manifest)
            if status != 201:
                raise RuntimeError(f"creating {name}: {status} {body[:300]!r}")
        paths.append(f"{pods_path(NAMESPACE)}/{name}")
    return paths


def measure(server: ServerProcess, load: Worker, op: str, work: tuple[bytes, list[str]],
            opts: RequestCPUOptions) -> dict[str, float]:
    """One timed run of ``op`` after a warm-up: rate and CPU µs per request. ``work``: the
    create body and the paths to patch."""
    body, paths = work
    load.call("connect", 30.0, port=server.port, count=opts.clients)

    def go(duration_s: float) -> dict[str, Any]:
        if op == "create":
            return load.call("closed_loop", duration_s + 60, path=pods_path(NAMESPACE),
                             body=body, max_requests=opts.max_requests, duration_s=duration_s)
        return load.call("patch_loop", duration_s + 60, paths=paths,
                         max_requests=opts.max_requests, duration_s=duration_s)

    go(opts.warm_up_s)
    loop0, process0 = loop_cpu_seconds(server.pid), process_cpu_seconds(server.pid)
    done = go(opts.duration_s)
    loop1, process1 = loop_cpu_seconds(server.pid), process_cpu_seconds(server.pid)
    load.call("close", 10.0)
    expected = OPERATIONS[op][1]
    if set(done["statuses"]) != {expected}:
        raise RuntimeError(f"{server.name} {op}: answers {done['statuses']}")
    n = done["completed"]
    return {"rate": n / done["elapsed"], "loop_cpu_us": 1e6 * (loop1 - loop0) / n,
            "process_cpu_us": 1e6 * (process1 - process0) / n}


def run(opts: RequestCPUOptions) -> dict[str, Any]:
    sides = ("kubewire", "base" if opts.base_src else "empty")
    body = msgspec.json.encode(pod_manifest(NAMESPACE, generate_name="c-",
                                            pad_bytes=PATCHED_POD_PAD_BYTES))
    samples: dict[str, dict[str, list[dict[str, float]]]] = {
        op: {side: [] for side in sides} for op in OPERATIONS}
    with contextlib.ExitStack() as stack:
        data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kw-reqcpu-")))
        servers = {side: start(side, opts, data_dir, stack) for side in sides}
        paths = {side: patch_paths(servers[side], opts.clients, seed=side != "empty")
                 for side in sides}
        load = stack.enter_context(Worker("bench.load:LoadGenerator"))
        for rep in range(opts.repeats):
            order = sides if rep % 2 == 0 else sides[::-1]
            for op in OPERATIONS:
                for side in order:
                    samples[op][side].append(
                        measure(servers[side], load, op, (body, paths[side]), opts))
    return result(opts, sides, samples)


def result(opts: RequestCPUOptions, sides: tuple[str, str],
           samples: dict[str, dict[str, list[dict[str, float]]]]) -> dict[str, Any]:
    ours, ref = sides
    rows = []
    for op, (unit, _) in OPERATIONS.items():
        runs = samples[op]
        case = f"C={opts.clients}, {'creates' if op == 'create' else 'merge PATCHes'}"
        rows.append(row(f"{case}: rate", unit, [s["rate"] for s in runs[ours]],
                        [s["rate"] for s in runs[ref]]))
        cpu_row = row(f"{case}: loop CPU per request", "µs",
                      [s["loop_cpu_us"] for s in runs[ours]],
                      [s["loop_cpu_us"] for s in runs[ref]],
                      process_cpu_us={side: summary([s["process_cpu_us"] for s in runs[side]])
                                      for side in sides})
        if opts.base_src:
            cpu_row["target"] = f"<= {TARGETS[op]}"
            cpu_row["met"] = cpu_row["ratio"]["median"] <= TARGETS[op]
        rows.append(cpu_row)
    reference = (f"kubewire serve from {opts.base_src} (A/B)" if opts.base_src else
                 "kubewire.server.wire.http.HTTPServer with an empty handler")
    return {"name": NAME, "title": "Creates and PATCHes: rate, loop CPU (issue 15)",
            "reference": reference, "command": "python -m bench.request_cpu"
            + (f" --base {opts.base_src}" if opts.base_src else ""),
            "repeats": opts.repeats, "rows": rows,
            "notes": [f"{opts.duration_s} s of back-to-back requests per side, operation and "
                      f"repetition after {opts.warm_up_s} s of warm-up; durability "
                      f"{DURABILITY}; ~2.5 KB Pods; one client process.",
                      "Loop CPU: the server's main thread from /proc/<pid>/task/<pid>/stat; "
                      "process_cpu_us adds its other threads (the store's commits).",
                      "The issue's targets are A/B against issue15-base: loop CPU per merge "
                      f"PATCH <= {TARGETS['patch']}x, per create <= {TARGETS['create']}x; "
                      "they are checked when run with --base (a checkout of issue15-base's "
                      "src), not against the empty handler."]}


def main() -> None:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--base", default="", help="another checkout's src: the A/B reference")
    known, rest = parser.parse_known_args()
    sys.argv[1:] = rest  # the common flags (--smoke, --repeats, --out) are report's

    def options(opts: RequestCPUOptions) -> RequestCPUOptions:
        opts.base_src = known.base
        return opts

    report.main(__doc__, options(SMOKE), lambda: options(default_options()), run)


if __name__ == "__main__":
    main()
