"""Crash safety: SIGKILL ``kubewire serve`` under a write storm and check what survived.

The run (``run_crash``): a ``kubewire serve`` subprocess on a fresh data dir; ``writers`` threads
create, merge-patch and delete ConfigMaps, Secrets and Leases in three namespaces (each thread
owns its keys, and every create and patch carries a unique marker annotation); ``watchers``
follow a kind (all namespaces, or one) and resume from their last revision whenever the stream
ends. The main thread SIGKILLs the server ``kills`` times at random moments and starts it again on
the same data dir. Then writers stop, a sentinel per kind and namespace is written, the watchers
drain, a fresh watch per kind replays from the start, the server is stopped and the SQLite file
is read directly. Checks:

- **acknowledged writes are kept**: every 2xx create/patch has a change row at the revision it
  was told, with its marker; every 2xx delete has a DELETED row for its key;
- **nothing half-applied**: per key, the change rows are exactly the key's writes in the order
  they were made, where answered-2xx writes must appear, writes answered 4xx/5xx or refused
  must not, and unanswered ones (the kill cut the connection) may or may not; the ``objects``
  table equals the last change row of every key; revisions are dense (1..meta revision);
- **watch history**: every resumed watcher's events over all restarts, and the fresh replay,
  equal the change log's rows for its filter after its start revision: no gaps, no duplicates,
  same order, same types and markers.

Durability modes (``--durability``, ``sqlite_schema.connect``): the store runs SQLite in WAL mode
and acknowledges a write only after its group's ``COMMIT`` returned and its changes were handed
to watchers.

- ``full`` (default, ``PRAGMA synchronous=FULL``): each commit group's WAL append is fsynced
  before ``COMMIT`` returns, so an acknowledged write survives a process crash, an OS crash and
  power loss.
- ``normal`` (``synchronous=NORMAL``): ``COMMIT`` returns once the WAL frames are written to the
  OS (fsync only at checkpoints), so an acknowledged write survives a crash of the process
  (SIGKILL: the kernel still holds the pages) but the last groups may be lost on power loss or an
  OS crash; the database stays consistent (no half-applied write) in both cases.

This harness tests process crashes (SIGKILL), which both modes must survive; it runs ``full``
by default (``durability="normal"`` also works). Power loss is not simulated.
"""

from __future__ import annotations

import base64
import http.client
import json
import random
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.reliability.proc import (
    HOST,
    JSON,
    MARKER,
    REQUEST_TIMEOUT_S,
    Reply,
    Seen,
    ServerProcess,
    WatchReader,
    call,
    count_gaps_and_duplicates,
    list_revision,
    request,
)

NAMESPACES = ("rel-a", "rel-b", "rel-c")
TYPES = {0: "ADDED", 1: "MODIFIED", 2: "DELETED"}


@dataclass(frozen=True)
class Kind:
    plural: str
    base: str  # /api/v1 or /apis/group/version
    store_prefix: str  # first key segment in the store
    body: Callable[[str, str], JSON]

    def collection(self, namespace: str | None) -> str:
        if namespace is None:
            return f"{self.base}/{self.plural}"
        return f"{self.base}/namespaces/{namespace}/{self.plural}"


def _meta(name: str, marker: str) -> JSON:
    return {"name": name, "annotations": {MARKER: marker}}


KINDS = (
    Kind("configmaps", "/api/v1", "core", lambda name, marker: {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(name, marker),
        "data": {"v": marker}}),
    Kind("secrets", "/api/v1", "core", lambda name, marker: {
        "apiVersion": "v1", "kind": "Secret", "metadata": _meta(name, marker), "type": "Opaque",
        "data": {"v": base64.b64encode(marker.encode()).decode()}}),
    Kind("leases", "/apis/coordination.k8s.io/v1", "coordination.k8s.io",
         lambda name, marker: {
             "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": _meta(name, marker), "spec": {"holderIdentity": marker}}),
)


@dataclass
class Op:
    plural: str
    key: str  # namespace/name
    type: str  # ADDED, MODIFIED, DELETED
    marker: str | None
    outcome: str = "unknown"  # ok, failed, refused, unknown
    status: int = 0
    revision: int | None = None


@dataclass
class CrashConfig:
    data_dir: Path
    seconds_between_kills: tuple[float, float] = (0.3, 1.2)
    kills: int = 3
    writers: int = 4
    keys_per_writer: int = 9
    watchers: int = 6
    durability: str = "full"
    seed: int | None = None


@dataclass
class CrashReport:
    seed: int = 0
    kills: int = 0
    attempted: int = 0
    acked: int = 0
    acked_found: int = 0
    failed: int = 0  # answered 4xx/5xx or refused: must not appear
    failed_found: int = 0
    unanswered: int = 0
    unanswered_applied: int = 0
    server_errors: int = 0  # 5xx answers
    events_expected: int = 0
    events_seen: int = 0
    gaps: int = 0
    duplicates: int = 0
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"crash-safety: seed={self.seed} kills={self.kills} "
                f"writes acknowledged={self.acked} "
                f"found={self.acked_found} failed={self.failed} (found {self.failed_found}) "
                f"unanswered={self.unanswered} (applied {self.unanswered_applied}) "
                f"5xx={self.server_errors} events expected={self.events_expected} "
                f"seen={self.events_seen} gaps={self.gaps} duplicates={self.duplicates} "
                f"problems={len(self.problems)}")

    @property
    def ok(self) -> bool:
        return not self.problems


class Writer(threading.Thread):
    """Creates, patches and deletes its own keys until ``stop`` is set."""

    def __init__(self, index: int, port: Callable[[], int], keys: list[tuple[Kind, str, str]],
                 stop: threading.Event, seed: int) -> None:
        super().__init__(name=f"writer {index}", daemon=True)
        self.index = index
        self.port = port
        self.keys = keys
        self.stop_event = stop
        self.rng = random.Random(seed)
        self.ops: list[Op] = []
        self.exists: dict[str, bool | None] = {}  # None: unknown
        self._conn: http.client.HTTPConnection | None = None
        self._seq = 0

    def run(self) -> None:
        try:
            while not self.stop_event.is_set():
                self.step()
        finally:
            self._drop()

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _choose(self) -> tuple[Kind, str, str, Op]:
        kind, namespace, name = self.rng.choice(self.keys)
        key = f"{namespace}/{name}"
        exists = self.exists.get(key, False)
        if exists is None:
            exists = self.rng.random() < 0.5
        op_type = "MODIFIED" if self.rng.random() < 0.7 else "DELETED"
        if not exists:
            op_type = "ADDED"
        self._seq += 1
        marker = None if op_type == "DELETED" else f"w{self.index}-{self._seq}"
        op = Op(kind.plural, key, op_type, marker)
        self.ops.append(op)
        return kind, namespace, name, op

    def step(self) -> None:
        kind, namespace, name, op = self._choose()
        path = f"{kind.collection(namespace)}/{name}"
        body: JSON | None = None
        content_type = "application/json"
        if op.type == "ADDED":
            method, path = "POST", kind.collection(namespace)
            body = kind.body(name, op.marker or "")
        elif op.type == "MODIFIED":
            method, body = "PATCH", {"metadata": {"annotations": {MARKER: op.marker}}}
            content_type = "application/merge-patch+json"
        else:
            method = "DELETE"
        if self._conn is None:
            self._conn = http.client.HTTPConnection(HOST, self.port(), timeout=REQUEST_TIMEOUT_S)
        try:
            reply = request(self._conn, method, path, body, content_type)
        except (OSError, http.client.HTTPException) as exc:
            # Refused: it never reached a server. Otherwise the kill cut it: outcome unknown.
            op.outcome = "refused" if isinstance(exc, ConnectionRefusedError) else "unknown"
            if op.outcome == "unknown":
                self.exists[op.key] = None
            self._drop()
            time.sleep(0.02)
            return
        self._record(op, reply)

    def _record(self, op: Op, reply: Reply) -> None:
        key, op_type = op.key, op.type
        op.status = reply.status
        if 200 <= reply.status < 300:
            op.outcome = "ok"
            if op_type != "DELETED":
                op.revision = int(reply.body["metadata"]["resourceVersion"])
            self.exists[key] = op_type != "DELETED"
        else:
            op.outcome = "failed"
            if reply.status == 404:
                self.exists[key] = False
            elif reply.status == 409 and op_type == "ADDED":
                self.exists[key] = True


@dataclass
class Row:
    revision: int
    type: str
    plural: str
    key: str
    marker: str | None


def read_store(path: Path) -> tuple[list[Row], dict[str, tuple[int, bytes]], list[str], int]:
    """The change log, the objects table, problems found in them, and meta's revision."""
    problems: list[str] = []
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        raw = conn.execute(
            "SELECT revision, key, type, value FROM changes ORDER BY revision").fetchall()
        objects = {k: (int(r), bytes(v)) for k, r, v in
                   conn.execute("SELECT key, revision, value FROM objects")}
        meta = dict(conn.execute("SELECT name, value FROM meta").fetchall())
    finally:
        conn.close()
    rows: list[Row] = []
    last: dict[str, tuple[int, int, bytes]] = {}
    for revision, key, type_, value in raw:
        _, plural, rest = key.split("/", 2)
        obj = json.loads(value)
        marker = (obj.get("metadata", {}).get("annotations") or {}).get(MARKER)
        if int(obj["metadata"]["resourceVersion"]) != revision and type_ != 2:
            problems.append(f"change {revision} holds resourceVersion "
                            f"{obj['metadata']['resourceVersion']}")
        rows.append(Row(int(revision), TYPES[type_], plural, rest, marker))
        last[key] = (int(revision), type_, bytes(value))
    compacted = int(meta.get("compacted_revision", 0))
    top = int(meta.get("revision", 0))
    if [r.revision for r in rows] != list(range(compacted + 1, top + 1)):
        problems.append(f"change log revisions not dense in ({compacted}, {top}]")
    for key, (revision, type_, value) in last.items():
        stored = objects.get(key)
        if type_ == 2:
            if stored is not None:
                problems.append(f"{key} deleted at {revision} but still in objects")
        elif stored is None:
            problems.append(f"{key} written at {revision} but missing from objects")
        elif stored != (revision, value):
            problems.append(f"{key}: objects row at {stored[0]} differs from change {revision}")
    problems.extend(f"{key} in objects without a change row" for key in objects
                    if key not in last and compacted == 0)
    return rows, objects, problems, top


def check_writes(ops: list[Op], rows: list[Row], report: CrashReport) -> None:
    """Match every key's change rows to its writer's ops, in order."""
    by_key: dict[tuple[str, str], list[Op]] = {}
    for op in ops:
        by_key.setdefault((op.plural, op.key), []).append(op)
    rows_by_key: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        rows_by_key.setdefault((row.plural, row.key), []).append(row)
    for op in ops:
        report.attempted += 1
        if op.outcome == "ok":
            report.acked += 1
        elif op.outcome == "unknown":
            report.unanswered += 1
        else:
            report.failed += 1
        if op.status >= 500:
            report.server_errors += 1
            report.problems.append(f"{op.type} {op.plural} {op.key} answered {op.status}")
    for key, key_ops in by_key.items():
        _match_key(key, key_ops, rows_by_key.get(key, []), report)


def _match_key(key: tuple[str, str], ops: list[Op], rows: list[Row],
               report: CrashReport) -> None:
    i = 0
    for row in rows:
        while i < len(ops):
            op = ops[i]
            same = op.type == row.type and (row.type == "DELETED" or op.marker == row.marker)
            if same and op.outcome == "unknown" and row.type == "DELETED" \
                    and _next_live(ops, i + 1) == "DELETED":
                i += 1  # of two deletes in a row only one applied: the acknowledged one
                continue
            if same and op.outcome in ("ok", "unknown"):
                break
            if same and row.type != "DELETED":  # a marker is proof; a delete has none
                report.failed_found += 1
                report.problems.append(f"{key}: {op.type} {op.marker} answered {op.status} "
                                       f"({op.outcome}) but is in the log at {row.revision}")
                break
            if op.outcome == "ok":
                report.problems.append(f"{key}: acknowledged {op.type} {op.marker} "
                                       f"(revision {op.revision}) missing from the log")
            i += 1
        else:
            report.problems.append(f"{key}: change {row.revision} {row.type} {row.marker} "
                                   "matches no write")
            return
        op = ops[i]
        if op.outcome == "ok":
            report.acked_found += 1
            if op.revision is not None and op.revision != row.revision:
                report.problems.append(f"{key}: {op.type} {op.marker} acknowledged at "
                                       f"{op.revision}, logged at {row.revision}")
        elif op.outcome == "unknown":
            report.unanswered_applied += 1
        i += 1
    for op in ops[i:]:
        if op.outcome == "ok":
            report.problems.append(f"{key}: acknowledged {op.type} {op.marker} "
                                   f"(revision {op.revision}) missing from the log")


def _next_live(ops: list[Op], start: int) -> str | None:
    """The type of the next write from ``start`` that was acknowledged or may have applied,
    if it was acknowledged (``None`` otherwise)."""
    for op in ops[start:]:
        if op.outcome == "ok":
            return op.type
        if op.outcome == "unknown":
            return None
    return None


def check_history(name: str, got: list[Seen], rows: list[Row], report: CrashReport) -> None:
    expected = [Seen(r.revision, r.type, r.key, r.marker) for r in rows]
    report.events_expected += len(expected)
    report.events_seen += len(got)
    gaps, duplicates = count_gaps_and_duplicates([s.revision for s in got],
                                                 [s.revision for s in expected])
    report.gaps += gaps
    report.duplicates += duplicates
    if got != expected:
        first = next((i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b),
                     min(len(got), len(expected)))
        report.problems.append(
            f"{name}: {len(got)} events vs {len(expected)} in the log, gaps={gaps}, "
            f"duplicates={duplicates}, first difference at {first}: "
            f"{got[first:first + 1]} vs {expected[first:first + 1]}")


def _filter_rows(rows: list[Row], plural: str, namespace: str | None, start: int,
                 end: int) -> list[Row]:
    return [r for r in rows if r.plural == plural and start < r.revision <= end
            and (namespace is None or r.key.startswith(namespace + "/"))]


Follower = tuple[str, Kind, str | None, WatchReader]


def _follow(port: Callable[[], int], kind: Kind, namespace: str | None, start: int,
            name: str) -> Follower:
    """A resuming watch that ends at the sentinel written last for its filter."""
    sentinel = f"sentinel-{kind.plural}-{namespace or NAMESPACES[-1]}"
    reader = WatchReader(port, kind.collection(namespace), start,
                         until=lambda evs: evs[-1].marker == sentinel)
    return name, kind, namespace, reader


def _write_sentinels(port: int) -> int:
    revision = 0
    for kind in KINDS:
        for namespace in NAMESPACES:
            name = f"sentinel-{kind.plural}-{namespace}"
            reply = call(port, "POST", kind.collection(namespace), kind.body(name, name))
            assert reply.status == 201, reply
            revision = int(reply.body["metadata"]["resourceVersion"])
    return revision


def _storm(config: CrashConfig, server: ServerProcess, rng: random.Random,
           writers: list[Writer], log: Callable[[str], None]) -> None:
    for writer in writers:
        writer.start()
    for n in range(config.kills):
        time.sleep(rng.uniform(*config.seconds_between_kills))
        server.kill()
        log(f"  kill {n + 1}/{config.kills}")
        time.sleep(rng.uniform(0.0, 0.2))
        server.start()
    time.sleep(rng.uniform(*config.seconds_between_kills))


def run_crash(config: CrashConfig, log: Callable[[str], None] = lambda _: None) -> CrashReport:
    seed = config.seed if config.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    report = CrashReport(seed=seed)
    server = ServerProcess(config.data_dir, "--durability", config.durability)
    server.start()
    followers: list[Follower] = []
    stop = threading.Event()

    def port() -> int:
        return server.port

    writers = [Writer(i, port, [(KINDS[(i + k) % len(KINDS)], NAMESPACES[k % len(NAMESPACES)],
                                 f"w{i}-{k}") for k in range(config.keys_per_writer)],
                      stop, rng.randrange(1 << 30)) for i in range(config.writers)]
    try:
        for namespace in NAMESPACES:
            reply = call(server.port, "POST", "/api/v1/namespaces",
                         {"metadata": {"name": namespace}})
            assert reply.status == 201, reply
        start = list_revision(server.port, "/api/v1/configmaps")
        for j in range(config.watchers):
            kind = KINDS[j % len(KINDS)]
            scope = None if j < len(KINDS) else NAMESPACES[j % len(NAMESPACES)]
            followers.append(_follow(port, kind, scope, start,
                                     f"watcher {j} {kind.plural} {scope or '*'}"))
        _storm(config, server, rng, writers, log)
        stop.set()
        for writer in writers:
            writer.join(60)
        end = _write_sentinels(server.port)
        for follower in followers:
            follower[3].wait(60)
        replays = [_follow(port, kind, None, start, f"replay {kind.plural}") for kind in KINDS]
        for follower in replays:
            follower[3].wait(60)
        followers.extend(replays)
    finally:
        stop.set()
        for writer in writers:
            if writer.ident is not None:
                writer.join(60)
        for follower in followers:
            follower[3].stop()
        server.stop()
    report.kills = server.kills
    rows, _, problems, _ = read_store(config.data_dir / "kubewire.db")
    report.problems.extend(problems)
    check_writes([op for writer in writers for op in writer.ops], rows, report)
    for name, kind, scope, reader in followers:
        report.problems.extend(f"{name}: {error}" for error in reader.errors)
        if not reader.done.is_set() or not reader.events:
            report.problems.append(f"{name}: did not reach its sentinel")
        check_history(name, reader.events,
                      _filter_rows(rows, kind.plural, scope, start, end), report)
    return report


def main_args(long: bool, data_dir: Path, seed: int | None = None) -> dict[str, Any]:
    """The short (CI) and long (``make reliability``) shapes of the run."""
    if long:
        return {"data_dir": data_dir, "kills": 12, "writers": 6, "watchers": 9,
                "seconds_between_kills": (0.5, 3.0), "seed": seed}
    return {"data_dir": data_dir, "kills": 3, "writers": 4, "watchers": 6,
            "seconds_between_kills": (0.3, 1.2), "seed": seed}
