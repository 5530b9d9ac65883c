"""What every test session needs before any test runs.

pytest marks each installed plugin's package for assertion rewriting, anyio's too (its plugin
is disabled with ``-p no:anyio``, but its modules are still rewritten when first imported).
kr8s imports ``anyio._backends._asyncio`` lazily, in its first client, so the rewrite used to
run mid-session. CPython 3.11.7's compiler (fixed in 3.11.8) can then raise "AST constructor
recursion depth mismatch" when earlier tests recursed deeply (the decoders' nesting limits).
Importing the backend here, at collection, rewrites it before any test runs.
"""

import anyio._backends._asyncio  # noqa: F401
from hypothesis import settings

# Hypothesis' per-example deadline (200 ms) is a timed assertion: on a shared machine a slow
# example fails a property that holds. No test here asserts time.
settings.register_profile("kubewire", deadline=None)
settings.load_profile("kubewire")

# Vendored third-party tests: they run against a server of their own, in a subprocess, from
# tests/integration/test_kubernetes_e2e.py, not in this session.
collect_ignore = ["external"]

from tests.socket_leaks import pytest_configure, pytest_terminal_summary  # noqa: E402, F401


def pytest_report_header() -> str:
    from tests.storage_choice import ENV, chosen
    return f"test servers' store: {chosen()} ({ENV})"


def pytest_sessionfinish() -> None:
    """Stop the session's etcd cluster, if test servers ran on one (tests/storage_choice)."""
    from tests.storage_choice import stop
    stop()
