"""The etcd client's pure decisions: prefix range ends, kube's RequestProgress version gate,
endpoint parsing into one gRPC target, and the generated stubs matching etcd's wire names."""

from __future__ import annotations

import grpc
import grpc.aio
import pytest

from kubewire.storage.etcd import client
from kubewire.storage.etcd.pb import rpc_pb2


@pytest.mark.parametrize(("prefix", "end"), [
    (b"/registry/pods/", b"/registry/pods0"),
    (b"a\xff", b"b"),
    (b"\xff\xff", b"\x00"),
])
def test_prefix_end_is_etcds(prefix: bytes, end: bytes) -> None:
    assert client.prefix_end(prefix) == end


@pytest.mark.parametrize(("version", "trusted"), [
    ("3.4.23", False), ("3.4.30", False), ("3.4.31", True), ("3.5.0", False),
    ("3.5.12", False), ("3.5.13", True), ("3.5.16", True), ("3.6.0", True),
    ("3.3.27", False), ("3.5.13-rc.0", True),
])
def test_request_progress_trusted_as_kube_decides(version: str, trusted: bool) -> None:
    assert client.supports_request_progress(version) is trusted


def test_endpoints_become_one_target() -> None:
    assert client.channel_target(["http://127.0.0.1:2379"]) == ("127.0.0.1:2379", "127.0.0.1")
    assert client.channel_target(["etcd.example:2379"]) == ("etcd.example:2379", "etcd.example")
    assert client.channel_target(["https://127.0.0.1:1", "https://localhost:2"]) == (
        "ipv4:127.0.0.1:1,127.0.0.1:2", "127.0.0.1")
    with pytest.raises(ValueError, match="host and a port"):
        client.channel_target(["http://127.0.0.1"])
    with pytest.raises(ValueError, match="no etcd endpoints"):
        client.channel_target([])


def test_tls_is_on_with_any_file_or_https() -> None:
    assert not client.EtcdConfig(["http://a:1"]).tls
    assert client.EtcdConfig(["https://a:1"]).tls
    assert client.EtcdConfig(["a:1"], ca_file="ca.pem").tls


def test_the_stubs_speak_etcds_wire_names() -> None:
    # the gRPC method paths etcd serves, and kube's compare shape
    assert rpc_pb2.DESCRIPTOR.services_by_name["KV"].full_name == "etcdserverpb.KV"
    compare = client.mod_revision_is(b"/registry/pods/ns/p", 0)
    assert (compare.result, compare.target) == (rpc_pb2.Compare.EQUAL, rpc_pb2.Compare.MOD)
    # the oneof is set even to 0, as Go's ``Compare(ModRevision(k), "=", 0)`` sends it (etcd
    # compares nothing, so "equal", when the oneof is absent)
    assert compare.WhichOneof("target_union") == "mod_revision"
    assert compare.SerializeToString().endswith(b"\x30\x00")  # field 6, varint 0
    assert client.PROGRESS_WATCH_ID == -1


@pytest.mark.parametrize(("code", "details", "kind"), [
    (grpc.StatusCode.UNAVAILABLE, "connection refused", client.EtcdUnavailable),
    (grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded", client.EtcdUnavailable),
    (grpc.StatusCode.UNKNOWN, "context deadline exceeded", client.EtcdUnavailable),
    (grpc.StatusCode.UNAVAILABLE, "etcdserver: no leader", client.EtcdUnavailable),
    (grpc.StatusCode.OUT_OF_RANGE, "etcdserver: mvcc: required revision has been compacted",
     client.CompactedError),
    (grpc.StatusCode.OUT_OF_RANGE, "etcdserver: mvcc: required revision is a future revision",
     client.FutureRevisionError),
    (grpc.StatusCode.INVALID_ARGUMENT, "etcdserver: request is too large", client.EtcdError),
])
def test_grpc_errors_are_classified(code: grpc.StatusCode, details: str, kind: type) -> None:
    error = client.classify(grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(),
                                                 details))
    assert type(error) is kind and error.details == details
