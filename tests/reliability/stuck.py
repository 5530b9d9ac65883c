"""Slow and stuck consumers: 200 watchers on one kind, 20 of which stop reading.

The run (``run_stuck``): a ``kubewire serve`` subprocess with a small ``--watch-cache-size``;
``readers`` real sockets watch the ConfigMaps of one namespace and are read continuously by one
selector thread; ``stuck`` more sockets (small receive buffer) send the same watch request and
never call ``recv``. Writers create ``events`` ConfigMaps with a ``payload_bytes`` payload.

Checks:
- every reader receives every acknowledged write's event exactly once, in revision order;
- the server closes every stuck watcher once it falls behind the ring (its
  ``apiserver_terminated_watchers_total`` counts them and ``apiserver_registered_watchers``
  drops back to the readers);
- server memory stays bounded: the server's peak RSS (``VmHWM``) over its RSS with all watchers
  connected, reported (and bounded loosely in CI);
- each stuck watcher, when it reads again, gets a prefix of the history and then the end of its
  stream; resumed from its last revision it gets the rest: nothing missing, nothing twice.

``run_stuck_replay`` covers stuck watchers that must catch up first: from before the ring
(durable replay), from inside a large ring, or from a ``sendInitialEvents`` snapshot. Each holds
a bounded amount of server memory while stuck (RSS growth under ``rss_bound_mb``), and gets
every event once it reads.
"""

from __future__ import annotations

import http.client
import itertools
import re
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.reliability.proc import (
    HOST,
    REQUEST_TIMEOUT_S,
    ServerProcess,
    call,
    count_gaps_and_duplicates,
    list_revision,
    request,
)

NAMESPACE = "slow"  # small events: every watcher gets them
BULK = "bulk"  # large events: only the cluster-wide watchers get them
COLLECTION = f"/api/v1/namespaces/{NAMESPACE}/configmaps"
ALL = "/api/v1/configmaps"
_RV = re.compile(rb'"resourceVersion":"(\d+)"')
_TYPE = re.compile(rb'^\{"type":"([A-Z]+)"')


class ChunkedLines:
    """Incremental parser of one chunked watch response: status, then one event per line."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.pending = bytearray()
        self.status = 0
        self.ended = False
        self.revisions: list[int] = []
        self.arrivals: list[float] = []
        self.types: list[str] = []

    def feed(self, data: bytes, now: float) -> None:
        self.buf += data
        if not self.status:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            self.status = int(self.buf[:end].split(b" ", 2)[1])
            del self.buf[:end + 4]
        while not self.ended:
            eol = self.buf.find(b"\r\n")
            if eol < 0:
                return
            size = int(bytes(self.buf[:eol]).split(b";")[0], 16)
            if size == 0:
                self.ended = True
                return
            if len(self.buf) < eol + 2 + size + 2:
                return
            self.pending += self.buf[eol + 2:eol + 2 + size]
            del self.buf[:eol + 4 + size]
            self._lines(now)

    def _lines(self, now: float) -> None:
        start = 0
        while (nl := self.pending.find(b"\n", start)) >= 0:
            line = bytes(self.pending[start:nl])
            start = nl + 1
            kind = _TYPE.match(line)
            rv = _RV.search(line)
            if kind is None or rv is None:
                raise ValueError(f"not a watch event: {line[:200]!r}")
            if kind.group(1) == b"BOOKMARK":
                continue
            self.types.append(kind.group(1).decode())
            self.revisions.append(int(rv.group(1)))
            self.arrivals.append(now)
        del self.pending[:start]


def open_watch(port: int, start: int, rcvbuf: int | None = None,
               collection: str = COLLECTION) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(REQUEST_TIMEOUT_S)
    try:
        sock.connect((HOST, port))
        sock.sendall(f"GET {collection}?watch=1&resourceVersion={start} HTTP/1.1\r\n"
                     f"Host: {HOST}:{port}\r\nAccept: application/json\r\n\r\n".encode())
    except OSError:
        sock.close()
        raise
    return sock


class ReaderPool(threading.Thread):
    """Reads many watch sockets on one thread until ``stop``."""

    def __init__(self, socks: list[socket.socket]) -> None:
        super().__init__(name="watch readers", daemon=True)
        self.parsers = {sock.fileno(): ChunkedLines() for sock in socks}
        self.socks = socks
        self.stop_event = threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        with selectors.DefaultSelector() as sel:
            for each in self.socks:
                each.setblocking(False)
                sel.register(each, selectors.EVENT_READ)
            while not self.stop_event.is_set():
                for key, _ in sel.select(0.1):
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    try:
                        data = sock.recv(1 << 20)
                    except BlockingIOError:
                        continue
                    except OSError as exc:
                        self.errors.append(f"reader {sock.fileno()}: {exc!r}")
                        data = b""
                    if not data:
                        sel.unregister(sock)
                        self.errors.append(f"reader {sock.fileno()} stream ended")
                        continue
                    try:
                        self.parsers[sock.fileno()].feed(data, time.monotonic())
                    except ValueError as exc:
                        self.errors.append(str(exc))
                        sel.unregister(sock)

    def caught_up(self, last: Callable[[int], int]) -> bool:
        """Every reader got the last revision it should (``last(fileno)``)."""
        return all(p.revisions and p.revisions[-1] >= last(fd) for fd, p in self.parsers.items())


def drain(sock: socket.socket, deadline: float, until: int = 0, count: int = 0) -> ChunkedLines:
    """Read a watch socket to the end of its stream, EOF, revision ``until``, ``count`` events
    or ``deadline``."""
    parser = ChunkedLines()
    sock.settimeout(0.5)
    while not parser.ended and time.monotonic() < deadline:
        if until and parser.revisions and parser.revisions[-1] >= until:
            break
        if count and len(parser.revisions) >= count:
            break
        try:
            data = sock.recv(1 << 20)
        except TimeoutError:
            continue
        if not data:
            break
        parser.feed(data, time.monotonic())
    return parser


def metric(port: int, name: str, label: str) -> float:
    """One sample of ``name`` whose labels contain ``label`` (0 if absent)."""
    reply = http.client.HTTPConnection(HOST, port, timeout=REQUEST_TIMEOUT_S)
    try:
        reply.request("GET", "/metrics")
        text = reply.getresponse().read().decode()
    finally:
        reply.close()
    for line in text.splitlines():
        if line.startswith(name + "{") and label in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@dataclass
class StuckConfig:
    data_dir: Path
    readers: int = 180  # of which ``wide_readers`` watch all namespaces, the rest one
    wide_readers: int = 10
    stuck: int = 20  # watch all namespaces, never read
    events: int = 400  # small events in NAMESPACE
    payload_bytes: int = 1024
    bulk_events: int = 60  # large events in BULK
    bulk_bytes: int = 128 * 1024
    ring: int = 32
    writers: int = 2
    rss_bound_mb: float = 128.0


@dataclass
class StuckReport:
    readers: int = 0
    stuck: int = 0
    events_expected: int = 0  # summed over readers
    events_seen: int = 0
    gaps: int = 0
    duplicates: int = 0
    out_of_order: int = 0
    stuck_closed: int = 0
    resumed_complete: int = 0
    rss_base_mb: float = 0.0
    rss_peak_mb: float = 0.0
    lag_p99_ms: float = 0.0
    lag_max_ms: float = 0.0
    stream_mb: float = 0.0  # bytes one stuck watcher was owed
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"slow-consumers: readers={self.readers} stuck={self.stuck} events "
                f"expected={self.events_expected} seen={self.events_seen} gaps={self.gaps} "
                f"duplicates={self.duplicates} out-of-order={self.out_of_order} "
                f"stuck closed={self.stuck_closed}/{self.stuck} resumed complete="
                f"{self.resumed_complete}/{self.stuck} peak RSS={self.rss_peak_mb:.0f} MB "
                f"(base {self.rss_base_mb:.0f} MB; stuck watchers were owed "
                f"{self.stuck * self.stream_mb:.0f} MB) lag p99/max={self.lag_p99_ms:.0f}/"
                f"{self.lag_max_ms:.0f} ms problems={len(self.problems)}")


@dataclass
class Written:
    small: list[int] = field(default_factory=list)
    every: list[int] = field(default_factory=list)
    sent: dict[int, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _write(port: int, plan: list[tuple[str, str, int]], written: Written) -> None:
    conn = http.client.HTTPConnection(HOST, port, timeout=REQUEST_TIMEOUT_S)
    try:
        for namespace, name, size in plan:
            body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                    "data": {"payload": "x" * size}}
            began = time.monotonic()
            reply = request(conn, "POST", f"/api/v1/namespaces/{namespace}/configmaps", body)
            if reply.status != 201:
                written.errors.append(f"create {name}: {reply.status} {reply.body}")
                continue
            revision = int(reply.body["metadata"]["resourceVersion"])
            with written.lock:
                written.sent[revision] = began
                written.every.append(revision)
                if namespace == NAMESPACE:
                    written.small.append(revision)
    finally:
        conn.close()


def _plans(config: StuckConfig) -> list[list[tuple[str, str, int]]]:
    """Small and bulk creates interleaved evenly, split over the writers."""
    every: list[tuple[float, tuple[str, str, int]]] = []
    every += [(i / config.events, (NAMESPACE, f"cm-{i}", config.payload_bytes))
              for i in range(config.events)]
    every += [((i + 0.5) / config.bulk_events, (BULK, f"big-{i}", config.bulk_bytes))
              for i in range(config.bulk_events)]
    ordered = [item for _, item in sorted(every)]
    return [ordered[w::config.writers] for w in range(config.writers)]


def _wait(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def _check_readers(pool: ReaderPool, expected_for: Callable[[int], list[int]],
                   sent: dict[int, float], report: StuckReport) -> None:
    lags: list[float] = []
    for fd, parser in pool.parsers.items():
        got = parser.revisions
        expected = expected_for(fd)
        report.events_expected += len(expected)
        report.events_seen += len(got)
        gaps, dups = count_gaps_and_duplicates(got, expected)
        report.gaps += gaps
        report.duplicates += dups
        report.out_of_order += sum(1 for a, b in itertools.pairwise(got) if b <= a)
        lags.extend(t - sent[r] for r, t in zip(got, parser.arrivals, strict=True) if r in sent)
    if report.gaps or report.duplicates or report.out_of_order:
        report.problems.append(f"readers: gaps={report.gaps} duplicates={report.duplicates} "
                               f"out of order={report.out_of_order}")
    if lags:
        lags.sort()
        report.lag_p99_ms = 1000 * lags[int(0.99 * (len(lags) - 1))]
        report.lag_max_ms = 1000 * lags[-1]


def _resume_stuck(port: int, socks: list[socket.socket], start: int, expected: list[int],
                  report: StuckReport) -> None:
    deadline = time.monotonic() + 60
    for i, sock in enumerate(socks):
        before = drain(sock, deadline)
        sock.close()
        if not before.ended:
            report.problems.append(f"stuck {i}: stream did not end ({len(before.revisions)} "
                                   "events read)")
            continue
        last = before.revisions[-1] if before.revisions else start
        with open_watch(port, last, collection=ALL) as again:
            after = drain(again, deadline, until=expected[-1])
        history = before.revisions + after.revisions
        if history == expected:
            report.resumed_complete += 1
        else:
            gaps, dups = count_gaps_and_duplicates(history, expected)
            report.problems.append(f"stuck {i}: read {len(before.revisions)} then resumed "
                                   f"from {last} and got {len(after.revisions)}: "
                                   f"gaps={gaps} duplicates={dups}")


def _check_closed(port: int, config: StuckConfig, report: StuckReport) -> None:
    label = 'kind="ConfigMap"'

    def closed() -> bool:
        report.stuck_closed = int(metric(port, "apiserver_terminated_watchers_total",
                                         'resource="configmaps"'))
        return report.stuck_closed >= config.stuck

    _wait(closed, 10)
    registered = metric(port, "apiserver_registered_watchers", label)
    if report.stuck_closed != config.stuck or registered != config.readers:
        report.problems.append(f"stuck watchers closed: {report.stuck_closed}, "
                               f"registered now: {registered:.0f}")


def _open_all(port: int, start: int, config: StuckConfig, socks: list[socket.socket],
              wide: set[int], stuck: list[socket.socket]) -> None:
    for i in range(config.readers):
        is_wide = i < config.wide_readers
        socks.append(open_watch(port, start, collection=ALL if is_wide else COLLECTION))
        if is_wide:
            wide.add(socks[-1].fileno())
    for _ in range(config.stuck):
        stuck.append(open_watch(port, start, rcvbuf=4096, collection=ALL))


def run_stuck(config: StuckConfig, log: Callable[[str], None] = lambda _: None) -> StuckReport:
    report = StuckReport(readers=config.readers, stuck=config.stuck)
    server = ServerProcess(config.data_dir, "--watch-cache-size", str(config.ring))
    socks: list[socket.socket] = []
    wide: set[int] = set()
    stuck: list[socket.socket] = []
    pool: ReaderPool | None = None
    written = Written()
    with server:
        port = server.port
        for namespace in (NAMESPACE, BULK):
            assert call(port, "POST", "/api/v1/namespaces",
                        {"metadata": {"name": namespace}}).status == 201
        start = list_revision(port, COLLECTION)
        try:
            _open_all(port, start, config, socks, wide, stuck)
            pool = ReaderPool(socks)
            pool.start()
            total = config.readers + config.stuck
            if not _wait(lambda: metric(port, "apiserver_registered_watchers",
                                        'kind="ConfigMap"') >= total, 30):
                report.problems.append("watchers did not all register")
            report.rss_base_mb = server.rss_kb() / 1024
            threads = [threading.Thread(target=_write, args=(port, plan, written))
                       for plan in _plans(config)]
            for thread in threads:
                thread.start()
            while any(t.is_alive() for t in threads):
                server.rss_kb()
                time.sleep(0.1)
            for thread in threads:
                thread.join()
            report.problems.extend(written.errors)
            every, small = sorted(written.every), sorted(written.small)
            report.stream_mb = (config.events * config.payload_bytes
                                + config.bulk_events * config.bulk_bytes) / (1 << 20)
            log(f"  {len(every)} writes acknowledged")

            def expected_for(fd: int) -> list[int]:
                return every if fd in wide else small

            if not _wait(lambda: pool is not None
                         and pool.caught_up(lambda fd: expected_for(fd)[-1]), 120):
                report.problems.append("readers did not catch up")
            _check_closed(port, config, report)
            server.rss_kb()
            report.rss_peak_mb = server.peak_rss_kb / 1024
            if report.rss_peak_mb - report.rss_base_mb > config.rss_bound_mb:
                report.problems.append(f"RSS grew {report.rss_peak_mb - report.rss_base_mb:.0f}"
                                       f" MB (bound {config.rss_bound_mb:.0f} MB)")
            pool.stop_event.set()
            pool.join(30)
            report.problems.extend(pool.errors)
            _check_readers(pool, expected_for, written.sent, report)
            _resume_stuck(port, stuck, start, every, report)
        finally:
            if pool is not None:
                pool.stop_event.set()
                pool.join(30)
            for sock in socks + stuck:
                sock.close()
    return report


def replay_args(long: bool, data_dir: Path, start: str = "log") -> dict[str, Any]:
    if long:
        return {"data_dir": data_dir, "stuck": 20, "events": 1000, "payload_bytes": 64 * 1024,
                "start": start}
    return {"data_dir": data_dir, "start": start}


def main_args(long: bool, data_dir: Path) -> dict[str, Any]:
    """Long: 200 watchers, each stuck one owed ~64 MB. Short (CI): 60 watchers, ~8 MB."""
    if long:
        return {"data_dir": data_dir, "events": 4000, "bulk_events": 240,
                "bulk_bytes": 256 * 1024, "ring": 64}
    return {"data_dir": data_dir, "readers": 50, "wide_readers": 5, "stuck": 10,
            "events": 300, "bulk_events": 60, "bulk_bytes": 128 * 1024, "ring": 32}


@dataclass
class ReplayConfig:
    data_dir: Path
    stuck: int = 10
    events: int = 300
    payload_bytes: int = 64 * 1024
    ring: int = 32
    rss_bound_mb: float = 100.0
    # log: resume from before the ring (durable replay); ring: from inside a large ring
    # (catch-up pump); initial: sendInitialEvents (the synthetic ADDED snapshot)
    start: str = "log"


@dataclass
class ReplayReport:
    start: str = "log"
    stuck: int = 0
    events: int = 0
    complete: int = 0
    rss_base_mb: float = 0.0
    rss_peak_mb: float = 0.0
    replay_mb: float = 0.0  # history one watcher is owed
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"slow-consumers-catch-up ({self.start}): stuck={self.stuck} "
                f"events={self.events} complete after reading={self.complete}/{self.stuck} "
                f"peak RSS={self.rss_peak_mb:.0f} MB (base {self.rss_base_mb:.0f} MB; they "
                f"were owed {self.stuck * self.replay_mb:.0f} MB) problems={len(self.problems)}")


def run_stuck_replay(config: ReplayConfig,
                     log: Callable[[str], None] = lambda _: None) -> ReplayReport:
    """Stuck watchers that must catch up (from the durable log, the ring or an initial snapshot)
    hold a bounded amount of server memory each, and get everything once they read."""
    report = ReplayReport(start=config.start, stuck=config.stuck, events=config.events,
                          replay_mb=config.events * config.payload_bytes / (1 << 20))
    ring = config.events * 2 if config.start == "ring" else config.ring
    with ServerProcess(config.data_dir, "--watch-cache-size", str(ring)) as server:
        port = server.port
        assert call(port, "POST", "/api/v1/namespaces",
                    {"metadata": {"name": NAMESPACE}}).status == 201
        start = list_revision(port, COLLECTION)
        collection = COLLECTION
        if config.start == "initial":
            start, collection = 0, (COLLECTION + "?sendInitialEvents=true&allowWatchBookmarks"
                                    "=true&resourceVersionMatch=NotOlderThan&watch=1&x=")
        written = Written()
        _write(port, [(NAMESPACE, f"cm-{i}", config.payload_bytes)
                      for i in range(config.events)], written)
        report.problems.extend(written.errors)
        expected = sorted(written.every)
        report.rss_base_mb = server.rss_kb() / 1024
        stuck: list[socket.socket] = []
        try:
            for _ in range(config.stuck):
                stuck.append(open_watch(port, start, rcvbuf=4096, collection=collection))
            _wait(lambda: metric(port, "apiserver_registered_watchers",
                                 'kind="ConfigMap"') >= config.stuck, 30)
            time.sleep(1.0)  # bounded: let every replay fill what it may
            server.rss_kb()
            report.rss_peak_mb = server.peak_rss_kb / 1024
            log(f"  peak RSS {report.rss_peak_mb:.0f} MB")
            if report.rss_peak_mb - report.rss_base_mb > config.rss_bound_mb:
                report.problems.append(f"RSS grew {report.rss_peak_mb - report.rss_base_mb:.0f}"
                                       f" MB with {config.stuck} stuck replaying watchers "
                                       f"(bound {config.rss_bound_mb:.0f} MB)")
            deadline = time.monotonic() + 60
            for i, sock in enumerate(stuck):
                got = drain(sock, deadline, count=len(expected)).revisions
                if config.start == "initial":
                    got = sorted(got)  # the snapshot comes in key order, as kube sends it
                if got == expected:
                    report.complete += 1
                else:
                    gaps, dups = count_gaps_and_duplicates(got, expected)
                    report.problems.append(f"stuck replay {i}: {len(got)} events, gaps={gaps}"
                                           f" duplicates={dups}")
        finally:
            for sock in stuck:
                sock.close()
    return report
