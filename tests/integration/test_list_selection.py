"""Lists and watches narrowed by selectors, and paging at their edges (watch-protocol.md §9, §10).

Issue 15 item 3 reads ``metadata.name`` selectors by key, ``metadata.namespace`` by key range
and label equalities through an index, and cuts pages after ``limit + 1`` matches; these tests
pin what clients see either way: key order (``a-b/x`` sorts before ``a/x``), continue tokens,
``remainingItemCount`` only without selectors, exact and snapshot reads from the durable log, an
index that follows later changes, and watches that get only the named object's events.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.harness import ServerThread
from tests.integration.kinds import CONFIG_MAP, NAMESPACE, NODE
from tests.integration.wire import call, create, get, ok, types_and_names, watch

CM = CONFIG_MAP


def names(listed: Any) -> list[tuple[str, str]]:
    return [(i["metadata"].get("namespace", ""), i["metadata"]["name"]) for i in listed["items"]]


def walk(server: ServerThread, path: str, token: str | None = None,
         **params: Any) -> tuple[list[Any], list[Any]]:
    """Every page of a paged list (from ``token``, if given): (the pages' metadata, the items'
    namespace/name)."""
    metas: list[Any] = []
    items: list[Any] = []
    while True:
        page = get(server, path, **params, **({"continue": token} if token else {}))
        metas.append(page["metadata"])
        items += names(page)
        token = page["metadata"].get("continue")
        if not token:
            return metas, items
        assert len(metas) < 100


@pytest.fixture
def spread(server: ServerThread) -> ServerThread:
    """ConfigMaps x, x1, y in namespaces a, a-b, b (key order: a-b/ < a/ < b/), labelled."""
    for ns in ("a", "a-b", "b"):
        create(server, NAMESPACE.collection(), NAMESPACE.obj(ns))
        for name, app in (("x", "web"), ("x1", "web"), ("y", "db")):
            create(server, CM.collection(ns), CM.obj(name, labels={"app": app, "ns": ns}))
    return server


# --- metadata.name / metadata.namespace ---------------------------------------------------------

def test_name_selector_in_a_namespace_is_that_object(spread: ServerThread) -> None:
    listed = get(spread, CM.collection("a"), fieldSelector="metadata.name=x", limit=1)
    assert names(listed) == [("a", "x")]
    assert "continue" not in listed["metadata"]
    assert "remainingItemCount" not in listed["metadata"]
    assert names(get(spread, CM.collection("a"), fieldSelector="metadata.name=nope")) == []
    assert names(get(spread, CM.collection("a"),
                     fieldSelector="metadata.name=x,metadata.name=x1")) == []
    assert names(get(spread, CM.collection("a"), fieldSelector="metadata.name=")) == []
    assert names(get(spread, CM.collection("a"), fieldSelector="metadata.name=x",
                     labelSelector="app=db")) == []
    assert names(get(spread, CM.collection("a"), fieldSelector="metadata.name!=x")) == [
        ("a", "x1"), ("a", "y")]


def test_name_selector_across_namespaces_is_in_key_order(spread: ServerThread) -> None:
    listed = get(spread, CM.collection(None), fieldSelector="metadata.name=x")
    assert names(listed) == [("a-b", "x"), ("a", "x"), ("b", "x")]
    metas, items = walk(spread, CM.collection(None), fieldSelector="metadata.name=x", limit=1)
    assert items == [("a-b", "x"), ("a", "x"), ("b", "x")]
    assert len(metas) == 3
    assert all("remainingItemCount" not in m for m in metas)
    assert len({m["resourceVersion"] for m in metas}) == 1


def test_name_selector_of_a_cluster_scoped_kind(server: ServerThread) -> None:
    for name in ("n1", "n10", "n2"):
        create(server, NODE.collection(), NODE.obj(name))
    assert names(get(server, NODE.collection(), fieldSelector="metadata.name=n1")) == [("", "n1")]
    assert names(get(server, NODE.collection(), fieldSelector="metadata.name=n")) == []


def test_namespace_selector_pages_one_namespace(spread: ServerThread) -> None:
    metas, items = walk(spread, CM.collection(None), fieldSelector="metadata.namespace=a",
                        limit=2)
    assert items == [("a", "x"), ("a", "x1"), ("a", "y")]
    assert [m.get("remainingItemCount") for m in metas] == [None, None]
    # Without a selector the count is every key after the page, in that namespace only.
    first = get(spread, CM.collection("a"), limit=1)
    assert first["metadata"]["remainingItemCount"] == 2
    first = get(spread, CM.collection(None), limit=4)
    assert names(first) == [("a-b", "x"), ("a-b", "x1"), ("a-b", "y"), ("a", "x")]
    assert first["metadata"]["remainingItemCount"] == 5


# --- label equalities ---------------------------------------------------------------------------

@pytest.mark.parametrize("selector", ["app=web", "app==web", "app in (web)"])
def test_label_equality_pages_in_key_order(spread: ServerThread, selector: str) -> None:
    metas, items = walk(spread, CM.collection(None), labelSelector=selector, limit=2)
    assert items == [("a-b", "x"), ("a-b", "x1"), ("a", "x"), ("a", "x1"), ("b", "x"),
                     ("b", "x1")]
    assert all("remainingItemCount" not in m for m in metas)
    _, items = walk(spread, CM.collection("a"), labelSelector=selector, limit=1)
    assert items == [("a", "x"), ("a", "x1")]


def test_label_selector_with_more_terms(spread: ServerThread) -> None:
    assert names(get(spread, CM.collection(None), labelSelector="app=web,ns=b")) == [
        ("b", "x"), ("b", "x1")]
    assert names(get(spread, CM.collection(None), labelSelector="app=web,ns!=a,ns!=a-b")) == [
        ("b", "x"), ("b", "x1")]
    assert names(get(spread, CM.collection(None), labelSelector="app=web",
                     fieldSelector="metadata.name=x1,metadata.namespace=a")) == [("a", "x1")]
    assert names(get(spread, CM.collection(None), labelSelector="app=nothing")) == []
    assert names(get(spread, CM.collection(None), labelSelector="app in (db,nothing)")) == [
        ("a-b", "y"), ("a", "y"), ("b", "y")]


def test_label_lists_follow_later_changes(spread: ServerThread) -> None:
    assert len(get(spread, CM.collection(None), labelSelector="app=web")["items"]) == 6
    ok(call(spread, "PATCH", CM.item("x", "a"), {"metadata": {"labels": {"app": "db"}}}))
    ok(call(spread, "PATCH", CM.item("y", "b"), {"metadata": {"labels": {"app": "web"}}}))
    ok(call(spread, "PATCH", CM.item("x1", "b"), {"metadata": {"labels": {"app": None}}}))
    ok(call(spread, "DELETE", CM.item("x1", "a")), 200)
    create(spread, CM.collection("a"), CM.obj("w", labels={"app": "web"}))
    create(spread, CM.collection("a"), CM.obj("a0", labels={"app": "web"}))
    assert names(get(spread, CM.collection(None), labelSelector="app=web")) == [
        ("a-b", "x"), ("a-b", "x1"), ("a", "a0"), ("a", "w"), ("b", "x"), ("b", "y")]
    assert names(get(spread, CM.collection(None), labelSelector="app=db")) == [
        ("a-b", "y"), ("a", "x"), ("a", "y")]


# --- paging edges -------------------------------------------------------------------------------

def test_limit_with_selector_filled_exactly_has_no_continue(spread: ServerThread) -> None:
    listed = get(spread, CM.collection("a"), labelSelector="app=web", limit=2)
    assert names(listed) == [("a", "x"), ("a", "x1")]
    assert "continue" not in listed["metadata"]
    listed = get(spread, CM.collection("a"), limit=3)
    assert "continue" not in listed["metadata"]


def test_continue_across_deletes_and_creates_reads_the_snapshot(spread: ServerThread) -> None:
    first = get(spread, CM.collection(None), labelSelector="app=web", limit=2)
    rv = first["metadata"]["resourceVersion"]
    ok(call(spread, "DELETE", CM.item("x", "a")), 200)
    ok(call(spread, "DELETE", CM.item("x", "b")), 200)
    create(spread, CM.collection("a"), CM.obj("x0", labels={"app": "web"}))
    rest = walk(spread, CM.collection(None), first["metadata"]["continue"],
                labelSelector="app=web", limit=2)
    # every later page reflects the first page's revision
    assert rest[1] == [("a", "x"), ("a", "x1"), ("b", "x"), ("b", "x1")]
    assert {m["resourceVersion"] for m in rest[0]} == {rv}
    unselected = get(spread, CM.collection(None), limit=3)
    token = unselected["metadata"]["continue"]
    ok(call(spread, "DELETE", CM.item("y", "a")), 200)
    second = get(spread, CM.collection(None), limit=3, **{"continue": token})
    assert names(second) == [("a", "x0"), ("a", "x1"), ("a", "y")]
    assert second["metadata"]["remainingItemCount"] == 2
    assert second["metadata"]["resourceVersion"] == unselected["metadata"]["resourceVersion"]
    named = get(spread, CM.collection(None), fieldSelector="metadata.name=x", limit=1,
                **{"continue": token})
    assert names(named) == []  # both x were deleted before the token's snapshot
    assert "continue" not in named["metadata"]
    named = get(spread, CM.collection(None), fieldSelector="metadata.name=x1", limit=1,
                **{"continue": token})
    assert names(named) == [("a", "x1")]
    assert "remainingItemCount" not in named["metadata"]
    assert named["metadata"]["continue"]


@pytest.mark.parametrize("match", ["Exact", "NotOlderThan"])
def test_resource_version_match_with_selectors(spread: ServerThread, match: str) -> None:
    before = get(spread, CM.collection(None))["metadata"]["resourceVersion"]
    ok(call(spread, "DELETE", CM.item("x", "a-b")), 200)
    ok(call(spread, "PATCH", CM.item("y", "a"), {"metadata": {"labels": {"app": "web"}}}))
    params = {"resourceVersion": before, "resourceVersionMatch": match}
    by_name = get(spread, CM.collection(None), fieldSelector="metadata.name=x", **params)
    by_label = get(spread, CM.collection(None), labelSelector="app=web", limit=3, **params)
    if match == "Exact":
        assert by_name["metadata"]["resourceVersion"] == before
        assert names(by_name) == [("a-b", "x"), ("a", "x"), ("b", "x")]
        assert names(by_label) == [("a-b", "x"), ("a-b", "x1"), ("a", "x")]
        assert "continue" in by_label["metadata"]
        assert "remainingItemCount" not in by_label["metadata"]
    else:
        assert names(by_name) == [("a", "x"), ("b", "x")]
        assert names(by_label) == [("a-b", "x1"), ("a", "x"), ("a", "x1")]
    exact = get(spread, CM.collection(None), limit=2, resourceVersion=before,
                resourceVersionMatch="Exact")
    assert names(exact) == [("a-b", "x"), ("a-b", "x1")]
    assert exact["metadata"]["remainingItemCount"] == 7


# --- watches by name ----------------------------------------------------------------------------

def test_name_watches_get_only_that_name(spread: ServerThread) -> None:
    rv = get(spread, CM.collection(None))["metadata"]["resourceVersion"]
    with watch(spread, CM.collection("a"), fieldSelector="metadata.name=x",
               resourceVersion=rv) as in_ns, \
            watch(spread, CM.collection(None), fieldSelector="metadata.name=x",
                  resourceVersion=rv) as everywhere, \
            watch(spread, CM.collection("a"), fieldSelector="metadata.name=x",
                  labelSelector="app=web", resourceVersion=rv) as labelled:
        ok(call(spread, "PATCH", CM.item("x1", "a"), {"data": {"k": "1"}}))
        ok(call(spread, "PATCH", CM.item("x", "b"), {"data": {"k": "2"}}))
        ok(call(spread, "PATCH", CM.item("x", "a"), {"metadata": {"labels": {"app": "db"}}}))
        ok(call(spread, "DELETE", CM.item("x", "a")), 200)
        assert [(e["type"], e["object"]["metadata"]["namespace"]) for e in in_ns.events(2)] == [
            ("MODIFIED", "a"), ("DELETED", "a")]
        assert [(e["type"], e["object"]["metadata"]["namespace"])
                for e in everywhere.events(3)] == [
            ("MODIFIED", "b"), ("MODIFIED", "a"), ("DELETED", "a")]
        assert types_and_names(labelled.events(1)) == [("DELETED", "x")]
        in_ns.expect_no_event(0.3)
        labelled.expect_no_event(0.1)


def test_name_watch_initial_events_are_that_object(spread: ServerThread) -> None:
    with watch(spread, CM.collection("a"), fieldSelector="metadata.name=x",
               sendInitialEvents="true", allowWatchBookmarks="true",
               resourceVersionMatch="NotOlderThan") as stream:
        events = stream.events(2)
        assert [(e["type"], e["object"]["metadata"].get("name")) for e in events] == [
            ("ADDED", "x"), ("BOOKMARK", None)]
    with watch(spread, NODE.collection(), fieldSelector="metadata.name=n1",
               sendInitialEvents="true", allowWatchBookmarks="true",
               resourceVersionMatch="NotOlderThan") as stream:
        create(spread, NODE.collection(), NODE.obj("n10"))
        create(spread, NODE.collection(), NODE.obj("n1"))
        events = stream.events(2)
        assert [e["type"] for e in events] == ["BOOKMARK", "ADDED"]
        assert events[1]["object"]["metadata"]["name"] == "n1"


# --- pages at an older revision -----------------------------------------------------------------

def _store_lists(server: ServerThread) -> float:
    """How many ConfigMap lists the server asked its store for (its etcd_request metric)."""
    text = call(server, "GET", "/metrics").body.decode()
    sample = 'etcd_request_duration_seconds_count{operation="list",type="configmaps"} '
    return sum(float(line[len(sample):]) for line in text.splitlines() if line.startswith(sample))


def _history(server: ServerThread) -> list[tuple[str, list[Any]]]:
    """Creates, label changes, deletes and re-creates of ConfigMaps in three namespaces; after
    each, the revision and every ConfigMap of a consistent unpaged list at it."""
    snapshots: list[tuple[str, list[Any]]] = []

    def snapshot() -> None:
        listed = get(server, CM.collection(None))
        snapshots.append((listed["metadata"]["resourceVersion"], listed["items"]))

    for ns in ("a", "a-b", "b"):
        create(server, NAMESPACE.collection(), NAMESPACE.obj(ns))
    for i in range(6):
        for ns in ("a", "a-b", "b"):
            create(server, CM.collection(ns), CM.obj(f"c{i}", labels={"app": "web"}))
        snapshot()
    for ns, name in (("a", "c1"), ("b", "c4"), ("a-b", "c0")):
        ok(call(server, "DELETE", CM.item(name, ns)), 200)
        snapshot()
        ok(call(server, "PATCH", CM.item("c2", ns), {"metadata": {"labels": {"app": "db"}}}))
        snapshot()
    create(server, CM.collection("a"), CM.obj("c1", labels={"app": "web"}))  # again
    create(server, CM.collection("b"), CM.obj("c9"))
    snapshot()
    return snapshots


def _walk_items(server: ServerThread, rv: str, **params: Any) -> list[Any]:
    """Every item of a walk whose first page is at exact ``rv``; each page's metadata checked
    against what remains."""
    page = get(server, CM.collection(None), resourceVersion=rv, resourceVersionMatch="Exact",
               **params)
    items: list[Any] = []
    while True:
        assert page["metadata"]["resourceVersion"] == rv
        items += page["items"]
        token = page["metadata"].get("continue")
        if not token:
            return items
        page = get(server, CM.collection(None), **{"continue": token}, **params)
        assert len(items) < 200


def _check_pages_at_every_revision(server: ServerThread) -> None:
    for rv, expected in _history(server):
        for limit in (1, 2, 5, 500):
            assert _walk_items(server, rv, limit=limit) == expected
            first = get(server, CM.collection(None), resourceVersion=rv,
                        resourceVersionMatch="Exact", limit=limit)
            rest = len(expected) - len(first["items"])
            assert first["metadata"].get("remainingItemCount", 0) == rest
            web = [o for o in expected if o["metadata"].get("labels", {}).get("app") == "web"]
            assert _walk_items(server, rv, limit=limit, labelSelector="app=web") == web
            for name in ("c1", "c2", "c9"):
                named = [o for o in expected if o["metadata"]["name"] == name]
                assert _walk_items(server, rv, limit=limit,
                                   fieldSelector=f"metadata.name={name}") == named
        named_in_a = get(server, CM.collection("a"), resourceVersion=rv,
                         resourceVersionMatch="Exact", fieldSelector="metadata.name=c1")
        assert named_in_a["items"] == [o for o in expected if o["metadata"]["namespace"] == "a"
                                       and o["metadata"]["name"] == "c1"]


def test_pages_at_older_revisions_come_from_the_cache(server: ServerThread) -> None:
    """Issue 15: while the cache's history ring holds every change since a revision, a page at
    it is the current state with those changes undone (a page costs what a current page costs,
    not a read of the store from the page's start): the same answers as the store's, and no
    store list."""
    lists = _store_lists(server)
    _check_pages_at_every_revision(server)
    assert _store_lists(server) == lists


def test_pages_at_revisions_older_than_the_ring_come_from_the_store(make_server: Any) -> None:
    server = make_server(ring_capacity=4)
    lists = _store_lists(server)
    _check_pages_at_every_revision(server)
    assert _store_lists(server) > lists
