"""HTTP on aiohttp: one session per client, credentials on every request, errors mapped once.

Every non-2xx answer becomes the ``StatusError`` subclass for its ``Status`` (or, for a body
that is not a Status, for its HTTP code). aiohttp's own failures become ``TransportError``.
A 401 invalidates the credentials and the request is sent once more (a rotated token file or
an exec plugin whose token was revoked), as client-go's exec authenticator does.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
import msgspec

from kubewire.client.config import ClientConfig
from kubewire.client.credentials import AuthInfo
from kubewire.client.errors import StatusError, TransportError
from kubewire.client.tls import ssl_context

CONNECT_TIMEOUT_S = 10.0  # a dead address fails fast instead of waiting for the OS (~2 min)
REQUEST_TIMEOUT_S = 60.0  # non-streaming requests: kube's own default request timeout
USER_AGENT = "kubewire-client/0.1"

Params = Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Request:
    """One API call, built purely from its arguments (the transport only sends it)."""

    method: str
    path: str
    params: Params | None = None
    body: bytes | None = None
    content_type: str = "application/json"


class Transport:
    """Sends ``Request``s to one API server. Use as ``async with`` or call ``close()``."""

    def __init__(self, config: ClientConfig, *, connect_timeout_s: float = CONNECT_TIMEOUT_S,
                 request_timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        self.config = config
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the session's
        self._ssl: ssl.SSLContext | bool = False
        self._pair: tuple[bytes | None, bytes | None] = (None, None)
        self._connect_timeout_s = connect_timeout_s
        self._request_timeout_s = request_timeout_s

    async def _ensure_session(self, auth: AuthInfo) -> aiohttp.ClientSession:
        pair = (auth.client_cert_pem, auth.client_key_pem)
        if self._session is not None and pair != self._pair:
            # An exec plugin rotated the client certificate: new TLS context, new pool.
            # Open streams on the old pool end and resume on the new one.
            await self._session.close()
            self._session = None
        if self._session is None or self._session.closed:
            self._pair = pair
            if self.config.server.startswith("https:"):
                self._ssl = ssl_context(self.config.tls, *pair)
            # One connection pool for all calls; watch streams hold their own connection.
            connector = aiohttp.TCPConnector(limit=0, ssl=self._ssl)
            self._session = aiohttp.ClientSession(
                connector=connector, headers={"User-Agent": USER_AGENT},
                timeout=aiohttp.ClientTimeout(total=None, connect=self._connect_timeout_s))
            self._loop = asyncio.get_running_loop()
        return self._session

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop its open connections belong to (``close()`` must run there), or
        None while it has none."""
        return self._loop if self._session is not None else None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(self, req: Request) -> bytes:
        """Send ``req`` and return the body of a 2xx answer; raise ``StatusError`` otherwise."""
        timeout = aiohttp.ClientTimeout(total=self._request_timeout_s,
                                        connect=self._connect_timeout_s)
        async with self.open(req, timeout) as resp:
            with map_transport_errors():
                return await resp.read()

    @asynccontextmanager
    async def open(self, req: Request, timeout: aiohttp.ClientTimeout | None = None,
                   ) -> AsyncIterator[aiohttp.ClientResponse]:
        """Send ``req`` and hand over the 2xx response with its body unread (for streams).

        The connection is released when the block exits (closed if the body was not read).
        """
        for attempt in range(2):
            resp = await self._send(req, timeout)
            if resp.status == 401 and attempt == 0:
                resp.release()
                self.config.credentials.invalidate()
                continue
            break
        try:
            if resp.status >= 300:
                with map_transport_errors():
                    body = await resp.read()
                raise status_error(resp.status, body, resp.headers.get("Retry-After"))
            yield resp
        finally:
            resp.close()

    async def _send(self, req: Request, timeout: aiohttp.ClientTimeout | None,
                    ) -> aiohttp.ClientResponse:
        auth = await self.config.credentials.current()
        session = await self._ensure_session(auth)
        headers = {"Accept": "application/json"}
        if auth.authorization:
            headers["Authorization"] = auth.authorization
        if req.body is not None:
            headers["Content-Type"] = req.content_type
        kwargs: dict[str, Any] = {}
        if self.config.tls.server_name:
            kwargs["server_hostname"] = self.config.tls.server_name
        if self.config.proxy_url:
            kwargs["proxy"] = self.config.proxy_url
        with map_transport_errors():
            return await session.request(
                req.method, self.config.server + req.path, params=req.params, data=req.body,
                headers=headers, timeout=timeout or aiohttp.ClientTimeout(
                    total=None, connect=self._connect_timeout_s), **kwargs)


@contextmanager
def map_transport_errors() -> Iterator[None]:
    """aiohttp's connection, payload and timeout errors → ``TransportError``, chained."""
    try:
        yield
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise TransportError(f"{type(exc).__name__}: {exc}") from exc


class _StatusView(msgspec.Struct):
    kind: str = ""
    code: int = 0


def status_error(http_status: int, body: bytes, retry_after: str | None = None) -> StatusError:
    """The exception for an error answer: its ``Status`` if it sent one, else by HTTP code."""
    status: dict[str, Any] | None = None
    try:
        if msgspec.json.decode(body, type=_StatusView).kind == "Status":
            status = msgspec.json.decode(body)
    except msgspec.DecodeError:
        pass
    if status is None:
        status = {"code": http_status, "message": body.decode(errors="replace").strip()}
    status.setdefault("code", http_status)
    if retry_after and retry_after.isdigit():
        details = status.setdefault("details", {})
        if isinstance(details, dict):
            details.setdefault("retryAfterSeconds", int(retry_after))
    return StatusError.from_status(status)
