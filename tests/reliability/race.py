"""Concurrency: N clients update one object with its resourceVersion as the precondition.

The run (``run_race``): ``clients`` threads, each on its own connection, repeat: GET the
ConfigMap, then write it back with a new marker and ``metadata.resourceVersion`` set to what
they read (half of them by PUT, half by a merge patch carrying the resourceVersion). Checks:

- exactly one write wins per revision: the winners' base revisions are all distinct, every
  revision a client tried to update from that later changed has exactly one winner, and the
  winners chain (each one's base is the previous winner's result);
- every loser gets 409 with kube's Status (``reason: Conflict``, ``details.name``/``kind``, the
  message "Operation cannot be fulfilled on configmaps "NAME": the object has been modified;
  please apply your changes to the latest version and try again");
- the final object carries the last winner's marker and revision, and a watch from the start
  shows exactly the winners' sequence of markers.

Then ``create_rounds`` rounds in which every client creates the same new name at once: exactly
one 201 per round, the rest 409 ``AlreadyExists`` with kube's Status, and the stored object is the
winner's.
"""

from __future__ import annotations

import http.client
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.reliability.proc import (
    HOST,
    MARKER,
    REQUEST_TIMEOUT_S,
    ServerProcess,
    WatchReader,
    call,
    request,
)

NAME = "contended"
PATH = f"/api/v1/namespaces/default/configmaps/{NAME}"
CONFLICT = ('Operation cannot be fulfilled on configmaps "contended": the object has been '
            "modified; please apply your changes to the latest version and try again")


@dataclass
class RaceConfig:
    data_dir: Path
    clients: int = 8
    attempts: int = 40  # per client
    create_rounds: int = 10


@dataclass(frozen=True)
class Attempt:
    client: int
    base: int
    marker: str
    status: int
    result: int  # the new revision of a winner, else 0


@dataclass
class RaceReport:
    attempts: int = 0
    winners: int = 0
    conflicts: int = 0
    other: int = 0
    contended_revisions: int = 0
    create_rounds: int = 0
    create_winners: int = 0
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"concurrency: attempts={self.attempts} winners={self.winners} "
                f"409s={self.conflicts} other={self.other} revisions contended="
                f"{self.contended_revisions} create rounds={self.create_rounds} "
                f"create winners={self.create_winners} problems={len(self.problems)}")


def _client(index: int, port: int, attempts: int, out: list[Attempt],
            problems: list[str]) -> None:
    conn = http.client.HTTPConnection(HOST, port, timeout=REQUEST_TIMEOUT_S)
    try:
        for n in range(attempts):
            current = request(conn, "GET", PATH)
            obj = current.body
            base = int(obj["metadata"]["resourceVersion"])
            marker = f"c{index}-{n}"
            if index % 2:
                obj["metadata"].setdefault("annotations", {})[MARKER] = marker
                reply = request(conn, "PUT", PATH, obj)
            else:
                reply = request(conn, "PATCH", PATH, {"metadata": {
                    "resourceVersion": str(base), "annotations": {MARKER: marker}}},
                    "application/merge-patch+json")
            result = 0
            if reply.status == 200:
                result = int(reply.body["metadata"]["resourceVersion"])
            elif reply.status == 409:
                body = reply.body
                details = body.get("details") or {}
                if (body.get("kind"), body.get("status"), body.get("reason"), body.get("code"),
                        body.get("message"), details.get("name"), details.get("kind")) != (
                        "Status", "Failure", "Conflict", 409, CONFLICT, NAME, "configmaps"):
                    problems.append(f"409 body is not kube's Status: {body}")
            out.append(Attempt(index, base, marker, reply.status, result))
    finally:
        conn.close()


def _check(attempts: list[Attempt], report: RaceReport) -> list[Attempt]:
    winners = sorted((a for a in attempts if a.status == 200), key=lambda a: a.result)
    report.attempts = len(attempts)
    report.winners = len(winners)
    report.conflicts = sum(1 for a in attempts if a.status == 409)
    report.other = report.attempts - report.winners - report.conflicts
    if report.other:
        report.problems.append(f"{report.other} answers were neither 200 nor 409: "
                               f"{sorted({a.status for a in attempts} - {200, 409})}")
    by_base: dict[int, list[Attempt]] = {}
    for attempt in attempts:
        by_base.setdefault(attempt.base, []).append(attempt)
    final = winners[-1].result if winners else 0
    for base, tried in sorted(by_base.items()):
        won = [a for a in tried if a.status == 200]
        if len(tried) > 1:
            report.contended_revisions += 1
        if len(won) > 1 or (not won and base != final):
            report.problems.append(f"revision {base}: {len(won)} winners of {len(tried)}")
    for previous, winner in itertools.pairwise(winners):
        if winner.base != previous.result:
            report.problems.append(f"winner {winner.marker} based on {winner.base}, "
                                   f"previous winner made {previous.result}")
    return winners


def _creator(index: int, port: int, rounds: int, barrier: threading.Barrier,
             out: list[tuple[int, int, str]], problems: list[str]) -> None:
    conn = http.client.HTTPConnection(HOST, port, timeout=REQUEST_TIMEOUT_S)
    try:
        for n in range(rounds):
            name, marker = f"born-{n}", f"c{index}-born-{n}"
            barrier.wait(60)
            reply = request(conn, "POST", "/api/v1/namespaces/default/configmaps", {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "annotations": {MARKER: marker}}})
            if reply.status == 409:
                body = reply.body
                if (body.get("reason"), body.get("message"), body.get("code")) != (
                        "AlreadyExists", f'configmaps "{name}" already exists', 409):
                    problems.append(f"409 body is not kube's AlreadyExists Status: {body}")
            out.append((n, reply.status, marker))
    finally:
        conn.close()


def _create_race(port: int, config: RaceConfig, report: RaceReport) -> None:
    barrier = threading.Barrier(config.clients)
    out: list[tuple[int, int, str]] = []
    problems: list[str] = []
    threads = [threading.Thread(target=_creator, args=(
        i, port, config.create_rounds, barrier, out, problems)) for i in range(config.clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    report.problems.extend(problems[:5])
    report.create_rounds = config.create_rounds
    for n in range(config.create_rounds):
        answers = [(status, marker) for r, status, marker in out if r == n]
        won = [marker for status, marker in answers if status == 201]
        report.create_winners += len(won)
        if len(won) != 1 or any(s not in (201, 409) for s, _ in answers):
            report.problems.append(f"create round {n}: {sorted(s for s, _ in answers)}")
            continue
        stored = call(port, "GET", f"/api/v1/namespaces/default/configmaps/born-{n}").body
        if (stored["metadata"].get("annotations") or {}).get(MARKER) != won[0]:
            report.problems.append(f"create round {n}: stored {stored['metadata']}, "
                                   f"winner {won[0]}")


def run_race(config: RaceConfig, log: Callable[[str], None] = lambda _: None) -> RaceReport:
    report = RaceReport()
    with ServerProcess(config.data_dir) as server:
        port = server.port
        created = call(port, "POST", "/api/v1/namespaces/default/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": NAME}})
        assert created.status == 201, created
        start = int(created.body["metadata"]["resourceVersion"])
        attempts: list[Attempt] = []
        problems: list[str] = []
        threads = [threading.Thread(target=_client,
                                    args=(i, port, config.attempts, attempts, problems))
                   for i in range(config.clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        report.problems.extend(problems[:5])
        winners = _check(attempts, report)
        if winners and winners[0].base != start:
            report.problems.append(f"first winner based on {winners[0].base}, not {start}")
        log(f"  {len(winners)} winners")
        final = call(port, "GET", PATH).body
        if winners and ((final["metadata"].get("annotations") or {}).get(MARKER),
                        int(final["metadata"]["resourceVersion"])) != (
                            winners[-1].marker, winners[-1].result):
            report.problems.append(f"final object {final['metadata']} is not the last winner "
                                   f"{winners[-1]}")
        last = winners[-1].marker if winners else ""
        reader = WatchReader(lambda: port, "/api/v1/namespaces/default/configmaps", start,
                             until=lambda evs: evs[-1].marker == last)
        try:
            reader.wait(30)
        finally:
            reader.stop()
        history = [(e.type, e.marker) for e in reader.events]
        if history != [("MODIFIED", w.marker) for w in winners]:
            report.problems.append(f"watch history ({len(history)} events) differs from the "
                                   f"{len(winners)} winners")
        _create_race(port, config, report)
    return report


def main_args(long: bool, data_dir: Path) -> dict[str, Any]:
    if long:
        return {"data_dir": data_dir, "clients": 32, "attempts": 200, "create_rounds": 100}
    return {"data_dir": data_dir, "clients": 8, "attempts": 40, "create_rounds": 10}
