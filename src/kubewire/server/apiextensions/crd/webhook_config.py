"""A conversion webhook's client config: kube's URL, service and CA-bundle rules.

Source: ``apiserver:pkg/util/webhook/validation.go`` (``ValidateWebhookURL``,
``ValidateWebhookService``, ``ValidateCABundle``) and, for the CA bundle's messages,
``client-go:transport/transport.go`` (``rootCertPool``, ``createErrorParsingCAData``).

Go's ``url.Parse`` is written out here for the parts the rules read (scheme, user info, host,
query, fragment) and its common errors; Python's ``urllib`` accepts and splits differently
(it has no "missing protocol scheme", and splits a query before a fragment differently).
A CA bundle is valid when one ``CERTIFICATE`` PEM block parses as X.509 (``cryptography``, a
server dependency); the text of an X.509 parse failure is Go's generic ``x509: malformed
certificate`` whatever the detail.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

from cryptography import x509

from kubewire.go_text import go_quote
from kubewire.json_types import JSON
from kubewire.names import is_dns1123_subdomain
from kubewire.server.apiextensions.crd.go_literals import go_bytes
from kubewire.status import FieldError, invalid, required

_FORM = "; desired format: https://host[/path]"
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")


@dataclass(frozen=True)
class GoURL:
    scheme: str
    user: str | None
    host: str
    raw_query: str
    fragment: str


class URLError(ValueError):
    """``url.Parse``'s ``*url.Error``: ``parse "<url>": <reason>``."""


def parse_go_url(raw: str) -> GoURL:
    """What ``net/url.Parse`` finds in ``raw`` (the parts the webhook rules read)."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in raw):
        raise URLError(f"parse {go_quote(raw)}: net/url: invalid control character in URL")
    rest, _, fragment = raw.partition("#")
    scheme = ""
    found = _SCHEME.match(rest)
    if rest.startswith(":"):
        raise URLError(f"parse {go_quote(raw)}: missing protocol scheme")
    if found and rest[found.end():found.end() + 1] == ":":
        scheme, rest = found.group().lower(), rest[found.end() + 1:]
    rest, has_query, raw_query = rest.partition("?")
    user: str | None = None
    host = ""
    if rest.startswith("//") and (scheme or not rest.startswith("///")):
        authority = rest[2:].split("/", 1)[0]
        if "@" in authority:
            user, _, host = authority.rpartition("@")
        else:
            host = authority
        port = host.rpartition("]")[2].rpartition(":")
        if port[1] and port[2] and not port[2].isdigit():
            raise URLError(f"parse {go_quote(raw)}: invalid port {go_quote(':' + port[2])} "
                           "after host")
    return GoURL(scheme, user, host, raw_query if has_query else "", fragment)


def validate_webhook_url(path: str, url: str) -> list[FieldError]:
    """``ValidateWebhookURL(fldPath, url, forceHttps=true)``."""
    try:
        parsed = parse_go_url(url)
    except URLError as exc:
        return [required(path, f"url must be a valid URL: {exc}{_FORM}")]
    errors: list[FieldError] = []
    if parsed.scheme != "https":
        errors.append(invalid(path, parsed.scheme,
                              "'https' is the only allowed URL scheme" + _FORM))
    if not parsed.host:
        errors.append(invalid(path, parsed.host, "host must be specified" + _FORM))
    if parsed.user is not None:
        errors.append(invalid(path, parsed.user, "user information is not permitted in the URL"))
    if parsed.fragment:
        errors.append(invalid(path, parsed.fragment, "fragments are not permitted in the URL"))
    if parsed.raw_query:
        errors.append(invalid(path, parsed.raw_query,
                              "query parameters are not permitted in the URL"))
    return errors


def validate_webhook_service(path: str, service: dict[str, JSON]) -> list[FieldError]:
    """``ValidateWebhookService`` as the CRD validator calls it.

    apiextensions passes ``(Service.Name, Service.Namespace)`` where the function takes
    ``(namespace, name)``, so a missing *name* is reported as ``service.namespace: Required
    value: service namespace is required`` and the other way round; reproduced.
    """
    name = service.get("name") if isinstance(service.get("name"), str) else ""
    namespace = service.get("namespace") if isinstance(service.get("namespace"), str) else ""
    errors: list[FieldError] = []
    if not namespace:  # the function's ``name`` parameter holds Service.Namespace
        errors.append(required(f"{path}.name", "service name is required"))
    if not name:
        errors.append(required(f"{path}.namespace", "service namespace is required"))
    port = service.get("port")
    port_value = port if isinstance(port, int) and not isinstance(port, bool) else 0
    if not 1 <= port_value <= 65535:
        errors.append(invalid(f"{path}.port", port_value,
                              "port is not valid: must be between 1 and 65535, inclusive"))
    url_path = service.get("path")
    if not isinstance(url_path, str) or url_path in ("", "/"):
        return errors
    if url_path == "//":
        return [*errors, invalid(f"{path}.path", url_path, "segment[0] may not be empty")]
    if not url_path.startswith("/"):
        errors.append(invalid(f"{path}.path", url_path, "must start with a '/'"))
    to_check = url_path[1:]
    if to_check.endswith("/"):
        to_check = to_check[:-1]
    for i, step in enumerate(to_check.split("/")):
        if not step:
            errors.append(invalid(f"{path}.path", url_path, f"segment[{i}] may not be empty"))
            continue
        errors += [invalid(f"{path}.path", url_path, f"segment[{i}]: {failure}")
                   for failure in is_dns1123_subdomain(step)]
    return errors


_PEM_BLOCK = re.compile(
    rb"-----BEGIN ([^\r\n-]*)-----\r?\n(.*?)-----END \1-----", re.DOTALL)


def _pem_blocks(data: bytes) -> list[tuple[str, bool, bytes | None]] | None:
    """(type, has headers, DER bytes or None) per PEM block; None when data is left over that is
    no PEM block (``pem.Decode`` returning nil before the end)."""
    blocks: list[tuple[str, bool, bytes | None]] = []
    rest = data
    while rest.strip():
        found = _PEM_BLOCK.search(rest)
        if found is None:
            return None if not blocks else [*blocks, ("", True, None)]
        body = found.group(2)
        headers = b":" in body.split(b"\n\n", 1)[0] if b"\n\n" in body else False
        payload = body.split(b"\n\n", 1)[1] if headers else body
        try:
            der = base64.b64decode(b"".join(payload.split()), validate=True)
        except (binascii.Error, ValueError):
            der = None
        blocks.append((found.group(1).decode("latin-1"), headers, der))
        rest = rest[found.end():]
    return blocks


def ca_bundle_problem(data: bytes) -> str | None:
    """Why ``transport.TLSConfigFor`` rejects ``data`` as CA data, or None when it loads."""
    blocks = _pem_blocks(data)
    certs = 0
    for kind, headers, der in blocks or []:
        if kind != "CERTIFICATE" or headers or der is None:
            continue
        try:
            x509.load_der_x509_certificate(der)
        except ValueError:
            continue
        certs += 1
    if certs:
        return None
    prefix = "unable to load root certificates: "
    if blocks is None:
        return prefix + "unable to parse bytes as PEM block"
    for kind, headers, der in blocks:
        if kind == "" and der is None:
            return prefix + "unable to parse bytes as PEM block"
        if kind == "CERTIFICATE" and not headers:
            return prefix + "failed to parse certificate: x509: malformed certificate"
    return prefix + "no valid certificate authority data seen"


def validate_ca_bundle(path: str, ca_bundle: JSON) -> list[FieldError]:
    """``ValidateCABundle`` of the base64 ``caBundle`` field (undecodable base64 is decoding's
    error, reported before validation)."""
    if not isinstance(ca_bundle, str) or not ca_bundle:
        return []
    try:
        data = base64.b64decode(ca_bundle, validate=True)
    except (binascii.Error, ValueError):
        return []
    problem = ca_bundle_problem(data) if data else None
    return [] if problem is None else [invalid(path, go_bytes(data), problem)]
