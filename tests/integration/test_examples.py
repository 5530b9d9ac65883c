"""Every script in ``examples/`` runs against a real server and prints what it should.

Each example runs as a subprocess with ``KUBECONFIG`` pointing at the test's server. With
``--watch-only`` the test makes the writes the example is meant to observe (after the example
says it is watching) and asserts on the lines it printed, in order. Without it, on a fresh
server, each example shows the changes it makes itself, within its default bounds, and leaves
nothing behind (``test_on_a_fresh_server_each_example_shows_its_own_changes``). The examples
stop by themselves (``--max-events``, ``--timeout``), so a broken one fails here instead of
hanging.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from pathlib import Path

import pytest

from kubewire.client import Api, Client, Gone, NotFound, PatchType, create_client
from kubewire.models import ConfigMap, Deployment, Namespace, ObjectMeta, Pod, Service
from kubewire.models.apps_v1 import DeploymentSpec
from kubewire.models.core_v1 import Container, PodSpec, PodTemplateSpec, ServicePort, ServiceSpec
from kubewire.models.meta_v1 import LabelSelector
from kubewire.storage.base import Retention
from tests.integration.harness import ServerThread

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WAIT_S = 20.0  # bound on every wait for a line or an exit


class Example:
    """One example script as a subprocess; its stdout read line by line as it comes."""

    def __init__(self, proc: asyncio.subprocess.Process, name: str) -> None:
        self.proc = proc
        self.name = name
        self.lines: list[str] = []

    async def _next_line(self) -> str | None:
        assert self.proc.stdout is not None
        raw = await asyncio.wait_for(self.proc.stdout.readline(), WAIT_S)
        if not raw:
            return None
        line = raw.decode().rstrip("\n")
        self.lines.append(line)
        return line

    async def expect(self, pattern: str) -> re.Match[str]:
        """Read lines until one matches ``pattern`` entirely; fail if the example ends or
        stalls first."""
        try:
            while (line := await self._next_line()) is not None:
                if match := re.fullmatch(pattern, line):
                    return match
        except TimeoutError:
            pass
        return pytest.fail(f"{self.name}: no line matching {pattern!r} in:\n{self.output()}")

    async def finish(self) -> list[str]:
        """Wait for the example to stop by itself; all its lines. Fails unless it exits 0."""
        try:
            while await self._next_line() is not None:
                pass
            code = await asyncio.wait_for(self.proc.wait(), WAIT_S)
        except TimeoutError:
            pytest.fail(f"{self.name} did not stop by itself:\n{self.output()}")
        assert code == 0, f"{self.name} exited {code}:\n{self.output()}"
        return self.lines

    def output(self) -> str:
        return "\n".join(self.lines) + "\n--- stderr: see the captured output ---"


Run = Callable[..., Awaitable[Example]]


@pytest.fixture
async def run_example(tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[Example]]]:
    """``await run_example(server, "watch_basic.py", "--max-events", "3")``."""
    started: list[Example] = []

    async def start(server: ServerThread, script: str, *args: str,
                    kubeconfig: Path | None = None) -> Example:
        env = {key: value for key, value in os.environ.items()
               if not key.startswith(("EXAMPLES_", "KUBERNETES_"))}
        env |= {"KUBECONFIG": str(kubeconfig or server.kubeconfig), "PYTHONUNBUFFERED": "1",
                "HOME": str(tmp_path)}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(EXAMPLES / script), *args, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=None)
        example = Example(proc, script)
        started.append(example)
        return example

    yield start
    for example in started:
        if example.proc.returncode is None:
            example.proc.kill()
            await example.proc.wait()


@pytest.fixture
async def client(server: ServerThread) -> AsyncIterator[Client]:
    async with await create_client(server.kubeconfig) as c:
        yield c


def pod(name: str, namespace: str | None = None, **labels: str) -> Pod:
    return Pod(metadata=ObjectMeta(name=name, namespace=namespace, labels=labels or None),
               spec=PodSpec(containers=[Container(name="app", image="nginx")]))


def with_context_namespace(server: ServerThread, namespace: str, directory: Path) -> Path:
    """A copy of the server's kubeconfig whose context names ``namespace``."""
    text = server.kubeconfig.read_text()
    assert "namespace: default" in text
    path = directory / f"kubeconfig-{namespace}"
    path.write_text(text.replace("namespace: default", f"namespace: {namespace}"))
    return path


async def test_watch_basic_uses_the_context_namespace(
        server: ServerThread, client: Client, run_example: Run, tmp_path: Path) -> None:
    await Api(Namespace, client=client).create(Namespace(metadata=ObjectMeta(name="team-a")))
    pods = Api(Pod, client=client, namespace="team-a")
    await pods.create(pod("web"))
    await Api(Pod, client=client).create(pod("elsewhere"))  # in default: not watched
    example = await run_example(server, "watch_basic.py", "--watch-only", "--max-events", "4",
                                kubeconfig=with_context_namespace(server, "team-a", tmp_path))
    await example.expect("ADDED team-a/web: new pod")  # the watch is up
    await pods.create(pod("api"))
    await pods.delete("web")
    assert await example.finish() == [
        "watching pods in namespace team-a",
        "ADDED team-a/web: new pod",
        "ADDED team-a/api: new pod",
        "MODIFIED team-a/web: phase Pending",  # marked for deletion, then removed
        "DELETED team-a/web: pod gone",
        "stopping after 4 events",
    ]


async def test_watch_selectors(server: ServerThread, client: Client, run_example: Run) -> None:
    pods = Api(Pod, client=client)
    await pods.create(pod("listed", app="nginx", env="production"))
    await pods.patch_status("listed", {"status": {"phase": "Running"}})
    example = await run_example(server, "watch_selectors.py", "--watch-only",
                                "--max-events", "4")
    await example.expect("watching pods .*")
    await pods.create(pod("web", app="nginx", env="production"))  # Pending: filtered out
    await pods.create(pod("staging", app="nginx", env="staging"))
    await pods.patch_status("staging", {"status": {"phase": "Running"}})  # wrong label
    await pods.patch_status("web", {"status": {"phase": "Running"}})  # now it matches
    await pods.patch("web", {"metadata": {"labels": {"env": "test"}}})  # and no longer
    await pods.delete("listed")
    assert await example.finish() == [
        "LISTED default/listed",
        "watching pods in namespace default where app=nginx,env=production and "
        "status.phase=Running",
        "ADDED default/web labels app=nginx,env=production phase Running",
        # Leaving the selection is a DELETED carrying the last state that matched.
        "DELETED default/web labels app=nginx,env=production phase Running",
        "MODIFIED default/listed labels app=nginx,env=production phase Running",
        "DELETED default/listed labels app=nginx,env=production phase Running",
        "stopping after 4 events",
    ]


async def test_watch_bookmarks(make_server: Callable[..., ServerThread],
                               run_example: Run) -> None:
    server = make_server(bookmark_interval_s=0.5)
    async with await create_client(server.kubeconfig) as client:
        example = await run_example(server, "watch_bookmarks.py", "--watch-only",
                                    "--max-events", "3")
        start = int((await example.expect(r"watching pods in namespace default "
                                          r"from resourceVersion=(\d+)"))[1])
        maps = Api(ConfigMap, client=client)

        async def keep_writing() -> None:  # bookmarks come only when the store moved on
            for i in range(200):
                await maps.create(ConfigMap(metadata=ObjectMeta(name=f"tick-{i}")))
                await asyncio.sleep(0.1)

        writer = asyncio.create_task(keep_writing())
        try:
            lines = await example.finish()
        finally:
            writer.cancel()
    marks = [int(m[1]) for line in lines
             if (m := re.fullmatch(r"BOOKMARK checkpoint: resourceVersion=(\d+)", line))]
    assert len(marks) == 3, lines
    assert start < marks[0] < marks[1] < marks[2]
    assert lines[-2:] == ["stopping after 3 bookmarks",
                          f"resume later from resourceVersion={marks[2]}"]
    assert len(lines) == 6  # nothing but the bookmarks: no Pod changed


async def test_watch_all_namespaces(server: ServerThread, client: Client,
                                    run_example: Run) -> None:
    await Api(Namespace, client=client).create(Namespace(metadata=ObjectMeta(name="team-a")))
    await Api(Pod, client=client).create(pod("a"))
    team_a = Api(Pod, client=client, namespace="team-a")
    await team_a.create(pod("b"))
    example = await run_example(server, "watch_all_namespaces.py", "--watch-only",
                                "--max-events", "5")
    first = {(await example.expect("ADDED: .*"))[0], (await example.expect("ADDED: .*"))[0]}
    assert first == {"ADDED: default/a", "ADDED: team-a/b"}  # the existing ones first
    await team_a.create(pod("c"))
    await Api(Pod, client=client).delete("a")
    lines = await example.finish()
    assert lines[0] == "watching pods in all namespaces"
    assert lines[3:] == ["ADDED: team-a/c", "MODIFIED: default/a", "DELETED: default/a",
                         "stopping after 5 events"]


async def test_watch_initial_events(server: ServerThread, client: Client,
                                    run_example: Run) -> None:
    pods = Api(Pod, client=client)
    for name in ("a", "b"):
        await pods.create(pod(name))
    example = await run_example(server, "watch_initial_events.py", "--watch-only",
                                "--max-events", "3")
    await example.expect("initial list complete, watching for changes now")
    await pods.create(pod("c"))
    lines = await example.finish()
    assert lines[0] == "watching pods in namespace default with initial events"
    assert sorted(lines[1:3]) == ["ADDED default/a", "ADDED default/b"]
    assert lines[3:] == ["initial list complete, watching for changes now",
                         "ADDED default/c", "stopping after 3 events"]


async def test_watch_restart_on_gone(make_server: Callable[..., ServerThread],
                                     run_example: Run) -> None:
    server = make_server(ring_capacity=8, retention=Retention(max_changes=10, max_age_s=None))
    async with await create_client(server.kubeconfig) as client:
        pods = Api(Pod, client=client)
        await pods.create(pod("kept"))
        checkpoint = (await pods.list()).resource_version
        await pods.create(pod("lost"))
        await pods.delete("lost")  # never seen: the checkpoint is compacted away
        for i in range(4):  # more Pod changes than the ring and the log retain
            await pods.create(pod(f"churn-{i}"))
            await pods.delete(f"churn-{i}")
        await compact_now(server)
        with pytest.raises(Gone):
            async with aclosing(pods.watch(resource_version=checkpoint)) as stream:
                await asyncio.wait_for(anext(stream), WAIT_S)
        example = await run_example(server, "watch_restart_on_gone.py", "--watch-only",
                                    "--max-events", "1",
                                    "--resource-version", checkpoint)
        await example.expect("watching again from the list's resourceVersion")
        await pods.create(pod("after"))
        assert await example.finish() == [
            "watching pods in namespace default from the checkpoint",
            "410 Gone: the checkpoint was compacted; listing again",
            "LISTED default/kept",
            "watching again from the list's resourceVersion",
            "ADDED default/after",
            "stopping after 1 events",
        ]


async def compact_now(server: ServerThread) -> None:
    """Compact the server's change log now (it does so by itself every 1000 changes or 60 s,
    too slow for a test)."""
    assert server.server is not None
    store = server.server.ctx.store
    task = server.call(lambda: asyncio.ensure_future(store.compact()))
    while not server.call(task.done):
        await asyncio.sleep(0.01)
    assert server.call(task.exception) is None


async def test_watch_server_timeout(server: ServerThread, client: Client,
                                    run_example: Run) -> None:
    pods = Api(Pod, client=client)
    example = await run_example(server, "watch_server_timeout.py", "--watch-only",
                                "--watch-timeout", "2",
                                "--rounds", "3")
    await example.expect("round 1: watching pods in namespace default for 2s")
    await pods.create(pod("a"))
    await example.expect("round 2: watching pods in namespace default for 2s")
    await pods.create(pod("b"))
    lines = await example.finish()
    # Each change exactly once, whichever watch it fell into.
    assert [line for line in lines if not line.startswith(("round", "stopping"))] == [
        "ADDED default/a", "ADDED default/b"]
    assert [line for line in lines if line.startswith("round")] == [
        line for round_ in (1, 2, 3) for line in (
            f"round {round_}: watching pods in namespace default for 2s",
            f"round {round_}: the server ended the watch; resuming from the last "
            "resourceVersion")]
    assert lines[-1] == "stopping after 3 rounds (2 events)"


async def test_create_watch_delete(server: ServerThread, client: Client,
                                   run_example: Run) -> None:
    example = await run_example(server, "create_watch_delete.py")
    lines = await example.finish()
    created = re.fullmatch(r"created (default/example-pod-\w+)", lines[0])
    assert created, lines
    name = created[1]
    assert lines[1:] == [f"watch: ADDED {name}", "delete answered with a Pod",
                         f"watch: MODIFIED {name}", f"watch: DELETED {name}", "done"]
    assert len(await Api(Pod, client=client).list()) == 0


async def test_watch_many_kinds(server: ServerThread, client: Client,
                                run_example: Run) -> None:
    example = await run_example(server, "watch_many_kinds.py", "--watch-only",
                                "--max-events", "3")
    await example.expect("watching pods, services and deployments in namespace default")
    await Api(Pod, client=client).create(pod("p"))
    await example.expect("Pod ADDED: default/p")
    await Api(Service, client=client).create(Service(
        metadata=ObjectMeta(name="s"),
        spec=ServiceSpec(selector={"app": "web"}, ports=[ServicePort(port=80)])))
    await example.expect("Service ADDED: default/s")
    labels = {"app": "web"}
    await Api(Deployment, client=client).create(Deployment(
        metadata=ObjectMeta(name="d"),
        spec=DeploymentSpec(selector=LabelSelector(match_labels=labels), template=PodTemplateSpec(
            metadata=ObjectMeta(labels=labels),
            spec=PodSpec(containers=[Container(name="app", image="nginx")])))))
    assert await example.finish() == [
        "watching pods, services and deployments in namespace default",
        "Pod ADDED: default/p", "Service ADDED: default/s", "Deployment ADDED: default/d",
        "stopping after 3 events"]


async def test_controller_loop(server: ServerThread, client: Client,
                               run_example: Run) -> None:
    pods = Api(Pod, client=client)
    example = await run_example(server, "controller_loop.py", "--watch-only", "--max-events", "3")
    await example.expect("controller running .*")
    await pods.create(pod("ignored"))  # not labelled: not the controller's
    await pods.create(pod("managed", **{"managed-by": "simple-controller"}))
    await example.expect("default/managed: managing it, added finalizer .*")
    managed = await pods.get("managed")
    assert managed.metadata is not None
    assert managed.metadata.finalizers == ["simple-controller/cleanup"]
    await pods.delete("managed")  # stays, marked, until the controller lets go
    assert await example.finish() == [
        "controller running for pods in namespace default labelled "
        "managed-by=simple-controller",
        "default/managed: managing it, added finalizer simple-controller/cleanup",
        "default/managed: being deleted, cleaning up",
        "default/managed: cleaned up, removed finalizer simple-controller/cleanup",
        "default/managed: gone, forgotten",
        "stopping after 3 actions",
    ]
    with pytest.raises(NotFound):
        await pods.get("managed")
    ignored = await pods.get("ignored")
    assert ignored.metadata is not None and ignored.metadata.finalizers is None


async def test_informer_indexers(server: ServerThread, client: Client,
                                 run_example: Run) -> None:
    pods = Api(Pod, client=client)
    await pods.create(pod("a", app="web"))
    await pods.create(pod("b", app="db"))
    example = await run_example(server, "informer_indexers.py", "--watch-only",
                                "--max-events", "5")
    await example.expect("synced: 2 pods in namespace default")
    await pods.patch("b", {"metadata": {"labels": {"app": "web"}}}, type=PatchType.MERGE)
    await example.expect("update default/b app=db->web")
    await pods.delete("a")
    assert await example.finish() == [
        "add default/a app=web",
        "  index label:app: web=[default/a]",
        "  index phase: Pending=[default/a]",
        "add default/b app=db",
        "  index label:app: db=[default/b] web=[default/a]",
        "  index phase: Pending=[default/a,default/b]",
        "synced: 2 pods in namespace default",
        "update default/b app=db->web",
        "  index label:app: web=[default/a,default/b]",
        "  index phase: Pending=[default/a,default/b]",
        "update default/a app=web->web",  # marked for deletion
        "  index label:app: web=[default/a,default/b]",
        "  index phase: Pending=[default/a,default/b]",
        "delete default/a",
        "  index label:app: web=[default/b]",
        "  index phase: Pending=[default/b]",
        "stopping after 5 changes",
    ]


async def test_compat_watch_stream(server: ServerThread, client: Client,
                                   run_example: Run) -> None:
    pods = Api(Pod, client=client)
    example = await run_example(server, "compat_watch_stream.py", "--watch-only")
    await example.expect("Starting to watch pods in default namespace...")
    await pods.create(pod("other"))
    await pods.create(pod("target-pod"))
    await pods.delete("target-pod")
    lines = await example.finish()

    def block(event_type: str, name: str) -> list[str]:
        return [f"{event_type}: Pod {name}", "  Namespace: default", "  Phase: Pending",
                "  Node: Not scheduled", "---"]

    assert lines == [
        "Starting to watch pods in default namespace...",
        *block("ADDED", "other"), *block("ADDED", "target-pod"),
        *block("MODIFIED", "target-pod"), *block("DELETED", "target-pod"),
        "Target pod deleted, stopping watch",
        "Watch stream closed",
    ]


# What each example prints on a fresh server with its defaults, among other lines; its last line.
FRESH: dict[str, tuple[list[str], str]] = {
    "watch_basic.py": (["watching pods in namespace default",
                        "ADDED default/example-basic-1: new pod",
                        "MODIFIED default/example-basic-1: phase Pending",
                        "DELETED default/example-basic-1: pod gone"], "stopping after 10 events"),
    "watch_selectors.py": (
        ["watching pods in namespace default where app=nginx,env=production and "
         "status.phase=Running",
         "ADDED default/example-selected-1 labels app=nginx,env=production phase Running",
         "DELETED default/example-selected-1 labels app=nginx,env=production phase Running"],
        "stopping after 10 events"),
    "watch_bookmarks.py": ([], r"resume later from resourceVersion=\d+"),  # and 3 BOOKMARKs
    "watch_all_namespaces.py": (["watching pods in all namespaces",
                                 "ADDED: default/example-everywhere-1",
                                 "DELETED: default/example-everywhere-1"],
                                "stopping after 10 events"),
    "watch_initial_events.py": (["initial list complete, watching for changes now",
                                 "ADDED default/example-initial-1",
                                 "DELETED default/example-initial-1"], "stopping after 10 events"),
    "watch_restart_on_gone.py": (["watching pods in namespace default from the checkpoint",
                                  "ADDED default/example-resumed-1",
                                  "DELETED default/example-resumed-1"],
                                 "stopping after 10 events"),
    "watch_server_timeout.py": (["ADDED default/example-rounds-1",
                                 "round 3: the server ended the watch; resuming from the last "
                                 "resourceVersion"], r"stopping after 3 rounds \(\d+ events\)"),
    "watch_many_kinds.py": (["Pod ADDED: default/example-kinds-1",
                             "Service ADDED: default/example-kinds-1",
                             "Deployment ADDED: default/example-kinds-1"],
                            "stopping after 10 events"),
    "controller_loop.py": (
        ["default/example-managed-1: managing it, added finalizer simple-controller/cleanup",
         "default/example-managed-1: cleaned up, removed finalizer simple-controller/cleanup",
         "default/example-managed-1: gone, forgotten"], "stopping after 10 actions"),
    "informer_indexers.py": (["add default/example-indexed-1 app=web",
                              "update default/example-indexed-1 app=web->db",
                              "delete default/example-indexed-1"], "stopping after 10 changes"),
    "compat_watch_stream.py": (["ADDED: Pod target-pod", "DELETED: Pod target-pod",
                                "Target pod deleted, stopping watch"], "Watch stream closed"),
}


@pytest.mark.parametrize("script", sorted(FRESH))
async def test_on_a_fresh_server_each_example_shows_its_own_changes(
        make_server: Callable[..., ServerThread], run_example: Run, script: str) -> None:
    # kube and kubewire send a bookmark about once a minute; the test has no minutes to spare
    server = make_server(**({"bookmark_interval_s": 0.5} if "bookmarks" in script else {}))
    example = await run_example(server, script)  # its defaults: no --watch-only, no bounds
    lines = await example.finish()
    needed, last = FRESH[script]
    if "bookmarks" in script:
        needed = [line for line in lines if line.startswith("BOOKMARK")][:3]
        assert len(needed) == 3, lines
    assert [line for line in needed if line not in lines] == [], lines
    assert re.fullmatch(last, lines[-1]), lines
    async with await create_client(server.kubeconfig) as client:  # and nothing left behind
        for kind in (Pod, Service, Deployment, ConfigMap):
            left = [obj.metadata.name for obj in await Api(kind, client=client).list()]
            assert [name for name in left
                    if name and name.startswith(("example-", "target-pod"))] == []


def test_every_example_is_tested() -> None:
    scripts = {path.name for path in EXAMPLES.glob("*.py") if not path.name.startswith("_")}
    tested = {name.removeprefix("test_") + ".py" for name in globals()
              if name.startswith("test_") and name != "test_every_example_is_tested"}
    tested |= {"watch_basic.py"}  # test_watch_basic_uses_the_context_namespace
    assert scripts <= tested, f"untested examples: {sorted(scripts - tested)}"
