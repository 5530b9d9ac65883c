"""kopf's own example operators on its ``KopfExample`` CRD, run unchanged against the real server.

The examples, ``crd.yaml`` and ``obj.yaml`` are kopf's (``tests/external/kopf_examples``, see its
README). Each test installs the CRD with kubectl (``apply``, ``wait --for
condition=established``), then runs one example as ``kopf run --standalone -n default
example.py`` runs it, through kopf's own test runner (``kopf.testing.KopfRunner``: kopf's CLI in
a thread and loop of its own) with a fresh ``kopf.OperatorRegistry`` that the CLI makes the
default before it loads the file, as kopf's e2e tests do (``tests/e2e/test_examples.py``). The
object is applied and deleted with kubectl, as those e2e tests do; what a cluster would show is
asserted from the server over plain HTTP: handler results and daemon/timer patches in
``status`` (through ``/status``, since discovery lists ``kopfexamples/status``), kopf's finalizer
added and removed, ``last-handled-configuration``, Events posted.

kopf logs in with its kubeconfig reader (``login_with_kubeconfig``), as in test_client_kopf.py:
the ``kubernetes`` package reads ``KUBECONFIG`` once, at import, which a test cannot redo.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml
from kopf.testing import KopfRunner

from tests.integration import kubectl
from tests.integration.harness import ServerThread
from tests.integration.kinds import NS, POD
from tests.integration.wire import (
    Event,
    WatchStream,
    call,
    create,
    get,
    list_rv,
    rv_of,
    wait_for,
    watch,
)

EXAMPLES = Path(__file__).resolve().parent.parent / "external" / "kopf_examples"
CRD_YAML = EXAMPLES / "crd.yaml"
OBJ_YAML = EXAMPLES / "obj.yaml"
OBJ: dict[str, Any] = yaml.safe_load(OBJ_YAML.read_text())
NAME = OBJ["metadata"]["name"]
KEX = f"/apis/kopf.dev/v1/namespaces/{NS}/kopfexamples"
ITEM = f"{KEX}/{NAME}"
FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
LAST_HANDLED = "kopf.zalando.org/last-handled-configuration"
KOPF_PREFIX = "kopf.zalando.org/"
STEP_TIMEOUT_S = 15.0  # kopf's retries and daemons sleep in whole seconds; a busy 2-core box
STOP_TIMEOUT_S = 30.0


# --- the harness --------------------------------------------------------------------------------

@pytest.fixture
def cluster(server: ServerThread, monkeypatch: pytest.MonkeyPatch) -> ServerThread:
    """The server with kopf's CRD installed and established, as kopf's e2e ``with_crd`` does;
    ``KUBECONFIG`` points kopf at it."""
    return with_crd(server, monkeypatch)


@pytest.fixture(params=["sqlite", "memory"])
def any_cluster(request: pytest.FixtureRequest, make_server: Callable[..., ServerThread],
                monkeypatch: pytest.MonkeyPatch) -> ServerThread:
    """``cluster`` on each store (the memory store writes without yielding to the loop)."""
    return with_crd(make_server(storage=request.param), monkeypatch)


def with_crd(server: ServerThread, monkeypatch: pytest.MonkeyPatch) -> ServerThread:
    monkeypatch.setenv("KUBECONFIG", str(server.kubeconfig))
    kubectl.ok(server, "apply", "-f", str(CRD_YAML))
    kubectl.ok(server, "wait", "--for", "condition=established", "--timeout=30s",
               "crd/kopfexamples.kopf.dev")
    return server


@contextlib.contextmanager
def kopf_state_restored() -> Iterator[None]:
    """Undo what ``kopf run`` leaves in the process: its root log handler and level (on a
    stream CliRunner closes), the default registry, the example's ``sys.path`` entry and
    module."""
    root, aio = logging.getLogger(), logging.getLogger("asyncio")
    saved = (root.handlers[:], root.level, aio.handlers[:], aio.propagate, sys.path[:])
    registry = kopf.get_default_registry()
    try:
        yield
    finally:
        root.handlers[:], root.level, aio.handlers[:], aio.propagate, sys.path[:] = saved
        kopf.set_default_registry(registry)
        for name in [m for m in sys.modules if m.startswith("__kopf_script_")]:
            del sys.modules[name]


@contextlib.contextmanager
def running_example(example: str, scope: tuple[str, ...] = ("-n", NS)) -> Iterator[KopfRunner]:
    """``kopf run --standalone -n default EXAMPLE/example.py`` (or another ``scope``, such as
    ``-A``) until the block ends; fails if the operator failed or did not stop."""
    registry = kopf.OperatorRegistry()
    kopf.on.login(registry=registry)(kopf.login_with_kubeconfig)
    args = ["run", "--standalone", "--verbose", *scope, str(EXAMPLES / example / "example.py")]
    with kopf_state_restored(), KopfRunner(args, registry=registry,
                                           timeout=STOP_TIMEOUT_S) as runner:
        yield runner
    assert runner.exception is None, runner.output
    assert runner.exit_code == 0, runner.output


def apply_obj(server: ServerThread) -> dict[str, Any]:
    kubectl.ok(server, "apply", "-n", NS, "-f", str(OBJ_YAML))
    created: dict[str, Any] = get(server, ITEM)
    return created


def delete_obj(server: ServerThread) -> None:
    """``kubectl delete -f obj.yaml`` without waiting: the watch shows the rest."""
    kubectl.ok(server, "delete", "-n", NS, "-f", str(OBJ_YAML), "--wait=false")


def annotations(event_or_obj: dict[str, Any]) -> dict[str, str]:
    obj = event_or_obj.get("object", event_or_obj)
    found: dict[str, str] = obj["metadata"].get("annotations") or {}
    return found


def last_handled(event_or_obj: dict[str, Any]) -> Any:
    raw = annotations(event_or_obj).get(LAST_HANDLED)
    return None if raw is None else json.loads(raw)


def essence(spec: dict[str, Any]) -> dict[str, Any]:
    """What kopf records as handled for obj.yaml with ``spec`` (its labels and annotations,
    as the server returned them)."""
    meta = OBJ["metadata"]
    return {"spec": spec,
            "metadata": {"labels": meta["labels"], "annotations": meta["annotations"]}}


def finalizers(event: Event) -> list[str]:
    found: list[str] = event["object"]["metadata"].get("finalizers") or []
    return found


def marked(event: Event) -> bool:
    return "deletionTimestamp" in event["object"]["metadata"]


def until(stream: WatchStream, predicate: Callable[[Event], bool]) -> list[Event]:
    return stream.events_until(predicate, STEP_TIMEOUT_S)


def printed(runner: KopfRunner, *lines: str) -> list[str]:
    """The lines among ``lines`` the operator printed, in order."""
    return [line for line in runner.output.splitlines() if line in lines]


def logged(caplog: pytest.LogCaptureFixture, message: str) -> None:
    """Wait until the running operator logged ``message`` (kopf logs through ``logging``,
    which pytest captures from every thread)."""
    wait_for(lambda: any(message in m for m in caplog.messages), STEP_TIMEOUT_S,
             f"kopf to log {message!r}")


def assert_one_object_in_order(events: list[Event], uid: str) -> None:
    assert {e["object"]["metadata"]["uid"] for e in events} == {uid}
    rvs = [rv_of(e) for e in events]
    assert rvs == sorted(set(rvs)), rvs


# --- the examples -------------------------------------------------------------------------------

@pytest.mark.parametrize("scope", [("-n", NS), ("-A",)], ids=["namespace", "all-namespaces"])
def test_01_minimal_handler_result_goes_to_status(
        cluster: ServerThread, scope: tuple[str, ...]) -> None:
    """One create handler: its result lands in ``status.create_fn`` through ``/status`` (the
    CRD has the subresource), the printer column shows it, kopf records what it handled. With
    no delete handler there is no finalizer: the object goes at once. Watched in the namespace
    or cluster-wide (``/apis/kopf.dev/v1/kopfexamples``) alike."""
    with running_example("01-minimal", scope) as runner:
        created = apply_obj(cluster)
        def handled_obj() -> dict[str, Any] | None:
            obj: dict[str, Any] = get(cluster, ITEM)
            return obj if obj.get("status") and last_handled(obj) else None

        handled = wait_for(handled_obj, STEP_TIMEOUT_S, "the handler's result and kopf's record")
        table = kubectl.ok(cluster, "get", "-n", NS, "kex", NAME)
        delete_obj(cluster)
        wait_for(lambda: call(cluster, "GET", ITEM).status == 404, STEP_TIMEOUT_S, "deletion")

    assert handled["status"] == {"create_fn": {"message": "hello world"}}
    assert last_handled(handled) == essence(OBJ["spec"])
    assert not [k for k in annotations(handled) if k.startswith(KOPF_PREFIX)
                and k != LAST_HANDLED], "kopf's progress annotations were not cleaned"
    assert "finalizers" not in handled["metadata"]
    assert handled["metadata"]["generation"] == created["metadata"]["generation"] == 1
    [status_entry] = [m for m in handled["metadata"]["managedFields"]
                      if m.get("subresource") == "status"]
    assert (status_entry["manager"], status_entry["operation"]) == ("kopf", "Update")
    assert status_entry["fieldsV1"] == {"f:status": {".": {}, "f:create_fn": {
        ".": {}, "f:message": {}}}}
    assert table.split() == ["NAME", "DURATION", "CHILDREN", "MESSAGE",
                             NAME, "1m", "hello", "world"]
    assert runner.output.count("And here we are! Creating:") == 1
    where = "cluster-wide" if scope == ("-A",) else f"in '{NS}'"
    assert f"Starting the watch-stream for kopfexamples.v1.kopf.dev {where}." in runner.output


def test_01_minimal_follows_its_crd_deleted_and_recreated(
        any_cluster: ServerThread, caplog: pytest.LogCaptureFixture) -> None:
    """Deleting the CRD under a running operator deletes the object and ends kopf's watch of
    the kind (kopf follows CRDs through their own watch and discovery); applying the CRD again
    brings it back to kopf, which handles a new object as on a cluster, without a restart.

    The kind's streams end only after every watcher got what was committed before (the CRD's
    DELETED included): kopf, told by its CRD watch, stops its watch of the kind rather than
    resuming it into a 404 it cannot recover from."""
    cluster = any_cluster
    watched = f"the watch-stream for kopfexamples.v1.kopf.dev in '{NS}'."
    with running_example("01-minimal") as runner:
        first = apply_obj(cluster)["metadata"]["uid"]
        wait_for(lambda: get(cluster, ITEM).get("status"), STEP_TIMEOUT_S, "the first result")
        kubectl.ok(cluster, "delete", "crd", "kopfexamples.kopf.dev", "--timeout=30s")
        assert call(cluster, "GET", KEX).status == 404
        logged(caplog, f"Stopping {watched}")
        kubectl.ok(cluster, "apply", "-f", str(CRD_YAML))
        kubectl.ok(cluster, "wait", "--for", "condition=established", "--timeout=30s",
                   "crd/kopfexamples.kopf.dev")
        second = apply_obj(cluster)["metadata"]["uid"]
        handled = wait_for(lambda: get(cluster, ITEM).get("status"), STEP_TIMEOUT_S,
                           "the second result")

    assert first != second
    assert handled == {"create_fn": {"message": "hello world"}}
    assert runner.output.count(f"Starting {watched}") == 2
    assert runner.output.count(f"Stopping {watched}") == 2  # the CRD's deletion, the end
    assert runner.output.count("And here we are! Creating:") == 2


def test_05_handlers_create_update_field_delete_resume(
        cluster: ServerThread, caplog: pytest.LogCaptureFixture) -> None:
    """Create, update, field and delete handlers: kopf's finalizer goes on before the create
    handlers run and holds the deleted object until both delete handlers ran; each change is
    recorded in ``last-handled-configuration``. A restarted operator resumes the object
    (resume handlers only) from what the server holds."""
    start = list_rv(cluster, KEX)
    with watch(cluster, KEX, resourceVersion=start) as stream:
        with running_example("05-handlers") as first:
            uid = apply_obj(cluster)["metadata"]["uid"]
            created = until(stream, lambda e: last_handled(e) is not None)
            kubectl.ok(cluster, "patch", "-n", NS, "kex", NAME, "--type=merge",
                       "-p", '{"spec": {"field": "changed"}}')
            updated = until(stream, lambda e: (last_handled(e) or {}).get(
                "spec", {}).get("field") == "changed")
        with running_example("05-handlers") as second:
            logged(caplog, "Handler 'resume_fn_2' succeeded.")
            delete_obj(cluster)
            deleted = until(stream, lambda e: e["type"] == "DELETED")

    events = created + updated + deleted
    assert_one_object_in_order(events, uid)
    assert events[0]["type"] == "ADDED" and finalizers(events[0]) == []
    # The finalizer is kopf's first write, before any handler's progress.
    assert finalizers(events[1]) == [FINALIZER]
    assert not [k for k in annotations(events[1]) if k.startswith(KOPF_PREFIX)]
    assert all(finalizers(e) == [FINALIZER] for e in events[1:])
    assert last_handled(created[-1]) == essence(OBJ["spec"])
    assert last_handled(updated[-1]) == essence({**OBJ["spec"], "field": "changed"})
    assert updated[-1]["object"]["metadata"]["generation"] == 2  # the spec change only
    # Deleting marks the object; kopf runs the delete handlers, then removes its finalizer,
    # which deletes it. DELETED carries the last stored state (finalizer included).
    assert [e["type"] for e in deleted][-1] == "DELETED"
    assert {e["type"] for e in deleted[:-1]} == {"MODIFIED"}
    marks = deleted[[marked(e) for e in deleted].index(True):]
    assert all(marked(e) for e in marks)
    assert marks[0]["object"]["metadata"]["deletionGracePeriodSeconds"] == 0
    assert marks[0]["object"]["metadata"]["generation"] == 3  # marking bumps it, as kube does
    # The delete handlers' progress is stored on the marked object, under the finalizer.
    assert any(f"{KOPF_PREFIX}delete_fn_2" in annotations(e) for e in marks)
    assert finalizers(deleted[-1]) == [FINALIZER]
    assert call(cluster, "GET", ITEM).status == 404

    assert printed(first, "CREATED 1st", "CREATED 2nd", "FIELD CHANGED: None -> value",
                   "UPDATED", "FIELD CHANGED: value -> changed", "RESUMED 1st") == [
        "CREATED 1st", "CREATED 2nd", "FIELD CHANGED: None -> value",
        "UPDATED", "FIELD CHANGED: value -> changed"]
    assert printed(second, "CREATED 1st", "UPDATED", "RESUMED 1st", "RESUMED 2nd",
                   "DELETED 1st", "DELETED 2nd") == [
        "RESUMED 1st", "RESUMED 2nd", "DELETED 1st", "DELETED 2nd"]



def test_04_events_are_posted_for_the_custom_resource(cluster: ServerThread) -> None:
    """``kopf.event``, ``kopf.info``, ``kopf.warn`` and ``kopf.exception`` post core/v1
    Events about the KopfExample. core/v1 keeps the legacy validation, so kopf's free-form
    types (``SomeType``, ``Error``) are accepted as a cluster accepts them."""
    with running_example("04-events"):
        uid = apply_obj(cluster)["metadata"]["uid"]
        def four_events() -> list[dict[str, Any]] | None:
            items: list[dict[str, Any]] = get(cluster, f"/api/v1/namespaces/{NS}/events")["items"]
            return items if len(items) >= 4 else None

        events = wait_for(four_events, STEP_TIMEOUT_S, "kopf's four events")
        wait_for(lambda: last_handled(get(cluster, ITEM)), STEP_TIMEOUT_S, "the handler")
        described = kubectl.ok(cluster, "describe", "-n", NS, "kex", NAME)
        delete_obj(cluster)
        wait_for(lambda: call(cluster, "GET", ITEM).status == 404, STEP_TIMEOUT_S, "deletion")

    assert sorted((e["type"], e["reason"], e["message"]) for e in events) == [
        ("Error", "SomeReason", "Some exception: Exception text."),
        ("Normal", "SomeReason", "Some message"),
        ("SomeType", "SomeReason", "Some message"),
        ("Warning", "SomeReason", "Some message"),
    ]
    for event in events:
        assert event["metadata"]["name"].startswith("kopf-event-")
        assert event["involvedObject"] == {"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                                           "name": NAME, "namespace": NS, "uid": uid}
        assert event["source"] == {"component": "kopf"}
        assert (event["action"], event["reportingComponent"]) == ("Action?", "kopf")
    # kubectl describe finds them by the object's kind, name, namespace and uid.
    shown = described.split("\nEvents:\n", 1)[1].splitlines()[2:]
    columns = [line.split(None, 4) for line in shown]  # type, reason, age, from, message
    assert sorted((c[0], c[1], c[3], c[4]) for c in columns) == [
        ("Error", "SomeReason", "kopf", "Some exception: Exception text."),
        ("Normal", "SomeReason", "kopf", "Some message"),
        ("SomeType", "SomeReason", "kopf", "Some message"),
        ("Warning", "SomeReason", "kopf", "Some message")]
    # The same Events through events.k8s.io/v1, about the custom resource.
    regarding = [e["regarding"] for e in
                 get(cluster, f"/apis/events.k8s.io/v1/namespaces/{NS}/events")["items"]]
    assert regarding == [events[0]["involvedObject"]] * 4


def test_11_filtering_handlers_see_labels_annotations_and_fields(
        cluster: ServerThread, caplog: pytest.LogCaptureFixture) -> None:
    """Handlers filtered by the object's labels, annotations and fields run exactly when the
    object the server returns matches; the field daemon's finalizer goes once a spec change
    unmatches the daemon (no handler left that needs one)."""
    start = list_rv(cluster, KEX)
    with watch(cluster, KEX, resourceVersion=start) as stream, \
            running_example("11-filtering-handlers") as runner:
        uid = apply_obj(cluster)["metadata"]["uid"]
        created = until(stream, lambda e: last_handled(e) is not None)
        logged(caplog, "Field daemon is satisfied.")
        kubectl.ok(cluster, "patch", "-n", NS, "kex", NAME, "--type=merge",
                   "-p", '{"spec": {"field": "changed"}}')
        updated = until(stream, lambda e: not finalizers(e) and (last_handled(e) or {}).get(
            "spec", {}).get("field") == "changed")
        delete_obj(cluster)
        deleted = until(stream, lambda e: e["type"] == "DELETED")

    assert_one_object_in_order(created + updated + deleted, uid)
    assert finalizers(created[1]) == [FINALIZER]
    assert finalizers(created[-1]) == [FINALIZER]
    assert [e["type"] for e in deleted] == ["DELETED"]  # no finalizer: gone at once
    said = {line.rsplit("] ", 1)[-1] for line in runner.output.splitlines()}
    assert said >= {
        "Label is matching.", "Label is present.", "Label is absent.",
        "Label callback matching.", "Annotation is matching.", "Annotation is present.",
        "Annotation is absent.", "Filter satisfied.", "Field value is satisfied.",
        "Field presence is satisfied.", "Field change is satisfied.",
        "Field daemon is satisfied."}
    assert not said & {
        "Annotation callback mismatch.", "Filter not satisfied.",
        "Field value is not satisfied.", "Field presence is not satisfied."}


def test_14_daemons_patch_status_and_hold_the_finalizer(
        cluster: ServerThread, caplog: pytest.LogCaptureFixture) -> None:
    """Two daemons fail three times, then run. The sync one's ``patch.status`` arrives after
    each failure and once more when deletion stops it; kopf's finalizer holds the object until
    both daemons have exited."""
    start = list_rv(cluster, KEX)
    with watch(cluster, KEX, resourceVersion=start) as stream, running_example("14-daemons"):
        uid = apply_obj(cluster)["metadata"]["uid"]
        failing = until(stream, lambda e: (e["object"].get("status") or {}).get(
            "message") == "Failed 3 times.")
        logged(caplog, "=> Ping from a sync daemon: field='value', retry=3")
        logged(caplog, "=> Ping from an async daemon: field='value'")
        delete_obj(cluster)
        deleted = until(stream, lambda e: e["type"] == "DELETED")

    events = failing + deleted
    assert_one_object_in_order(events, uid)
    messages = [(e["object"].get("status") or {}).get("message") for e in events]
    assert [m for m, _ in itertools.groupby(messages) if m] == [
        "Failed 1 times.", "Failed 2 times.", "Failed 3 times.", "Accompanying is finished."]
    # kopf spawns the daemons before it patches its finalizer in (kopf's processing.py: the
    # spawning cause first, the finalizer in the event's closing patch), so a daemon's first
    # status patch may land on either side of it (on etcd it often lands first); once there,
    # the finalizer stays on every event, from before the deletion mark to the end
    held = [finalizers(e) == [FINALIZER] for e in events]
    assert True in held
    since = held.index(True)
    assert 1 <= since <= 2 and not marked(events[since])
    assert all(held[since:])
    finished = next(e for e in deleted
                    if e["object"]["status"]["message"] == "Accompanying is finished.")
    assert marked(finished) and finished["type"] == "MODIFIED"
    assert deleted[-1]["object"]["status"] == {"message": "Accompanying is finished."}
    assert any("'background_async' is cancelled" in m or "'background_async' has exited" in m
               for m in caplog.messages)


def test_16_indexing_timer_patches_arrive(cluster: ServerThread) -> None:
    """A timer on the short name ``kex`` (resolved through discovery) patches ``status`` from
    kopf's index of the namespace's pods: at once, and again on its 5 s interval after a pod
    appears. (The example lists every indexed pod, running or not: its ``if is_running`` tests
    the index's list of results, which is never empty.)"""
    start = list_rv(cluster, KEX)
    with watch(cluster, KEX, resourceVersion=start) as stream, running_example("16-indexing"):
        uid = apply_obj(cluster)["metadata"]["uid"]
        first = until(stream, lambda e: "running-pods" in (e["object"].get("status") or {}))
        create(cluster, POD.collection(), POD.obj("web", labels={"app": "web"}))
        second = until(stream, lambda e: (e["object"].get("status") or {}).get(
            "running-pods") == [f"{NS}::web"])
        delete_obj(cluster)
        deleted = until(stream, lambda e: e["type"] == "DELETED")

    assert_one_object_in_order(first + second + deleted, uid)
    assert first[-1]["object"]["status"] == {"running-pods": []}
    assert finalizers(first[-1]) == [FINALIZER]  # timers need one, as daemons do
    assert [e["type"] for e in second] == ["MODIFIED"]  # the timer's next patch, nothing else
    assert not marked(second[0])
    assert deleted[-1]["object"]["status"] == {"running-pods": [f"{NS}::web"]}
