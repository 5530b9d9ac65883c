"""Replicas under a write storm: SIGKILL one ``kubewire serve`` replica on etcd, check what
every replica served.

The run (``run_replica_crash``): ``replicas`` real ``kubewire serve`` processes on one etcd
(``tests/etcd_replicas.py``); ``writers`` threads create, merge-patch and delete ConfigMaps,
Secrets and Leases (crash.py's ``Writer``: each owns its keys, every create and patch carries a
unique marker), each on its own replica, or on the next live one while its own is down; on every
replica a resuming watch per kind (all namespaces) and one on a namespace. Meanwhile the main
thread SIGKILLs a replica ``kills`` times at random moments (a random one each time, never the
first, which writes the sentinels) and starts it again on its data dir and port; its watchers
resume there from their last revision. Then the writers stop, sentinels are written, the
watchers drain, a fresh watch per kind replays from the start on every replica, and etcd's own
history is read (``etcd_history``: the change log). Checks, with crash.py's checking code:

- **acknowledged writes are kept**: every 2xx create/patch is in etcd's history at the revision
  it was told, with its marker; every 2xx delete is a DELETED event of its key; per key, the
  events are exactly its writes in the order made (4xx/5xx answered or refused writes absent,
  unanswered ones may or may not be there); no write answered 5xx;
- **watch history**: every watcher's events over all its resumes, on every replica (the killed
  one included), and every replay, equal etcd's events for its filter after its start: no gap,
  no duplicate, same order, types and markers; so the replicas' streams are identical.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.etcd_replicas import Replicas, etcd_history
from tests.reliability.crash import (
    KINDS,
    NAMESPACES,
    CrashReport,
    Follower,
    Row,
    Writer,
    _filter_rows,
    _follow,
    _write_sentinels,
    check_history,
    check_writes,
)
from tests.reliability.proc import Seen, ServerProcess, call, list_revision


@dataclass
class ReplicaCrashConfig:
    root: Path
    endpoints: Sequence[str]
    replicas: int = 3
    writers: int = 8
    keys_per_writer: int = 9
    kills: int = 2
    seconds_between_kills: tuple[float, float] = (0.5, 1.5)
    seed: int | None = None
    extra: Sequence[str] = ()  # more ``kubewire serve`` flags for every replica


def _port_of(replicas: Replicas, index: int) -> Callable[[], int]:
    """Replica ``index``'s port, or the next live replica's while it is down."""
    def port() -> int:
        for k in range(len(replicas)):
            server = replicas[(index + k) % len(replicas)]
            if server.proc is not None:
                return server.port
        return replicas[index].port
    return port


def _own_port(server: ServerProcess) -> Callable[[], int]:
    return lambda: server.port


def _watchers(replicas: Replicas, start: int) -> list[Follower]:
    """On every replica: a watch per kind over all namespaces, and one on a namespace."""
    followers: list[Follower] = []
    for r, server in enumerate(replicas.servers):
        for kind in KINDS:
            followers.append(_follow(_own_port(server), kind, None, start,
                                     f"replica {r} watcher {kind.plural} *"))
        kind, namespace = KINDS[r % len(KINDS)], NAMESPACES[r % len(NAMESPACES)]
        followers.append(_follow(_own_port(server), kind, namespace, start,
                                 f"replica {r} watcher {kind.plural} {namespace}"))
    return followers


def _kill_and_restart(config: ReplicaCrashConfig, replicas: Replicas, rng: random.Random,
                      log: Callable[[str], None]) -> None:
    for n in range(config.kills):
        time.sleep(rng.uniform(*config.seconds_between_kills))
        victim = replicas[rng.randrange(1, len(replicas))]
        victim.kill()
        log(f"  kill {n + 1}/{config.kills}: replica on port {victim.port}")
        time.sleep(rng.uniform(0.0, 0.5))
        victim.start()
    time.sleep(rng.uniform(*config.seconds_between_kills))


def _replays(replicas: Replicas, start: int) -> list[Follower]:
    """A fresh watch per kind from ``start`` on every replica, each to its sentinel."""
    replays: list[Follower] = []
    for r, server in enumerate(replicas.servers):
        replays.extend(_follow(_own_port(server), kind, None, start,
                               f"replica {r} replay {kind.plural}") for kind in KINDS)
    for follower in replays:
        follower[3].wait(60)
    return replays


def run_replica_crash(config: ReplicaCrashConfig,
                      log: Callable[[str], None] = lambda _: None) -> CrashReport:
    seed = config.seed if config.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    report = CrashReport(seed=seed)
    replicas = Replicas(config.root, config.endpoints, config.replicas, extra=config.extra)
    replicas.start()
    followers: list[Follower] = []
    stop = threading.Event()
    writers = [Writer(i, _port_of(replicas, i % len(replicas)),
                      [(KINDS[(i + k) % len(KINDS)], NAMESPACES[k % len(NAMESPACES)],
                        f"w{i}-{k}") for k in range(config.keys_per_writer)],
                      stop, rng.randrange(1 << 30)) for i in range(config.writers)]
    try:
        first = replicas[0].port
        for namespace in NAMESPACES:
            reply = call(first, "POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
            assert reply.status == 201, reply
        start = list_revision(first, "/api/v1/configmaps")
        followers = _watchers(replicas, start)
        for writer in writers:
            writer.start()
        _kill_and_restart(config, replicas, rng, log)
        stop.set()
        for writer in writers:
            writer.join(60)
        end = _write_sentinels(first)
        for follower in followers:
            follower[3].wait(60)
        followers.extend(_replays(replicas, start))
    finally:
        stop.set()
        for writer in writers:
            if writer.ident is not None:
                writer.join(60)
        for follower in followers:
            follower[3].stop()
        report.kills = sum(s.kills for s in replicas.servers)
        replicas.stop()
    events, _ = etcd_history(config.endpoints, [kind.plural for kind in KINDS])
    rows = [Row(e.revision, e.type, e.plural, e.key, e.marker) for e in events]
    check_writes([op for writer in writers for op in writer.ops], rows, report)
    _check_streams(followers, rows, start, end, report)
    return report


def _check_streams(followers: list[Follower], rows: list[Row], start: int, end: int,
                   report: CrashReport) -> None:
    for name, kind, scope, reader in followers:
        report.problems.extend(f"{name}: {error}" for error in reader.errors)
        if not reader.done.is_set() or not reader.events:
            report.problems.append(f"{name}: did not reach its sentinel")
        check_history(name, reader.events,
                      _filter_rows(rows, kind.plural, scope, start, end), report)
    # the same filter on every replica: the same events (implied by the above; said directly)
    by_filter: dict[tuple[str, str | None], list[tuple[str, list[Seen]]]] = {}
    for name, kind, scope, reader in followers:
        by_filter.setdefault((kind.plural, scope), []).append((name, reader.events))
    for streams in by_filter.values():
        for name, events in streams[1:]:
            if events != streams[0][1]:
                report.problems.append(f"{name} differs from {streams[0][0]}")
