"""An asyncio etcd v3 client on ``grpc.aio`` and the stubs in ``pb`` (generated from etcd's
rpc.proto): exactly the calls kube's etcd3 store makes, with etcd's own revisions and headers.

Written here rather than taken from PyPI because no maintained asyncio client does what kube
needs (see the package docstring). Every unary call has a deadline (``timeout``); reads and
``status`` are retried by gRPC on ``UNAVAILABLE`` (safe: they change nothing), writes never are
(a write whose answer was lost is re-read and decided by its ``mod_revision`` compare, as kube
does). A watch reads straight from its gRPC stream: nothing is queued in Python, so what is held
is bounded by gRPC's flow-control window and ``max_message_bytes``.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import grpc
import grpc.aio

from .pb import kv_pb2, rpc_pb2, rpc_pb2_grpc

KeyValue = kv_pb2.KeyValue
Event = kv_pb2.Event
PUT = kv_pb2.Event.PUT
DELETE = kv_pb2.Event.DELETE
# etcd answers a progress request on the whole stream with this watch id (3.4 and 3.5).
PROGRESS_WATCH_ID = -1
# etcd's own marker for "the member has a leader" (``rpctypes.MetadataRequireLeaderKey``): with
# it a member cut off from its leader ends the watch (``etcdserver: no leader``) instead of
# leaving it silently stale, as kube's ``clientv3.WithRequireLeader`` does.
REQUIRE_LEADER = (("hasleader", "true"),)
_RETRY_READS = json.dumps({"methodConfig": [{
    "name": [{"service": "etcdserverpb.KV", "method": "Range"},
             {"service": "etcdserverpb.Maintenance", "method": "Status"}],
    "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.05s", "maxBackoff": "0.5s",
                    "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]})


class EtcdError(Exception):
    """A failed etcd call: ``code`` is the gRPC status, ``details`` etcd's text."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


class EtcdUnavailable(EtcdError):
    """No member answered in time (``UNAVAILABLE``, ``DEADLINE_EXCEEDED``, or etcd's own
    timeout and leader errors). A write that fails so may or may not have been applied: re-read
    and let its ``mod_revision`` compare decide, never repeat it blindly."""


class CompactedError(EtcdError):
    """The revision asked for was compacted; ``compact_revision`` is the oldest one kept."""

    def __init__(self, details: str, compact_revision: int = 0) -> None:
        super().__init__(grpc.StatusCode.OUT_OF_RANGE, details)
        self.compact_revision = compact_revision


class FutureRevisionError(EtcdError):
    """The revision asked for is newer than the store's."""


# etcd's texts (gRPC code UNKNOWN or UNAVAILABLE) for "no answer now": no quorum, no leader, or
# the caller's deadline reaching the member (etcd returns its context's error).
_UNAVAILABLE_TEXTS = ("context deadline exceeded", "etcdserver: request timed out",
                      "etcdserver: no leader", "etcdserver: leader changed")


def classify(exc: grpc.aio.AioRpcError) -> EtcdError:
    """The ``EtcdError`` for a failed gRPC call, by etcd's text first, then the status code."""
    code, details = exc.code(), exc.details() or ""
    if any(text in details for text in _UNAVAILABLE_TEXTS):
        return EtcdUnavailable(code, details)
    if "required revision has been compacted" in details:
        return CompactedError(details)
    if "required revision is a future revision" in details:
        return FutureRevisionError(code, details)
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return EtcdUnavailable(code, details)
    return EtcdError(code, details)


def prefix_end(prefix: bytes) -> bytes:
    """etcd's range end for every key starting with ``prefix`` (``clientv3.GetPrefixRangeEnd``)."""
    end = bytearray(prefix)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return b"\x00"  # every key


@dataclass(frozen=True)
class RangeResult:
    kvs: Sequence[Any]  # kv_pb2.KeyValue
    count: int
    more: bool
    revision: int  # the header revision: the store's revision the range was answered at


@dataclass(frozen=True)
class TxnResult:
    succeeded: bool
    revision: int  # the header revision: for a write, the new mod_revision
    responses: Sequence[Any]  # rpc_pb2.ResponseOp

    def range_kvs(self, index: int = 0) -> Sequence[Any]:
        """The kvs of the ``index``-th response, a range (kube's ``Else(Get)``)."""
        return list(self.responses[index].response_range.kvs)


@dataclass(frozen=True)
class Status:
    version: str  # the member's etcd version, e.g. "3.4.23"
    db_size: int
    leader: int
    member_id: int
    revision: int
    raft_term: int


def parse_version(version: str) -> tuple[int, int, int]:
    parts = [*version.split("-")[0].split("."), "0", "0", "0"][:3]
    return (int(parts[0]), int(parts[1]), int(parts[2]))


def supports_request_progress(version: str) -> bool:
    """kube's gate (``endpointSupportsRequestWatchProgress``): RequestProgress replies are
    trusted only from 3.4.31+ in 3.4 and 3.5.13+ in 3.5 (etcd#15220, etcd#17507)."""
    v = parse_version(version)
    if v[:2] == (3, 4):
        return v >= (3, 4, 31)
    if v[:2] == (3, 5):
        return v >= (3, 5, 13)
    return v >= (3, 6, 0)


# -- compares and operations, kube's patterns ------------------------------------------------

def mod_revision_is(key: bytes, revision: int) -> Any:
    """``If(mod_revision(key) == revision)``; 0 means "the key does not exist" (kube's create)."""
    return rpc_pb2.Compare(result=rpc_pb2.Compare.EQUAL, target=rpc_pb2.Compare.MOD, key=key,
                           mod_revision=revision)


def exists(key: bytes) -> Any:
    """``If(mod_revision(key) > 0)``: the key exists (an update or delete with no revision)."""
    return rpc_pb2.Compare(result=rpc_pb2.Compare.GREATER, target=rpc_pb2.Compare.MOD, key=key,
                           mod_revision=0)


def version_is(key: bytes, version: int) -> Any:
    """``If(version(key) == version)``: kube's compactor's logical clock on ``compact_rev_key``."""
    return rpc_pb2.Compare(result=rpc_pb2.Compare.EQUAL, target=rpc_pb2.Compare.VERSION,
                           key=key, version=version)


def put_op(key: bytes, value: bytes, lease: int = 0) -> Any:
    return rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=key, value=value, lease=lease))


def get_op(key: bytes) -> Any:
    return rpc_pb2.RequestOp(request_range=rpc_pb2.RangeRequest(key=key))


def delete_op(key: bytes, prev_kv: bool = False) -> Any:
    return rpc_pb2.RequestOp(request_delete_range=rpc_pb2.DeleteRangeRequest(key=key,
                                                                              prev_kv=prev_kv))


@dataclass(frozen=True)
class EtcdConfig:
    """Where etcd is and how to reach it (kube-apiserver's ``--etcd-*`` flags)."""

    endpoints: Sequence[str]  # "http://127.0.0.1:2379", "https://etcd-1:2379", "127.0.0.1:2379"
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    timeout: float = 10.0  # the deadline of every unary call, seconds
    dial_timeout: float = 20.0  # kube's: how long ``connect`` waits for a first connection
    max_message_bytes: int = 64 * 1024 * 1024  # bound on one received message (a range page)

    @property
    def tls(self) -> bool:
        return bool(self.ca_file or self.cert_file or self.key_file) or any(
            e.startswith("https://") for e in self.endpoints)


def channel_target(endpoints: Sequence[str]) -> tuple[str, str]:
    """The gRPC target for the endpoints and the host name TLS verifies. Several endpoints go
    into one ``ipv4:``/``ipv6:`` address list (names resolved now), so gRPC's ``pick_first``
    fails over to the next member when one stops answering."""
    hosts: list[tuple[str, int]] = []
    for endpoint in endpoints:
        url = urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}")
        if url.hostname is None or url.port is None:
            raise ValueError(f"etcd endpoint needs a host and a port: {endpoint!r}")
        hosts.append((url.hostname, url.port))
    if not hosts:
        raise ValueError("no etcd endpoints")
    authority = hosts[0][0]
    if len(hosts) == 1:
        host, port = hosts[0]
        return (f"[{host}]:{port}" if ":" in host else f"{host}:{port}"), authority
    v4: list[str] = []
    v6: list[str] = []
    for host, port in hosts:
        info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        address = str(info[4][0])
        if info[0] == socket.AF_INET6:
            v6.append(f"[{address}]:{port}")
        else:
            v4.append(f"{address}:{port}")
    if v4 and v6:
        raise ValueError("etcd endpoints mix IPv4 and IPv6 addresses")
    return ("ipv4:" + ",".join(v4)) if v4 else ("ipv6:" + ",".join(v6)), authority


def _read(path: str | None) -> bytes | None:
    if path is None:
        return None
    with open(path, "rb") as f:
        return f.read()


class EtcdClient:
    """One gRPC channel to an etcd cluster; use with ``async with`` or call ``close``."""

    def __init__(self, config: EtcdConfig) -> None:
        self.config = config
        target, authority = channel_target(config.endpoints)
        options: list[tuple[str, Any]] = [
            ("grpc.max_receive_message_length", config.max_message_bytes),
            ("grpc.max_send_message_length", 2 * 1024 * 1024 + 512),  # etcd's request limit
            ("grpc.keepalive_time_ms", 30_000), ("grpc.keepalive_timeout_ms", 10_000),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.enable_retries", 1), ("grpc.service_config", _RETRY_READS)]
        if config.tls:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_read(config.ca_file), private_key=_read(config.key_file),
                certificate_chain=_read(config.cert_file))
            options.append(("grpc.ssl_target_name_override", authority))
            self._channel = grpc.aio.secure_channel(target, credentials, options=options)
        else:
            self._channel = grpc.aio.insecure_channel(target, options=options)
        self._kv = rpc_pb2_grpc.KVStub(self._channel)  # type: ignore[no-untyped-call]
        self._watch = rpc_pb2_grpc.WatchStub(self._channel)  # type: ignore[no-untyped-call]
        self._lease = rpc_pb2_grpc.LeaseStub(self._channel)  # type: ignore[no-untyped-call]
        self._maintenance = rpc_pb2_grpc.MaintenanceStub(  # type: ignore[no-untyped-call]
            self._channel)

    async def __aenter__(self) -> EtcdClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()

    async def connect(self) -> None:
        """Wait (up to ``dial_timeout``) until the channel is connected to some member."""
        try:
            await asyncio.wait_for(self._channel.channel_ready(), self.config.dial_timeout)
        except TimeoutError as exc:
            raise EtcdUnavailable(grpc.StatusCode.UNAVAILABLE,
                                  f"no etcd member reachable at {self.config.endpoints}") from exc

    async def _call(self, method: Any, request: Any, timeout: float | None) -> Any:
        try:
            return await method(request, timeout=timeout or self.config.timeout,
                                wait_for_ready=True)
        except grpc.aio.AioRpcError as exc:
            raise classify(exc) from None

    # -- KV ---------------------------------------------------------------------------------

    async def range(self, key: bytes, range_end: bytes = b"", *, revision: int = 0,  # noqa: PLR0913
                    limit: int = 0, count_only: bool = False, keys_only: bool = False,
                    serializable: bool = False, timeout: float | None = None) -> RangeResult:
        """Keys in ``[key, range_end)`` (just ``key`` without an end) at ``revision`` (0: the
        latest), at most ``limit`` (0: all); ``count`` counts every match regardless of limit."""
        response = await self._call(self._kv.Range, rpc_pb2.RangeRequest(
            key=key, range_end=range_end, revision=revision, limit=limit,
            count_only=count_only, keys_only=keys_only, serializable=serializable), timeout)
        return RangeResult(response.kvs, response.count, response.more,
                           response.header.revision)

    async def put(self, key: bytes, value: bytes, lease: int = 0,
                  timeout: float | None = None) -> int:
        """An unconditional put; the new revision. (kube writes through ``txn``.)"""
        response = await self._call(self._kv.Put, rpc_pb2.PutRequest(key=key, value=value,
                                                                     lease=lease), timeout)
        return int(response.header.revision)

    async def delete_range(self, key: bytes, range_end: bytes = b"",
                           timeout: float | None = None) -> tuple[int, int]:
        """Delete every key in the range: (how many, the new revision)."""
        response = await self._call(self._kv.DeleteRange, rpc_pb2.DeleteRangeRequest(
            key=key, range_end=range_end), timeout)
        return int(response.deleted), int(response.header.revision)

    async def txn(self, compares: Sequence[Any], success: Sequence[Any],
                  failure: Sequence[Any] = (), timeout: float | None = None) -> TxnResult:
        """``If(compares) Then(success) Else(failure)`` in one revision."""
        response = await self._call(self._kv.Txn, rpc_pb2.TxnRequest(
            compare=compares, success=success, failure=failure), timeout)
        return TxnResult(response.succeeded, response.header.revision, response.responses)

    async def create(self, key: bytes, value: bytes, lease: int = 0) -> TxnResult:
        """kube's create: ``If(mod_revision == 0) Then(Put)``; fails if the key exists."""
        return await self.txn([mod_revision_is(key, 0)], [put_op(key, value, lease)])

    async def update(self, key: bytes, value: bytes, mod_revision: int,
                     lease: int = 0) -> TxnResult:
        """kube's ``OptimisticPut``: ``If(mod_revision == N) Then(Put) Else(Get)``; on failure
        ``range_kvs()`` is the current state (empty if the key is gone)."""
        return await self.txn([mod_revision_is(key, mod_revision)],
                              [put_op(key, value, lease)], [get_op(key)])

    async def delete(self, key: bytes, mod_revision: int) -> TxnResult:
        """kube's ``OptimisticDelete``: ``If(mod_revision == N) Then(Delete) Else(Get)``."""
        return await self.txn([mod_revision_is(key, mod_revision)], [delete_op(key)],
                              [get_op(key)])

    async def compact(self, revision: int, physical: bool = False,
                      timeout: float | None = None) -> int:
        """Drop history below ``revision``; the header revision."""
        response = await self._call(self._kv.Compact, rpc_pb2.CompactionRequest(
            revision=revision, physical=physical), timeout)
        return int(response.header.revision)

    # -- leases and maintenance ---------------------------------------------------------------

    async def lease_grant(self, ttl: int, timeout: float | None = None) -> tuple[int, int]:
        """A new lease: (its id, the TTL etcd granted in seconds)."""
        response = await self._call(self._lease.LeaseGrant,
                                    rpc_pb2.LeaseGrantRequest(TTL=ttl), timeout)
        if response.error:
            raise EtcdError(grpc.StatusCode.UNKNOWN, response.error)
        return int(response.ID), int(response.TTL)

    async def lease_revoke(self, lease: int, timeout: float | None = None) -> None:
        await self._call(self._lease.LeaseRevoke, rpc_pb2.LeaseRevokeRequest(ID=lease), timeout)

    async def status(self, timeout: float | None = None) -> Status:
        """The answering member's status: its version decides whether RequestProgress replies
        can be trusted (``supports_request_progress``)."""
        r = await self._call(self._maintenance.Status, rpc_pb2.StatusRequest(), timeout)
        return Status(r.version, r.dbSize, r.leader, r.header.member_id, r.header.revision,
                      r.raftTerm)

    # -- watch ----------------------------------------------------------------------------------

    def watch(self, key: bytes, range_end: bytes = b"", *, start_revision: int = 0,
              prev_kv: bool = True, progress_notify: bool = True) -> Watch:
        """A watch on ``[key, range_end)`` from ``start_revision`` (0: from now), on its own
        gRPC stream (kube keeps one watcher per stream, so a progress reply concerns it alone).
        Use as ``async with client.watch(...) as w: async for response in w: ...``."""
        request = rpc_pb2.WatchRequest(create_request=rpc_pb2.WatchCreateRequest(
            key=key, range_end=range_end, start_revision=start_revision, prev_kv=prev_kv,
            progress_notify=progress_notify))
        return Watch(self, request)


@dataclass
class WatchResponse:
    """One response on a watch: events in revision order, or none (a progress notification:
    every change up to ``revision`` has been sent)."""

    revision: int  # the header revision
    events: Sequence[Any] = field(default_factory=list)  # kv_pb2.Event, with prev_kv if asked
    progress: bool = False  # periodic or requested progress notification
    watch_id: int = 0  # this watch's id, or -1 for a reply to ``request_progress``


class Watch:
    """An open etcd watch (see ``EtcdClient.watch``). Iterating yields ``WatchResponse``s;
    it raises ``CompactedError`` when the start revision was compacted (with the oldest kept
    revision), ``EtcdError`` when etcd cancels it otherwise, ``EtcdUnavailable`` when the stream
    breaks. ``created_revision`` is the store revision when the watch was created."""

    def __init__(self, client: EtcdClient, request: Any) -> None:
        self._client = client
        self._request = request
        self._call: Any = None
        self.watch_id: int | None = None
        self.created_revision = 0

    async def __aenter__(self) -> Watch:
        self._call = self._client._watch.Watch(metadata=REQUIRE_LEADER, wait_for_ready=True)
        try:
            async with asyncio.timeout(self._client.config.timeout):
                await self._call.write(self._request)
                response = await self._call.read()
        except TimeoutError:
            self._call.cancel()
            raise EtcdUnavailable(grpc.StatusCode.DEADLINE_EXCEEDED,
                                  "etcd watch was not created in time") from None
        except grpc.aio.AioRpcError as exc:
            raise classify(exc) from None
        if response is grpc.aio.EOF:
            raise EtcdUnavailable(grpc.StatusCode.UNAVAILABLE, "etcd closed the watch stream")
        self._check_canceled(response)
        if not response.created:
            raise EtcdError(grpc.StatusCode.INTERNAL, "etcd watch: no created response")
        self.watch_id = response.watch_id
        self.created_revision = response.header.revision
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        if self._call is not None:
            self._call.cancel()
            self._call = None

    def _check_canceled(self, response: Any) -> None:
        if not response.canceled:
            return
        if response.compact_revision:
            raise CompactedError("etcdserver: mvcc: required revision has been compacted",
                                 response.compact_revision)
        raise EtcdError(grpc.StatusCode.CANCELLED,
                        response.cancel_reason or "etcd canceled the watch")

    async def request_progress(self) -> None:
        """Ask etcd for a progress notification on this stream (Go's ``RequestProgress``); it
        arrives with watch id -1 and is yielded as a ``progress`` response. etcd before
        3.4.31/3.5.13 may send it ahead of queued events: see ``supports_request_progress``."""
        if self._call is None:
            raise RuntimeError("the watch is not open")
        try:
            await self._call.write(rpc_pb2.WatchRequest(
                progress_request=rpc_pb2.WatchProgressRequest()))
        except grpc.aio.AioRpcError as exc:
            raise classify(exc) from None

    def __aiter__(self) -> Watch:
        return self

    async def __anext__(self) -> WatchResponse:
        if self._call is None:
            raise StopAsyncIteration
        while True:
            try:
                response = await self._call.read()
            except grpc.aio.AioRpcError as exc:
                raise classify(exc) from None
            if response is grpc.aio.EOF:
                raise EtcdUnavailable(grpc.StatusCode.UNAVAILABLE, "etcd closed the watch stream")
            self._check_canceled(response)
            if response.watch_id not in (self.watch_id, PROGRESS_WATCH_ID):
                continue  # not ours (cannot happen on a one-watcher stream)
            if response.events:
                return WatchResponse(response.header.revision, response.events,
                                     watch_id=response.watch_id)
            if not response.created:
                return WatchResponse(response.header.revision, progress=True,
                                     watch_id=response.watch_id)
