"""What a client gets when the store fails (``server.app.storage_failure``) and which etcd
failures are timeouts (``storage.etcd.store._storage_error``): kube-apiserver relays a raw etcd
error as a 500 ``Status`` with etcd's text and no reason (``ErrorToAPIStatus``), a call whose
deadline passed is the request deadline's 504, etcd's request-too-large is 413."""

from __future__ import annotations

import grpc

from kubewire.server.app import storage_failure
from kubewire.storage.base import StorageError, StorageTimeoutError, ValueTooLargeError
from kubewire.storage.etcd.client import EtcdError, EtcdUnavailable
from kubewire.storage.etcd.store import _storage_error


def test_an_etcd_error_is_a_500_with_etcds_text_and_no_reason() -> None:
    status = storage_failure(StorageError("etcdserver: request timed out")).to_status()
    assert status == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                      "status": "Failure", "message": "etcdserver: request timed out",
                      "code": 500}


def test_a_store_timeout_is_the_request_deadlines_504() -> None:
    status = storage_failure(StorageTimeoutError("etcd did not answer in time")).to_status()
    assert status == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                      "status": "Failure", "message": "Timeout: request did not complete within "
                      "requested timeout - context deadline exceeded", "reason": "Timeout",
                      "details": {}, "code": 504}


def test_a_value_too_large_is_413() -> None:
    status = storage_failure(ValueTooLargeError("core/configmaps/a/b", 10, 5)).to_status()
    assert (status["code"], status["reason"]) == (413, "RequestEntityTooLarge")


def test_which_etcd_failures_are_timeouts() -> None:
    deadline = _storage_error(EtcdUnavailable(grpc.StatusCode.DEADLINE_EXCEEDED,
                                              "Deadline Exceeded"))
    member_deadline = _storage_error(EtcdUnavailable(grpc.StatusCode.UNKNOWN,
                                                     "context deadline exceeded"))
    assert isinstance(deadline, StorageTimeoutError)
    assert isinstance(member_deadline, StorageTimeoutError)
    for text in ("etcdserver: request timed out", "etcdserver: no leader",
                 "etcdserver: mvcc: database space exceeded"):
        err = _storage_error(EtcdError(grpc.StatusCode.UNAVAILABLE, text))
        assert type(err) is StorageError
        assert str(err) == text
