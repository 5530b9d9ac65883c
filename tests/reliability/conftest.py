"""Fixtures for the reliability tests: the integration suite's in-process servers."""

from tests.integration.conftest import make_server, server

__all__ = ["make_server", "server"]
