"""Calling a CRD's conversion webhook: one ``ConversionReview`` over HTTPS, as kube does.

kube's client (``apiserver:pkg/util/webhook/client.go`` ``hookClientConfig``) posts JSON to the
``url`` clientConfig (scheme and host, then its path; the CA is the CRD's ``caBundle``, or the
system's roots without one), or to ``https://<name>.<namespace>.svc:<port><path>`` reached
through the Service's endpoints. kubewire runs no pods, so a ``service`` clientConfig fails as
kube's resolver does for a Service without endpoints (``no endpoints available for service``),
or one that does not exist (``service "<name>" not found``).

Bounds (kube sets none: the call runs under ``context.TODO()`` with no client timeout): each
call ends after ``CALL_TIMEOUT_S``; an answer may be at most ``MAX_ANSWER_BYTES``; at most
``MAX_CALLS`` calls are in flight per server (more wait their turn), and a review carries at
most ``MAX_BATCH`` objects. Converted objects are remembered per (CRD, version, object uid,
resourceVersion) (``MEMO_ENTRIES``), so every watcher and reader of one object revision in one
version costs one call, as kube's per-version watch cache converts each revision once.

Transport failures read as Go's ``net/http`` errors (``Post "<url>": <cause>``) for the common
causes (refused, TLS verification, timeout); other causes keep aiohttp's text. aiohttp (its
client: ~200 ms to import) is imported at the first call, not with the server.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import ssl
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import msgspec

from kubewire.go_json_bytes import GoJSONEncoder
from kubewire.go_text import decode_go_json, go_json_error
from kubewire.json_types import JSON
from kubewire.resources import Resource
from kubewire.server.apiextensions.crd.conversion_review import (
    ConversionFailure,
    checked_object,
    converted_objects,
    gvk_text,
    review_request,
    review_version,
)
from kubewire.server.context import ServerContext

if TYPE_CHECKING:
    import aiohttp

CALL_TIMEOUT_S = 30.0
MAX_ANSWER_BYTES = 32 * 1024 * 1024
MAX_CALLS = 16
MAX_BATCH = 100
MEMO_ENTRIES = 4096

_encode = GoJSONEncoder().encode
_decode = msgspec.json.Decoder(dict[str, Any]).decode
_limits: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = \
    weakref.WeakKeyDictionary()
_memo: OrderedDict[tuple[str, ...], bytes] = OrderedDict()


async def convert(ctx: ServerContext, resource: Resource, objects: Sequence[dict[str, JSON]],
                  desired: str) -> list[dict[str, JSON]]:
    """``objects`` (custom resources of ``resource``'s CRD, each in some version of it) in the
    ``desired`` apiVersion, pruned with its schema; those already in it come back as they are.

    Raises ``ConversionFailure`` with kube's text when the webhook fails.
    """
    assert resource.crd is not None and resource.conversion is not None
    out = list(objects)
    pending: list[int] = []
    for index, obj in enumerate(objects):
        if obj.get("apiVersion") == desired:
            continue
        known = _memo.get(_memo_key(resource.crd, desired, obj))
        if known is None:
            pending.append(index)
        else:
            out[index] = _decode(known)
    for start in range(0, len(pending), MAX_BATCH):
        chunk = pending[start:start + MAX_BATCH]
        sent = [objects[i] for i in chunk]
        answered = await _review(ctx, resource.crd, sent, desired)
        for index, original, converted in zip(chunk, sent, answered, strict=True):
            out[index] = resource.conversion.converted(converted, desired)
            _remember(_memo_key(resource.crd, desired, original), _encode(out[index]))
    return out


def _memo_key(crd: Mapping[str, Any], desired: str, obj: Mapping[str, JSON]) -> tuple[str, ...]:
    crd_meta, meta = crd.get("metadata") or {}, obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return (str(crd_meta.get("uid")), str(crd_meta.get("generation")), desired,
            str(meta.get("uid")), str(meta.get("resourceVersion")))


def _remember(key: tuple[str, ...], value: bytes) -> None:
    _memo[key] = value
    _memo.move_to_end(key)
    while len(_memo) > MEMO_ENTRIES:
        _memo.popitem(last=False)


async def _review(ctx: ServerContext, crd: Mapping[str, Any], objects: list[dict[str, JSON]],
                  desired: str) -> list[dict[str, JSON]]:
    """One ConversionReview of ``objects``: the checked converted objects."""
    first = objects[0]
    kind = str(first.get("kind"))
    batch = len(objects) > 1
    source = gvk_text(str(first.get("apiVersion")), kind + ("List" if batch else ""))
    version = review_version(crd)
    if version is None:
        raise ConversionFailure("no supported conversion review versions")
    uid = str(uuid.uuid4())
    body = _encode(review_request(version, uid, desired, objects))
    limit = _limits.get(asyncio.get_running_loop())
    if limit is None:
        limit = _limits[asyncio.get_running_loop()] = asyncio.Semaphore(MAX_CALLS)
    try:
        async with limit:
            answer = await _post(ctx, crd, body)
        converted = converted_objects(version, uid, answer)
    except ConversionFailure as err:
        raise ConversionFailure(f"conversion webhook for {source} failed: {err}") from None
    if len(converted) != len(objects):
        raise ConversionFailure(f"conversion webhook for {source} returned {len(converted)} "
                                f"objects, expected {len(objects)}")
    try:
        return [checked_object(original, answered, desired, index, batch)
                for index, (original, answered) in enumerate(zip(objects, converted,
                                                                 strict=True))]
    except ConversionFailure as err:
        raise ConversionFailure(f"conversion webhook for {source} {err}") from None


def _client_config(crd: Mapping[str, Any]) -> Mapping[str, Any]:
    conversion = (crd.get("spec") or {}).get("conversion") or {}
    return (conversion.get("webhook") or {}).get("clientConfig") or {}


async def _post(ctx: ServerContext, crd: Mapping[str, Any], body: bytes) -> JSON:
    """POST the review; the decoded answer, or ``ConversionFailure`` with the cause."""
    import aiohttp  # ~200 ms, once, at a process's first call rather than at import

    config = _client_config(crd)
    service = config.get("service")
    if isinstance(service, Mapping):
        raise ConversionFailure(_service_failure(ctx, service))
    url = str(config.get("url") or "")
    parts = urlsplit(url)
    target = f"{parts.scheme}://{parts.netloc}{parts.path}"
    context = _ssl_context(config.get("caBundle"))
    timeout = aiohttp.ClientTimeout(total=CALL_TIMEOUT_S)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session, session.post(
                target, data=body, ssl=context,
                headers={"Content-Type": "application/json",
                         "Accept": "application/json, */*"}) as resp:
            data = await resp.content.read(MAX_ANSWER_BYTES + 1)
            status, content_type = resp.status, resp.headers.get("Content-Type", "")
    except aiohttp.ClientConnectorCertificateError as exc:
        raise ConversionFailure(f'Post "{target}": tls: failed to verify certificate: '
                                f"x509: {_x509_reason(exc)}") from None
    except aiohttp.ClientConnectorError as exc:
        reason = "connection refused" if isinstance(exc.os_error, ConnectionRefusedError) \
            else (exc.os_error.strerror or str(exc.os_error)).lower()
        raise ConversionFailure(f'Post "{target}": dial tcp {exc.host}:{exc.port}: connect: '
                                f"{reason}") from None
    except TimeoutError:
        raise ConversionFailure(f'Post "{target}": context deadline exceeded (Client.Timeout '
                                "exceeded while awaiting headers)") from None
    except aiohttp.ClientError as exc:
        raise ConversionFailure(f'Post "{target}": {exc}') from None
    if len(data) > MAX_ANSWER_BYTES:
        raise ConversionFailure(f"the webhook's answer is larger than {MAX_ANSWER_BYTES} bytes")
    if not 200 <= status < 300:
        raise ConversionFailure(_status_failure(status, data, content_type))
    try:
        answer: JSON = decode_go_json(data)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise ConversionFailure(go_json_error(data, exc if isinstance(exc, msgspec.DecodeError)
                                              else None)) from None
    return answer


def _ssl_context(ca_bundle: object) -> ssl.SSLContext:
    """The roots to trust: the CRD's ``caBundle`` (base64 PEM), else the system's."""
    if isinstance(ca_bundle, str) and ca_bundle:
        try:
            pem = base64.b64decode(ca_bundle, validate=True).decode("ascii", "replace")
        except (binascii.Error, ValueError):
            pem = ""
        if pem:
            return ssl.create_default_context(cadata=pem)
    return ssl.create_default_context()


def _x509_reason(exc: aiohttp.ClientConnectorCertificateError) -> str:
    text = str(exc.certificate_error).lower()
    if "hostname" in text or "ip address mismatch" in text:
        return "certificate is not valid for the requested name"
    if "expired" in text:
        return "certificate has expired or is not yet valid"
    return "certificate signed by unknown authority"


def _service_failure(ctx: ServerContext, service: Mapping[str, Any]) -> str:
    name, namespace = str(service.get("name")), str(service.get("namespace"))
    port = service.get("port") or 443
    url = f'Post "https://{name}.{namespace}.svc:{port}{service.get("path") or ""}"'
    services = ctx.registry.by_id("core/services")
    found = None if services is None else ctx.caches.for_resource(services).get(
        services.storage_key(namespace, name))
    if found is None:
        return f'{url}: service "{name}" not found'
    return f'{url}: no endpoints available for service "{name}"'


def _status_failure(status: int, body: bytes, content_type: str) -> str:
    """client-go's error for an answer that is not 2xx (``transformResponse``): a ``Status``
    body's message, else a generic text by code (``NewGenericServerResponse``)."""
    try:
        decoded = _decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError):
        decoded = {}
    if decoded.get("kind") == "Status" and isinstance(decoded.get("message"), str):
        return str(decoded["message"])
    text = body.decode("utf-8", "replace").strip() if content_type.startswith("text/") \
        else "unknown"
    generic = {
        400: "the server rejected our request for an unknown reason",
        401: "the server has asked for the client to provide credentials",
        403: "forbidden",
        404: "the server could not find the requested resource",
        409: "the server reported a conflict",
        429: "the server has received too many requests and has asked us to try again later",
        500: f'an error on the server ("{text}") has prevented the request from succeeding',
        503: "the server is currently unable to handle the request",
        504: "the server was unable to return a response in the time allotted, but may still "
             "be processing the request",
    }
    return generic.get(status, f"the server responded with the status code {status} but did "
                               "not return more information")
