"""Watch readers over TLS, with a client certificate: what a kubeconfig user's client does.

``TLSReaderSet`` is ``readers.ReaderSet`` whose connections are TLS (verified against the CA,
presenting the client pair). ``tls_request`` is the blocking set-up request over TLS.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import ssl
from pathlib import Path
from typing import Any

from bench.readers import OPEN_BATCH, ReaderSet, WatchReader, _factory
from bench.wire import CONTROL_TIMEOUT_S, USER_AGENT, get_request


def client_context(ca: Path | str, cert: Path | str, key: Path | str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.load_cert_chain(str(cert), str(key))
    return ctx


class TLSReaderSet(ReaderSet):
    """Watch connections over TLS to one server, opened and read in this process."""

    def __init__(self, ca: str, cert: str, key: str) -> None:
        super().__init__()
        self.context = client_context(ca, cert, key)

    async def open(self, port: int, path: str, count: int, timeout_s: float) -> int:
        """Open ``count`` watches of ``path`` and wait for every response head."""
        loop = asyncio.get_running_loop()
        request = get_request(path)
        self.expected = 0
        self._all_done = asyncio.Event()
        async with asyncio.timeout(timeout_s):
            for start in range(0, count, OPEN_BATCH):
                batch = []
                for _ in range(min(OPEN_BATCH, count - start)):
                    reader = WatchReader(self, request)
                    await loop.create_connection(_factory(reader), "127.0.0.1", port,
                                                 ssl=self.context)
                    batch.append(reader)
                self.readers.extend(batch)
                statuses = await asyncio.gather(*(r.head for r in batch))
                bad = [s for s in statuses if s != 200]
                if bad:
                    raise RuntimeError(f"watch answered {bad[0]} ({len(bad)} of {len(batch)})")
        return len(self.readers)


def tls_request(port: int, context: ssl.SSLContext, method: str, path: str,
                body: Any = None) -> tuple[int, bytes]:
    """One blocking request over TLS from the benchmark process (set-up, never measured)."""
    conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=CONTROL_TIMEOUT_S,
                                       context=context)
    try:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT}
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()
