"""Who is asking: client certificates and bearer tokens, as kube-apiserver reads them.

- A client certificate verified against the server's CA names the user by its subject CN and the
  groups by its O attributes (x509 authenticator, ``CommonNameUserConversion``); the TLS layer
  verifies it (``client_certs.py``) and hands over a ``CertificateVerdict``. One that does not
  verify is an error the next authenticator may still overrule: a valid bearer token on the same
  request authenticates it (kube's union authenticator); without one the request gets 401.
- A bearer token is looked up in a file in kube-apiserver's ``--token-auth-file`` format: CSV
  lines ``token,user,uid[,"group1,group2,..."]``; blank lines are skipped.
- A bearer token the file does not hold may be a service-account token the server issued
  (``service_accounts.py``), as in kube's union after the token file.
- Every authenticated user is also in ``system:authenticated``. A request with no credentials is
  anonymous (``system:anonymous`` in ``system:unauthenticated``); a request with a token the
  file does not hold fails — kube does not fall back to anonymous then.
"""

from __future__ import annotations

import csv
import io
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

log = logging.getLogger(__name__)

AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
ANONYMOUS = "system:anonymous"


CREDENTIAL_ID_KEY = "authentication.kubernetes.io/credential-id"

Extra = tuple[tuple[str, tuple[str, ...]], ...]  # user.Info's extra, in order (hashable)


@dataclass(frozen=True, slots=True)
class UserInfo:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Extra = ()

    @property
    def is_anonymous(self) -> bool:
        return self.name == ANONYMOUS


ANONYMOUS_USER = UserInfo(ANONYMOUS, "", (UNAUTHENTICATED,))


class TokenFileError(ValueError):
    """A token file kube-apiserver would refuse to start with."""


class ServiceAccountKeyError(ValueError):
    """A service-account key file kube-apiserver would refuse to start with (``sa_keys``)."""


def parse_token_file(text: str, source: str = "token file") -> dict[str, UserInfo]:
    """``token,user,uid[,groups]`` lines → token → user (kube's tokenfile.NewCSV)."""
    users: dict[str, UserInfo] = {}
    reader = csv.reader(io.StringIO(text), skipinitialspace=False)
    for line_no, record in enumerate(reader, start=1):
        if not record or (len(record) == 1 and not record[0].strip()):
            continue
        if len(record) < 3:
            raise TokenFileError(f"{source}: line {line_no}: token file is malformed: "
                                 f"expected at least 3 fields, got {len(record)}")
        token, name, uid = (field.strip() for field in record[:3])
        if not token:
            continue  # kube warns and skips a line with an empty token
        groups: tuple[str, ...] = ()
        if len(record) >= 4 and record[3].strip():
            groups = tuple(g.strip() for g in record[3].split(",") if g.strip())
        users[token] = UserInfo(name, uid, groups)
    return users


def load_token_file(path: Path) -> dict[str, UserInfo]:
    return parse_token_file(path.read_text(), str(path))


RECHECK_SECONDS = 1.0  # how stale the tokens a server accepts may be (``kubewire user revoke``)


class TokenFile:
    """A token file that is read again when it changes (``kubewire user --token`` appends).

    kube-apiserver reads its file once; re-reading lets a new user in without a restart. The
    file is re-read only when its mtime or size changed.
    """

    def __init__(self, path: Path, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self._clock = clock
        self._checked = float("-inf")
        self._stamp: tuple[int, int] | None = None
        self._tokens: dict[str, UserInfo] = {}
        self._refresh()

    def _refresh(self) -> None:
        try:
            info = self.path.stat()
        except FileNotFoundError:
            self._stamp, self._tokens = None, {}
            return
        stamp = (info.st_mtime_ns, info.st_size)
        if stamp != self._stamp:
            try:
                self._tokens = load_token_file(self.path)
            except TokenFileError:
                if self._stamp is None:
                    raise
                log.exception("keeping the previous tokens: %s is malformed", self.path)
            self._stamp = stamp

    def get(self, token: str) -> UserInfo | None:
        found = self._tokens.get(token)
        now = self._clock()
        # A known token is re-checked once a second (it may have been removed); an unknown one
        # at once, since it may have just been added (a stat is cheap next to a request).
        if found is None or now - self._checked >= RECHECK_SECONDS:
            self._checked = now
            self._refresh()
            found = self._tokens.get(token)
        return found


def with_authenticated(user: UserInfo) -> UserInfo:
    if AUTHENTICATED in user.groups:
        return user
    return UserInfo(user.name, user.uid, (*user.groups, AUTHENTICATED), user.extra)


@dataclass(frozen=True, slots=True)
class CertificateVerdict:
    """What the connection's client certificate says: a user, or why it does not verify.

    ``user`` None with no ``error``: verified but without a common name (no opinion, as kube's
    ``CommonNameUserConversion`` has none)."""

    user: UserInfo | None
    error: str = ""


class InvalidCredentials(Exception):
    """Credentials were sent but do not identify anyone: 401."""


class TokenLookup(Protocol):
    def get(self, token: str) -> UserInfo | None: ...


class IssuedTokens:
    """Bearer tokens the server issued in memory (the loopback clients of the components it
    runs, as kube-apiserver's loopback token), in front of the token file's. Never written
    anywhere; gone with the process."""

    def __init__(self, inner: TokenLookup) -> None:
        self.inner = inner
        self.issued: dict[str, UserInfo] = {}

    def issue(self, name: str, groups: tuple[str, ...] = ()) -> str:
        import secrets

        token = secrets.token_urlsafe(32)
        self.issued[token] = UserInfo(name=name, groups=groups)
        return token

    def get(self, token: str) -> UserInfo | None:
        found = self.issued.get(token)
        return found if found is not None else self.inner.get(token)


@dataclass(slots=True)
class Authenticator:
    """Turns a request's transport facts and headers into a ``UserInfo``."""

    tokens: TokenLookup
    service_accounts: TokenLookup | None = None  # bound service-account tokens (JWTs)

    def authenticate(self, authorization: str,
                     certificate: CertificateVerdict | None = None) -> UserInfo:
        """kube's union: the certificate, then the bearer token; the first that names a user
        wins. Raises ``InvalidCredentials`` when none does and one of them failed."""
        if certificate is not None and certificate.user is not None:
            return certificate.user
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            found = self.tokens.get(token.strip())
            if found is None and self.service_accounts is not None:
                found = self.service_accounts.get(token.strip())
            if found is None:
                raise InvalidCredentials("invalid bearer token")
            return with_authenticated(found)
        if certificate is not None and certificate.error:
            raise InvalidCredentials(certificate.error)
        return ANONYMOUS_USER
