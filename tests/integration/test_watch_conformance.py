"""The five ``[Conformance]`` scenarios of kube's test/e2e/apimachinery/watch.go (watch-protocol.md
§13), on Pods, on Services, on claims, volumes, LimitRanges and StorageClasses and on a custom
resource (a CRD installed through the API at the start of each test,
``tests/integration/custom_kinds.py``) instead of ConfigMaps.

Absence is proven without waiting: after the steps under test, a *sentinel* write that the
watch is known to match is made; events are delivered in revision order (§2.4), so everything a
watch received before the sentinel's event is everything it will ever receive for those steps.

A pod is graceful even when unscheduled: its DELETE writes the deletion mark (MODIFIED, grace 0)
and then removes it (DELETED) — kube's store.go ``updateForGracefulDeletionAndFinalizers``.
"""

from __future__ import annotations

import functools
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.integration.custom_kinds import GIZMO
from tests.integration.harness import ServerThread
from tests.integration.kinds import (
    LIMIT_RANGE,
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    POD,
    SERVICE,
    STATEFUL_SET,
    STORAGE_CLASS,
    Kind,
    kind_id,
)
from tests.integration.wire import (
    Event,
    Reply,
    Session,
    WatchStream,
    call,
    create,
    list_rv,
    ok,
    rv_of,
    types_and_names,
    watch,
)
from tests.storage_choice import range_writes

LABEL = "watch-this-object"
# plus the quota, limits and storage kinds that no controller writes to (a ResourceQuota's
# status is the quota controller's, as in kube: its events would be the controller's too)
KINDS = pytest.mark.parametrize("kind", [POD, SERVICE, STATEFUL_SET, GIZMO,
                                         PERSISTENT_VOLUME_CLAIM, PERSISTENT_VOLUME, LIMIT_RANGE,
                                         STORAGE_CLASS],
                                ids=kind_id, indirect=True)


def deletion(kind: Kind, name: str) -> list[tuple[str, str]]:
    """The events one DELETE produces for a watcher of ``name``."""
    if kind in (POD, PERSISTENT_VOLUME_CLAIM, PERSISTENT_VOLUME):
        # claims and volumes: the deletion mark, then the protection controller's release
        return [("MODIFIED", name), ("DELETED", name)]
    return [("DELETED", name)]


def make(server: ServerThread, kind: Kind, name: str, value: str) -> dict[str, Any]:
    return create(server, kind.collection(), kind.obj(name, labels={LABEL: value}))


def touch(server: ServerThread, kind: Kind, name: str, step: int) -> dict[str, Any]:
    """An update that keeps the labels (an annotation changes)."""
    body = {"metadata": {"annotations": {"mutation": str(step)}}}
    return ok(call(server, "PATCH", kind.item(name), body), 200)


def relabel(server: ServerThread, kind: Kind, name: str, value: str) -> dict[str, Any]:
    return ok(call(server, "PATCH", kind.item(name), {"metadata": {"labels": {LABEL: value}}}),
              200)


def remove(server: ServerThread, kind: Kind, name: str) -> None:
    ok(call(server, "DELETE", kind.item(name)), 200)
    _wait_gone(functools.partial(call, server, "GET"), kind, name)


def until_sentinel(stream: WatchStream, sentinel: str) -> list[tuple[str, str]]:
    events = stream.events_until(lambda e: e["object"]["metadata"].get("name") == sentinel)
    return types_and_names(events)


@KINDS
def test_observe_add_update_delete_with_three_label_watches(server: ServerThread,
                                                            kind: Kind) -> None:
    a = f"{LABEL}=multiple-watchers-a"
    b = f"{LABEL}=multiple-watchers-b"
    a_or_b = f"{LABEL} in (multiple-watchers-a,multiple-watchers-b)"
    with (watch(server, kind.collection(), labelSelector=a) as watch_a,
          watch(server, kind.collection(), labelSelector=b) as watch_b,
          watch(server, kind.collection(), labelSelector=a_or_b) as watch_ab):
        make(server, kind, "obj-a", "multiple-watchers-a")
        touch(server, kind, "obj-a", 1)
        touch(server, kind, "obj-a", 2)
        remove(server, kind, "obj-a")
        make(server, kind, "obj-b", "multiple-watchers-b")
        remove(server, kind, "obj-b")
        make(server, kind, "sentinel-a", "multiple-watchers-a")
        make(server, kind, "sentinel-b", "multiple-watchers-b")

        a_events = [("ADDED", "obj-a"), ("MODIFIED", "obj-a"), ("MODIFIED", "obj-a"),
                    *deletion(kind, "obj-a")]
        b_events = [("ADDED", "obj-b"), *deletion(kind, "obj-b")]
        assert until_sentinel(watch_a, "sentinel-a") == [*a_events, ("ADDED", "sentinel-a")]
        assert until_sentinel(watch_b, "sentinel-b") == [*b_events, ("ADDED", "sentinel-b")]
        assert until_sentinel(watch_ab, "sentinel-b") == [
            *a_events, *b_events, ("ADDED", "sentinel-a"), ("ADDED", "sentinel-b")]
        assert {e["object"]["kind"] for e in watch_ab.received} == {kind.kind}


@KINDS
def test_start_watching_from_a_specific_resource_version(server: ServerThread,
                                                         kind: Kind) -> None:
    make(server, kind, "obj", "from-rv")
    first_update = touch(server, kind, "obj", 1)
    second_update = touch(server, kind, "obj", 2)
    remove(server, kind, "obj")
    make(server, kind, "sentinel", "from-rv")

    with watch(server, kind.collection(), resourceVersion=rv_of(first_update),
               labelSelector=f"{LABEL}=from-rv") as stream:
        events = stream.events_until(lambda e: e["object"]["metadata"]["name"] == "sentinel")
    assert types_and_names(events) == [("MODIFIED", "obj"), *deletion(kind, "obj"),
                                       ("ADDED", "sentinel")]
    assert events[0]["object"] == second_update  # the same encoding as the PATCH response
    assert events[0]["object"]["metadata"]["annotations"] == {"mutation": "2"}
    deleted = events[len(deletion(kind, "obj"))]
    assert deleted["type"] == "DELETED"
    assert rv_of(deleted) > rv_of(second_update)  # history keeps the deleted object


@KINDS
def test_restart_watching_from_the_last_observed_resource_version(server: ServerThread,
                                                                  kind: Kind) -> None:
    selector = f"{LABEL}=restart"
    with watch(server, kind.collection(), labelSelector=selector) as first:
        make(server, kind, "obj", "restart")
        touch(server, kind, "obj", 1)
        seen = first.events(2)
    assert types_and_names(seen) == [("ADDED", "obj"), ("MODIFIED", "obj")]
    last_rv = rv_of(seen[-1])

    missed = touch(server, kind, "obj", 2)  # no watch open
    with watch(server, kind.collection(), labelSelector=selector,
               resourceVersion=last_rv) as second:
        remove(server, kind, "obj")
        make(server, kind, "sentinel", "restart")
        events = second.events_until(lambda e: e["object"]["metadata"]["name"] == "sentinel")
    assert types_and_names(events) == [("MODIFIED", "obj"), *deletion(kind, "obj"),
                                       ("ADDED", "sentinel")]
    assert rv_of(events[0]) == rv_of(missed)
    assert events[0]["object"]["metadata"]["annotations"] == {"mutation": "2"}


@KINDS
def test_object_leaving_and_reentering_the_selector(server: ServerThread, kind: Kind) -> None:
    with watch(server, kind.collection(), labelSelector=f"{LABEL}=yes") as stream:
        make(server, kind, "obj", "yes")
        touch(server, kind, "obj", 1)
        out = relabel(server, kind, "obj", "no")
        touch(server, kind, "obj", 2)  # invisible: not matching
        back = relabel(server, kind, "obj", "yes")
        touch(server, kind, "obj", 3)
        remove(server, kind, "obj")
        make(server, kind, "sentinel", "yes")
        events = stream.events_until(lambda e: e["object"]["metadata"]["name"] == "sentinel")

    assert types_and_names(events) == [
        ("ADDED", "obj"), ("MODIFIED", "obj"), ("DELETED", "obj"), ("ADDED", "obj"),
        ("MODIFIED", "obj"), *deletion(kind, "obj"), ("ADDED", "sentinel")]
    left, returned = events[2], events[3]
    # DELETED on leaving: the previous content (still matching), at the relabel's revision.
    assert left["object"]["metadata"]["labels"] == {LABEL: "yes"}
    assert left["object"]["metadata"]["annotations"] == {"mutation": "1"}
    assert rv_of(left) == rv_of(out)
    # ADDED on re-entering: the new content, which includes the update made while outside.
    assert returned["object"]["metadata"]["labels"] == {LABEL: "yes"}
    assert returned["object"]["metadata"]["annotations"] == {"mutation": "2"}
    assert rv_of(returned) == rv_of(back)


WRITES = 200
WATCHERS = 10


def _background_writer(server: ServerThread, kind: Kind, errors: list[BaseException],
                       revisions: list[int]) -> None:
    rng = random.Random(1815)
    names = [f"busy-{i}" for i in range(5)]
    present: set[str] = set()
    try:
        with Session(server) as session:
            for step in range(WRITES):
                name = rng.choice(names)
                if name not in present:
                    reply = session.call("POST", kind.collection(), kind.obj(name))
                    present.add(name)
                elif rng.random() < 0.7:
                    reply = session.call("PATCH", kind.item(name),
                                         {"metadata": {"annotations": {"step": str(step)}}})
                else:
                    reply = session.call("DELETE", kind.item(name))
                    present.discard(name)
                    _wait_gone(functools.partial(session.call, "GET"), kind, name)
                answer = ok(reply)
                # A kind without ReturnDeletedObject (custom resources) answers a DELETE with a
                # Success Status, which carries no revision.
                if answer["kind"] != "Status":
                    revisions.append(rv_of(answer))
    except BaseException as exc:
        errors.append(exc)


def _wait_gone(get: Callable[[str], Reply], kind: Kind, name: str,
               timeout_s: float = 10.0) -> None:
    """After a DELETE of ``name``, when a controller finishes it (``deletion`` has two steps),
    until the object is removed (``get`` makes a GET), as ``kubectl delete --wait``: a claim's
    or volume's protection controller, or the pod termination controller, releases it;
    creating the name again before that is kube's 409 AlreadyExists, and the release must not
    fall between later writes (a watcher would see it after them)."""
    if len(deletion(kind, name)) == 1:
        return
    path = kind.item(name)
    deadline = time.monotonic() + timeout_s
    while get(path).status != 404:
        assert time.monotonic() < deadline, f"{path} still there {timeout_s}s after DELETE"
        time.sleep(0.005)


def _read_until(stream: WatchStream, final_rv: int) -> list[int]:
    rvs = [rv_of(e) for e in stream.received]
    while not rvs or rvs[-1] < final_rv:
        rvs.append(rv_of(stream.next_event(10)))
    return rvs


@KINDS
def test_concurrent_watches_from_successive_rvs_see_the_same_order(server: ServerThread,
                                                                   kind: Kind) -> None:
    start_rv = int(list_rv(server, kind.collection()))
    errors: list[BaseException] = []
    written: list[int] = []
    writer = threading.Thread(target=_background_writer, args=(server, kind, errors, written))
    streams: list[WatchStream] = []
    writer.start()
    try:
        streams.append(watch(server, kind.collection(), resourceVersion=start_rv))
        # Each next watcher starts at the revision of the next event the first one received.
        for _ in range(WATCHERS - 1):
            event: Event = streams[0].next_event(10)
            streams.append(watch(server, kind.collection(), resourceVersion=rv_of(event)))
        writer.join(60)
        assert not writer.is_alive()
        assert not errors, errors
        final_rv = int(list_rv(server, kind.collection()))
        sequences = [_read_until(s, final_rv) for s in streams]
    finally:
        writer.join(60)
        for s in streams:
            s.close()

    reference = sequences[0]
    assert reference == sorted(set(reference)), "not strictly increasing"
    assert reference[-1] == final_rv
    assert set(written) <= set(reference), "a write was never delivered"
    # Only this writer wrote: every revision after start_rv is one of its changes.
    if not range_writes(kind.plural):  # on etcd a Service write also writes kube's ranges
        assert reference == list(range(start_rv + 1, final_rv + 1))
    for i, sequence in enumerate(sequences):
        assert sequence == reference[i:], f"watcher {i} diverged"
