"""Which store the test servers use: ``KUBEWIRE_TEST_STORAGE`` (``sqlite``, the default;
``etcd``: one etcd member; ``etcd-3``: a three-member cluster).

On etcd every server the harness starts (``tests/integration/harness.ServerThread``) keeps its
objects in one session-wide etcd cluster (``tests/etcd_cluster``, started at the first server
and stopped at the end of the session), under an ``--etcd-prefix`` of its own, so tests stay as
independent as with a data directory each. The prefix is chosen per data directory: a server
started again on the same data directory (a restart) finds what it kept, as it would in SQLite.

Tests that read SQLite's file or the data directory's database directly cannot apply to etcd and
are marked ``@sqlite_only(reason)``; tests that need an etcd whatever the variable says start
their own (``tests/etcd_cluster``).
"""

from __future__ import annotations

import atexit
import os
import signal
import threading
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.etcd_cluster import Cluster, etcd_cluster

ENV = "KUBEWIRE_TEST_STORAGE"
CHOICES = {"sqlite": 0, "etcd": 1, "etcd-3": 3}  # the etcd cluster's size (0: none)
PREFIX_ROOT = "/kubewire-test"

_cluster: Cluster | None = None
_stack = ExitStack()
_prefixes: dict[Path, str] = {}

F = TypeVar("F", bound=Callable[..., Any])


def chosen() -> str:
    value = os.environ.get(ENV, "sqlite") or "sqlite"
    if value not in CHOICES:
        raise ValueError(f"{ENV}={value!r}: expected one of {', '.join(CHOICES)}")
    return value


def on_etcd() -> bool:
    return CHOICES[chosen()] > 0


def sqlite_only(reason: str) -> pytest.MarkDecorator:
    """Skip a test (or module, as ``pytestmark``) when the servers run on etcd, saying why."""
    return pytest.mark.skipif(on_etcd(), reason=f"SQLite only: {reason}")


def cluster() -> Cluster:
    """The session's etcd cluster, started on first use."""
    global _cluster
    if _cluster is None:
        _cluster = _stack.enter_context(etcd_cluster(CHOICES[chosen()]))
        _stop_on_sigterm()
    return _cluster


def _stop_on_sigterm() -> None:
    """The members run in sessions of their own and atexit does not run on SIGTERM: a test run
    stopped that way stops them first (where nobody else handles SIGTERM)."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        return

    def on_term(signum: int, _frame: object) -> None:
        stop()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, on_term)


def prefix_for(data_dir: Path) -> str:
    """This data directory's own ``--etcd-prefix`` (the same each time it is asked)."""
    key = data_dir.resolve()
    if key not in _prefixes:
        _prefixes[key] = f"{PREFIX_ROOT}/{len(_prefixes)}-{os.getpid()}"
    return _prefixes[key]


def storage_overrides(data_dir: Path) -> dict[str, Any]:
    """The ``ServerConfig`` fields that put a test server on the chosen store ({} for SQLite)."""
    if not on_etcd():
        return {}
    return {"storage": "etcd", "etcd_servers": tuple(cluster().endpoints),
            "etcd_prefix": prefix_for(data_dir)}


def stop() -> None:
    """Stop the session's etcd cluster (pytest's session end; also at exit)."""
    global _cluster
    _stack.close()
    _cluster = None


atexit.register(stop)


def range_writes(kind_plural: str) -> int:
    """Store writes beside a Service's own create or delete: on etcd the server keeps kube's
    allocator range (``/registry/ranges/serviceips``) in the store, one more revision each (a
    ClusterIP Service; SQLite keeps ranges in memory)."""
    return 1 if on_etcd() and kind_plural == "services" else 0
