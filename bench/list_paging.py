"""List and paging cost at 1k/10k/50k Pods (issue 15 item 3); other source trees side by side.

For each size one database is built (Pods of ~2 KB in 10 namespaces, ``app`` label with 100
values) and copied for every tree, so all trees serve the same bytes. Per tree and size, two
processes read it: an in-process worker (``kubewire.server.reads.get_list.serve_list`` called
directly against the watch cache, CPU from ``time.process_time``) and ``kubewire serve`` over
HTTP (one keep-alive connection, server CPU from ``/proc/<pid>/stat``). All of them stay up for
the run, and repetitions interleave sizes and trees, so ratios between sizes are paired.

Cases (CPU per operation):
- ``list``: one unpaged list of every Pod; ``walk500``: every page at ``limit=500``, summed;
  ``walk/list``: their ratio (target at 50k: <= 1.2);
- ``name``: ``metadata.name=`` in a namespace; ``name-all``: the same across namespaces;
- ``label``: ``app=web-7`` (1% of the Pods), unpaged, across namespaces; ``ns-page``: a page of
  as many Pods from one namespace (``limit``), the cost of reading and encoding that many;
- ``page``: the first page at ``limit=500``; ``old-page``: the same page at an older exact
  revision (``resourceVersionMatch=Exact``, as every continue token reads), one Pod having
  changed since: a page at an older revision should cost what a current one does;
- in-process only, ``watch-name W=1`` and ``watch-name W=n``: fan-out CPU per event (the
  cache's ``dispatch``) with one ``metadata.name=`` watcher, or one per Pod (each kubelet
  watching its own object), while Pods are updated through the store.

The suite's rows (this tree): walk/list at each size; a name list at each size / at the
smallest; a name watch per event at the largest / at the smallest; the label list / the
namespace page at the largest; the page at an older revision / at the current one at each size.
With ``--src`` the other trees run beside this one: the A/B
table is printed and rows "this tree / other" at the largest size are added.

``--compare`` instead checks that the trees answer byte for byte the same over a corpus of list
and paging requests (selectors, limits, continue chains, resourceVersion/Match, with deletes
and label changes between pages) on one small database, and prints any difference.

    python -m bench.list_paging [--smoke] [--repeats 5] [--out DIR]
                                [--src /work/wt-p1-base/src] [--sizes 1000,10000,50000]
    python -m bench.list_paging --compare --src /work/wt-p1-base/src
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import http.client
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from bench import report
from bench.servers import REPO_ROOT, ServerProcess, process_cpu_seconds, tree_without_components
from bench.stats import paired_ratios, row, summary

NAME = "list_paging"
TARGET_RATIO = 1.2  # issue 15: walk/list at 50k; a name list or watch at 50k / at 1k
TARGET_SIZE = 50_000  # the size the walk/list target is stated at
NAMESPACES = 10
LABEL_VALUES = 100
PAGE = 500
PAD_BYTES = 600
WATCH_EVENTS = 60
MIN_CPU_S = 0.05  # in-process: repeat an operation until it used this much CPU ...
MIN_HTTP_CPU_S = 0.3  # ... over HTTP (10 ms ticks): this much
MIN_OPS = 2
OLD = "<older revision>"  # in a case's query: the revision ``age`` returned for that server


def ns_of(i: int) -> str:
    return f"bench-{i % NAMESPACES:02d}"


# A Pod spec as the server defaults and admits it (so that updates of these Pods validate).
_SPEC: dict[str, Any] = {
    "containers": [{
        "name": "app", "image": "registry.example/app:1.0",
        "ports": [{"containerPort": 8080, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
        "imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "volumeMounts": [{"name": "kube-api-access-bench", "readOnly": True,
                          "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]}],
    "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
    "schedulerName": "default-scheduler", "enableServiceLinks": True, "securityContext": {},
    "serviceAccountName": "default", "serviceAccount": "default",
    "volumes": [{"name": "kube-api-access-bench", "projected": {"sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt",
                       "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
            "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}], "defaultMode": 420}}],
    "priority": 0, "preemptionPolicy": "PreemptLowerPriority",
    "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                     "effect": "NoExecute", "tolerationSeconds": 300},
                    {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                     "effect": "NoExecute", "tolerationSeconds": 300}]}


def pod(i: int) -> dict[str, Any]:
    """A Pod of about 2 KB, the same bytes in every run."""
    name = f"pod-{i:06d}"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": ns_of(i), "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, name)),
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "labels": {"app": f"web-{i % LABEL_VALUES}", "tier": "frontend",
                   "pod-template-hash": f"{i % 7:010d}"},
        "annotations": {"bench/pad": "x" * PAD_BYTES}},
        "spec": _SPEC,
        "status": {"phase": "Pending", "qosClass": "Burstable"}}


async def build_db(data_dir: Path, size: int) -> None:
    """The Pods and their namespaces, written straight to a store (this tree's code)."""
    from kubewire.server.context import DATABASE_NAME
    from kubewire.storage.base import Create
    from kubewire.storage.sqlite.store import SQLiteStore

    data_dir.mkdir(parents=True)
    store = SQLiteStore(data_dir / DATABASE_NAME, durability="normal")
    await store.open()
    # The namespaces the server would otherwise make at start-up (with fresh uids and times).
    for ns in [ns_of(n) for n in range(NAMESPACES)] + ["default", "kube-node-lease",
                                                       "kube-public", "kube-system"]:
        await store.write(Create(f"core/namespaces/{ns}", {
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns, "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, ns)),
                         "creationTimestamp": "2026-01-01T00:00:00Z",
                         "labels": {"kubernetes.io/metadata.name": ns}},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}))
    for lo in range(0, size, 1000):
        await asyncio.gather(*(
            store.write(Create(f"core/pods/{ns_of(i)}/pod-{i:06d}", pod(i)))
            for i in range(lo, min(size, lo + 1000))))
    await store.close()


# --- the in-process worker (runs in a subprocess with one tree's code) --------------------------

class _Sink:
    framing = "lines"

    def __init__(self) -> None:
        self.closed = False
        self.on_resume: Any = None
        self.on_close: Any = None
        self.events = 0

    @property
    def is_paused(self) -> bool:
        return False

    @staticmethod
    def frame(lines: list[bytes]) -> bytes:
        return b"".join(lines)

    def write_framed(self, framed: bytes) -> None:
        self.events += framed.count(b"\n")

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.on_close is not None:
                self.on_close()


class InProcess:
    """An ``APIServer`` whose reads are called directly; methods answer CPU seconds per op."""

    def __init__(self, data_dir: str) -> None:
        from kubewire.server.app import APIServer
        from kubewire.server.context import ServerConfig
        self.server = APIServer(ServerConfig(data_dir=Path(data_dir), port=0, insecure_http=True,
                                             durability="normal"))
        self.size = 0

    async def start(self) -> int:
        await self.server.start()
        cache = self.server.ctx.caches.for_resource(self._pods())
        self.size = len(cache.objects)  # type: ignore[union-attr]
        return self.size

    @staticmethod
    def _pods() -> Any:
        from kubewire.resources import REGISTRY
        return REGISTRY.by_id("core/pods")

    async def _list(self, path: str, query: dict[str, str]) -> tuple[float, bytes]:
        from kubewire.resources import REGISTRY
        from kubewire.server.reads.get_list import serve_list
        from kubewire.server.request.options import parse_list_options
        from kubewire.server.request.routes import parse_route
        route = parse_route(REGISTRY, path)
        opts = parse_list_options({k: [v] for k, v in query.items()}, route.resource)  # type: ignore[union-attr]
        started = time.process_time()
        response = await serve_list(self.server.ctx, route, opts)  # type: ignore[arg-type]
        return time.process_time() - started, response.body

    async def cpu_per_op(self, path: str, query: dict[str, str], walk: bool,
                         min_cpu_s: float = MIN_CPU_S) -> float:
        """CPU per list (or per walk of every page), repeated for at least ``min_cpu_s``."""
        total, ops = 0.0, 0
        while total < min_cpu_s or ops < MIN_OPS:
            token = ""
            while True:
                cpu, body = await self._list(path, query | ({"continue": token} if token
                                                              else {}))
                total += cpu
                token = json.loads(body)["metadata"].get("continue", "") if walk else ""
                if not token:
                    break
            ops += 1
        return total / ops

    async def watch_name_cpu(self, watchers: int, events: int) -> float:
        """Dispatch CPU per event with ``watchers`` ``metadata.name=`` watchers (one per Pod
        from the first), while ``events`` Pods (the first ones) are updated via the store."""
        from kubewire.resources import REGISTRY
        from kubewire.server.reads.watch import watch_filter
        from kubewire.server.request.options import parse_list_options
        from kubewire.server.request.routes import parse_route
        from kubewire.storage.base import Update
        from kubewire.storage.cached import WatchStart
        ctx = self.server.ctx
        cache: Any = ctx.caches.for_resource(self._pods())
        sinks = []
        for i in range(watchers):
            route: Any = parse_route(REGISTRY, f"/api/v1/namespaces/{ns_of(i)}/pods")
            opts = parse_list_options({"watch": ["true"], "resourceVersion": [str(
                ctx.caches.revision)], "fieldSelector": [f"metadata.name=pod-{i:06d}"]},
                route.resource)
            sink = _Sink()
            sinks.append(sink)
            await cache.watch(sink, watch_filter(route, opts),
                              WatchStart(revision=ctx.caches.revision))
        spent = [0.0]
        dispatch = cache.dispatch

        def timed() -> None:
            started = time.process_time()
            dispatch()
            spent[0] += time.process_time() - started
        cache.dispatch = timed
        try:
            for n in range(events):
                i = n % max(watchers, 1)
                obj = json.loads(cache.objects[f"core/pods/{ns_of(i)}/pod-{i:06d}"].value)
                obj["metadata"]["labels"]["rev"] = str(time.monotonic_ns())
                await ctx.store.write(Update(f"core/pods/{ns_of(i)}/pod-{i:06d}", obj))
                await asyncio.sleep(0)
            ctx.caches.flush()
        finally:
            del cache.dispatch
        delivered = sum(s.events for s in sinks)
        for sink in sinks:
            sink.close()
        assert delivered == events, (delivered, events)
        return spent[0] / events

    async def age(self) -> str:
        """The current revision, made older by an update of one Pod."""
        from kubewire.storage.base import Update
        ctx = self.server.ctx
        revision = ctx.caches.revision
        key = f"core/pods/{ns_of(0)}/pod-{0:06d}"
        obj = json.loads(ctx.caches.for_resource(self._pods()).get(key).value)  # type: ignore[union-attr]
        obj["metadata"]["labels"]["aged"] = "true"
        await ctx.store.write(Update(key, obj))
        await ctx.caches.wait_for_revision(revision + 1)
        return str(revision)

    async def stop(self) -> None:
        await self.server.stop()


def _worker_main(data_dir: str) -> None:
    """Serve ``InProcess`` calls read as JSON lines on stdin; answer JSON lines on stdout."""
    from bench.worker import new_event_loop
    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    worker = InProcess(data_dir)
    out = sys.stdout
    sys.stdout = sys.stderr  # only answers on the real stdout
    for line in sys.stdin:
        method, kwargs = json.loads(line)
        result = loop.run_until_complete(getattr(worker, method)(**kwargs))
        out.write(json.dumps(result) + "\n")
        out.flush()
        if method == "stop":
            return


class WorkerProcess:
    def __init__(self, src: str, data_dir: Path) -> None:
        import subprocess
        env = dict(os.environ, PYTHONPATH=f"{src}:{REPO_ROOT}")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.list_paging", "--worker", str(data_dir)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=REPO_ROOT, text=True)

    def call(self, method: str, **kwargs: Any) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps([method, kwargs]) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker ended during {method}")
        return json.loads(line)

    def close(self) -> None:
        try:
            self.call("stop")
        finally:
            self.proc.wait(30)


# --- over HTTP ----------------------------------------------------------------------------------

def serve_argv(src: str, data_dir: Path) -> list[str]:
    return ["/usr/bin/env", f"PYTHONPATH={src}", sys.executable, "-m", "kubewire.cli", "serve",
            "--data-dir", str(data_dir), "--port", "0", "--insecure-http",
            "--durability", "normal", "--log-level", "WARNING", *tree_without_components(src)]


class Client:
    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def request(self, method: str, path: str, query: dict[str, str] | None = None,
                body: Any = None) -> tuple[int, bytes]:
        url = path + ("?" + urlencode(query) if query else "")
        headers = {"Accept": "application/json"}
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = ("application/merge-patch+json" if method == "PATCH"
                                       else "application/json")
        try:
            self.conn.request(method, url, payload, headers)
            reply = self.conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            # the server closed the idle keep-alive connection (the run's slowest cases kept
            # this one idle for longer than its idle timeout): once more on a new one
            self.conn.close()
            self.conn.request(method, url, payload, headers)
            reply = self.conn.getresponse()
        return reply.status, reply.read()

    def age(self) -> str:
        """The current revision, made older by a PATCH of one Pod."""
        status, body = self.request("GET", ALL, {"limit": "1"})
        assert status == 200
        revision: str = json.loads(body)["metadata"]["resourceVersion"]
        status, _ = self.request("PATCH", f"/api/v1/namespaces/{ns_of(0)}/pods/pod-{0:06d}",
                                 body={"metadata": {"labels": {"aged": "true"}}})
        assert status == 200
        return revision

    def cpu_per_op(self, pid: int, path: str, query: dict[str, str], walk: bool,
                   min_cpu_s: float = MIN_HTTP_CPU_S) -> float:
        """Server CPU per list (or per walk), repeated for at least ``min_cpu_s`` (the
        kernel counts CPU in 10 ms ticks)."""
        started, ops = process_cpu_seconds(pid), 0
        while process_cpu_seconds(pid) - started < min_cpu_s or ops < MIN_OPS:
            token = ""
            while True:
                status, body = self.request("GET", path, query | ({"continue": token} if token
                                                                   else {}))
                assert status == 200
                token = json.loads(body)["metadata"].get("continue", "") if walk else ""
                if not token:
                    break
            ops += 1
        return (process_cpu_seconds(pid) - started) / ops


# --- the run ------------------------------------------------------------------------------------

ALL = "/api/v1/pods"
LABEL_NS = ns_of(7)  # every ``app=web-7`` Pod (i = 7 mod 100) is in this namespace


@dataclass
class ListPagingOptions:
    sizes: tuple[int, ...] = (1_000, 10_000, 50_000)
    repeats: int = 5
    src: tuple[str, ...] = ()  # other checkouts' src, run beside this one (A/B)
    watch_events: int = WATCH_EVENTS
    min_cpu_s: float = MIN_CPU_S
    min_http_cpu_s: float = MIN_HTTP_CPU_S


default_options = ListPagingOptions
SMOKE = ListPagingOptions(sizes=(200, 400), repeats=1, watch_events=10, min_cpu_s=0.002,
                          min_http_cpu_s=0.02)


def cases(size: int) -> list[tuple[str, str, dict[str, str], bool]]:
    """(case, path, query, whether it walks every page)."""
    return [
        ("list", ALL, {}, False),
        ("walk500", ALL, {"limit": str(PAGE)}, True),
        ("name", f"/api/v1/namespaces/{ns_of(size // 2)}/pods",
         {"fieldSelector": f"metadata.name=pod-{size // 2:06d}"}, False),
        ("name-all", ALL, {"fieldSelector": f"metadata.name=pod-{size // 2:06d}"}, False),
        ("label", ALL, {"labelSelector": "app=web-7"}, False),
        # As many Pods as ``label`` answers (1%), as the first page of one namespace.
        ("ns-page", f"/api/v1/namespaces/{LABEL_NS}/pods",
         {"limit": str(max(1, size // LABEL_VALUES))}, False),
        ("page", ALL, {"limit": str(PAGE)}, False),
        ("old-page", ALL, {"limit": str(PAGE), "resourceVersion": OLD,
                           "resourceVersionMatch": "Exact"}, False),
    ]


def at(query: dict[str, str], older: str) -> dict[str, str]:
    """``query`` with ``OLD`` replaced by the server's older revision."""
    return {k: older if v == OLD else v for k, v in query.items()}


Results = dict[int, dict[str, dict[str, list[float]]]]  # size -> tree -> case -> per repetition


def measure(trees: dict[str, str], opts: ListPagingOptions, root: Path) -> Results:
    """CPU seconds per operation (and walk/list ratios) for every size, tree and case. Every
    (tree, size) has its worker and server up for the whole run, so that repetitions interleave
    sizes as well as trees and ratios between sizes are paired."""
    results: Results = {size: {t: {} for t in trees} for size in opts.sizes}
    workers: dict[tuple[str, int], WorkerProcess] = {}
    servers: dict[tuple[str, int], ServerProcess] = {}
    try:
        for size in opts.sizes:
            print(f"size {size:,}: building and loading ...", flush=True)
            base = root / f"db-{size}"
            asyncio.run(build_db(base, size))
            for tree, src in trees.items():
                shutil.copytree(base, root / f"{tree}-{size}-w")
                shutil.copytree(base, root / f"{tree}-{size}-h")
                workers[tree, size] = WorkerProcess(src, root / f"{tree}-{size}-w")
                loaded = workers[tree, size].call("start")
                assert loaded == size, (tree, loaded)
                servers[tree, size] = ServerProcess(
                    tree, serve_argv(src, root / f"{tree}-{size}-h")).wait_ready()
            shutil.rmtree(base)
        clients = {k: Client(s.port) for k, s in servers.items()}
        older = {k: (w.call("age"), clients[k].age()) for k, w in workers.items()}
        for (tree, size), worker in workers.items():  # warm-up, not recorded: first-use
            for _, path, query, walk in cases(size):  # caches, lazy imports, the heap
                worker.call("cpu_per_op", path=path, query=at(query, older[tree, size][0]),
                            walk=walk, min_cpu_s=0.0)
                clients[tree, size].cpu_per_op(servers[tree, size].pid, path,
                                               at(query, older[tree, size][1]), walk, 0.0)
        for rep in range(opts.repeats):
            for size in opts.sizes if rep % 2 == 0 else opts.sizes[::-1]:
                for tree in list(trees) if rep % 2 == 0 else list(reversed(trees)):
                    out = results[size][tree]
                    w_older, h_older = older[tree, size]
                    one_repetition(out, size, (workers[tree, size], w_older),
                                   (clients[tree, size], servers[tree, size].pid, h_older), opts)
                    print(f"  size {size} rep {rep + 1} {tree}: " + ", ".join(
                        f"{k}={_fmt(v[-1], k)}" for k, v in out.items()), flush=True)
    finally:
        for worker in workers.values():
            worker.close()
        for server in servers.values():
            server.stop()
    return results


def one_repetition(out: dict[str, list[float]], size: int, in_process: tuple[WorkerProcess, str],
                   http: tuple[Client, int, str], opts: ListPagingOptions) -> None:
    """Every case once, in-process and over HTTP (``in_process``: the worker and its older
    revision; ``http``: a client, the server's pid and its older revision)."""
    worker, worker_older = in_process
    client, pid, http_older = http
    for case, path, query, walk in cases(size):
        inproc = worker.call("cpu_per_op", path=path, query=at(query, worker_older), walk=walk,
                             min_cpu_s=opts.min_cpu_s)
        over_http = client.cpu_per_op(pid, path, at(query, http_older), walk,
                                      opts.min_http_cpu_s)
        out.setdefault(f"in-process {case}", []).append(inproc)
        out.setdefault(f"http {case}", []).append(over_http)
    for kind in ("in-process", "http"):
        out.setdefault(f"{kind} walk/list", []).append(
            out[f"{kind} walk500"][-1] / out[f"{kind} list"][-1])
    out.setdefault("in-process watch-name W=1", []).append(
        worker.call("watch_name_cpu", watchers=1, events=opts.watch_events))
    out.setdefault("in-process watch-name W=n", []).append(
        worker.call("watch_name_cpu", watchers=size, events=opts.watch_events))


def _fmt(value: float, case: str) -> str:
    if case.endswith("walk/list"):
        return f"{value:.2f}x"
    return f"{value * 1e6:,.0f}us" if value < 0.01 else f"{value * 1e3:,.1f}ms"


def report_trees(all_results: Results, trees: list[str]) -> None:
    """The A/B table: every case, size and tree, and each tree's scaling."""
    print("\nmedian (min-max) CPU per operation; walk/list is a ratio")
    cases_seen = list(next(iter(all_results.values()))[trees[0]])
    header = "| case | " + " | ".join(f"{t} {s:,}" for s in all_results for t in trees) + " |"
    print(header)
    print("|" + " --- |" * (1 + len(all_results) * len(trees)))
    for case in cases_seen:
        cells = []
        for res in all_results.values():
            for tree in trees:
                values = res[tree][case]
                cells.append(f"{_fmt(statistics.median(values), case)} "
                             f"({_fmt(min(values), case)}-{_fmt(max(values), case)})")
        print(f"| {case} | " + " | ".join(cells) + " |")
    sizes = list(all_results)
    if len(sizes) > 1:
        print(f"\nscaling {sizes[-1]:,} vs {sizes[0]:,} objects (median per-op ratio; "
              "1.0 = the same cost)")
        for case in ("in-process name", "http name", "in-process name-all", "http name-all",
                     "in-process watch-name W=1", "in-process watch-name W=n",
                     "in-process label", "http label"):
            parts = []
            for tree in trees:
                lo = statistics.median(all_results[sizes[0]][tree][case])
                hi = statistics.median(all_results[sizes[-1]][tree][case])
                parts.append(f"{tree} {hi / lo:.2f}x" if lo else f"{tree} n/a")
            print(f"- {case}: " + ", ".join(parts))


def _target(value: float, applies: bool) -> dict[str, Any]:
    return {"target": f"<= {TARGET_RATIO}", "met": value <= TARGET_RATIO} if applies else {}


def _ratios(ours: list[float], reference: list[float]) -> dict[str, float]:
    return summary(paired_ratios(ours, reference))


def rows_of(res: Results, tree: str) -> list[dict[str, Any]]:
    """The suite's rows for one tree: each a ratio the issue states a target for."""
    sizes = list(res)
    first, last = sizes[0], sizes[-1]
    rows = []
    for size in sizes:
        got = res[size][tree]
        r = row(f"{size:,} Pods: full walk at limit={PAGE} / one unpaged list (HTTP, server CPU)",
                "ms", [v * 1e3 for v in got["http walk500"]], [v * 1e3 for v in got["http list"]],
                in_process_ratio=summary(got["in-process walk/list"]))
        r.update(_target(r["ratio"]["median"], size == TARGET_SIZE))
        rows.append(r)
    for size in sizes:
        got = res[size][tree]
        rows.append(row(f"{size:,} Pods: a page of {PAGE} at an older exact revision / at the "
                        "current one (HTTP, server CPU)", "ms",
                        [v * 1e3 for v in got["http old-page"]],
                        [v * 1e3 for v in got["http page"]],
                        in_process_ratio=_ratios(got["in-process old-page"],
                                                 got["in-process page"])))

    def scaling(case: str, size: int) -> list[list[float]]:
        return [[v * 1e6 for v in res[s][tree][case]] for s in (size, first)]

    for size in sizes[1:]:
        ours, ref = scaling("in-process name", size)
        r = row(f"metadata.name= list in a namespace: at {size:,} Pods / at {first:,} "
                "(in-process)", "µs", ours, ref,
                http_ratio=_ratios(*scaling("http name", size)),
                all_namespaces_ratio=_ratios(*scaling("in-process name-all", size)))
        r.update(_target(r["ratio"]["median"], True))
        rows.append(r)
    if len(sizes) > 1:
        for case, what in (("in-process watch-name W=n", "one watcher per Pod"),
                           ("in-process watch-name W=1", "one watcher")):
            r = row(f"metadata.name= watch, {what}: dispatch CPU per event at {last:,} Pods / "
                    f"at {first:,} (in-process)", "µs", *scaling(case, last))
            r.update(_target(r["ratio"]["median"], True))
            rows.append(r)
    got = res[last][tree]
    rows.append(row(
        f"{last:,} Pods: labelSelector app=web-7 ({last // LABEL_VALUES:,} Pods, all "
        f"namespaces) / a page of as many Pods in one namespace (in-process)", "ms",
        [v * 1e3 for v in got["in-process label"]], [v * 1e3 for v in got["in-process ns-page"]],
        http_ratio=_ratios(got["http label"], got["http ns-page"])))
    return rows


def ab_rows(res: Results, trees: list[str]) -> list[dict[str, Any]]:
    """With other trees: this tree / each other, per case, at the largest size."""
    size = list(res)[-1]
    rows = []
    for other in trees[1:]:
        for case in ("http list", "http walk500", "http old-page", "in-process old-page",
                     "in-process name", "in-process name-all",
                     "in-process label", "in-process watch-name W=1",
                     "in-process watch-name W=n"):
            unit, scale = ("ms", 1e3) if case.startswith("http") else ("µs", 1e6)
            rows.append(row(f"{size:,} Pods, {case}: this tree / {other}", unit,
                            [v * scale for v in res[size][trees[0]][case]],
                            [v * scale for v in res[size][other][case]]))
    return rows


def trees_of(opts: ListPagingOptions) -> dict[str, str]:
    trees = {"this": str(REPO_ROOT / "src")}
    for n, src in enumerate(opts.src):
        trees[f"other{n + 1}" if len(opts.src) > 1 else "base"] = str(Path(src).resolve())
    return trees


def run(opts: ListPagingOptions) -> dict[str, Any]:
    trees = trees_of(opts)
    with tempfile.TemporaryDirectory(prefix="list-paging-") as tmp:
        res = measure(trees, opts, Path(tmp))
    report_trees(res, list(trees))
    others = [f"{t}: {src}" for t, src in trees.items() if t != "this"]
    return {"name": NAME, "title": "List and paging (issue 15)",
            "reference": "per row: one unpaged list; the same case at the smallest size; "
                         "a namespace's page of as many Pods"
                         + ("; this tree / " + ", ".join(others) if others else ""),
            "command": "python -m bench.list_paging" + "".join(f" --src {s}" for s in opts.src),
            "repeats": opts.repeats, "rows": rows_of(res, "this") + ab_rows(res, list(trees)),
            "notes": [
                f"~2 KB Pods in {NAMESPACES} namespaces, label app with {LABEL_VALUES} values; "
                "CPU per operation: over HTTP the server process's (from /proc, 10 ms ticks, "
                f"repeated for >= {opts.min_http_cpu_s} s), in-process `serve_list` called on "
                f"the watch cache (process_time, repeated for >= {opts.min_cpu_s} s). Sizes "
                "and trees interleave per repetition, so the ratios between sizes are paired.",
                "Older revision: the server's revision before one Pod was updated; the page "
                f"at it asks resourceVersion=<it>&resourceVersionMatch=Exact&limit={PAGE}, "
                "the first page's cost (every later page's continue token carries it too).",
                "Name watch: the cache's dispatch CPU per event while "
                f"{opts.watch_events} Pods are updated through the store, with one "
                "metadata.name= watcher, or one per Pod (each kubelet watching its own).",
                "The issue's targets: a full walk at limit=500 over 50k Pods <= 1.2x one "
                "unpaged list; a metadata.name= list or watch costs the same at 1k and 50k "
                "(<= 1.2x here). `--compare` checks trees answer a list/paging corpus byte "
                "for byte alike."]}


# --- the byte-for-byte comparison ---------------------------------------------------------------

SELECTORS: list[dict[str, str]] = [
    {}, {"labelSelector": "app=web-7"}, {"labelSelector": "app==web-3,tier=frontend"},
    {"labelSelector": "app in (web-5)"}, {"labelSelector": "app in (web-5,web-6)"},
    {"labelSelector": "app=web-7,pod-template-hash!=0000000003"},
    {"labelSelector": "app=nothing"}, {"labelSelector": "!app"},
    {"labelSelector": "tier,app notin (web-1)"},
    {"fieldSelector": "metadata.name=pod-000103"},
    {"fieldSelector": "metadata.name=pod-000103,metadata.namespace=bench-03"},
    {"fieldSelector": "metadata.name=pod-00010"}, {"fieldSelector": "metadata.name="},
    {"fieldSelector": "metadata.name!=pod-000103"},
    {"fieldSelector": "metadata.namespace=bench-04"},
    {"fieldSelector": "metadata.namespace=bench-04", "labelSelector": "app=web-4"},
    {"fieldSelector": "metadata.name=pod-000104", "labelSelector": "app=web-4"},
    {"fieldSelector": "status.phase=Pending", "labelSelector": "app=web-13"},
]
CORPUS_PATHS = [ALL, "/api/v1/namespaces/bench-03/pods", "/api/v1/namespaces/nope/pods",
                "/api/v1/namespaces", "/api/v1/namespaces/bench-03/configmaps"]


class Corpus:
    """Lists and pages of one server, with writes between: (request, status, body)."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.out: list[tuple[str, int, bytes]] = []

    def get(self, path: str, query: dict[str, str]) -> dict[str, Any] | None:
        status, body = self.client.request("GET", path, query)
        self.out.append((f"GET {path}?{urlencode(query)}", status, body))
        return json.loads(body) if status == 200 else None

    def walk(self, path: str, query: dict[str, str]) -> list[str]:
        """Every page; the continue tokens it was given."""
        tokens: list[str] = []
        token = ""
        for _ in range(200):
            page = self.get(path, query | ({"continue": token} if token else {}))
            token = page["metadata"].get("continue", "") if page else ""
            if not token:
                break
            tokens.append(token)
        return tokens

    def write(self, method: str, path: str, query: dict[str, str] | None = None,
              body: Any = None) -> None:
        """A write; only its status is compared (its answer has the time in it)."""
        status, _ = self.client.request(method, path, query, body)
        self.out.append((f"{method} {path}", status, b""))

    def run(self) -> list[tuple[str, int, bytes]]:
        saved, rv = self.first_pages()
        self.changes()
        for path, query, token in saved:
            self.get(path, query | {"continue": token})
        for path in CORPUS_PATHS[:2]:
            for sel in SELECTORS:
                for extra in ({"resourceVersion": rv, "resourceVersionMatch": "Exact"},
                              {"resourceVersion": rv, "resourceVersionMatch": "Exact",
                               "limit": "7"},
                              {"resourceVersion": rv, "resourceVersionMatch": "NotOlderThan"},
                              {"resourceVersion": rv, "limit": "5"}, {"limit": "9"}):
                    self.walk(path, sel | extra)
        return self.out

    def first_pages(self) -> tuple[list[tuple[str, dict[str, str], str]], str]:
        """Every path, selector and limit walked; the first tokens kept, and a revision."""
        saved: list[tuple[str, dict[str, str], str]] = []
        rv = ""
        for path in CORPUS_PATHS:
            for sel in SELECTORS:
                for limit in ("", "1", "7", "500"):
                    query = sel | ({"limit": limit} if limit else {})
                    saved += [(path, query, t) for t in self.walk(path, query)[:2]]
                page = self.get(path, sel | {"resourceVersion": "0", "limit": "3"})
                if page:
                    rv = page["metadata"]["resourceVersion"]
        return saved, rv

    def changes(self) -> None:
        # Writes between the pages: deletes and label changes (which the label indexes
        # follow); a patch records its time in managedFields, which ``compare`` masks.
        for i in (3, 13, 103, 104, 203, 503):
            self.write("DELETE", f"/api/v1/namespaces/{ns_of(i)}/pods/pod-{i:06d}",
                       {"gracePeriodSeconds": "0"})
        for i in (7, 107, 5, 33):
            self.write("PATCH", f"/api/v1/namespaces/{ns_of(i)}/pods/pod-{i:06d}",
                       body={"metadata": {"labels": {"app": "web-4", "tier": None}}})


# The one thing two runs cannot share: the second a patch was made, in its managedFields entry.
_MANAGED_TIME = re.compile(rb'"operation":"Update","apiVersion":"v1","time":"[0-9TZ:-]+"')


def compare(trees: dict[str, str], root: Path, size: int) -> int:
    base = root / "db-compare"
    asyncio.run(build_db(base, size))
    answers: dict[str, list[tuple[str, int, bytes]]] = {}
    for tree, src in trees.items():
        data = root / f"{tree}-compare"
        shutil.copytree(base, data)
        server = ServerProcess(tree, serve_argv(src, data)).wait_ready()
        try:
            time.sleep(1.0)  # let start-up controllers settle
            answers[tree] = Corpus(Client(server.port)).run()
        finally:
            server.stop()
    first, *others = trees
    differences = 0
    for other in others:
        a, b = answers[first], answers[other]
        assert len(a) == len(b), (len(a), len(b))
        for (req, sa, ba), (req_b, sb, bb) in zip(a, b, strict=True):
            ba, bb = _MANAGED_TIME.sub(b"<time>", ba), _MANAGED_TIME.sub(b"<time>", bb)
            if (req, sa, ba) != (req_b, sb, bb):
                differences += 1
                if differences <= 5:
                    print(f"DIFFERENT: {req} -> {sa} {ba[:300]!r}\n      vs {req_b} -> {sb} "
                          f"{bb[:300]!r}")
    digest = hashlib.sha256(b"".join(b for _, _, b in answers[first])).hexdigest()[:16]
    statuses: dict[int, int] = {}
    for _, status, _ in answers[first]:
        statuses[status] = statuses.get(status, 0) + 1
    print(f"compared {len(answers[first])} responses ({sum(len(b) for _, _, b in answers[first]):,}"
          f" bytes, statuses {statuses}, sha256 {digest}) across {list(trees)}: "
          f"{differences} different")
    return differences


def main() -> None:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--src", action="append", default=[],
                        help="another checkout's src to run beside this one")
    parser.add_argument("--sizes", default="")
    parser.add_argument("--compare", action="store_true",
                        help="only the byte-for-byte comparison of the trees' answers")
    known, rest = parser.parse_known_args()
    if known.worker:
        _worker_main(known.worker)
        return
    if known.compare:
        trees = trees_of(ListPagingOptions(src=tuple(known.src)))
        with tempfile.TemporaryDirectory(prefix="list-paging-") as tmp:
            sys.exit(1 if compare(trees, Path(tmp), 1200) else 0)
    sys.argv[1:] = rest  # the common flags (--smoke, --repeats, --out) are report's

    def options(opts: ListPagingOptions) -> ListPagingOptions:
        opts.src = tuple(known.src)
        if known.sizes:
            opts.sizes = tuple(int(s) for s in known.sizes.split(","))
        return opts

    report.main(__doc__, options(SMOKE), lambda: options(default_options()), run)


if __name__ == "__main__":
    main()
