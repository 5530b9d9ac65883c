"""Watch readers over TLS, with a client certificate: what a kubeconfig user's client does.

``TLSReaderSet`` is ``readers.ReaderSet`` whose connections are TLS (verified against the CA,
presenting the client pair). ``tls_request`` is the blocking set-up request over TLS.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

from bench.readers import ReaderSet
from bench.wire import request


def client_context(ca: Path | str, cert: Path | str, key: Path | str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.load_cert_chain(str(cert), str(key))
    return ctx


class TLSReaderSet(ReaderSet):
    """Watch connections over TLS to one server, opened and read in this process."""

    def __init__(self, ca: str, cert: str, key: str) -> None:
        super().__init__()
        self.context = client_context(ca, cert, key)


def tls_request(port: int, context: ssl.SSLContext, method: str, path: str,
                body: Any = None) -> tuple[int, bytes]:
    """One blocking request over TLS from the benchmark process (set-up, never measured)."""
    return request(port, method, path, body, context=context)
