"""``kubewire record`` / ``replay`` / ``snapshot`` between real servers, with real clients.

Server A is recorded (kubewire's client, as ``kubewire record`` runs it) while a script
creates, updates (spec and status) and deletes objects of core, apps and custom kinds; the trace
is replayed into server B with a watch open on each kind. B must then hold the same objects as
A (every field but resourceVersion) and its watchers must have seen the script's events in the
same order.
"""

from __future__ import annotations

import asyncio
import base64
import http.server
import io
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubewire.client import create_client
from kubewire.server.access.users import UserRequest, user_kubeconfig
from kubewire.storage.base import Retention
from kubewire.testing import snapshot
from kubewire.testing.record import Recorder, RecordOptions, choose, served_kinds
from kubewire.testing.replay import replay
from kubewire.testing.trace import (
    NO_REDACTION,
    REDACTED,
    REDACTED_B64,
    Redaction,
    read_trace,
)
from tests.integration.custom_kinds import GIZMO, serve
from tests.integration.harness import ServerThread
from tests.integration.wire import Session, WatchStream, call, create, get, ok

KUBEWIRE = (sys.executable, "-m", "kubewire.cli")
PREFIX = "t-"
CM = "/api/v1/namespaces/default/configmaps"
SECRETS = "/api/v1/namespaces/default/secrets"
PODS = "/api/v1/namespaces/default/pods"
DEPLOYS = "/apis/apps/v1/namespaces/default/deployments"
GIZMOS = "/apis/tests.kubewire.io/v1/namespaces/default/gizmos"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
KINDS = ["customresourcedefinitions.apiextensions.k8s.io", "configmaps", "secrets", "pods",
         "deployments.apps", "gizmos.tests.kubewire.io"]
COLLECTIONS = {"ConfigMap": CM, "Secret": SECRETS, "Pod": PODS, "Deployment": DEPLOYS,
               "Gizmo": GIZMOS}
MERGE = {"Content-Type": "application/merge-patch+json"}


def kubeconfig(server: ServerThread) -> Path:
    return server.config.data_dir / "kubeconfig"


def deployment(name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


def script(server: ServerThread) -> list[tuple[str, str, str]]:
    """Writes of several kinds; the (type, kind, name) of each event they make, in order."""
    out: list[tuple[str, str, str]] = []

    def did(kind: str, name: str, *types: str) -> None:
        out.extend((t, kind, name) for t in types)

    create(server, CM, {"metadata": {"name": "t-cm1", "annotations": {"note": "hi"}},
                        "data": {"a": "1"}})
    did("ConfigMap", "t-cm1", "ADDED")
    create(server, DEPLOYS, deployment("t-web"))
    did("Deployment", "t-web", "ADDED")
    ok(call(server, "PATCH", f"{CM}/t-cm1", {"data": {"a": "2"}}, MERGE))
    did("ConfigMap", "t-cm1", "MODIFIED")
    create(server, SECRETS, {"metadata": {"name": "t-s1"},
                             "data": {"token": base64.b64encode(b"sekret").decode()}})
    did("Secret", "t-s1", "ADDED")
    create(server, GIZMOS, {"apiVersion": GIZMO.api_version, "kind": "Gizmo",
                            "metadata": {"name": "t-g1"}, "spec": {"size": 3}})
    did("Gizmo", "t-g1", "ADDED")
    ok(call(server, "PATCH", f"{GIZMOS}/t-g1/status", {"status": {"ready": True}}, MERGE))
    did("Gizmo", "t-g1", "MODIFIED")
    ok(call(server, "PATCH", f"{DEPLOYS}/t-web", {"spec": {"replicas": 3}}, MERGE))
    did("Deployment", "t-web", "MODIFIED")
    ok(call(server, "PATCH", f"{DEPLOYS}/t-web/status",
            {"status": {"replicas": 3, "readyReplicas": 2, "observedGeneration": 2}}, MERGE))
    did("Deployment", "t-web", "MODIFIED")
    create(server, PODS, {"metadata": {"name": "t-pod"},
                          "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    did("Pod", "t-pod", "ADDED")
    ok(call(server, "DELETE", f"{PODS}/t-pod", params={"gracePeriodSeconds": 0}))
    did("Pod", "t-pod", "MODIFIED", "DELETED")  # deletionTimestamp set, then gone
    create(server, CM, {"metadata": {"name": "t-cm2"}})
    did("ConfigMap", "t-cm2", "ADDED")
    ok(call(server, "DELETE", f"{CM}/t-cm1"))
    did("ConfigMap", "t-cm1", "DELETED")
    ok(call(server, "DELETE", f"{GIZMOS}/t-g1"))
    did("Gizmo", "t-g1", "DELETED")
    return out


def record(server: ServerThread, run: Callable[[], Any], kinds: list[str] | None = KINDS,
           redaction: Redaction = NO_REDACTION, settle_s: float = 0.6,
           discover_every_s: float | None = None) -> tuple[bytes, Any]:
    """Record ``kinds`` of ``server``'s default namespace while ``run`` runs; the trace and
    what ``run`` returned."""
    out = io.BytesIO()

    async def main() -> Any:
        async with await create_client(kubeconfig(server)) as client:
            specs = choose(await served_kinds(client), kinds)
            recorder = Recorder(client, specs, out, RecordOptions(
                ["default"], redaction, discover_every_s=discover_every_s))
            task = asyncio.create_task(recorder.run())
            await recorder.ready.wait()
            result = await asyncio.to_thread(run)
            await asyncio.sleep(settle_s)  # past the reorder window: every event is written
            recorder.stop()
            await task
            return result

    result = asyncio.run(main())
    return out.getvalue(), result


def replay_into(server: ServerThread, trace: bytes, speed: float | None = None) -> Any:
    async def main() -> Any:
        async with await create_client(kubeconfig(server)) as client:
            return await replay(client, io.BytesIO(trace), speed)

    return asyncio.run(main())


def events_after_initial(trace: bytes) -> list[tuple[str, str, str]]:
    _, events = read_trace(io.BytesIO(trace))
    return [(e.type, e.object["kind"], e.object["metadata"]["name"]) for e in events
            if not e.initial]


def state(server: ServerThread) -> dict[tuple[str, str], dict[str, Any]]:
    """Every object of the recorded kinds in default (and every CRD), resourceVersion
    left out."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for kind, path in [*COLLECTIONS.items(), ("CustomResourceDefinition", CRDS)]:
        for item in get(server, path)["items"]:
            item["metadata"].pop("resourceVersion")
            item.pop("kind", None)
            item.pop("apiVersion", None)
            out[(kind, item["metadata"]["name"])] = item
    return out


@pytest.fixture
def servers(make_server: Callable[..., ServerThread]) -> tuple[ServerThread, ServerThread]:
    # B without kubewire's pod-termination controller: the trace's pod MODIFIED (marked, grace
    # 0) would have it race the trace's own DELETED, which then finds nothing (skipped); the
    # slower the store (etcd, three members) the likelier the controller wins
    source = make_server()
    target = make_server(controllers=("*", "-pod-termination-controller"))
    serve(source, GIZMO)  # the CRD is in the trace's initial state: B learns it from there
    return source, target


def test_replay_gives_identical_state_and_event_order(
        servers: tuple[ServerThread, ServerThread]) -> None:
    source, target = servers
    trace, expected = record(source, lambda: script(source))
    assert events_after_initial(trace) == expected  # one global order, the server's
    head, _ = read_trace(io.BytesIO(trace))
    assert head["kinds"] == KINDS and head["serverVersion"]["gitVersion"]

    rv = get(target, CM)["metadata"]["resourceVersion"]
    watches = {kind: WatchStream(target, path, {"resourceVersion": rv})
               for kind, path in COLLECTIONS.items() if kind != "Gizmo"}
    result = replay_into(target, trace)
    assert result.skipped == 0
    # the custom kind is served once the replayed CRD is established: watch it from the start
    watches["Gizmo"] = WatchStream(target, GIZMOS, {"resourceVersion": rv})
    assert state(target) == state(source)

    seen: list[tuple[int, str, str, str]] = []
    for kind, watch in watches.items():
        mine = [e for e in expected if e[1] == kind]
        got: list[tuple[str, str, str]] = []
        while len(got) < len(mine):
            event = watch.next_event()
            meta = event["object"]["metadata"]
            if meta["name"].startswith(PREFIX):
                got.append((event["type"], kind, meta["name"]))
                seen.append((int(meta["resourceVersion"]), *got[-1]))
        assert got == mine, kind
        watch.close()
    assert [e[1:] for e in sorted(seen)] == expected  # and the same order across kinds


def test_a_crd_created_while_recording_every_kind_is_followed_and_replays_first(
        make_server: Callable[..., ServerThread]) -> None:
    source, target = make_server(), make_server()

    def install_and_use() -> None:
        serve(source, GIZMO)
        time.sleep(0.5)  # the recorder's discovery finds the new kind
        create(source, GIZMOS, {"apiVersion": GIZMO.api_version, "kind": "Gizmo",
                                "metadata": {"name": "t-late"}, "spec": {"size": 5}})

    trace, _ = record(source, install_and_use, kinds=None, discover_every_s=0.1)
    events = events_after_initial(trace)
    crd = events.index(("ADDED", "CustomResourceDefinition", "gizmos.tests.kubewire.io"))
    assert events.index(("ADDED", "Gizmo", "t-late")) > crd
    assert all(kind != "Gizmo" for _, kind, _ in events[:crd])
    result = replay_into(target, trace)
    assert result.imported >= len(events)
    late_a, late_b = get(source, f"{GIZMOS}/t-late"), get(target, f"{GIZMOS}/t-late")
    late_a["metadata"].pop("resourceVersion")
    late_b["metadata"].pop("resourceVersion")
    assert late_b == late_a


def test_replayed_objects_keep_uid_timestamps_generation_and_status(
        servers: tuple[ServerThread, ServerThread]) -> None:
    source, target = servers
    trace, _ = record(source, lambda: script(source))
    replay_into(target, trace)
    web_a, web_b = get(source, f"{DEPLOYS}/t-web"), get(target, f"{DEPLOYS}/t-web")
    for field in ("uid", "creationTimestamp", "generation", "managedFields"):
        assert web_b["metadata"][field] == web_a["metadata"][field]
    assert web_b["metadata"]["generation"] == 2
    assert web_b["status"] == web_a["status"] and web_b["status"]["readyReplicas"] == 2
    assert web_b["metadata"]["resourceVersion"] != "" and "t-cm1" not in {
        item["metadata"]["name"] for item in get(target, CM)["items"]}


def test_redaction_replaces_secret_values_and_annotations(
        servers: tuple[ServerThread, ServerThread]) -> None:
    source, target = servers
    trace, _ = record(source, lambda: script(source), kinds=["secrets", "configmaps"],
                      redaction=Redaction(secrets=True, annotations=frozenset({"note"})))
    assert b"sekret" not in trace and base64.b64encode(b"sekret") not in trace
    _, events = read_trace(io.BytesIO(trace))
    secret = next(e.object for e in events if e.object["metadata"]["name"] == "t-s1")
    assert secret["data"] == {"token": REDACTED_B64}
    replay_into(target, trace)
    assert get(target, f"{SECRETS}/t-s1")["data"] == {"token": REDACTED_B64}
    assert get(source, f"{SECRETS}/t-s1")["data"] == {
        "token": base64.b64encode(b"sekret").decode()}
    notes = [line for line in trace.splitlines() if b"t-cm1" in line]
    assert notes and all(json.loads(line)["object"]["metadata"]["annotations"]["note"]
                         == REDACTED for line in notes if b'"note"' in line)


def test_recorded_speed_takes_about_the_recorded_time(
        make_server: Callable[..., ServerThread]) -> None:
    source, target = make_server(), make_server()

    def slow() -> None:
        create(source, CM, {"metadata": {"name": "t-a"}})
        time.sleep(1.0)
        create(source, CM, {"metadata": {"name": "t-b"}})

    trace, _ = record(source, slow, kinds=["configmaps"])
    _, events = read_trace(io.BytesIO(trace))
    offsets = [e.offset for e in events if not e.initial]
    assert len(offsets) == 2 and offsets[1] is not None and offsets[0] is not None
    span = offsets[1] - offsets[0]
    assert span >= 0.9
    started = time.monotonic()
    replay_into(target, trace, speed=1.0)
    assert time.monotonic() - started >= span * 0.9  # paced, never faster than recorded
    fast_target = make_server()
    started = time.monotonic()
    replay_into(fast_target, trace, speed=None)
    assert time.monotonic() - started < span  # fast does not wait
    assert {i["metadata"]["name"] for i in get(fast_target, CM)["items"]} >= {"t-a", "t-b"}


def test_snapshot_save_and_load_round_trip(servers: tuple[ServerThread, ServerThread],
                                           tmp_path: Path) -> None:
    source, target = servers
    script(source)
    path = tmp_path / "snap.jsonl"

    async def main() -> int:
        async with await create_client(kubeconfig(source)) as client:
            with path.open("wb") as out:
                saved = await snapshot.save(client, out)
        async with await create_client(kubeconfig(target)) as client:
            with path.open("rb") as lines:
                await snapshot.load(client, lines)
        return saved

    saved = asyncio.run(main())
    assert saved > 10
    assert state(target) == state(source)
    namespaces = [n["metadata"]["uid"] for n in get(target, "/api/v1/namespaces")["items"]]
    assert namespaces == [n["metadata"]["uid"] for n in get(source, "/api/v1/namespaces")
                          ["items"]]


def test_the_commands_record_replay_and_snapshot(
        servers: tuple[ServerThread, ServerThread], tmp_path: Path) -> None:
    source, target = servers
    trace = tmp_path / "trace.jsonl"
    recording = subprocess.Popen(
        [*KUBEWIRE, "record", "--kubeconfig", str(kubeconfig(source)), "--kinds",
         "configmaps,deployments.apps,gizmos.tests.kubewire.io", "--namespaces", "default",
         "--duration", "4s", "--out", str(trace)], stderr=subprocess.PIPE, text=True)
    assert recording.stderr is not None
    assert recording.stderr.readline().startswith("kubewire: recording 3 kinds")
    expected = script(source)
    _, err = recording.communicate(timeout=30)
    assert recording.returncode == 0, err
    assert "recorded 3 kinds" in err
    kinds = {"ConfigMap", "Deployment", "Gizmo"}
    assert events_after_initial(trace.read_bytes()) == [e for e in expected if e[1] in kinds]
    # into B: its CRD first (the trace does not hold CRDs)
    done = subprocess.run([*KUBEWIRE, "replay", str(trace), "--data-dir",
                           str(target.config.data_dir)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1 and "install its CustomResourceDefinition" in done.stderr
    assert done.stderr.count("\n") == 1
    serve(target, GIZMO)
    done = subprocess.run([*KUBEWIRE, "replay", str(trace), "--data-dir",
                           str(target.config.data_dir), "--speed", "fast"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    web_a, web_b = get(source, f"{DEPLOYS}/t-web"), get(target, f"{DEPLOYS}/t-web")
    assert web_b["metadata"]["uid"] == web_a["metadata"]["uid"]
    snap = tmp_path / "snap.jsonl"
    for args in (("save", str(snap), "--kubeconfig", str(kubeconfig(source))),
                 ("load", str(snap), "--data-dir", str(target.config.data_dir))):
        done = subprocess.run([*KUBEWIRE, "snapshot", *args], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
    assert state(target) == state(source)
    done = subprocess.run([*KUBEWIRE, "replay", str(trace), "--speed", "0"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "above 0" in done.stderr


# --- the import endpoint ---------------------------------------------------------------------

def _cm(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default", "uid": "u-" + name}}


BAD_BODIES: list[tuple[bytes, str]] = [
    (b"", "empty"),
    (b"{nope", "not JSON"),
    (b'{"type": "ADDED"}', "object must be"),
    (json.dumps({"type": "SYNC", "object": _cm("x")}).encode(), "is not ADDED"),
    (json.dumps({"type": "ADDED", "object": {"kind": "ConfigMap", "metadata": {}}}).encode(),
     "apiVersion and kind"),
    (json.dumps({"type": "ADDED", "object": {**_cm("x"), "metadata": {
        "name": "a/b", "namespace": "default"}}}).encode(), "not a usable name"),
    (json.dumps({"type": "ADDED", "object": {**_cm("x"), "metadata": {"name": "x"}}}).encode(),
     "no metadata.namespace"),
    (json.dumps([{"type": "ADDED", "object": _cm("ok")},
                 {"type": "ADDED", "object": {"apiVersion": "example.com/v1", "kind": "Widget",
                                              "metadata": {"name": "w"}}}]).encode(),
     "does not serve Widget"),
]


@pytest.mark.parametrize(("body", "message"), BAD_BODIES)
def test_bad_import_bodies_get_400_and_change_nothing(server: ServerThread, body: bytes,
                                                      message: str) -> None:
    before = get(server, CM)["metadata"]["resourceVersion"]
    reply = call(server, "POST", "/kubewire/import", body)
    status = reply.status_object()
    assert reply.status == 400 and status["reason"] == "BadRequest", reply.body
    assert message in status["message"]
    assert get(server, CM)["metadata"]["resourceVersion"] == before
    assert call(server, "GET", f"{CM}/ok").status == 404


def test_too_many_events_is_413(server: ServerThread) -> None:
    body = b"\n".join(json.dumps({"type": "ADDED", "object": _cm(f"c{i}")}).encode()
                      for i in range(1001))
    reply = call(server, "POST", "/kubewire/import", body)
    assert reply.status == 413 and "over the limit of 1000" in reply.status_object()["message"]
    assert call(server, "GET", f"{CM}/c0").status == 404


def test_import_writes_as_given_and_deletes(server: ServerThread) -> None:
    body = [{"type": "ADDED", "object": {**_cm("given"), "data": {"k": "v"}}},
            {"type": "MODIFIED", "object": {**_cm("given"), "data": {"k": "w"}}},
            {"type": "DELETED", "object": _cm("missing")}]
    answer = ok(call(server, "POST", "/kubewire/import", body))
    assert isinstance(answer, dict)
    assert (answer["imported"], answer["skipped"]) == (2, 1)
    found = get(server, f"{CM}/given")
    assert found["metadata"]["uid"] == "u-given" and found["data"] == {"k": "w"}
    ok(call(server, "POST", "/kubewire/import", [{"type": "DELETED", "object": _cm("given")}]))
    assert call(server, "GET", f"{CM}/given").status == 404
    assert call(server, "PUT", "/kubewire/import", body).status == 405


def test_a_non_admin_gets_403(make_server: Callable[..., ServerThread], tmp_path: Path) -> None:
    server = make_server(insecure_http=False)
    path = tmp_path / "bob.kubeconfig"
    path.write_text(user_kubeconfig(server.config.data_dir, UserRequest("bob", ("devs",))))

    async def main() -> list[int]:
        codes = []
        for config in (path, kubeconfig(server)):
            async with await create_client(config) as client:
                try:
                    await snapshot.save(client, io.BytesIO())
                    codes.append(200)
                except Exception as exc:  # the client's StatusError for the answer
                    codes.append(getattr(exc, "code", 0))
        return codes

    assert asyncio.run(main()) == [403, 200]
    done = subprocess.run([*KUBEWIRE, "snapshot", "load", str(tmp_path / "none.jsonl"),
                           "--kubeconfig", str(path)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1 and done.stderr.startswith("kubewire: snapshot load:")


def test_a_compacted_watch_lists_again_and_records_what_changed(
        make_server: Callable[..., ServerThread]) -> None:
    """410 while recording: the kind is listed again and the difference becomes events (a
    vanished object's DELETED carries its name)."""
    server = make_server(ring_capacity=8, retention=Retention(max_changes=10, max_age_s=None))
    for name in ("keep", "change", "vanish"):
        create(server, CM, {"metadata": {"name": name}})

    async def main() -> list[tuple[str, str]]:
        async with await create_client(kubeconfig(server)) as client:
            specs = choose(await served_kinds(client), ["configmaps"])
            recorder = Recorder(client, specs, io.BytesIO(), RecordOptions(["default"]))
            follow = await recorder._initial(specs[0], "default")
            ok(call(server, "PATCH", f"{CM}/change", {"data": {"k": "v"}}, MERGE))
            ok(call(server, "DELETE", f"{CM}/vanish"))
            create(server, CM, {"metadata": {"name": "new"}})
            with Session(server) as session:  # the log compacts every 1,000 changes
                for round_ in range(60):
                    for i in range(20):
                        name = f"churn-{round_}-{i}"
                        ok(session.call("POST", CM, {"metadata": {"name": name}}))
                        ok(session.call("DELETE", f"{CM}/{name}"))
                    if round_ < 24:
                        continue
                    probe = call(server, "GET", CM, params={
                        "watch": "1", "timeoutSeconds": "1",
                        "resourceVersion": follow.revision})
                    if probe.status == 410 or b'"code":410' in probe.body:
                        break
                else:
                    pytest.fail("the change log was never compacted past the list's revision")
            task = asyncio.create_task(recorder._watch(follow))
            got = []
            while len(got) < 3:
                event = await asyncio.wait_for(recorder.queue.get(), 10)
                got.append((event.type, event.object["metadata"]["name"]))
            task.cancel()
            return got

    assert sorted(asyncio.run(main())) == [("ADDED", "new"), ("DELETED", "vanish"),
                                           ("MODIFIED", "change")]


def test_replay_into_a_server_without_the_admin_api_says_so(tmp_path: Path) -> None:
    """A cluster that is not kubewire answers 404 for /kubewire/import: one line saying why."""
    class NotKubewire(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                               "message": "the server could not find the requested resource",
                               "reason": "NotFound", "code": 404}).encode()
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotKubewire)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        config = tmp_path / "kubeconfig"
        url = f"http://127.0.0.1:{httpd.server_port}"
        config.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": url}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            "users": [{"name": "u", "user": {}}]}))
        trace = tmp_path / "trace.jsonl"
        trace.write_bytes(b'{"kubewireTrace": 1}\n' + json.dumps(
            {"type": "ADDED", "object": _cm("a")}).encode() + b"\n")
        done = subprocess.run([*KUBEWIRE, "replay", str(trace), "--kubeconfig", str(config)],
                              capture_output=True, text=True, timeout=60)
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert done.returncode == 1
    assert done.stderr.startswith("kubewire: replay: the server could not find")
    assert "is it a kubewire server?" in done.stderr and done.stderr.count("\n") == 1


def test_record_to_stdout_until_ctrl_c(server: ServerThread) -> None:
    recording = subprocess.Popen(
        [*KUBEWIRE, "record", "--kubeconfig", str(kubeconfig(server)), "--kinds", "configmaps"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert recording.stderr is not None
    assert recording.stderr.readline().startswith(b"kubewire: recording 1 kinds (Ctrl-C")
    create(server, CM, {"metadata": {"name": "t-late"}})
    time.sleep(1.0)  # the event reaches the recorder (Ctrl-C writes what it holds)
    recording.send_signal(signal.SIGINT)
    out, err = recording.communicate(timeout=30)
    assert recording.returncode == 0, err
    head, events = read_trace(io.BytesIO(out))
    assert head["source"] == "record" and head["namespaces"] is None
    assert [(e.type, e.object["metadata"]["name"]) for e in events if not e.initial] == [
        ("ADDED", "t-late")]


def test_snapshot_is_get_only(server: ServerThread) -> None:
    reply = call(server, "POST", "/kubewire/snapshot", {})
    assert reply.status == 405 and reply.status_object()["reason"] == "MethodNotAllowed"
    lines = call(server, "GET", "/kubewire/snapshot").body.splitlines()
    head = json.loads(lines[0])
    assert head["kind"] == "Snapshot" and head["objects"] == len(lines) - 1
    assert head["revision"] == int(get(server, CM)["metadata"]["resourceVersion"])
    kinds = [json.loads(line)["kind"] for line in lines[1:]]
    crds = [i for i, k in enumerate(kinds) if k == "CustomResourceDefinition"]
    assert crds == list(range(len(crds)))  # the preinstalled Gateway API CRDs lead
    assert kinds.index("Namespace") < min(i for i, k in enumerate(kinds) if k != "Namespace"
                                          and k != "CustomResourceDefinition")
