"""``Client``: one API server connection (configuration plus transport), used by ``Api``."""

from __future__ import annotations

from pathlib import Path
from types import TracebackType

from kubewire.client.config import ClientConfig, load_config
from kubewire.client.discovery import Discovery
from kubewire.client.transport import Request, Transport


class Client:
    """A connection to one API server. ``async with client:`` closes it on exit.

    ``namespace`` is the context's namespace: the default of every ``Api`` built on it;
    ``discovery`` caches where the kinds its ``Api``s found by discovery are served.
    """

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self.transport = Transport(config)
        self.discovery = Discovery(self.request)

    @property
    def namespace(self) -> str:
        return self.config.namespace

    async def request(self, req: Request) -> bytes:
        """Send one request; the 2xx body, else the ``StatusError`` for the answer."""
        return await self.transport.request(req)

    async def close(self) -> None:
        await self.transport.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()


async def create_client(kubeconfig: Path | str | None = None, *, context: str | None = None,
                        config: ClientConfig | None = None) -> Client:
    """A client from ``config``, else a kubeconfig (``KUBECONFIG``, ``~/.kube/config``), else
    the in-cluster service account. Raises ``ConfigError`` when none is usable."""
    return Client(config if config is not None else load_config(kubeconfig, context))
