"""Which etcd client the etcd backend stands on: kubewire's own (``kubewire.storage.etcd.client``,
grpc.aio on stubs generated from etcd's rpc.proto) against ``aetcd`` (PyPI), on one real etcd.

Two parts, each client in its own process (both register etcd's messages as ``etcdserverpb.*``
in protobuf's default pool, which refuses a second copy):

- ``probe``: what aetcd does with kube's needs: a range at an old revision with a limit and a
  count; the txn's header revision (a write's new resourceVersion); periodic progress
  notifications reaching a watcher; a progress request.
- ``bench``: round trips per second, one request in flight, of (a) a small txn in kube's update
  shape (``If(mod_revision == N) Then(Put) Else(Get)``, the compare failing after the first
  round, so every round is the same work) and (b) a range of 500 keys of 300 bytes; ``--reps``
  interleaved repetitions per client, the median reported.

Usage: ``python -m bench.etcd_clients [--reps 5] [--seconds 2]`` (starts its own etcd).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from typing import Any

PREFIX = b"/bench/items/"
N_KEYS = 500
VALUE = b"x" * 300


async def _ours(endpoint: str, op: str, seconds: float) -> float:
    from kubewire.storage.etcd.client import EtcdClient, EtcdConfig, prefix_end

    async with EtcdClient(EtcdConfig([endpoint])) as client:
        await client.connect()
        end = prefix_end(PREFIX)
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            if op == "txn":
                await client.update(PREFIX + b"0", b"v", 1)
            else:
                result = await client.range(PREFIX, end)
                assert len(result.kvs) == N_KEYS
            n += 1
        return n / (time.perf_counter() - start)


async def _aetcd(endpoint: str, op: str, seconds: float) -> float:
    import aetcd

    host, port = endpoint.rsplit("//", 1)[-1].rsplit(":", 1)
    async with aetcd.Client(host=host, port=int(port)) as client:
        tx = client.transactions
        end = bytes(PREFIX[:-1]) + bytes([PREFIX[-1] + 1])
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            if op == "txn":
                await client.transaction([tx.mod(PREFIX + b"0") == 1],
                                         [tx.put(PREFIX + b"0", b"v")], [tx.get(PREFIX + b"0")])
            else:
                result = await client.get_range(PREFIX, end)
                assert len(result) == N_KEYS
            n += 1
        return n / (time.perf_counter() - start)


async def _probe_aetcd(endpoint: str) -> dict[str, Any]:
    """What aetcd's high-level API gives for kube's needs (etcd started with a 1 s progress
    notify interval)."""
    import inspect

    import aetcd

    host, port = endpoint.rsplit("//", 1)[-1].rsplit(":", 1)
    found: dict[str, Any] = {}
    async with aetcd.Client(host=host, port=int(port)) as client:
        params = inspect.signature(client.get_range).parameters
        found["get_range takes revision/limit/count_only"] = [
            p for p in ("revision", "limit", "count_only") if p in params]
        tx = client.transactions
        try:
            await client.transaction([tx.mod(b"/probe/j") == 0], [tx.put(b"/probe/j", b"1")])
            found["transaction without failure ops"] = "ok"
        except TypeError as exc:
            found["transaction without failure ops"] = f"TypeError: {exc}"
        result = await client.transaction([tx.mod(b"/probe/k") == 0],
                                          [tx.put(b"/probe/k", b"1")], [])
        found["transaction returns"] = type(result).__name__ + f" of {len(result)}: " + ", ".join(
            type(x).__name__ for x in result) + " (no header revision)"
        watch = await client.watch_prefix(b"/probe/quiet/", progress_notify=True)
        seen: list[Any] = []

        async def drain() -> None:
            async for event in watch:
                seen.append(event)

        task = asyncio.create_task(drain())
        await asyncio.sleep(3.5)  # three periodic progress notifications were sent by etcd
        task.cancel()
        found["responses seen by a quiet watch in 3.5 s (progress each 1 s)"] = len(seen)
        found["a progress-request method"] = [name for name in dir(client) + dir(watch)
                                              if "progress" in name.lower()]
    return found


def _child(args: argparse.Namespace) -> None:
    if args.child == "probe":
        print(json.dumps(asyncio.run(_probe_aetcd(args.endpoint))))
        return
    run = _ours if args.child == "ours" else _aetcd
    print(json.dumps(asyncio.run(run(args.endpoint, args.op, args.seconds))))


async def _load(endpoint: str) -> None:
    from kubewire.storage.etcd.client import EtcdClient, EtcdConfig

    async with EtcdClient(EtcdConfig([endpoint])) as client:
        for i in range(N_KEYS):
            await client.put(PREFIX + str(i).encode(), VALUE)


def _spawn(*argv: str) -> Any:
    done = subprocess.run([sys.executable, "-m", "bench.etcd_clients", *argv],
                          capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{argv}: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--child", choices=("ours", "aetcd", "probe"))
    parser.add_argument("--endpoint")
    parser.add_argument("--op", choices=("txn", "range"))
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    from tests.etcd_cluster import etcd_cluster

    with etcd_cluster(1, ["--experimental-watch-progress-notify-interval", "1s"]) as cluster:
        endpoint = cluster.endpoints[0]
        asyncio.run(_load(endpoint))
        print("aetcd probe:", json.dumps(_spawn("--child", "probe", "--endpoint", endpoint),
                                         indent=1))
        figures: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.reps):
            for op in ("txn", "range"):
                for client in ("ours", "aetcd"):
                    figures.setdefault((client, op), []).append(_spawn(
                        "--child", client, "--endpoint", endpoint, "--op", op,
                        "--seconds", str(args.seconds)))
        print(f"round trips/s, median of {args.reps} interleaved runs of {args.seconds} s "
              f"(etcd 3.4.23, one member, loopback):")
        for op in ("txn", "range"):
            ours = statistics.median(figures[("ours", op)])
            theirs = statistics.median(figures[("aetcd", op)])
            print(f"  {op:5}  kubewire {ours:8.0f}   aetcd {theirs:8.0f}   "
                  f"ratio {ours / theirs:.2f}")


if __name__ == "__main__":
    main()
