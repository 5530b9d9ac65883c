"""Where bearer tokens (and exec-provided client certificates) come from.

A ``Credentials`` source answers ``await current()`` with what to send now and is told by
``invalidate()`` that the server answered 401, so the next ``current()`` fetches afresh:

- ``StaticCredentials``: a token or basic auth fixed in the kubeconfig;
- ``TokenFileCredentials``: a file re-read periodically (client-go re-reads ``tokenFile`` and the
  service-account token about once a minute, so rotated tokens are picked up);
- ``ExecCredentials``: a client-go credential plugin, re-run when its token expires or on 401
  (client-go ``plugin/pkg/client/auth/exec/exec.go``).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kubewire.client.errors import CredentialError
from kubewire.times import parse_time

TOKEN_FILE_REREAD_S = 60.0  # client-go cachingTokenSource period for tokenFile / in-cluster
EXEC_EXPIRY_MARGIN_S = 10.0  # re-run a plugin this long before its token expires
EXEC_TIMEOUT_S = 60.0  # a plugin that hangs must not hang every request

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class AuthInfo:
    """What to present on a request: an Authorization header value and/or a client cert."""

    authorization: str | None = None
    client_cert_pem: bytes | None = None
    client_key_pem: bytes | None = None


class Credentials(Protocol):
    async def current(self) -> AuthInfo:
        """What to send on the next request."""
        ...

    def invalidate(self) -> None:
        """The server answered 401: fetch afresh next time."""
        ...


@dataclass(slots=True)
class StaticCredentials:
    """A fixed token, basic auth pair, or nothing."""

    auth: AuthInfo = field(default_factory=AuthInfo)

    @classmethod
    def bearer(cls, token: str) -> StaticCredentials:
        return cls(AuthInfo(authorization=f"Bearer {token}"))

    @classmethod
    def basic(cls, username: str, password: str) -> StaticCredentials:
        pair = base64.b64encode(f"{username}:{password}".encode()).decode()
        return cls(AuthInfo(authorization=f"Basic {pair}"))

    async def current(self) -> AuthInfo:
        return self.auth

    def invalidate(self) -> None:
        """Nothing to refresh: a fixed token stays what it is."""


@dataclass(slots=True)
class TokenFileCredentials:
    """A bearer token read from a file, re-read every ``reread_s`` and after a 401."""

    path: Path
    reread_s: float = TOKEN_FILE_REREAD_S
    clock: Clock = time.monotonic
    _token: str | None = None
    _read_at: float = 0.0

    async def current(self) -> AuthInfo:
        now = self.clock()
        if self._token is None or now - self._read_at >= self.reread_s:
            try:
                self._token = self.path.read_text().strip()
            except OSError as exc:
                raise CredentialError(f"cannot read token file {self.path}: {exc}") from exc
            self._read_at = now
        return AuthInfo(authorization=f"Bearer {self._token}")

    def invalidate(self) -> None:
        self._token = None


@dataclass(frozen=True, slots=True)
class ExecConfig:
    """The ``user.exec`` stanza of a kubeconfig."""

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    api_version: str = "client.authentication.k8s.io/v1"
    provide_cluster_info: bool = False
    cluster_info: Mapping[str, Any] = field(default_factory=dict)
    cwd: Path | None = None  # relative commands resolve against the kubeconfig's directory


@dataclass(slots=True)
class ExecCredentials:
    """Runs a credential plugin; caches its answer until expiry or a 401."""

    config: ExecConfig
    wall_clock: Callable[[], float] = time.time
    _auth: AuthInfo | None = None
    _expires_at: float | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def current(self) -> AuthInfo:
        async with self._lock:  # concurrent requests share one plugin run
            if self._auth is None or self._is_expired():
                self._auth, self._expires_at = await self._run()
            return self._auth

    def invalidate(self) -> None:
        self._auth = None

    def _is_expired(self) -> bool:
        return (self._expires_at is not None
                and self.wall_clock() >= self._expires_at - EXEC_EXPIRY_MARGIN_S)

    async def _run(self) -> tuple[AuthInfo, float | None]:
        env = {**os.environ, **self.config.env,
               "KUBERNETES_EXEC_INFO": json.dumps(exec_info(self.config))}
        command = self.config.command
        if self.config.cwd is not None and os.sep in command and not os.path.isabs(command):
            command = str(self.config.cwd / command)
        try:
            proc = await asyncio.create_subprocess_exec(
                command, *self.config.args, env=env, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            stdout, stderr = await asyncio.wait_for(proc.communicate(), EXEC_TIMEOUT_S)
        except (OSError, TimeoutError) as exc:
            raise CredentialError(f"exec plugin {command!r} failed: {exc}") from exc
        if proc.returncode != 0:
            raise CredentialError(f"exec plugin {command!r} exited {proc.returncode}: "
                                  f"{stderr.decode(errors='replace').strip()}")
        return parse_exec_output(stdout)


def exec_info(config: ExecConfig) -> dict[str, Any]:
    """The ``KUBERNETES_EXEC_INFO`` document handed to a plugin."""
    spec: dict[str, Any] = {"interactive": False}
    if config.provide_cluster_info:
        spec["cluster"] = dict(config.cluster_info)
    return {"apiVersion": config.api_version, "kind": "ExecCredential", "spec": spec}


def parse_exec_output(stdout: bytes) -> tuple[AuthInfo, float | None]:
    """An ExecCredential's status → what to send and when it expires (epoch seconds)."""
    try:
        doc = json.loads(stdout)
        status = doc["status"]
    except (ValueError, KeyError, TypeError) as exc:
        raise CredentialError(f"exec plugin printed no ExecCredential status: {exc}") from exc
    token = status.get("token")
    cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
    if not token and not (cert and key):
        raise CredentialError("exec plugin returned neither a token nor a client certificate")
    auth = AuthInfo(authorization=f"Bearer {token}" if token else None,
                    client_cert_pem=cert.encode() if cert else None,
                    client_key_pem=key.encode() if key else None)
    expiry = status.get("expirationTimestamp")
    return auth, parse_time(expiry).timestamp() if expiry else None


def exec_config_from(stanza: Mapping[str, Any], cwd: Path | None,
                     cluster_info: Mapping[str, Any]) -> ExecConfig:
    """Build an ``ExecConfig`` from a kubeconfig ``user.exec`` mapping."""
    env_list: Sequence[Mapping[str, str]] = stanza.get("env") or ()
    return ExecConfig(
        command=str(stanza["command"]),
        args=tuple(str(a) for a in stanza.get("args") or ()),
        env={e["name"]: e["value"] for e in env_list},
        api_version=str(stanza.get("apiVersion") or "client.authentication.k8s.io/v1"),
        provide_cluster_info=bool(stanza.get("provideClusterInfo")),
        cluster_info=cluster_info,
        cwd=cwd,
    )
