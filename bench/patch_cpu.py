"""Server CPU per merge PATCH and per create, side by side for several source trees.

Not a benchmark with a target of its own: it measures issue 15's "each write does its work
once" (loop CPU per merge PATCH and per create, A/B against an older tree). Starts ``kubewire
serve --insecure-http`` per source tree (interleaved per repetition, so trees compare under the
same machine load), creates one ~2.5 KB Pod per writer, then keeps W writers (one keep-alive
connection each) merge-patching their own Pod back to back: each PATCH sets an annotation to a
new value as a second field manager, so the Pod has two managers and every PATCH changes it.
Then the same writers create Pods (``generateName``). Per repetition and tree it prints the
process CPU and the event loop thread's CPU (``/proc/<pid>/task/<pid>/stat``) per request.

    python -m bench.patch_cpu [--writers 16] [--seconds 3] [--repeats 5] [--src OTHER/src ...]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import msgspec

from bench.load import ClientConnection, LoadGenerator
from bench.servers import REPO_ROOT, ServerProcess, process_cpu_seconds
from bench.wire import create_namespace, pod_manifest, pods_path, post_request, request
from bench.write_cpu import serve_argv, thread_cpu

NAMESPACE = "bench"
WARM_UP_S = 1.0
PATCH_PAD_BYTES = 1300  # annotation padding: the stored Pod is ~2.5 KB with its managedFields
PATCHER = "kubewire-patcher"  # a second manager: the Pod's creator keeps its entry


def patch_request(path: str, body: bytes) -> bytes:
    """A keep-alive merge PATCH of ``body`` by ``PATCHER``."""
    return (f"PATCH {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: {PATCHER}/1.0\r\n"
            f"Content-Type: application/merge-patch+json\r\nAccept: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def patch_body(seq: int) -> bytes:
    return msgspec.json.encode({"metadata": {"annotations": {"bench/seq": str(seq)}}})


async def closed_loop(conns: list[ClientConnection], make: Callable[[int, int], bytes],
                      seconds: float) -> tuple[int, Counter[int]]:
    """Each connection ``i`` sends ``make(i, n)`` back to back for ``seconds``."""
    statuses: Counter[int] = Counter()
    deadline = time.monotonic() + seconds

    async def run(index: int, conn: ClientConnection) -> None:
        n = 0
        while time.monotonic() < deadline:
            n += 1
            status, _ = await conn.send(make(index, n))
            statuses[status] += 1

    await asyncio.wait_for(asyncio.gather(*(run(i, c) for i, c in enumerate(conns))),
                           seconds + 30)
    return sum(statuses.values()), statuses


def loop_cpu(pid: int) -> float:
    """User + system CPU seconds of the main (event loop) thread."""
    user, system = thread_cpu(pid)[str(pid)]
    return user + system


async def measure(server: ServerProcess, conns: list[ClientConnection],
                  make: Callable[[int, int], bytes], seconds: float,
                  expect: int) -> tuple[float, float, float]:
    """Requests/s, process CPU µs and loop CPU µs per request."""
    await closed_loop(conns, make, WARM_UP_S)
    cpu0, loop0, t0 = process_cpu_seconds(server.pid), loop_cpu(server.pid), time.monotonic()
    n, statuses = await closed_loop(conns, make, seconds)
    cpu1, loop1, t1 = process_cpu_seconds(server.pid), loop_cpu(server.pid), time.monotonic()
    if set(statuses) != {expect}:
        raise RuntimeError(f"{server.name}: answers {dict(statuses)}")
    return n / (t1 - t0), 1e6 * (cpu1 - cpu0) / n, 1e6 * (loop1 - loop0) / n


def setup(server: ServerProcess, writers: int) -> None:
    create_namespace(server.port, NAMESPACE)
    for i in range(writers):
        body = pod_manifest(NAMESPACE, name=f"p-{i}", pad_bytes=PATCH_PAD_BYTES)
        status, text = request(server.port, "POST", pods_path(NAMESPACE), body)
        if status != 201:
            raise RuntimeError(f"creating pod: {status} {text[:300]!r}")


async def run(trees: dict[str, str], opts: argparse.Namespace) -> None:
    path = pods_path(NAMESPACE)
    create = post_request(path, msgspec.json.encode(
        pod_manifest(NAMESPACE, generate_name="w-", pad_bytes=PATCH_PAD_BYTES)))
    kinds = {"patch": (lambda i, n: patch_request(f"{path}/p-{i}", patch_body(n)), 200),
             "create": (lambda i, n: create, 201)}
    results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="kw-patch-cpu-") as tmp:
        servers: dict[str, ServerProcess] = {}
        load = LoadGenerator()
        try:
            for name, src in trees.items():
                data = Path(tmp) / str(len(servers))
                data.mkdir()
                servers[name] = ServerProcess(name, serve_argv(src, data, opts.durability))
                servers[name].wait_ready()
                setup(servers[name], opts.writers)
            for rep in range(opts.repeats):
                names = list(trees) if rep % 2 == 0 else list(reversed(trees))
                for kind in opts.kinds.split(","):
                    make, expect = kinds[kind]
                    for name in names:
                        await load.connect(servers[name].port, opts.writers)
                        m = await measure(servers[name], load.connections, make, opts.seconds,
                                          expect)
                        results.setdefault((kind, name), []).append(m)
                        print(f"{kind} {name} rep {rep}: {m[0]:.0f}/s, {m[1]:.0f} µs CPU, "
                              f"{m[2]:.0f} µs loop CPU per request", flush=True)
            await load.close()
        finally:
            for server in servers.values():
                server.stop()
    for (kind, name), values in results.items():
        loop = [v[2] for v in values]
        proc = [v[1] for v in values]
        print(f"{kind} {name}: loop CPU median {statistics.median(loop):.0f} µs "
              f"[{min(loop):.0f}-{max(loop):.0f}], process CPU median "
              f"{statistics.median(proc):.0f} µs [{min(proc):.0f}-{max(proc):.0f}] "
              f"over {len(values)} repetitions")
    first = next(iter(trees))
    for kind in opts.kinds.split(","):
        for name in list(trees)[1:]:
            ratios = [a[2] / b[2] for a, b in zip(results[(kind, first)], results[(kind, name)],
                                                  strict=True)]
            print(f"{kind}: loop CPU {first}/{name} median {statistics.median(ratios):.2f} "
                  f"[{min(ratios):.2f}-{max(ratios):.2f}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--durability", choices=("full", "normal"), default="full")
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--kinds", default="patch,create", help="patch, create or both")
    parser.add_argument("--src", action="append", default=[],
                        help="another checkout's src directory to run beside this one")
    opts = parser.parse_args()
    trees = {"this": str(REPO_ROOT / "src")} | {src: src for src in opts.src}
    asyncio.run(run(trees, opts))


if __name__ == "__main__":
    main()
