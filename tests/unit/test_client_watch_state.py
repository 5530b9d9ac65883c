"""The pure watch machinery: line splitting, event parsing, resume decisions."""

from __future__ import annotations

import random

import pytest

from kubewire.client.errors import Expired, Timeout
from kubewire.client.events import Bookmark, BookmarkMeta, LineSplitter, error_from, parse_line
from kubewire.client.watch_state import WatchOptions, WatchState


def test_lines_are_split_across_chunks() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b'{"a"') == []
    assert splitter.feed(b':1}\n{"b":2}\n{"c"') == [b'{"a":1}', b'{"b":2}']
    assert splitter.pending == b'{"c"'
    assert splitter.feed(b":3}\n\n") == [b'{"c":3}']
    assert splitter.pending == b""


def test_an_endless_line_is_refused() -> None:
    splitter = LineSplitter(max_line_bytes=8)
    with pytest.raises(ValueError, match="longer than 8"):
        splitter.feed(b"x" * 9)


def test_error_events_become_typed_errors() -> None:
    raw = parse_line(b'{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1",'
                     b'"status":"Failure","message":"too old resource version: 1 (5)",'
                     b'"reason":"Expired","code":410}}')
    assert raw.type == "ERROR"
    err = error_from(raw.object)
    assert isinstance(err, Expired) and err.code == 410
    timeout = error_from(parse_line(
        b'{"type":"ERROR","object":{"kind":"Status","code":504,"reason":"Timeout",'
        b'"details":{"retryAfterSeconds":1}}}').object)
    assert isinstance(timeout, Timeout) and timeout.retry_after_seconds == 1


def bookmark(rv: str, end: bool = False) -> Bookmark:
    annotations = {"k8s.io/initial-events-end": "true"} if end else None
    return Bookmark(metadata=BookmarkMeta(resource_version=rv, annotations=annotations))


def test_resumes_after_the_last_delivered_revision() -> None:
    state = WatchState(WatchOptions(resource_version="10", label_selector={"a": "b"}),
                       random.Random(1))
    first = state.params()
    assert first["resourceVersion"] == "10" and first["labelSelector"] == "a=b"
    assert first["allowWatchBookmarks"] == "true" and first["watch"] == "true"
    assert 300 <= int(first["timeoutSeconds"]) < 600
    assert state.on_object(("ns", "p", "11"))
    assert state.params()["resourceVersion"] == "11"
    assert not state.on_bookmark(bookmark("15"))  # not asked for: hidden, still a resume point
    assert state.params()["resourceVersion"] == "15"


def test_initial_phase_is_not_resumable_until_a_bookmark() -> None:
    state = WatchState(WatchOptions(send_initial_events=True, allow_bookmarks=True,
                                    timeout_seconds=30))
    params = state.params()
    assert params["sendInitialEvents"] == "true"
    assert params["resourceVersionMatch"] == "NotOlderThan"
    assert params["timeoutSeconds"] == "30" and "resourceVersion" not in params
    assert state.on_object(("ns", "b", "9"))
    assert state.on_object(("ns", "a", "4"))
    assert state.params() == params  # broken now: start over...
    assert not state.on_object(("ns", "b", "9"))  # ...skipping what was delivered
    assert state.on_object(("ns", "c", "7"))
    assert state.on_bookmark(bookmark("12", end=True))
    assert bookmark("12", end=True).is_initial_events_end
    resumed = state.params()
    assert resumed["resourceVersion"] == "12" and "sendInitialEvents" not in resumed
    assert state.on_object(("ns", "b", "13"))


def test_no_initial_events_means_from_now() -> None:
    state = WatchState(WatchOptions(send_initial_events=False))
    assert state.needs_start_revision
    state.start_from("42")
    assert not state.needs_start_revision
    assert state.params()["resourceVersion"] == "42"


def test_a_named_revision_with_initial_events_keeps_the_initial_phase() -> None:
    state = WatchState(WatchOptions(resource_version="7", send_initial_events=True))
    assert state.initial_phase
    params = state.params()
    assert (params["resourceVersion"], params["sendInitialEvents"]) == ("7", "true")


def test_caller_timeout_shrinks_across_reconnects() -> None:
    state = WatchState(WatchOptions(resource_version="3", timeout_seconds=60))
    assert state.params()["timeoutSeconds"] == "60"
    assert state.params(remaining_s=12.2)["timeoutSeconds"] == "13"
    assert state.params(remaining_s=0.1)["timeoutSeconds"] == "1"


def test_objects_missing_from_a_restarted_snapshot_vanished() -> None:
    state = WatchState(WatchOptions(send_initial_events=True), random.Random(1))
    state.on_connect()
    for name in ("a", "b", "c", "d"):
        assert state.on_object(("ns", name, "5"))
    state.on_connect()  # broken before the bookmark: a new snapshot
    assert not state.on_object(("ns", "a", "5"))  # already delivered
    assert state.on_object(("ns", "c", "9"))  # changed meanwhile
    assert state.on_object(("ns", "d", "9"))
    assert state.on_object(("ns", "d", "10"), deleted=True)  # legacy live events: deleted
    bookmark = Bookmark(metadata=BookmarkMeta(resource_version="10"))
    assert state.ends_initial_phase(bookmark)
    assert state.vanished() == [("ns", "b")]  # d's deletion was delivered
    state.on_bookmark(bookmark)
    assert not state.ends_initial_phase(bookmark)
    assert state.vanished() == []
