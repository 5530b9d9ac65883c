"""Write path diagnostics: server CPU per create, per thread, and creates per commit group.

Not a benchmark with a target: it explains ``bench.write_path``. Starts ``kubewire serve
--insecure-http`` (one per source tree given, interleaved per repetition, so two trees compare
under the same machine load), keeps C connections creating ~2 KB Pods back to back, and prints
per repetition: creates/s, CPU µs per create for the whole process (``/proc/<pid>/stat``) and per
thread (``/proc/<pid>/task/*/stat``, user and system), and creates per commit with the mean commit
time (``kubewire_storage_commit_duration_seconds`` from ``/metrics``).

    python -m bench.write_cpu [--durability full] [--clients 8] [--seconds 3] [--repeats 3]
                              [--src OTHER/src ...]

``--src`` runs another checkout's ``src`` (e.g. a ``git worktree`` of an older commit) beside
this one; without it only this checkout runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
from pathlib import Path

import msgspec

from bench.load import LoadGenerator
from bench.servers import REPO_ROOT, ServerProcess, process_cpu_seconds, tree_without_components
from bench.wire import create_namespace, pod_manifest, pods_path, request

NAMESPACE = "bench"
WARM_UP_S = 1.0
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_COMMITS = "kubewire_storage_commit_duration_seconds"


def serve_argv(src: str, data_dir: Path, durability: str) -> list[str]:
    return ["/usr/bin/env", f"PYTHONPATH={src}", sys.executable, "-m", "kubewire.cli", "serve",
            "--data-dir", str(data_dir), "--port", "0", "--insecure-http",
            "--durability", durability, "--log-level", "WARNING", *tree_without_components(src)]


def thread_cpu(pid: int) -> dict[str, tuple[float, float]]:
    """User and system CPU seconds per thread id."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        out[tid] = (int(fields[11]) / _CLOCK_TICKS, int(fields[12]) / _CLOCK_TICKS)
    return out


def commits(port: int) -> tuple[float, float]:
    """Commit count and total commit seconds so far."""
    _, body = request(port, "GET", "/metrics")
    count = total = 0.0
    for line in body.decode().splitlines():
        if line.startswith(_COMMITS + "_count"):
            count = float(line.split()[-1])
        elif line.startswith(_COMMITS + "_sum"):
            total = float(line.split()[-1])
    return count, total


async def measure(server: ServerProcess, load: LoadGenerator, body: bytes, clients: int,
                  seconds: float) -> dict[str, float | str]:
    await load.connect(server.port, clients)
    await load.closed_loop(pods_path(NAMESPACE), body, 10**6, WARM_UP_S)
    commits0, threads0 = commits(server.port), thread_cpu(server.pid)
    cpu0 = process_cpu_seconds(server.pid)
    done = await load.closed_loop(pods_path(NAMESPACE), body, 10**6, seconds)
    cpu1 = process_cpu_seconds(server.pid)
    threads1, commits1 = thread_cpu(server.pid), commits(server.port)
    if set(done["statuses"]) != {201}:
        raise RuntimeError(f"answers: {done['statuses']}")
    n = done["completed"]
    groups = max(1.0, commits1[0] - commits0[0])
    per_thread = []
    for tid, (user, system) in threads1.items():
        user0, system0 = threads0.get(tid, (0.0, 0.0))
        if user - user0 + system - system0 > 0:
            per_thread.append(f"{tid}: {1e6 * (user - user0) / n:.0f}u+"
                              f"{1e6 * (system - system0) / n:.0f}s")
    return {"rate": n / done["elapsed"], "cpu_us": 1e6 * (cpu1 - cpu0) / n,
            "per_commit": n / groups, "commit_ms": 1e3 * (commits1[1] - commits0[1]) / groups,
            "threads": ", ".join(per_thread)}


async def run(trees: dict[str, str], opts: argparse.Namespace) -> None:
    body = msgspec.json.encode(pod_manifest(NAMESPACE, generate_name="w-"))
    cpu: dict[str, list[float]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="kw-write-cpu-") as tmp:
        servers = {}
        try:
            for name, src in trees.items():
                data = Path(tmp) / name.replace("/", "_")
                data.mkdir()
                servers[name] = ServerProcess(name, serve_argv(src, data, opts.durability))
                servers[name].wait_ready()
                create_namespace(servers[name].port, NAMESPACE)
            load = LoadGenerator()
            for rep in range(opts.repeats):
                names = list(trees) if rep % 2 == 0 else list(reversed(trees))
                for name in names:
                    m = await measure(servers[name], load, body, opts.clients, opts.seconds)
                    cpu[name].append(float(m["cpu_us"]))
                    print(f"{name} rep {rep}: {m['rate']:.0f} creates/s, {m['cpu_us']:.0f} µs "
                          f"CPU/create ({m['threads']}), {m['per_commit']:.2f} creates/commit, "
                          f"mean commit {m['commit_ms']:.2f} ms", flush=True)
            await load.close()
        finally:
            for server in servers.values():
                server.stop()
    for name, values in cpu.items():
        print(f"{name}: median {statistics.median(values):.0f} µs CPU/create over "
              f"{len(values)} repetitions")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--durability", choices=("full", "normal"), default="full")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--src", action="append", default=[],
                        help="another checkout's src directory to run beside this one")
    opts = parser.parse_args()
    trees = {"this": str(REPO_ROOT / "src")} | {src: src for src in opts.src}
    asyncio.run(run(trees, opts))


if __name__ == "__main__":
    main()
