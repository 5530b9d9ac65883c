"""@kubernetes/client-node (1.4.0, the JavaScript client) against the real server, unchanged.

Each scenario is a script in ``client_node/`` written as a client-node user writes it (the
``CoreV1Api``/``CustomObjectsApi`` request objects of 1.x, ``Watch``, ``makeInformer``), run by
Node.js over TLS with the admin's client certificate from the kubeconfig, or a bearer token;
it prints one JSON line per step and the test reads them. One scenario is driven from both
sides: an informer whose resume meets 410 Gone (the server's faults, as docs/testing.md's
recipe) must list again. ``tools/ensure-client-node`` installs
Node.js and the client (``make test`` runs it); the scripts are fed on stdin from the install's
directory, so their ``import`` finds it there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import kubewire
from tests.integration.custom_kinds import GIZMO_CRD
from tests.integration.wire import wait_for

SCRIPTS = Path(__file__).parent / "client_node"
INSTALL = Path(__file__).parents[2] / ".cache" / "client-node"
INSTALLED = (INSTALL / "node_modules" / "@kubernetes" / "client-node").is_dir()
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(
    (NODE is None or not INSTALLED) and not os.environ.get("CI"),
    reason="Node.js and @kubernetes/client-node are not installed (tools/ensure-client-node)")
RUN_S = 60.0


def node_argv(kubeconfig: Path, *args: str) -> list[str]:
    """Node.js reading a module from stdin, resolved from the client's install."""
    assert NODE is not None and INSTALLED, "tools/ensure-client-node did not run"
    return [NODE, "--input-type=module", "-", str(kubeconfig), *args]


def run_script(name: str, kubeconfig: Path, *args: str) -> list[dict[str, Any]]:
    """The JSON lines the script printed; a failed or hung run fails the test."""
    done = subprocess.run(node_argv(kubeconfig, *args), input=(SCRIPTS / name).read_text(),
                          capture_output=True, text=True, cwd=INSTALL, timeout=RUN_S,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def merged(lines: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for line in lines:
        out.update(line)
    return out


@pytest.fixture
def server() -> Iterator[kubewire.Server]:
    with kubewire.Server(tls=True, users={"alice": ["developers"]},
                         crds=[GIZMO_CRD]) as running:
        yield running


@pytest.mark.parametrize("who", ["admin-certificate", "bearer-token"])
def test_crud_and_a_watch_with_bookmarks(server: kubewire.Server, who: str) -> None:
    kubeconfig = server.kubeconfig if who == "admin-certificate" else server.kubeconfig_for(
        "alice")
    steps = merged(run_script("crud_and_watch.mjs", kubeconfig))
    assert steps["created"] == "p1" and steps["uid"] is True
    assert steps["listed"] == ["p1"] and steps["kind"] == "PodList"
    assert steps["patched"] == {"a": "b"}
    assert (steps["missing"], steps["reason"], steps["message"]) == (
        404, "NotFound", 'pods "nope" not found')
    seen = steps["seen"]
    # the initial-events-end bookmark of a watch with bookmarks and no resourceVersion, then
    # p1's life: created, patched, marked for deletion (never scheduled: grace 0), deleted
    assert seen[0][0] == "BOOKMARK" and seen[0][3] == "true"
    assert [(kind, name) for kind, name, _, _ in seen[1:]] == [
        ("ADDED", "p1"), ("MODIFIED", "p1"), ("MODIFIED", "p1"), ("DELETED", "p1")]
    revisions = [int(rv) for _, _, rv, _ in seen]
    assert revisions == sorted(revisions) and len(set(revisions[1:])) == 4


def test_an_informer_lists_watches_and_caches(server: kubewire.Server) -> None:
    steps = merged(run_script("informer.mjs", server.kubeconfig, "changes"))
    assert steps["errors"] == [], steps
    # "before" is marked for deletion (grace 0), then deleted: an update, then a delete
    assert steps["events"] == [["add", "before"], ["add", "after"], ["update", "after"],
                               ["update", "before"], ["delete", "before"]]
    assert steps["cached"] == [["after", {"seen": "yes"}]]


def test_custom_objects_and_their_watch(server: kubewire.Server) -> None:
    steps = merged(run_script("custom_objects.mjs", server.kubeconfig))
    assert steps["created"] == "g1" and steps["shape"] == "round"  # the schema's default
    assert steps["got"] == {"size": 3, "shape": "round"}
    assert (steps["refused"], steps["reason"]) == (422, "Invalid")
    assert any("too big" in cause for cause in steps["causes"]), steps["causes"]
    assert [tuple(event) for event in steps["seen"]] == [
        ("ADDED", "g1", 3), ("DELETED", "g1", 3)]


def test_an_informer_lists_again_after_410_gone(server: kubewire.Server) -> None:
    """docs/testing.md's recipe for a forced 410: the informer's resume must list again."""
    with subprocess.Popen(node_argv(server.kubeconfig, "relist"), stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=INSTALL,
                          text=True) as node:
        assert node.stdin is not None and node.stdout is not None
        node.stdin.write((SCRIPTS / "informer.mjs").read_text())
        node.stdin.close()
        synced = json.loads(node.stdout.readline())
        assert synced == {"synced": [["add", "before"]]}
        stall = server.faults.stall_streams(resource="pods", namespace="default")
        server.apply_sync({"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"name": "missed", "namespace": "default"},
                           "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
        server.faults.expire_history()
        assert server.faults.drop_watches(resource="pods", namespace="default") == 1
        server.faults.clear(stall)
        node.stdin = None  # written and closed: communicate() only reads
        try:
            out, err = node.communicate(timeout=RUN_S)
        except subprocess.TimeoutExpired:
            node.kill()
            raise
        assert node.returncode == 0, err[-3000:]
    steps = merged([json.loads(line) for line in out.splitlines() if line.strip()])
    assert steps["events"] == [["add", "before"], ["add", "missed"]]
    assert [name for name, _ in steps["cached"]] == ["before", "missed"]
    assert steps["errors"] == []  # client-node takes the 410 in its stride
    # list, watch; the watch dropped; its resume met 410 Gone: list again (then its next watch,
    # recorded when it ends, if the script's exit did not come before it was sent)
    def lists_and_watches() -> list[str] | None:
        record = [e.verb for e in server.requests(resource="pods")
                  if e.verb in ("list", "watch")]
        return record if len(record) >= 4 else None

    record = wait_for(lists_and_watches, what="the informer's requests in the record")
    assert record[:4] == ["list", "watch", "watch", "list"], record
    assert set(record[4:]) <= {"watch"}, record
