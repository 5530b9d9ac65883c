"""Soak: N minutes of churn against a `kubewire serve` subprocess, with watchers that connect,
disconnect and resume from their last revision.

    python -m tests.reliability.soak --minutes 30

Writers create, update and delete ConfigMaps in a few namespaces at a steady rate; watchers
(some per namespace, some cluster-wide) each follow the ConfigMaps from the revision the run
started at, in sessions of random length, resuming every time from the last revision they saw.
The watch cache is made small (``--watch-cache-size``) so resumes are also served from the
durable change log, not only from the in-memory ring.

Checked at the end:
- every watcher's events equal the store's change log for its scope (read from the SQLite file
  the server writes): no gap, no duplicate, in order, no 410;
- every write the server acknowledged is in the change log (by its revision);
- the server's RSS, open file descriptors, threads and registered watchers (``/metrics``) are
  flat: the median of a warm-up window against the median of the last window, within a
  tolerance. asyncio tasks are not exposed by the server (no suitable gauge in ``/metrics``),
  so they are not counted; a leaked task would hold sockets or memory, which are.

Prints one line per property with its figures and exits 1 if any fails.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import random
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from tests.api_only import API_ONLY

HOST = "127.0.0.1"
KIB = 1024


@dataclass(frozen=True)
class SoakConfig:
    seconds: float = 60.0
    writers: int = 4
    watchers: int = 8
    namespaces: int = 3
    writes_per_second: float = 60.0  # all writers together
    live_objects_per_writer: int = 20
    session_seconds: tuple[float, float] = (0.3, 3.0)  # a watcher's connection lasts this long
    away_chance: float = 0.15  # after a session, stay away long enough to fall off the ring
    away_seconds: tuple[float, float] = (4.0, 8.0)
    watch_cache_size: int = 256  # small: resumes also come from the durable change log
    sample_interval_s: float = 1.0
    rss_tolerance: float = 0.20  # end median may exceed warm-up median by this fraction...
    rss_slack_kib: int = 16 * KIB  # ...plus this much
    fd_slack: int = 12  # open fds may differ by this many (connections come and go)
    seed: int = 7


@dataclass
class Sample:
    at: float
    rss_kib: int
    fds: int
    threads: int
    watchers: int


@dataclass
class WatcherLog:
    name: str
    namespace: str  # "" = all namespaces
    last: int
    events: list[tuple[int, str, str]] = field(default_factory=list)  # (rv, type, ns/name)
    sessions: int = 0
    long_absences: int = 0
    expired: int = 0
    errors: list[str] = field(default_factory=list)


@dataclass
class Check:
    name: str
    ok: bool
    figures: str

    def line(self) -> str:
        return f"{'PASS' if self.ok else 'FAIL'} {self.name}: {self.figures}"


@dataclass
class SoakResult:
    checks: list[Check]
    samples: list[Sample]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def report(self) -> str:
        return "\n".join(c.line() for c in self.checks)


# --- the server subprocess ----------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


class ServerProcess:
    def __init__(self, data_dir: Path, watch_cache_size: int) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self._log = open(data_dir / "server.log", "wb")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kubewire.cli", "serve", *API_ONLY, "--insecure-http",
             "--data-dir", str(data_dir / "data"), "--host", HOST, "--port", str(self.port),
             "--watch-cache-size", str(watch_cache_size), "--log-level", "WARNING"],
            stdout=self._log, stderr=subprocess.STDOUT)

    @property
    def db(self) -> Path:
        return self.data_dir / "data" / "kubewire.db"

    async def ready(self, session: aiohttp.ClientSession, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log_tail()}")
            with contextlib.suppress(aiohttp.ClientError, OSError):
                async with session.get(self.url + "/readyz") as resp:
                    if resp.status == 200:
                        return
            await asyncio.sleep(0.1)
        raise TimeoutError(f"server not ready: {self.log_tail()}")

    def sample(self, watchers: int) -> Sample:
        pid = self.proc.pid
        status = Path(f"/proc/{pid}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        return Sample(at=time.monotonic(), rss_kib=int(fields["VmRSS"].split()[0]),
                      fds=len(os.listdir(f"/proc/{pid}/fd")),
                      threads=int(fields["Threads"]), watchers=watchers)

    def log_tail(self) -> str:
        self._log.flush()
        return (self.data_dir / "server.log").read_bytes()[-3000:].decode("utf-8", "replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


async def registered_watchers(session: aiohttp.ClientSession, url: str) -> int:
    async with session.get(url + "/metrics") as resp:
        text = await resp.text()
    return sum(int(float(line.rsplit(" ", 1)[1])) for line in text.splitlines()
               if line.startswith("apiserver_registered_watchers{"))


# --- churn --------------------------------------------------------------------------------------

def configmaps(namespace: str) -> str:
    if namespace:
        return f"/api/v1/namespaces/{namespace}/configmaps"
    return "/api/v1/configmaps"


@dataclass
class Churn:
    acknowledged: dict[int, str] = field(default_factory=dict)  # revision -> ns/name
    acknowledged_deletes: int = 0
    failures: list[str] = field(default_factory=list)


async def writer(index: int, cfg: SoakConfig, url: str, session: aiohttp.ClientSession,
                 namespaces: list[str], deadline: float, churn: Churn) -> None:
    rng = random.Random(cfg.seed * 1000 + index)
    interval = cfg.writers / cfg.writes_per_second
    live: list[tuple[str, str]] = []
    serial = 0
    next_at = time.monotonic()
    while time.monotonic() < deadline:
        next_at += interval
        roll = rng.random()
        try:
            if not live or (roll < 0.4 and len(live) < cfg.live_objects_per_writer):
                serial += 1
                ns, name = rng.choice(namespaces), f"w{index}-{serial}"
                body = {"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": name, "labels": {"writer": str(index)}},
                        "data": {"n": "0", "pad": "x" * rng.randint(0, 2000)}}
                async with session.post(url + configmaps(ns), json=body) as resp:
                    await _acknowledge(resp, 201, f"{ns}/{name}", churn)
                live.append((ns, name))
            elif roll < 0.8:
                ns, name = rng.choice(live)
                patch = {"data": {"n": str(rng.randint(0, 10**9))}}
                async with session.patch(
                        url + f"{configmaps(ns)}/{name}", data=json.dumps(patch),
                        headers={"Content-Type": "application/merge-patch+json"}) as resp:
                    await _acknowledge(resp, 200, f"{ns}/{name}", churn)
            else:
                ns, name = live.pop(rng.randrange(len(live)))
                async with session.delete(url + f"{configmaps(ns)}/{name}") as resp:
                    if resp.status == 200:
                        churn.acknowledged_deletes += 1
                        await resp.read()
                    else:
                        churn.failures.append(f"DELETE {ns}/{name}: {resp.status}")
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            churn.failures.append(repr(exc))
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))


async def _acknowledge(resp: aiohttp.ClientResponse, want: int, key: str, churn: Churn) -> None:
    body = await resp.read()
    if resp.status != want:
        churn.failures.append(f"{resp.method} {key}: {resp.status} {body[:200]!r}")
        return
    churn.acknowledged[int(json.loads(body)["metadata"]["resourceVersion"])] = key


# --- watchers -----------------------------------------------------------------------------------

async def watcher(log: WatcherLog, cfg: SoakConfig, url: str, session: aiohttp.ClientSession,
                  stop: asyncio.Event, index: int) -> None:
    rng = random.Random(cfg.seed * 7919 + index)
    while not stop.is_set():
        log.sessions += 1
        query = (f"?watch=true&allowWatchBookmarks=true&resourceVersion={log.last}"
                 f"&timeoutSeconds=600")
        length = rng.uniform(*cfg.session_seconds)
        try:
            async with session.get(url + configmaps(log.namespace) + query) as resp:
                if resp.status != 200:
                    log.errors.append(f"watch answered {resp.status}")
                    await asyncio.sleep(0.5)
                    continue
                ends = time.monotonic() + length
                while not stop.is_set():
                    left = ends - time.monotonic()
                    if left <= 0:
                        break
                    try:
                        line = await asyncio.wait_for(resp.content.readline(), left)
                    except TimeoutError:
                        break
                    if not line:
                        break  # the server ended the stream: resume
                    _record(log, json.loads(line))
        except (aiohttp.ClientError, OSError) as exc:
            log.errors.append(repr(exc))
            await asyncio.sleep(0.2)
        if rng.random() < cfg.away_chance:  # resume from the durable log, not the ring
            log.long_absences += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), rng.uniform(*cfg.away_seconds))


def _record(log: WatcherLog, event: dict[str, Any]) -> None:
    obj = event.get("object", {})
    kind = event.get("type")
    if kind == "ERROR":
        log.expired += 1
        log.errors.append(f"ERROR event: {obj.get('message')}")
        return
    rv = int(obj["metadata"]["resourceVersion"])
    if kind != "BOOKMARK":
        meta = obj["metadata"]
        log.events.append((rv, str(kind), f"{meta.get('namespace')}/{meta['name']}"))
    log.last = max(log.last, rv)


# --- the run ------------------------------------------------------------------------------------

_TYPES = {0: "ADDED", 1: "MODIFIED", 2: "DELETED"}


def change_log(db: Path, after: int) -> list[tuple[int, str, str]]:
    """(revision, type, ns/name) of every ConfigMap change after ``after``, from the store."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        rows = conn.execute("SELECT revision, type, key FROM changes WHERE key LIKE "
                            "'core/configmaps/%' AND revision > ? ORDER BY revision",
                            (after,)).fetchall()
    return [(int(rev), _TYPES[int(kind)], key.split("/", 2)[2]) for rev, kind, key in rows]


async def _sampler(server: ServerProcess, session: aiohttp.ClientSession, cfg: SoakConfig,
                   samples: list[Sample], stop: asyncio.Event) -> None:
    while not stop.is_set():
        with contextlib.suppress(aiohttp.ClientError, OSError):
            count = await registered_watchers(session, server.url)
            samples.append(server.sample(count))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), cfg.sample_interval_s)


async def _run(cfg: SoakConfig, work_dir: Path) -> SoakResult:
    server = ServerProcess(work_dir, cfg.watch_cache_size)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=30)
    connector = aiohttp.TCPConnector(limit=cfg.writers + cfg.watchers + 4)
    try:
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
            await server.ready(session)
            namespaces = [f"soak-{i}" for i in range(cfg.namespaces)]
            for ns in namespaces:
                async with session.post(server.url + "/api/v1/namespaces", json={
                        "apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": ns}}) as resp:
                    assert resp.status == 201, await resp.text()
            async with session.get(server.url + configmaps("")) as resp:
                start_rv = int((await resp.json())["metadata"]["resourceVersion"])
            logs = [WatcherLog(f"watcher-{i}", "" if i % 4 == 3 else namespaces[i % len(
                namespaces)], start_rv) for i in range(cfg.watchers)]
            churn = Churn()
            samples: list[Sample] = []
            stop_watchers, stop_sampler = asyncio.Event(), asyncio.Event()
            started = time.monotonic()
            deadline = started + cfg.seconds
            sampler = asyncio.create_task(_sampler(server, session, cfg, samples, stop_sampler))
            watchers = [asyncio.create_task(watcher(log, cfg, server.url, session,
                                                    stop_watchers, i))
                        for i, log in enumerate(logs)]
            await asyncio.gather(*(writer(i, cfg, server.url, session, namespaces, deadline,
                                          churn) for i in range(cfg.writers)))
            stop_sampler.set()
            await sampler
            # Let every watcher catch up with the last change in its scope, then stop them.
            expected = change_log(server.db, start_rv)
            scopes = {log.name: [e for e in expected
                                 if not log.namespace or e[2].startswith(log.namespace + "/")]
                      for log in logs}
            catch_up_deadline = time.monotonic() + 60
            while time.monotonic() < catch_up_deadline and any(
                    scopes[log.name] and log.last < scopes[log.name][-1][0] for log in logs):
                await asyncio.sleep(0.2)
            stop_watchers.set()
            await asyncio.gather(*watchers)
            final_rss = server.sample(0).rss_kib
    finally:
        server.stop()
    return _judge(cfg, logs, scopes, expected, churn, samples, started, final_rss,
                  server.proc.returncode)


def _judge(cfg: SoakConfig, logs: list[WatcherLog],
           scopes: dict[str, list[tuple[int, str, str]]], expected: list[tuple[int, str, str]],
           churn: Churn, samples: list[Sample], started: float, final_rss: int,
           exit_code: int | None) -> SoakResult:
    checks: list[Check] = []
    in_log = {rev: key for rev, _, key in expected}
    missing = [rev for rev, key in churn.acknowledged.items() if in_log.get(rev) != key]
    checks.append(Check(
        "writes", not missing and not churn.failures,
        f"acknowledged {len(churn.acknowledged) + churn.acknowledged_deletes} "
        f"({churn.acknowledged_deletes} deletes), found {len(churn.acknowledged) - len(missing)}"
        f"/{len(churn.acknowledged)} creates+updates in the change log, "
        f"failed {len(churn.failures)} {churn.failures[:3]}"))
    gaps = duplicates = disorder = seen = want = expired = sessions = absences = 0
    mismatched: list[str] = []
    for log in logs:
        got, scope = log.events, scopes[log.name]
        revs = [rev for rev, _, _ in got]
        seen += len(got)
        want += len(scope)
        sessions += log.sessions
        absences += log.long_absences
        expired += log.expired
        duplicates += len(revs) - len(set(revs))
        disorder += sum(1 for a, b in itertools.pairwise(revs) if b <= a)
        gaps += len({rev for rev, _, _ in scope} - set(revs))
        if got != scope and not mismatched:
            first = next((i for i, (a, b) in enumerate(zip(got, scope, strict=False))
                          if a != b), min(len(got), len(scope)))
            mismatched.append(f"{log.name} first differs at #{first}: "
                              f"{got[first:first + 2]} vs {scope[first:first + 2]}")
    checks.append(Check(
        "watch history", not (gaps or duplicates or disorder or expired or mismatched),
        f"{len(logs)} watchers, {sessions} sessions (resumed {sessions - len(logs)}x, "
        f"{absences} after falling off the ring), "
        f"events expected {want} / seen {seen}, gaps {gaps}, duplicates {duplicates}, "
        f"out of order {disorder}, 410s {expired}{' ' + mismatched[0] if mismatched else ''}"))
    errors = [e for log in logs for e in log.errors]
    checks.append(Check("watch errors", not errors,
                        f"{len(errors)} {errors[:3]}"))
    checks.extend(_flatness(cfg, samples, started))
    checks.append(Check("clean exit", exit_code == 0,
                        f"server exit code {exit_code}, RSS at the end {final_rss // KIB} MiB"))
    return SoakResult(checks, samples)


def _flatness(cfg: SoakConfig, samples: list[Sample], started: float) -> list[Check]:
    """Warm-up window (20-40% of the run) against the end window (last 20%)."""
    def window(lo: float, hi: float) -> list[Sample]:
        return [s for s in samples if lo <= (s.at - started) / cfg.seconds <= hi]

    warm, end = window(0.2, 0.4), window(0.8, 1.0)
    if len(warm) < 2 or len(end) < 2:
        return [Check("flat resources", False, f"too few samples ({len(samples)})")]

    def med(group: list[Sample], attr: str) -> float:
        return float(statistics.median(getattr(s, attr) for s in group))

    rss_w, rss_e = med(warm, "rss_kib"), med(end, "rss_kib")
    fd_w, fd_e = med(warm, "fds"), med(end, "fds")
    th_w, th_e = med(warm, "threads"), med(end, "threads")
    wa_w, wa_e = med(warm, "watchers"), med(end, "watchers")
    peak = max(s.rss_kib for s in samples)
    rss_ok = rss_e <= rss_w * (1 + cfg.rss_tolerance) + cfg.rss_slack_kib
    return [
        Check("RSS flat", rss_ok,
              f"warm-up {rss_w / KIB:.1f} MiB, end {rss_e / KIB:.1f} MiB "
              f"({(rss_e - rss_w) / KIB:+.1f} MiB, allowed +{cfg.rss_tolerance:.0%} "
              f"+{cfg.rss_slack_kib // KIB} MiB), peak {peak / KIB:.1f} MiB"),
        Check("fds flat", fd_e <= fd_w + cfg.fd_slack,
              f"warm-up {fd_w:.0f}, end {fd_e:.0f} (allowed +{cfg.fd_slack})"),
        Check("threads flat", th_e <= th_w + 2, f"warm-up {th_w:.0f}, end {th_e:.0f}"),
        Check("registered watchers flat", wa_e <= max(wa_w, cfg.watchers) + 2,
              f"warm-up {wa_w:.0f}, end {wa_e:.0f} ({cfg.watchers} watchers connect and "
              "disconnect; asyncio tasks are not exposed in /metrics)"),
    ]


def run_soak(cfg: SoakConfig, work_dir: Path | None = None) -> SoakResult:
    if work_dir is not None:
        return asyncio.run(_run(cfg, work_dir))
    with tempfile.TemporaryDirectory(prefix="kubewire-soak-") as tmp:
        return asyncio.run(_run(cfg, Path(tmp)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.reliability.soak",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--writers", type=int, default=SoakConfig.writers)
    parser.add_argument("--watchers", type=int, default=SoakConfig.watchers)
    parser.add_argument("--rate", type=float, default=SoakConfig.writes_per_second,
                        help="writes per second, all writers together")
    parser.add_argument("--watch-cache-size", type=int, default=SoakConfig.watch_cache_size)
    parser.add_argument("--seed", type=int, default=SoakConfig.seed)
    args = parser.parse_args(argv)
    cfg = SoakConfig(seconds=args.minutes * 60, writers=args.writers, watchers=args.watchers,
                     writes_per_second=args.rate, watch_cache_size=args.watch_cache_size,
                     seed=args.seed)
    result = run_soak(cfg)
    print(f"soak: {args.minutes:g} min, {cfg.writers} writers at {cfg.writes_per_second:g}/s, "
          f"{cfg.watchers} watchers, watch cache {cfg.watch_cache_size}")
    print(result.report())
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
