"""Attacks in one request: what a request says, not how much of it there is.

- ``alias_bomb``: a YAML body of about 400 bytes whose anchors expand to 9^9 strings (kube's
  CVE-2019-11253 document) must be refused at once, 400 with go-yaml's
  ``yaml: document contains excessive aliasing``.
- ``invalid_utf8``: invalid UTF-8 inside JSON strings is not an error in Go's decoder: each bad
  byte becomes U+FFFD (``utf8.DecodeRune`` gives ``RuneError`` of size 1), and the create is 201.
- ``impersonation``: ``Impersonate-User`` from a user without the ``impersonate`` verb on
  ``users`` is 403 with the impersonation filter's Forbidden, not served as that user.
- ``client_certs``: a client certificate the server cannot verify (self-signed, or expired)
  plus a valid bearer token is 200: kube requests a certificate but never requires one, and an
  unverifiable one only fails the x509 authenticator, after which the token authenticates.
- ``big_selector``: a 200 KiB ``labelSelector`` is within the 1 MiB head limit: 200.
- ``protocol_token``: the WebSocket subprotocol bearer token is read only on WebSocket
  requests (kube's ``wsstream.IsWebSocketRequest``): elsewhere it is no credential, 401.
- ``watch_limit``: a watch counts against the per-user watch limit however ``watch`` is spelled
  (``yes``, ``on``, empty are true for kube), so past the limit every spelling is 429.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import itertools
import time
import urllib.parse
from collections.abc import Callable, Mapping
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.reliability.hostile.harness import Outcome
from tests.reliability.hostile.server import ATTACKER, HostileServer
from tests.reliability.hostile.wire import (
    ANSWER_TIMEOUT_S,
    CONFIGMAPS,
    Answer,
    Conn,
    Result,
    connect,
    exchanges,
    get_request,
    post_request,
    read_answer,
    summary,
)

ALIASING = "yaml: document contains excessive aliasing"
SELECTOR_BYTES = 200 * 1024


def _outcome(results: list[Result], seconds: float, connections: int,
             good: Callable[[Answer], bool]) -> Outcome:
    ok = bool(results) and all(isinstance(r, Answer) and good(r) for r in results)
    return Outcome(ok, summary(results), seconds, connections)


# --- bodies ---------------------------------------------------------------------------------------

def alias_bomb_yaml(levels: int = 9, width: int = 9) -> bytes:
    """kube issue 83253's ConfigMap: ``a`` holds ``width`` strings, each next level ``width``
    aliases of the one before: ``width ** levels`` strings once expanded."""
    names = "abcdefghijklmnopqrstuvwxyz"[:levels]
    leaves = ",".join(['"x"'] * width)
    lines = ["apiVersion: v1", "data:", f"  a: &a [{leaves}]"]
    lines += [f"  {name}: &{name} [{','.join(['*' + prev] * width)}]"
              for prev, name in itertools.pairwise(names)]
    lines += ["kind: ConfigMap", "metadata:", "  name: yaml-bomb"]
    return ("\n".join(lines) + "\n").encode()


async def alias_bomb(server: HostileServer, long: bool) -> Outcome:
    connections, repeat = (20, 5) if long else (4, 2)
    request = post_request(server, alias_bomb_yaml(), "application/yaml")
    results, seconds = await exchanges(server, connections, [request] * repeat)
    return _outcome(results, seconds, connections,
                    lambda a: a.status == 400 and ALIASING in str(a.json().get("message")))


UTF8_BODY = (b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"utf8-"},'
             b'"data":{"bad":"a\xffb","cut":"c\xe2\x82d"}}')
UTF8_DATA = {"bad": "a\ufffdb", "cut": "c\ufffd\ufffdd"}  # Go: one U+FFFD per invalid byte


async def invalid_utf8(server: HostileServer, long: bool) -> Outcome:
    connections, repeat = (8, 50) if long else (2, 2)
    request = post_request(server, UTF8_BODY, "application/json")
    results, seconds = await exchanges(server, connections, [request] * repeat)
    return _outcome(results, seconds, connections,
                    lambda a: a.status == 201 and a.json().get("data") == UTF8_DATA)


# --- identities -----------------------------------------------------------------------------------

def forbidden_impersonation(name: str) -> str:
    """responsewriters.Forbidden for the impersonation filter's ``actingAsAttributes``."""
    return (f'users "{name}" is forbidden: User "attacker" cannot impersonate resource "users"'
            ' in API group "" at the cluster scope: No policy matched.')


async def impersonation(server: HostileServer, long: bool) -> Outcome:
    connections, repeat = (20, 20) if long else (2, 1)
    path = f"{CONFIGMAPS}/cm-0"
    asks = [("admin", {"Impersonate-User": "admin"}),
            ("friend", {"Impersonate-User": "friend", "Impersonate-Group": "system:masters"})]
    requests = [get_request(server, path, {**server.auth(ATTACKER), **headers})
                for _, headers in asks] * repeat
    results, seconds = await exchanges(server, connections, requests)
    expected = {forbidden_impersonation(name) for name, _ in asks}
    return _outcome(results, seconds, connections,
                    lambda a: a.status == 403 and a.json().get("message") in expected)


def _write_pair(directory: Path, name: str, cert: x509.Certificate,
                key: ec.EllipticCurvePrivateKey) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    cert_file, key_file = directory / f"{name}.crt", directory / f"{name}.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


def client_cert(directory: Path, name: str, ca_dir: Path | None, days: float,
                ) -> tuple[Path, Path]:
    """A client certificate for CN ``name``: self-signed when ``ca_dir`` is None, else signed
    by that CA; ``days`` of validity from now (negative: expired that long ago)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
                         x509.NameAttribute(NameOID.COMMON_NAME, name)])
    issuer, signer = subject, key
    if ca_dir is not None:
        ca = x509.load_pem_x509_certificate((ca_dir / "ca.crt").read_bytes())
        ca_key = serialization.load_pem_private_key((ca_dir / "ca.key").read_bytes(), None)
        assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
        issuer, signer = ca.subject, ca_key
    now = datetime.datetime.now(datetime.UTC)
    start, end = sorted([now - datetime.timedelta(days=30), now + datetime.timedelta(days=days)])
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start - datetime.timedelta(days=1)).not_valid_after(end)
            .sign(signer, hashes.SHA256()))
    return _write_pair(directory, name, cert, key)


async def client_certs(server: HostileServer, long: bool) -> Outcome:
    """Blocking clients (on threads): ``ssl`` names the alert of a refused handshake, where
    asyncio's TLS only sees the connection end."""
    connections = 50 if long else 2
    pairs = [client_cert(server.data_dir / "attack-certs", "self-signed", None, 30),
             client_cert(server.data_dir / "attack-certs", "expired", server.data_dir / "pki",
                         -1)]
    began = time.monotonic()

    async def get(pair: tuple[Path, Path]) -> Result:
        try:
            reply = await asyncio.to_thread(server.call, "GET", f"{CONFIGMAPS}/cm-0", ATTACKER,
                                            timeout=ANSWER_TIMEOUT_S,
                                            context=server.ssl_context(pair))
        except OSError as exc:
            return exc
        return Answer(reply.status, reply.headers, reply.body)

    results = await asyncio.gather(*(get(pair) for pair in pairs for _ in range(connections)))
    return _outcome(list(results), time.monotonic() - began, connections * len(pairs),
                    lambda a: a.status == 200)


def protocol_header(token: str) -> str:
    encoded = base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")
    return f"base64url.bearer.authorization.k8s.io.{encoded}"


async def protocol_token(server: HostileServer, long: bool) -> Outcome:
    connections, repeat = (20, 20) if long else (2, 2)
    header = {"Sec-WebSocket-Protocol": protocol_header(server.tokens[ATTACKER.name])}
    requests = [get_request(server, CONFIGMAPS, header)] * repeat
    results, seconds = await exchanges(server, connections, requests)
    return _outcome(results, seconds, connections,
                    lambda a: a.status == 401 and a.json().get("reason") == "Unauthorized")


# --- limits ---------------------------------------------------------------------------------------

def big_selector(size: int = SELECTOR_BYTES) -> str:
    """``app in (web,v0,v1,...)``, URL-encoded to about ``size`` bytes (it matches ``cm-0``)."""
    values = ["web"]
    length = len("app+in+%28web%29")
    while length < size:
        values.append(f"v{len(values)}")
        length += len(values[-1]) + 3  # the value and an encoded comma
    return urllib.parse.quote_plus(f"app in ({','.join(values)})")


async def _selector_attack(server: HostileServer, long: bool, selector: str,
                           good: Callable[[Answer], bool]) -> Outcome:
    """GETs of the ConfigMaps with ``selector`` (URL-encoded) from 2 connections (10x10 long)."""
    connections, repeat = (10, 10) if long else (2, 1)
    path = f"{CONFIGMAPS}?labelSelector={selector}"
    results, seconds = await exchanges(server, connections,
                                       [get_request(server, path, server.auth(ATTACKER))] * repeat)
    return _outcome(results, seconds, connections, good)


async def selector(server: HostileServer, long: bool) -> Outcome:
    return await _selector_attack(server, long, big_selector(),
                                  lambda a: a.status == 200 and _names(a) == ["cm-0"])


def selector_variants(size: int = SELECTOR_BYTES) -> dict[str, str]:
    """Two more 200 KiB selectors that pure-Python parsing finds slow: one bad value at the end
    of the list (kube's error names it, so every value is read the careful way), and
    requirement after requirement (``k0=v,k1=v,...``; none matches ``cm-0``)."""
    listed = urllib.parse.unquote_plus(big_selector(size))
    requirements = []
    length = 0
    while length < size:
        requirements.append(f"k{len(requirements)}=v")
        length += len(requirements[-1]) + 3
    return {"error": urllib.parse.quote_plus(listed[:-1] + ",-bad-)"),
            "requirements": urllib.parse.quote_plus(",".join(requirements))}


async def selector_error(server: HostileServer, long: bool) -> Outcome:
    return await _selector_attack(server, long, selector_variants()["error"],
                                  lambda a: a.status == 400 and b"-bad-" in a.body)


async def selector_requirements(server: HostileServer, long: bool) -> Outcome:
    return await _selector_attack(server, long, selector_variants()["requirements"],
                                  lambda a: a.status == 200 and _names(a) == [])


def _names(answer: Answer) -> list[object]:
    """The names in a list answer."""
    items = answer.json().get("items")
    return [item.get("metadata", {}).get("name") for item in items
            if isinstance(item, dict)] if isinstance(items, list) else []


WATCH_SPELLINGS = ("1", "true", "yes", "on", "")  # each is a watch for kube (only 0/false not)


def watch_limits(long: bool) -> Mapping[str, float]:
    return {"max_watches_per_user": 200 if long else 4}


async def watch_limit(server: HostileServer, long: bool) -> Outcome:
    """Open the limit's worth of watches in every spelling, then one more of each spelling."""
    limit = int(watch_limits(long)["max_watches_per_user"])
    began = time.monotonic()
    held: list[Conn] = []

    async def watch(spelling: str) -> Answer | None:
        conn = await connect(server)
        held.append(conn)
        conn.writer.write(get_request(server, f"{CONFIGMAPS}?watch={spelling}",
                                      server.auth(ATTACKER)))
        return await read_answer(conn.reader, ANSWER_TIMEOUT_S, body=False)

    try:
        opened = [await watch(WATCH_SPELLINGS[1 + i % 4]) for i in range(limit)]
        extra = [await watch(spelling) for spelling in WATCH_SPELLINGS * (10 if long else 1)]
    finally:
        for conn in held:
            conn.abort()
    ok = (all(a is not None and a.status == 200 for a in opened)
          and all(a is not None and a.status == 429 for a in extra))
    text = f"first {limit}: {summary(opened)}; past the limit: {summary(extra)}"
    return Outcome(ok, text, time.monotonic() - began, len(opened) + len(extra))
