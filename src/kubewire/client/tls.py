"""Build an ``ssl.SSLContext`` from PEM bytes (the stdlib only loads key pairs from files)."""

from __future__ import annotations

import os
import ssl
import tempfile

from kubewire.client.config import TLSSettings
from kubewire.client.errors import ConfigError


def ssl_context(tls: TLSSettings, cert_pem: bytes | None = None,
                key_pem: bytes | None = None) -> ssl.SSLContext:
    """Verify against ``tls.ca_pem`` (or the system store); present the client pair if given.

    ``cert_pem``/``key_pem`` override the kubeconfig pair (exec plugins may return one).
    """
    try:
        ctx = ssl.create_default_context(
            cadata=tls.ca_pem.decode() if tls.ca_pem else None)
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(f"certificate authority is not valid PEM: {exc}") from exc
    if tls.insecure_skip_verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    cert, key = cert_pem or tls.client_cert_pem, key_pem or tls.client_key_pem
    if cert and key:
        _load_pair(ctx, cert, key)
    return ctx


def _load_pair(ctx: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    # load_cert_chain takes paths only: write to a private directory, removed at once.
    with tempfile.TemporaryDirectory(prefix="kubewire-tls-") as tmp:
        cert_path, key_path = os.path.join(tmp, "tls.crt"), os.path.join(tmp, "tls.key")
        for path, data in ((cert_path, cert), (key_path, key)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        try:
            ctx.load_cert_chain(cert_path, key_path)
        except ssl.SSLError as exc:
            raise ConfigError(f"client certificate/key cannot be loaded: {exc}") from exc
