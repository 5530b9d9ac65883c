"""Creates and merge PATCHes per second, and loop CPU per request, at C=16 (issue 15).

One client process keeps C keep-alive connections sending ~2.5 KB Pod creates
(``generateName``), then merge PATCHes (connection i patches its own ~2.5 KB Pod, one
annotation set to a new value each time), back to back for a fixed time after a warm-up. The
PATCHes run twice, on Pods of their own each: by the Pods' creator (one field manager), and by
a second field manager (User-Agent ``kubewire-patcher``), so the Pod has two managers: the
issue's workload, where every PATCH updates one manager's entry beside another's.
Server CPU comes from ``/proc`` as in ``bench.write_cpu``: the loop thread's
(``/proc/<pid>/task/<pid>/stat``, the thread serving HTTP, handlers and watchers: the issue's
"loop CPU") and the whole process's (storage thread included) per answered request.

Reference, interleaved per repetition with the same request bytes:

- by default, kubewire's own HTTP stack answering from an empty handler (``bench.empty_server``):
  the HTTP floor of a request;
- with ``--base SRC``, ``kubewire serve`` run from another checkout's ``src`` (e.g. a
  ``git worktree`` of ``issue15-base``): the A/B the issue's CPU targets are stated in (loop CPU
  per merge PATCH <= 0.6x, per create <= 0.75x); the rows then carry those targets. ``--base``
  may be given several times: every tree runs in the same repetitions, each gets its own rows,
  and the targets are checked against the first.

    python -m bench.request_cpu [--smoke] [--repeats 5] [--base ../wt-base/src [--base ...]]

Its options, the interleaving of sides and the timed round with its CPU reading are shared
with ``bench.crd_writes`` (``LoadOptions``, ``in_turn``, ``timed_round``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import msgspec

from bench import report
from bench.servers import (
    REPO_ROOT,
    ServerProcess,
    kubewire_serve_argv,
    process_cpu_seconds,
    tree_without_components,
)
from bench.servers import reference_argv as reference_server_argv
from bench.stats import row, summary
from bench.wire import PATCHED_POD_PAD_BYTES, create_namespace, pod_manifest, pods_path, request
from bench.worker import Worker

NAME = "request_cpu"
NAMESPACE = "bench"
DURABILITY = "full"  # what ``kubewire serve`` runs by default
# issue 15: loop CPU per request, A/B to issue15-base (both merge PATCH rows carry the PATCH one)
TARGETS = {"create": 0.75, "patch": 0.6, "patch2": 0.6}
SECOND_MANAGER = "kubewire-patcher/1.0"  # its product names the second field manager
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class LoadOptions:
    """C keep-alive connections; per side and repetition, ``duration_s`` of back-to-back
    requests (at most ``max_requests``) after ``warm_up_s`` of warm-up."""
    clients: int = 16
    repeats: int = 5
    duration_s: float = 2.0
    warm_up_s: float = 0.5
    max_requests: int = 200_000

    @classmethod
    def smoke(cls) -> Self:
        return cls(clients=2, repeats=1, duration_s=0.3, warm_up_s=0.1)


@dataclass
class RequestCPUOptions(LoadOptions):
    # other checkouts' src: the references (A/B) instead of the empty handler
    base_srcs: list[str] = field(default_factory=list)


default_options = RequestCPUOptions
SMOKE = RequestCPUOptions.smoke()
# operation -> (case, unit, expected status)
OPERATIONS = {"create": ("creates", "creates/s", 201),
              "patch": ("merge PATCHes", "merge PATCHes/s", 200),
              "patch2": ("merge PATCHes by a second manager", "merge PATCHes/s", 200)}


def loop_cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid``'s main thread (where the event loop runs)."""
    with open(f"/proc/{pid}/task/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def in_turn(sides: Sequence[str], rep: int) -> list[str]:
    """The order of ``sides`` in repetition ``rep``: reversed every other repetition, so no
    side always runs first."""
    return list(sides) if rep % 2 == 0 else list(sides)[::-1]


def timed_round(server: ServerProcess, load: Worker, opts: LoadOptions,
                go: Callable[[float], dict[str, Any]], expect: tuple[str, int]) -> dict[str, float]:
    """Connect ``opts.clients`` connections, run ``go(seconds)`` (a load call returning
    ``completed``, ``elapsed`` and ``statuses``) for the warm-up, then timed: the rate and the
    loop and process CPU µs per request. ``expect``: what runs (for the error) and the status
    every answer must have."""
    what, expected = expect
    load.call("connect", 30.0, port=server.port, count=opts.clients)
    go(opts.warm_up_s)
    loop0, process0 = loop_cpu_seconds(server.pid), process_cpu_seconds(server.pid)
    done = go(opts.duration_s)
    loop1, process1 = loop_cpu_seconds(server.pid), process_cpu_seconds(server.pid)
    load.call("close", 10.0)
    if set(done["statuses"]) != {expected}:
        raise RuntimeError(f"{what}: answers {done['statuses']}")
    n = done["completed"]
    return {"rate": n / done["elapsed"], "loop_cpu_us": 1e6 * (loop1 - loop0) / n,
            "process_cpu_us": 1e6 * (process1 - process0) / n}


def tree_serve_argv(src: str, data_dir: Path) -> list[str]:
    """``kubewire serve`` from the checkout whose package directory is ``src``."""
    return ["/usr/bin/env", f"PYTHONPATH={src}", sys.executable, "-m", "kubewire.cli", "serve",
            "--data-dir", str(data_dir), "--port", "0", "--insecure-http",
            "--durability", DURABILITY, "--log-level", "WARNING", *tree_without_components(src)]


def reference_sides(opts: RequestCPUOptions) -> dict[str, str]:
    """Reference side -> the src it serves from ("" for the empty handler)."""
    if not opts.base_srcs:
        return {"empty": ""}
    if len(opts.base_srcs) == 1:
        return {"base": opts.base_srcs[0]}
    return {f"base{i}": src for i, src in enumerate(opts.base_srcs, 1)}


def start(side: str, opts: RequestCPUOptions, data_dir: Path,
          stack: contextlib.ExitStack) -> ServerProcess:
    refs = reference_sides(opts)
    if side == "empty":
        argv = reference_server_argv("bench.empty_server")
    elif opts.base_srcs:
        argv = tree_serve_argv(refs.get(side) or str(REPO_ROOT / "src"), data_dir / side)
    else:
        argv = kubewire_serve_argv(data_dir / side, durability=DURABILITY)
    server = stack.enter_context(ServerProcess(side, argv)).wait_ready()
    if side != "empty":
        create_namespace(server.port, NAMESPACE)
    return server


def patch_paths(server: ServerProcess, count: int, seed: bool, prefix: str) -> list[str]:
    """``count`` ~2.5 KB Pods ``<prefix>-<i>`` to patch, one per connection (created, by the
    bench's own User-Agent, if ``seed``)."""
    paths = []
    for i in range(count):
        name = f"{prefix}-{i}"
        if seed:
            manifest = pod_manifest(NAMESPACE, name=name, pad_bytes=PATCHED_POD_PAD_BYTES)
            status, body = request(server.port, "POST", pods_path(NAMESPACE), manifest)
            if status != 201:
                raise RuntimeError(f"creating {name}: {status} {body[:300]!r}")
        paths.append(f"{pods_path(NAMESPACE)}/{name}")
    return paths


def measure(server: ServerProcess, load: Worker, op: str, work: tuple[bytes, dict[str, list[str]]],
            opts: RequestCPUOptions) -> dict[str, float]:
    """One timed run of ``op`` after a warm-up: rate and CPU µs per request. ``work``: the
    create body and, per PATCH operation, the paths to patch."""
    body, paths = work

    def go(duration_s: float) -> dict[str, Any]:
        if op == "create":
            return load.call("closed_loop", duration_s + 60, path=pods_path(NAMESPACE),
                             body=body, max_requests=opts.max_requests, duration_s=duration_s)
        extra = {"user_agent": SECOND_MANAGER} if op == "patch2" else {}
        return load.call("patch_loop", duration_s + 60, paths=paths[op],
                         max_requests=opts.max_requests, duration_s=duration_s, **extra)

    return timed_round(server, load, opts, go, (f"{server.name} {op}", OPERATIONS[op][2]))


def run(opts: RequestCPUOptions) -> dict[str, Any]:
    sides = ("kubewire", *reference_sides(opts))
    body = msgspec.json.encode(pod_manifest(NAMESPACE, generate_name="c-",
                                            pad_bytes=PATCHED_POD_PAD_BYTES))
    samples: dict[str, dict[str, list[dict[str, float]]]] = {
        op: {side: [] for side in sides} for op in OPERATIONS}
    with contextlib.ExitStack() as stack:
        data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kw-reqcpu-")))
        servers = {side: start(side, opts, data_dir, stack) for side in sides}
        paths = {side: {op: patch_paths(servers[side], opts.clients, side != "empty", prefix)
                        for op, prefix in (("patch", "patched"), ("patch2", "managed"))}
                 for side in sides}
        load = stack.enter_context(Worker("bench.load:LoadGenerator"))
        for rep in range(opts.repeats):
            for op in OPERATIONS:
                for side in in_turn(sides, rep):
                    samples[op][side].append(
                        measure(servers[side], load, op, (body, paths[side]), opts))
    return result(opts, sides, samples)


def result(opts: RequestCPUOptions, sides: Sequence[str],
           samples: dict[str, dict[str, list[dict[str, float]]]]) -> dict[str, Any]:
    ours, *refs = sides
    rows = []
    for op, (what, unit, _) in OPERATIONS.items():
        runs = samples[op]
        for ref in refs:
            case = f"C={opts.clients}, {what}" + (f" (vs {ref})" if len(refs) > 1 else "")
            rows.append(row(f"{case}: rate", unit, [s["rate"] for s in runs[ours]],
                            [s["rate"] for s in runs[ref]]))
            cpu_row = row(f"{case}: loop CPU per request", "µs",
                          [s["loop_cpu_us"] for s in runs[ours]],
                          [s["loop_cpu_us"] for s in runs[ref]],
                          process_cpu_us={side: summary([s["process_cpu_us"] for s in runs[side]])
                                          for side in (ours, ref)})
            if opts.base_srcs and ref == refs[0]:
                cpu_row["target"] = f"<= {TARGETS[op]}"
                cpu_row["met"] = cpu_row["ratio"]["median"] <= TARGETS[op]
            rows.append(cpu_row)
    trees = reference_sides(opts)
    reference = ("kubewire serve from " + ", ".join(
        f"{src} ({side})" if len(trees) > 1 else src for side, src in trees.items()) + " (A/B)"
        if opts.base_srcs else "kubewire.server.wire.http.HTTPServer with an empty handler")
    return {"name": NAME, "title": "Creates and PATCHes: rate, loop CPU (issue 15)",
            "reference": reference, "command": "python -m bench.request_cpu"
            + "".join(f" --base {src}" for src in opts.base_srcs),
            "repeats": opts.repeats, "rows": rows,
            "notes": [f"{opts.duration_s} s of back-to-back requests per side, operation and "
                      f"repetition after {opts.warm_up_s} s of warm-up; durability "
                      f"{DURABILITY}; ~2.5 KB Pods; one client process.",
                      "Merge PATCHes: by the Pods' creator (one field manager), and on other Pods "
                      "by a second manager (two managers: the issue's workload).",
                      "Loop CPU: the server's main thread from /proc/<pid>/task/<pid>/stat; "
                      "process_cpu_us adds its other threads (the store's commits).",
                      "The issue's targets are A/B against issue15-base: loop CPU per merge "
                      f"PATCH <= {TARGETS['patch']}x, per create <= {TARGETS['create']}x; "
                      "they are checked when run with --base (a checkout of issue15-base's "
                      "src; the first one if several), not against the empty handler."]}


def main() -> None:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--base", action="append", default=[],
                        help="another checkout's src: an A/B reference (repeatable)")
    known, rest = parser.parse_known_args()
    sys.argv[1:] = rest  # the common flags (--smoke, --repeats, --out) are report's

    def options(opts: RequestCPUOptions) -> RequestCPUOptions:
        opts.base_srcs = list(known.base)
        return opts

    report.main(__doc__, options(SMOKE), lambda: options(default_options()), run)


if __name__ == "__main__":
    main()
