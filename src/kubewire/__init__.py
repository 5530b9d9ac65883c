"""kubewire: the Kubernetes Watch API in Python, server and client.

``kubewire.Server`` (a real server in process, for tests: ``kubewire.testing.server``) is
imported on first use, so that ``import kubewire`` stays light for client users (and the
server, which imports ``__version__`` from here, forms no cycle with it); ``__init__.pyi`` gives
type checkers its type.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["Server", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "Server":
        from kubewire.testing.server import Server

        return Server
    raise AttributeError(f"module 'kubewire' has no attribute {name!r}")
