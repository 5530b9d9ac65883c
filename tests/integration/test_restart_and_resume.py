"""Durability on the wire: a restart keeps objects and revisions; a watch resumes from any
revision the change log still holds, even far outside the in-memory window (watch-protocol.md
§2.2, §7.1: kubewire backs its per-kind ring with the durable log).

The watch scenarios run on Pods and on a custom resource of a CRD installed through the API at
the start of the test (``custom_kinds.py``): the CRD, its objects and their history must all
come back after a restart.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.integration.custom_kinds import GIZMO, serve
from tests.integration.harness import ServerThread
from tests.integration.kinds import (
    NS,
    PERSISTENT_VOLUME_CLAIM,
    POD,
    SERVICE,
    STORAGE_CLASS,
    Kind,
    kind_id,
)
from tests.integration.wire import (
    Session,
    call,
    create,
    get,
    list_rv,
    name_of,
    ok,
    rv_of,
    watch,
)
from tests.storage_choice import on_etcd

PODS = POD.collection()
Labels = dict[str, str]
KINDS = pytest.mark.parametrize("kind", [POD, GIZMO, PERSISTENT_VOLUME_CLAIM, STORAGE_CLASS],
                                ids=kind_id, indirect=True)


def test_objects_and_revisions_survive_a_restart(server: ServerThread) -> None:
    pods = [create(server, PODS, POD.obj(f"p{i}", labels={"i": str(i)})) for i in range(3)]
    service = create(server, SERVICE.collection(), SERVICE.obj("svc"))
    ok(call(server, "PATCH", POD.item("p1"), {"metadata": {"labels": {"i": "one"}}}), 200)
    ok(call(server, "DELETE", SERVICE.item("svc")), 200)
    before = get(server, PODS)
    before_rv = int(before["metadata"]["resourceVersion"])

    server.restart()

    after = get(server, PODS)
    if on_etcd():  # etcd's revision is global: the restarted server's controller Lease moves it
        moved = int(after["metadata"]["resourceVersion"])
        assert moved >= before_rv
        after["metadata"]["resourceVersion"] = before["metadata"]["resourceVersion"]
        before_rv = moved
    assert after == before  # same items, same revisions, same list RV
    assert int(list_rv(server, SERVICE.collection())) == before_rv
    assert get(server, POD.item("p0"))["metadata"]["uid"] == pods[0]["metadata"]["uid"]
    assert call(server, "GET", SERVICE.item("svc")).status == 404
    assert service["metadata"]["uid"]
    fresh = create(server, PODS, POD.obj("p3"))
    assert rv_of(fresh) == before_rv + 1  # the revision counter carries on


@KINDS
def test_watch_from_before_a_restart_gets_every_later_change_once(server: ServerThread,
                                                                  kind: Kind) -> None:
    objects = kind.collection()
    start = int(list_rv(server, objects))
    written: list[tuple[str, str, int]] = []

    def write(name: str) -> None:
        reply = call(server, "PATCH", kind.item(name), {"metadata": {"labels": {"n": name}}})
        if reply.status == 404:
            written.append(("ADDED", name, rv_of(create(server, objects, kind.obj(name)))))
        else:
            written.append(("MODIFIED", name, rv_of(ok(reply, 200))))

    with watch(server, objects, resourceVersion=start) as open_during_stop:
        for name in ("a", "b", "a"):
            write(name)
        seen = open_during_stop.events(3)
        server.restart()
        assert open_during_stop.ended(timeout=10)  # shutdown ends open watches

    for name in ("c", "b", "d"):
        write(name)
    with watch(server, objects, resourceVersion=start) as resumed, \
            watch(server, objects, resourceVersion=rv_of(seen[-1])) as continued:
        everything = resumed.events(len(written))
        rest = continued.events(len(written) - 3)
        sentinel = create(server, objects, kind.obj("sentinel"))
        assert rv_of(resumed.next_event()) == rv_of(sentinel)
        assert rv_of(continued.next_event()) == rv_of(sentinel)
    triples = [(e["type"], name_of(e), rv_of(e)) for e in everything]
    assert triples == written
    assert [(e["type"], name_of(e), rv_of(e)) for e in seen] == written[:3]
    assert [(e["type"], name_of(e), rv_of(e)) for e in rest] == written[3:]


# --- durable resume far outside the in-memory ring ----------------------------------------------

RING = 8
CHANGES = 100


@dataclass(frozen=True)
class Change:
    revision: int | None  # None: a pod's deletion mark, whose revision no response reports
    type: str  # ADDED, MODIFIED, DELETED (a pod delete is a MODIFIED mark, then DELETED)
    name: str
    old: Labels | None
    new: Labels | None


def _write_history(server: ServerThread, kind: Kind) -> list[Change]:
    """~100 changes: creates, relabels, annotation updates and deletes, all recorded."""
    objects = kind.collection()
    rng = random.Random(7)
    names = [f"p{i}" for i in range(10)]
    live: dict[str, Labels] = {}
    log: list[Change] = []
    with Session(server) as session:
        step = 0
        while len(log) < CHANGES:
            step += 1
            name = rng.choice(names)
            color = rng.choice(["red", "blue"])
            if name not in live:
                labels = {"color": color}
                reply = session.call("POST", objects, kind.obj(name, labels=labels))
                log.append(Change(rv_of(ok(reply, 201)), "ADDED", name, None, labels))
                live[name] = labels
                continue
            old = live[name]
            roll = rng.random()
            if roll < 0.15:
                ok(session.call("DELETE", kind.item(name)), 200)
                if kind is POD:  # graceful: the deletion mark first
                    log.append(Change(None, "MODIFIED", name, old, old))
                # The only writer: the list RV now is the revision of the removal.
                gone = int(ok(session.call("GET", objects), 200)["metadata"]["resourceVersion"])
                log.append(Change(gone, "DELETED", name, old, None))
                del live[name]
            else:
                new = {"color": color} if roll < 0.6 else dict(old)
                body = {"metadata": {"labels": new, "annotations": {"step": str(step)}}}
                reply = session.call("PATCH", kind.item(name), body)
                log.append(Change(rv_of(ok(reply, 200)), "MODIFIED", name, old, new))
                live[name] = new
    return log


Expected = list[tuple[str, str, int | None]]


def _expected(log: list[Change], start: int, matches: Callable[[Labels], bool]) -> Expected:
    """What a watch from ``log[start]``'s revision with the selector ``matches`` delivers."""
    out: Expected = []
    for change in log[start + 1:]:
        was = change.old is not None and matches(change.old)
        now = change.new is not None and matches(change.new)
        if was and now:
            out.append(("MODIFIED", change.name, change.revision))
        elif was:
            out.append(("DELETED", change.name, change.revision))
        elif now:
            out.append(("ADDED", change.name, change.revision))
    return out


def assert_delivered(events: list[dict[str, Any]], expected: Expected) -> None:
    """Same types, names and revisions, in order (a mark's revision only has to fit the order)."""
    got = [(e["type"], name_of(e), rv_of(e)) for e in events]
    assert [g[:2] for g in got] == [x[:2] for x in expected]
    for (_, _, rv), (_, _, want) in zip(got, expected, strict=True):
        assert want is None or rv == want, (got, expected)
    revisions = [g[2] for g in got]
    assert revisions == sorted(set(revisions))


@pytest.mark.parametrize("kind", [POD, GIZMO], ids=kind_id)
def test_resume_from_ten_windows_back_misses_nothing(
        make_server: Callable[..., ServerThread], kind: Kind) -> None:
    server = make_server(ring_capacity=RING)
    serve(server, kind)
    objects = kind.collection()
    log = _write_history(server, kind)
    known = [c.revision for c in log if c.revision is not None]
    assert known == sorted(set(known))
    start = len(log) - (10 * RING + 5)  # 85 changes back: ten windows and more
    while log[start].revision is None:
        start -= 1
    start_rv = log[start].revision

    expected_all = _expected(log, start, lambda labels: True)
    expected_red = _expected(log, start, lambda labels: labels.get("color") == "red")
    assert len(expected_all) >= 10 * RING
    assert {t for t, _, _ in expected_red} == {"ADDED", "MODIFIED", "DELETED"}

    with watch(server, objects, resourceVersion=start_rv) as everything, \
            watch(server, objects, resourceVersion=start_rv, labelSelector="color=red") as red:
        got_all = everything.events(len(expected_all))
        got_red = red.events(len(expected_red))
        sentinel = create(server, objects, kind.obj("sentinel", labels={"color": "red"}))
        assert rv_of(everything.next_event()) == rv_of(sentinel)  # nothing twice, nothing extra
        assert rv_of(red.next_event()) == rv_of(sentinel)

    assert_delivered(got_all, expected_all)
    assert_delivered(got_red, expected_red)
    for event in got_red:  # DELETED on leaving the selector carries the old (red) content
        assert event["object"]["metadata"]["labels"] == {"color": "red"}
        assert event["object"]["metadata"]["namespace"] == NS


@pytest.mark.parametrize("kind", [POD, GIZMO], ids=kind_id)
def test_resume_after_restart_from_outside_the_ring(
        make_server: Callable[..., ServerThread], kind: Kind) -> None:
    server = make_server(ring_capacity=RING)
    serve(server, kind)
    objects = kind.collection()
    log = _write_history(server, kind)
    start = len(log) // 4
    while log[start].revision is None:
        start -= 1
    server.restart()  # the ring starts empty: everything comes from the durable log
    expected = _expected(log, start, lambda labels: True)
    with watch(server, objects, resourceVersion=log[start].revision) as stream:
        got = stream.events(len(expected))
        sentinel = create(server, objects, kind.obj("sentinel"))
        assert rv_of(stream.next_event()) == rv_of(sentinel)
    assert_delivered(got, expected)
