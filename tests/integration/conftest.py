"""Fixtures: a real kubewire server per test (fresh data dir, random loopback port)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kubewire.server.context import ServerConfig
from tests.integration.custom_kinds import serve
from tests.integration.harness import ServerThread
from tests.integration.kinds import Kind


@pytest.fixture
def make_server(tmp_path: Path) -> Iterator[Callable[..., ServerThread]]:
    """Start servers with config overrides: ``make_server(ring_capacity=8)``.

    Servers are plain HTTP with access open (``insecure_http=True``) unless the test passes
    ``insecure_http=False``: then HTTPS, with ``DIR/kubeconfig`` holding the admin certificate.
    The cluster's components (``kubewire.cluster``) run only with ``cluster=True``, as
    ``kubewire.Server`` has it; a ``controllers`` list a test gives is kept, less them. No
    leader election unless asked (``leader_elect=True``).
    """
    started: list[ServerThread] = []

    def make(**overrides: Any) -> ServerThread:
        data_dir = overrides.pop("data_dir", tmp_path / f"data{len(started)}")
        # Plain HTTP with everyone admin unless a test asks for TLS and credentials.
        overrides.setdefault("insecure_http", True)
        # The cluster's components (kubewire.cluster: the garbage collector, ...) are clients
        # of the server whose requests, watches and audit events a test would see beside its
        # own, and act on its objects: off unless a test asks for them (``cluster=True``).
        overrides.setdefault("cluster", False)
        # On etcd a server elects its controller-manager leader by default (the store may be
        # shared) and renews the Lease every two seconds, each renewal a revision of etcd's one
        # counter: tests that check which revisions their own writes took (the watch
        # conformance scenarios, a create's resourceVersion) would fail when one falls among
        # them. Tests of the election ask for it; test_etcd_operations checks the default.
        overrides.setdefault("leader_elect", False)
        config = ServerConfig(data_dir=data_dir, host="127.0.0.1", port=0, **overrides)
        server = ServerThread(config).start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def server(make_server: Callable[..., ServerThread]) -> ServerThread:
    return make_server()


@pytest.fixture
def kind(request: pytest.FixtureRequest, server: ServerThread) -> Kind:
    """The kind of an indirectly parametrized test, served on ``server`` (a run-time custom
    kind's CRD is installed first): ``@pytest.mark.parametrize("kind", [...], indirect=True)``."""
    wanted: Kind = request.param
    return serve(server, wanted)
