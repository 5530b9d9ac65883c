"""``kubewire simulate`` against a real server: the operations land at about the rate (counted
from watches), the bound holds, ``--cleanup`` leaves nothing, Ctrl-C ends a run cleanly."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubewire.client import Api
from kubewire.client.client import Client, create_client
from kubewire.cluster.churn import API_VERSIONS, KINDS, ChurnOptions, ChurnPlan, selector
from kubewire.cluster.churn_runner import ChurnRunner
from tests.integration.harness import ServerThread
from tests.integration.wire import call, ok

KUBEWIRE = (sys.executable, "-m", "kubewire.cli")


@pytest.fixture
async def client(server: ServerThread) -> AsyncIterator[Client]:
    async with await create_client(server.kubeconfig) as c:
        yield c


async def _watch(client: Client, kind: str, seen: Counter[tuple[str, str]],
                 live: dict[str, int], peak: list[int]) -> None:
    api: Api[dict[str, Any]] = Api(dict, client=client, namespace=None,
                                   api_version=API_VERSIONS[kind], kind=kind)
    async for ev in api.watch(namespace=None, label_selector=selector()):
        t = ev.type.value
        if t not in ("ADDED", "MODIFIED", "DELETED"):
            continue
        seen[(t, kind)] += 1
        meta = ev.object["metadata"] if isinstance(ev.object, dict) else {}
        key = f"{kind}/{meta.get('namespace')}/{meta.get('name')}"
        if t == "DELETED" or meta.get("deletionTimestamp"):  # being deleted: not held
            live.pop(key, None)
        else:
            live[key] = 1
        peak[0] = max(peak[0], len(live))


async def test_ops_at_the_rate_bounded_and_seen_by_watches(client: Client) -> None:
    seen: Counter[tuple[str, str]] = Counter()
    live: dict[str, int] = {}
    peak = [0]
    watches = [asyncio.create_task(_watch(client, k, seen, live, peak)) for k in KINDS]
    await asyncio.sleep(0.3)  # the watches are open before the first write
    plan = ChurnPlan(ChurnOptions(rate=40, duration=2.0, max_objects=12, seed=5,
                                  run_id="t1", namespaces=("default",)))
    runner = ChurnRunner(client, plan)
    stats = await runner.run()
    for _ in range(400):  # the watches catch up with the last answers
        if all(seen[(t, k)] == stats.ok[(o, k)] for k in KINDS
               for t, o in (("ADDED", "create"), ("DELETED", "delete"))):
            break  # (a pod on a simulated node goes once its kubelet ends it)
        await asyncio.sleep(0.05)
    for w in watches:
        assert not w.done(), w.exception()
        w.cancel()
    await asyncio.gather(*watches, return_exceptions=True)
    # 2 s at 40/s: the 80 slots due before the end, each an operation or skipped
    assert stats.done + stats.skipped == 80
    assert not stats.errors, stats.errors
    creates = {k: stats.ok[("create", k)] for k in KINDS}
    deletes = {k: stats.ok[("delete", k)] for k in KINDS}
    assert {k: seen[("ADDED", k)] for k in KINDS} == creates
    assert {k: seen[("DELETED", k)] for k in KINDS} == deletes
    assert seen[("MODIFIED", "Deployment")] > 0 or stats.ok[("scale", "Deployment")] == 0
    assert peak[0] <= 12
    assert plan.held() == sum(creates.values()) - sum(deletes.values())
    assert await runner.cleanup([], "t1") == plan.held()
    for kind in KINDS:
        api: Api[dict[str, Any]] = Api(dict, client=client, namespace=None,
                                       api_version=API_VERSIONS[kind], kind=kind)
        left = (await api.list(namespace=None, label_selector=selector("t1"))).items
        assert [i for i in left if not i["metadata"].get("deletionTimestamp")] == []


def _count_ours(server: ServerThread) -> int:
    total = 0
    for path in ("/apis/apps/v1/deployments", "/api/v1/pods", "/api/v1/services",
                 "/api/v1/configmaps"):
        body = ok(call(server, "GET", f"{path}?labelSelector={selector()}"), 200)
        # deleted; a pod on a simulated node may still be terminating
        total += sum(1 for i in body["items"] if not i["metadata"].get("deletionTimestamp"))
    return total


def test_cli_runs_bounded_and_cleans_up(server: ServerThread) -> None:
    done = subprocess.run(
        [*KUBEWIRE, "simulate", "--kubeconfig", str(server.kubeconfig), "--rate", "100",
         "--max-ops", "60", "--max-objects", "6", "--namespaces", "2", "--seed", "3",
         "--ops", "create=3,update=1,scale=1", "--cleanup"],
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "OPERATION" in done.stdout and "60 operations" in done.stdout
    assert "delete" not in done.stdout.split("cleanup")[0]  # the mix had no deletes
    # six creates at most: the bound held, everything else was a scale or an update
    creates = sum(int(line.split()[2]) + int(line.split()[3]) for line in done.stdout.splitlines()
                  if line.startswith("create"))
    assert creates == 6
    assert "cleanup: deleted 6 objects and namespaces sim-0, sim-1" in done.stdout
    assert _count_ours(server) == 0
    for ns in ("sim-0", "sim-1"):
        got = call(server, "GET", f"/api/v1/namespaces/{ns}")
        assert got.status == 404 or ok(got, 200)["status"]["phase"] == "Terminating"


def test_cli_bad_flags_and_ctrl_c(server: ServerThread) -> None:
    bad = subprocess.run([*KUBEWIRE, "simulate", "--kubeconfig", str(server.kubeconfig),
                          "--ops", "frob=1"], capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "frob=1" in bad.stderr
    proc = subprocess.Popen(
        [*KUBEWIRE, "simulate", "--kubeconfig", str(server.kubeconfig), "--rate", "20",
         "--cleanup"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stderr is not None
    lines = []
    while True:  # until the first live summary line: the run is under way
        line = proc.stderr.readline()
        assert line, "simulate ended early"
        lines.append(line)
        if " ops " in line:
            break
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "OPERATION" in out and "cleanup: deleted" in out
    assert _count_ours(server) == 0
