"""The kubeconfig files kubewire writes: the admin's in ``DIR/kubeconfig``, and new users'.

Certificates and keys are embedded (``*-data``) so the file works when copied elsewhere; kubectl,
the ``kubernetes`` package and every other client read that form.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

import yaml

CLUSTER = "kubewire"


def server_url(host: str, port: int, *, tls: bool) -> str:
    """The URL clients use: a wildcard bind address is reached on loopback."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    shown = f"[{host}]" if ":" in host else host
    return f"{'https' if tls else 'http'}://{shown}:{port}"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@dataclass(frozen=True, slots=True)
class Credentials:
    """A kubeconfig user: a client certificate and key, or a bearer token, or nothing."""

    user: str = "kubewire-admin"
    client_cert: bytes | None = None
    client_key: bytes | None = None
    token: str | None = None

    def entry(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.client_cert is not None and self.client_key is not None:
            out["client-certificate-data"] = _b64(self.client_cert)
            out["client-key-data"] = _b64(self.client_key)
        if self.token is not None:
            out["token"] = self.token
        return out


def kubeconfig_text(url: str, credentials: Credentials | None = None, *,
                    ca_cert: bytes | None = None, namespace: str = "default") -> str:
    """One cluster, one user, one context that is current."""
    creds = credentials or Credentials()
    user = creds.user
    cluster: dict[str, str] = {"server": url}
    if ca_cert is not None:
        cluster["certificate-authority-data"] = _b64(ca_cert)
    doc = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": CLUSTER, "cluster": cluster}],
        "users": [{"name": user, "user": creds.entry()}],
        "contexts": [{"name": CLUSTER, "context": {"cluster": CLUSTER, "user": user,
                                                   "namespace": namespace}}],
        "current-context": CLUSTER, "preferences": {},
    }
    return yaml.safe_dump(doc, sort_keys=False)
