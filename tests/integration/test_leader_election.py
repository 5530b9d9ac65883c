"""Leader election on a Lease (``kubewire.client.leaderelection``) with real electors talking
HTTP to a real server: one leader at a time, takeover no sooner than the lease duration after
the last change the contender saw, release on cancel, the 409 race; and the server's own
``--leader-elect`` for its controller-manager controllers.

Leases here are 3 s: client-go notices a renewal by the record's bytes, whose times are to the
second, so a contender may see a renewing holder change only once a second."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from kubewire.client.api import Api
from kubewire.client.client import Client, create_client
from kubewire.client.errors import Conflict
from kubewire.client.leaderelection import (
    ClientEventRecorder,
    ClientLeases,
    LeaderCallbacks,
    LeaderElectionConfig,
    LeaderElector,
    Leases,
)
from kubewire.client.leaderelection.record import raw_record, record_of_spec
from kubewire.models import Lease, ObjectMeta
from kubewire.models.coordination_k8s_io_v1 import LeaseSpec
from tests.api_only import API_ONLY
from tests.integration import kubectl
from tests.integration.harness import ServerThread
from tests.integration.wire import call, create
from tests.storage_choice import sqlite_only

WAIT_S = 20.0
LOCK = "my-operator"


@pytest.fixture
async def client(server: ServerThread) -> AsyncIterator[Client]:
    async with await create_client(server.kubeconfig) as c:
        yield c


async def eventually(predicate: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(0.01)
    try:
        await asyncio.wait_for(poll(), timeout)
    except TimeoutError:
        pytest.fail(f"timed out waiting for {what}")


@dataclass
class RecordingLeases:
    """The real ``ClientLeases``, noting when each read came back and each write was sent
    (on the monotonic clock the elector uses)."""

    inner: Leases
    reads: list[tuple[float, bytes]] = field(default_factory=list)
    writes: list[tuple[float, dict[str, Any], str]] = field(default_factory=list)

    async def get(self, namespace: str, name: str) -> dict[str, Any]:
        lease = await self.inner.get(namespace, name)
        self.reads.append((time.monotonic(), raw_record(record_of_spec(lease["spec"]))))
        return lease

    async def create(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        return await self._write(self.inner.create, namespace, lease)

    async def update(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        return await self._write(self.inner.update, namespace, lease)

    async def _write(self, write: Any, namespace: str, lease: dict[str, Any],
                     ) -> dict[str, Any]:
        sent = time.monotonic()
        try:
            written: dict[str, Any] = await write(namespace, lease)
        except Exception as err:
            self.writes.append((sent, lease["spec"], type(err).__name__))
            raise
        self.writes.append((sent, lease["spec"], "ok"))
        return written


@dataclass
class Candidate:
    elector: LeaderElector
    leases: RecordingLeases
    started: list[float] = field(default_factory=list)
    work_ended: list[float] = field(default_factory=list)
    stopped: list[float] = field(default_factory=list)
    leaders_seen: list[str] = field(default_factory=list)
    task: asyncio.Task[None] | None = None

    def run(self) -> Candidate:
        self.task = asyncio.get_running_loop().create_task(self.elector.run())
        return self

    async def cancel(self) -> None:
        assert self.task is not None
        self.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self.task


def candidate(client: Client, identity: str, *, lease: float = 3.0, renew: float = 2.0,
              retry: float = 0.25, release: bool = False, name: str = LOCK,
              namespace: str = "default") -> Candidate:
    leases = RecordingLeases(ClientLeases(client))
    made: list[Candidate] = []

    async def work() -> None:
        made[0].started.append(time.monotonic())
        try:
            await asyncio.Event().wait()
        finally:
            made[0].work_ended.append(time.monotonic())

    config = LeaderElectionConfig(name=name, namespace=namespace, identity=identity,
                                  lease_duration=lease, renew_deadline=renew,
                                  retry_period=retry, release_on_cancel=release)
    elector = LeaderElector(config, LeaderCallbacks(
        on_started_leading=work,
        on_stopped_leading=lambda: made[0].stopped.append(time.monotonic()),
        on_new_leader=lambda holder: made[0].leaders_seen.append(holder)), leases)
    made.append(Candidate(elector, leases))
    return made[0]


async def lease_of(client: Client, name: str = LOCK, namespace: str = "default") -> Lease:
    return await Api(Lease, client=client, namespace=namespace).get(name)


async def test_one_leader_at_a_time_and_the_lease_names_it(client: Client) -> None:
    candidates = [candidate(client, f"candidate-{i}").run() for i in range(3)]
    await eventually(lambda: any(c.elector.leading for c in candidates), "a leader")
    loop = asyncio.get_running_loop()
    watched_until = loop.time() + 4.5  # more than a lease duration, many renewals
    while loop.time() < watched_until:
        assert sum(c.elector.leading for c in candidates) == 1
        await asyncio.sleep(0.05)
    (leader,) = [c for c in candidates if c.elector.leading]
    assert [len(c.started) for c in candidates].count(1) == 1  # one ever started leading
    lease = await lease_of(client)
    assert lease.spec is not None
    assert lease.spec.holder_identity == leader.elector.identity
    assert lease.spec.lease_duration_seconds == 3 and lease.spec.lease_transitions == 0
    assert lease.spec.renew_time is not None and len(lease.spec.renew_time) == 27  # MicroTime
    for c in candidates:  # everyone was told, once
        assert c.leaders_seen == [leader.elector.identity]
        assert c.elector.get_leader() == leader.elector.identity
    for c in candidates:
        await c.cancel()
    assert all(len(c.stopped) == 1 for c in candidates)  # called even for those never leading


async def test_a_holder_that_stops_renewing_is_replaced_a_lease_duration_after_its_last_change(
        client: Client) -> None:
    holder = candidate(client, "holder").run()
    await eventually(lambda: holder.elector.leading, "the holder to lead")
    first = await lease_of(client)
    contender = candidate(client, "contender").run()
    await asyncio.sleep(1.5)
    assert not contender.elector.leading
    await holder.cancel()  # no release: its renewals just stop
    stopped_at = time.monotonic()
    await eventually(lambda: contender.elector.leading, "the contender to take over")
    # its first write is the takeover (renewals follow at once)
    taken_at, taking, result = contender.leases.writes[0]
    assert result == "ok" and taking["holderIdentity"] == "contender"
    assert taken_at > stopped_at
    # the last change of the holder's record the contender saw before taking over
    reads = [(seen, raw) for seen, raw in contender.leases.reads if seen < taken_at]
    last_raw = reads[-1][1]
    changed_at = reads[-1][0]
    for seen, raw in reversed(reads):
        if raw != last_raw:
            break
        changed_at = seen
    assert taken_at - changed_at >= 3.0
    lease = await lease_of(client)
    assert lease.spec is not None and first.spec is not None
    assert lease.spec.holder_identity == "contender"
    assert lease.spec.lease_transitions == 1
    assert lease.spec.acquire_time != first.spec.acquire_time
    await contender.cancel()


async def test_release_on_cancel_lets_another_take_over_at_once(client: Client) -> None:
    # a 15 s lease: without the release the contender would wait 15 s
    first = candidate(client, "first", lease=15.0, renew=10.0, release=True).run()
    await eventually(lambda: first.elector.leading, "the first to lead")
    second = candidate(client, "second", lease=15.0, renew=10.0).run()
    await asyncio.sleep(0.8)
    assert not second.elector.leading
    await first.cancel()
    released_at = time.monotonic()
    await eventually(lambda: second.elector.leading, "the second to take over", timeout=5.0)
    assert time.monotonic() - released_at < 5.0
    sent, spec, result = first.leases.writes[-1]
    assert result == "ok"
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"]) == ("", 1)
    assert first.work_ended and first.work_ended[0] < sent  # the work stopped before
    assert first.stopped and first.stopped[0] >= sent
    lease = await lease_of(client)
    assert lease.spec is not None
    assert (lease.spec.holder_identity, lease.spec.lease_transitions) == ("second", 1)
    assert lease.spec.lease_duration_seconds == 15
    await second.cancel()


@dataclass
class TogetherLeases:
    """The real ``ClientLeases``; a read returns only once both candidates have read, so both
    write from the same resourceVersion."""

    inner: Leases
    both_read: asyncio.Barrier

    async def get(self, namespace: str, name: str) -> dict[str, Any]:
        try:
            return await self.inner.get(namespace, name)
        finally:
            await self.both_read.wait()

    async def create(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        return await self.inner.create(namespace, lease)

    async def update(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        return await self.inner.update(namespace, lease)


@pytest.mark.parametrize("lease", ["released", "absent"])
async def test_candidates_racing_from_one_read_get_one_winner_and_a_409(
        client: Client, lease: str) -> None:
    if lease == "released":
        await Api(Lease, client=client, namespace="default").create(Lease(
            metadata=ObjectMeta(name=LOCK),
            spec=LeaseSpec(holder_identity="", lease_duration_seconds=1, lease_transitions=4)))
    barrier = asyncio.Barrier(2)
    racers = []
    for name in ("left", "right"):
        c = candidate(client, name)
        c.leases.inner = TogetherLeases(ClientLeases(client), barrier)
        racers.append(c)
    results = await asyncio.gather(*(c.elector.try_acquire_or_renew() for c in racers))
    assert sorted(results) == [False, True]
    winner, loser = racers if results[0] else racers[::-1]
    refused = {"released": "Conflict", "absent": "AlreadyExists"}[lease]
    assert [result for _, _, result in loser.leases.writes] == [refused]
    assert not loser.elector.is_leader() and winner.elector.is_leader()
    got = await lease_of(client)
    assert got.spec is not None and got.spec.holder_identity == winner.elector.identity
    assert got.spec.lease_transitions == (5 if lease == "released" else 0)
    # the loser's next try reads the winner's lease and leaves it alone
    loser.leases.inner = ClientLeases(client)
    assert not await loser.elector.try_acquire_or_renew()
    assert loser.elector.get_leader() == winner.elector.identity


async def test_a_stale_update_is_refused_with_409(client: Client) -> None:
    """The lock's update carries the resourceVersion it read: a write in between → 409."""
    first = candidate(client, "first")
    assert await first.elector.try_acquire_or_renew()
    current = await lease_of(client)
    assert current.spec is not None and current.metadata is not None
    current.spec.holder_identity = "someone-else"
    await Api(Lease, client=client, namespace="default").replace(current)
    with pytest.raises(Conflict):  # the fast path's write, from the stale read
        await first.elector.lock.update(replace(first.elector.observed.record))
    # a full try falls back to reading, sees the other holder, and refuses to take it
    assert not await first.elector.try_acquire_or_renew()
    assert first.elector.get_leader() == "someone-else"


async def test_became_leader_and_stopped_leading_events_are_recorded(client: Client) -> None:
    recorder = ClientEventRecorder(client, "my-operator")
    elector = LeaderElector(
        LeaderElectionConfig(name=LOCK, namespace="default", identity="me", lease_duration=3.0,
                             renew_deadline=2.0, retry_period=0.25),
        LeaderCallbacks(on_started_leading=asyncio.Event().wait,
                        on_stopped_leading=lambda: None),
        ClientLeases(client), events=recorder)
    running = asyncio.get_running_loop().create_task(elector.run())
    await eventually(lambda: elector.leading, "the elector to lead")
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    await recorder.flush()
    lease = await lease_of(client)
    assert lease.metadata is not None
    found = await Api(dict, client=client, api_version="v1", kind="Event").list(
        namespace="default")
    events = sorted(found.items, key=lambda e: str(e["message"]))
    assert [e["message"] for e in events] == ["me became leader", "me stopped leading"]
    for event in events:
        assert event["reason"] == "LeaderElection" and event["type"] == "Normal"
        assert event["source"] == {"component": "my-operator"}
        assert event["reportingComponent"] == "my-operator" and event["count"] == 1
        involved = event["involvedObject"]
        assert (involved["kind"], involved["apiVersion"], involved["name"], involved["uid"]) == (
            "Lease", "coordination.k8s.io/v1", LOCK, lease.metadata.uid)
        assert str(event["metadata"]["name"]).startswith(f"{LOCK}.")


def test_constructor_refuses_with_client_gos_texts() -> None:
    callbacks = LeaderCallbacks(on_started_leading=None, on_stopped_leading=lambda: None)

    def made(**overrides: Any) -> str:
        config = LeaderElectionConfig(name="x", namespace="y", identity="me", **overrides)
        with pytest.raises(ValueError) as refused:
            LeaderElector(config, callbacks, ClientLeases.__new__(ClientLeases))
        return str(refused.value)

    assert made(lease_duration=10.0) == "leaseDuration must be greater than renewDeadline"
    assert made(retry_period=9.0) == "renewDeadline must be greater than retryPeriod*JitterFactor"
    assert made() == "OnStartedLeading callback must not be nil"


# --- the server's --leader-elect ----------------------------------------------------------

SERVER_ELECTION = {"leader_elect": True, "leader_elect_lease_duration_s": 3.0,
                   "leader_elect_renew_deadline_s": 2.0, "leader_elect_retry_period_s": 0.2}


def _controllers(server: ServerThread) -> Any:
    assert server.server is not None
    return server.server.controllers


@sqlite_only("on etcd the server elects from its first start, so the operator cannot lead first")
async def test_server_runs_namespace_finalization_only_while_it_holds_the_lease(
        make_server: Callable[..., ServerThread]) -> None:
    server = make_server(namespace_deletion_delay_s=0.0)
    async with await create_client(server.kubeconfig) as client:
        # an elector already holds the controller-manager lease when the server starts
        # electing (a restart on the same data dir and port, the elector renewing throughout)
        operator = candidate(client, "operator", lease=8.0, renew=6.0, release=True,
                             name="kube-controller-manager", namespace="kube-system").run()
        await eventually(lambda: operator.elector.leading, "the operator to lead")
        server.config = replace(server.config, **SERVER_ELECTION)
        started = time.monotonic()
        await asyncio.to_thread(server.restart)
        assert time.monotonic() - started < 8.0  # start did not wait for controllers it lacks
        assert server.call(lambda: _controllers(server).idle)
        create(server, "/api/v1/namespaces", {"metadata": {"name": "doomed"}})
        create(server, "/api/v1/namespaces", {"metadata": {"name": "waiting"}})
        assert call(server, "DELETE", "/api/v1/namespaces/doomed").status == 200
        await asyncio.sleep(4.0)  # more than the server's own lease duration
        assert operator.elector.leading
        assert not server.call(lambda: _controllers(server).leadership.leading)
        left = call(server, "GET", "/api/v1/namespaces/doomed")
        assert left.status == 200 and left.json["status"]["phase"] == "Terminating"
        accounts = call(server, "GET", "/api/v1/namespaces/waiting/serviceaccounts")
        assert accounts.json["items"] == []  # the serviceaccount controller waits too

        await operator.cancel()  # releases the lease: the server takes it at once
        await eventually(lambda: call(server, "GET", "/api/v1/namespaces/doomed").status == 404,
                         "the namespace to be finalized", timeout=10.0)
        await eventually(lambda: call(server, "GET", "/api/v1/namespaces/waiting/"
                                      "serviceaccounts/default").status == 200,
                         "the default ServiceAccount of a namespace made meanwhile")
        identity = server.call(lambda: _controllers(server).leadership.identity)
        shown = kubectl.ok(server, "get", "lease", "-n", "kube-system",
                           "kube-controller-manager", "-o", "yaml")
        assert f"holderIdentity: {identity}" in shown
        assert "leaseTransitions: 1" in shown and "leaseDurationSeconds: 3" in shown
        hostname, _, uuid = identity.rpartition("_")
        assert hostname and len(uuid) == 36
        events = kubectl.ok(server, "get", "events", "-n", "kube-system")
        assert f"LeaderElection   lease/kube-controller-manager   {identity} became leader" \
            in events


async def test_server_stops_its_controllers_when_it_loses_the_lease_and_campaigns_again(
        make_server: Callable[..., ServerThread]) -> None:
    server = make_server(namespace_deletion_delay_s=0.0, **SERVER_ELECTION)
    assert server.call(lambda: _controllers(server).leadership.leading)
    identity = server.call(lambda: _controllers(server).leadership.identity)
    async with await create_client(server.kubeconfig) as client:
        leases = Api(Lease, client=client, namespace="kube-system")
        while True:  # another writes itself into the lease (not by the rules): 6 s for it
            lease = await leases.get("kube-controller-manager")
            assert lease.spec is not None
            lease.spec.holder_identity, lease.spec.lease_duration_seconds = "intruder", 6
            try:
                await leases.replace(lease)
                break
            except Conflict:
                continue
        # the server's renewals fail (409, then a valid lease of another) until its deadline
        await eventually(lambda: not server.call(lambda: _controllers(server)._kcm_running),
                         "the server to stop its controllers", timeout=10.0)
        assert not server.call(lambda: _controllers(server).leadership.leading)
        create(server, "/api/v1/namespaces", {"metadata": {"name": "orphan"}})
        assert call(server, "DELETE", "/api/v1/namespaces/orphan").status == 200
        await asyncio.sleep(1.0)
        assert call(server, "GET", "/api/v1/namespaces/orphan").json["status"]["phase"] == \
            "Terminating"
        assert (await leases.get("kube-controller-manager")).spec.holder_identity == "intruder"  # type: ignore[union-attr]
        # 6 s after it saw the intruder's write, the server takes the lease back and its
        # controllers start again: the namespace is finalized
        await eventually(lambda: call(server, "GET", "/api/v1/namespaces/orphan").status == 404,
                         "the namespace to be finalized once the server leads again")
        taken = await leases.get("kube-controller-manager")
        assert taken.spec is not None
        assert (taken.spec.holder_identity, taken.spec.lease_transitions) == (identity, 1)
        assert server.call(lambda: _controllers(server).leadership.leading)


def test_serve_takes_kube_controller_managers_leader_election_flags(
        capsys: pytest.CaptureFixture[str]) -> None:
    from kubewire import cli

    def config(*flags: str) -> Any:
        return cli.config_from_args(cli.build_parser().parse_args(["serve", *API_ONLY, *flags]))

    default = config()
    assert not default.leader_elect
    assert (default.leader_elect_lease_duration_s, default.leader_elect_renew_deadline_s,
            default.leader_elect_retry_period_s) == (15.0, 10.0, 2.0)
    assert (default.leader_elect_resource_namespace, default.leader_elect_resource_name) == (
        "kube-system", "kube-controller-manager")
    chosen = config("--leader-elect", "--leader-elect-lease-duration", "1m",
                    "--leader-elect-renew-deadline", "30s", "--leader-elect-retry-period",
                    "500ms", "--leader-elect-resource-name", "kcm",
                    "--leader-elect-resource-namespace", "ops")
    assert chosen.leader_elect
    assert (chosen.leader_elect_lease_duration_s, chosen.leader_elect_renew_deadline_s,
            chosen.leader_elect_retry_period_s) == (60.0, 30.0, 0.5)
    assert (chosen.leader_elect_resource_namespace, chosen.leader_elect_resource_name) == (
        "ops", "kcm")
    assert config("--leader-elect=true").leader_elect
    assert not config("--leader-elect=false").leader_elect
    with pytest.raises(SystemExit) as refused:
        cli.main(["serve", *API_ONLY, "--leader-elect", "--leader-elect-renew-deadline", "20s"])
    assert refused.value.code == 2
    assert "leaseDuration must be greater than renewDeadline" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["serve", *API_ONLY, "--leader-elect=maybe"])
    assert 'strconv.ParseBool: parsing "maybe": invalid syntax' in capsys.readouterr().err
