"""Media types in and out: request body decoding, Accept negotiation, response bodies.

kube-apiserver treats a missing Content-Type as JSON (the official Python client sends none on
POST/PUT), accepts YAML, and answers 415/406 with fixed messages (watch-protocol.md §3.3, §8.2).
JSON is read as Go reads it (invalid UTF-8 and unpaired surrogates become U+FFFD,
``go_text.decode_go_json``), YAML as sigs.k8s.io/yaml over go-yaml reads it (``yaml_bodies``:
aliases bounded before expansion, go-yaml's reader errors).

Answers end as kube-apiserver v1.32's do. Its JSON serializer (apimachinery
``runtime/serializer/json/json.go`` ``doEncode``) writes with ``encoding/json``'s
``json.NewEncoder(w).Encode(obj)``, which ends the value with ``\\n``; so does everything
``responsewriters.SerializeObject`` writes. Per answer, kube's writer → final ``\\n`` → kubewire:

- objects of get, list, create, update, patch, delete; delete's Status Success; Scale
  (``WriteObjectNegotiated`` → ``SerializeObject``) → yes → ``object_response`` (encoded bytes,
  the newline as the response's ``tail``) and ``json_response`` here;
- meta.k8s.io Tables (``transformResponseObject``, then the same) → yes → ``object_response``;
- Status errors of handlers and filters (``ErrorNegotiated``: 400, 404, 405, 406, 409, 413,
  415, 422, 500, 401 of authentication, 403 of ``responsewriters.Forbidden``, 504 of
  ``WithRequestDeadline``) → yes → ``http_messages.status_response``;
- discovery, legacy (``/api``, ``/apis``, ``/apis/<g>``, ``/api/v1``, ``/apis/<g>/<v>``:
  ``WriteObjectNegotiated``) and aggregated (``ServeHTTPWithETag``, the same) → yes →
  ``discovery.documents``;
- watch event lines (a ``json.Encoder`` per event) → yes → ``storage.cached.event_line``;
- 504 of the timeout filter (``json.NewEncoder(tw.w)``, a Status without kind, text/plain) →
  yes → ``http_input.REQUEST_TIMEOUT_BODY``;
- 429 of max-in-flight (``http.Error``, which ``Fprintln``s, text/plain) → yes →
  ``observe.per_request``;
- ``/version`` (``routes/version.go`` ``WriteRawJSON``: ``json.MarshalIndent``, two spaces) →
  no → ``app.VERSION_BODY``;
- OpenAPI v2 and v3 (kube-openapi ``handler``, ``handler3``: ``json.Marshal`` bytes through
  ``http.ServeContent``) → no → ``discovery.openapi``;
- protobuf → no newline; kubewire answers JSON only (406 otherwise).

kube pretty-prints (``?pretty=true``, or a ``curl``/``Wget``/``Mozilla/5.0`` User-Agent) with
``MarshalIndent`` and no newline; kubewire does not pretty-print.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import msgspec

from kubewire.go_json_bytes import GoJSONEncoder
from kubewire.go_text import JSON_KIND_NAMES, decode_go_json, go_json_error, go_utf8
from kubewire.resources import Resource
from kubewire.server.wire.http_messages import Response
from kubewire.server.wire.json_depth import EXCEEDED_MAX_DEPTH, MAX_NESTING_DEPTH, too_deep
from kubewire.server.wire.protobuf import PROTOBUF_MEDIA_TYPE, decode_protobuf_object
from kubewire.server.wire.yaml_bodies import YAMLBodyError, load_yaml_body
from kubewire.status import BadRequest, NotAcceptable, UnsupportedMediaType

_encoder = GoJSONEncoder()
encode_json = _encoder.encode
# Always given a list: msgspec 0.22 leaks one iterator per call on any other sequence.
_encode_lines = _encoder.encode_lines
JSON_END = b"\n"  # what Go's json.Encoder writes after each value

JSON_TYPES = ("application/json", "")
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml")
_ACCEPTED_BODY_TYPES = (
    "application/json, application/yaml, application/vnd.kubernetes.protobuf")
_ACCEPTED_CUSTOM_BODY_TYPES = "application/json, application/yaml"
def media_type(header: str) -> str:
    """``application/json; charset=utf-8`` -> ``application/json``."""
    return header.split(";", 1)[0].strip().lower()


def unsupported_body(resource: Resource) -> UnsupportedMediaType:
    accepted = _ACCEPTED_CUSTOM_BODY_TYPES if resource.is_custom else _ACCEPTED_BODY_TYPES
    return UnsupportedMediaType(
        "the body of the request was in an unknown format - accepted media types include: "
        + accepted)


def decode_object(body: bytes, content_type: str, resource: Resource,
                  as_kind: tuple[str, str] | None = None) -> dict[str, Any]:
    """Decode a create/update body into a JSON object; 415 for unknown media types.

    Protobuf bodies are built-in kinds only (CRs have no protobuf form); ``as_kind``
    (apiVersion, kind) names a subresource's payload type (autoscaling/v1 Scale) when it is not
    ``resource``'s own. Protobuf bodies come back with kind/apiVersion first, like JSON ones.
    """
    kind = media_type(content_type)
    if as_kind is not None:  # error messages name the payload's kind
        group, _, version = as_kind[0].rpartition("/")
        resource = replace(resource, group=group, version=version, kind=as_kind[1])
    if kind == PROTOBUF_MEDIA_TYPE and not resource.is_custom:
        value = decode_protobuf_object(body, resource.api_version, resource.kind)
    elif kind in JSON_TYPES:
        if not body.strip():
            raise BadRequest("the body of the request was empty")
        try:
            value = decode_go_json(body)
        except msgspec.DecodeError:
            raise BadRequest(unrecognized(resource, go_json_error(body), body)) from None
        except RecursionError:
            raise BadRequest(unrecognized(resource, EXCEEDED_MAX_DEPTH, body)) from None
    elif kind in YAML_TYPES:
        value = _decode_yaml(body, resource)
    else:
        raise unsupported_body(resource)
    if not isinstance(value, dict):
        raise BadRequest(unrecognized(resource, _cannot_unmarshal(value), body))
    # Each level opens a bracket, so a JSON text with few of them cannot nest too deep; counting
    # is C-speed, the walk is not.
    shallow = kind in JSON_TYPES and body.count(b"{") + body.count(b"[") <= MAX_NESTING_DEPTH
    if not shallow and too_deep(value):
        raise BadRequest(unrecognized(resource, EXCEEDED_MAX_DEPTH, body))
    return value


def unrecognized(resource: Resource, reason: str, body: bytes) -> str:
    """create.go ``transformDecodeError`` when no kind could be read: reason plus a summary."""
    return (f"the object provided is unrecognized (must be of type {resource.kind}): "
            f"couldn't get version/kind; json parse error: {reason} ({summarize_data(body)})")


def summarize_data(data: bytes, max_length: int = 30) -> str:
    """create.go ``summarizeData``: an object's first bytes as text, anything else as hex."""
    if not data:
        return "<empty>"
    cut = data[:max_length]
    suffix = " ..." if len(data) > max_length else ""
    if data[:1] == b"{":
        return go_utf8(cut) + suffix
    return cut.hex() + suffix


def _decode_yaml(body: bytes, resource: Resource) -> Any:
    """The YAML serializer's ``YAMLToJSON``; its error reaches ``transformDecodeError`` as is."""
    try:
        return load_yaml_body(body).value
    except YAMLBodyError as exc:
        raise BadRequest(f"the object provided is unrecognized (must be of type {resource.kind}): "
                         f"{exc} ({summarize_data(body)})") from None
    except RecursionError:
        raise BadRequest(unrecognized(resource, EXCEEDED_MAX_DEPTH, body)) from None


def _cannot_unmarshal(value: Any) -> str:
    type_name = JSON_KIND_NAMES.get(type(value), "null")
    return (f"json: cannot unmarshal {type_name} "
            f"into Go value of type struct {{ APIVersion string \"json:\\\"apiVersion,omitempty"
            f"\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }}")


def negotiate_json(accept: str, *, stream: bool = False) -> None:
    """Accept must allow JSON; otherwise 406 with kube's list of types.

    Table (``as=Table``) and protobuf entries are skipped when JSON is also acceptable, as
    every kubectl Accept list ends with ``application/json``.
    """
    if not accept.strip():
        return
    for part in accept.split(","):
        kind = media_type(part)
        params = part.lower()
        if kind in ("*/*", "application/*"):
            return
        if kind == "application/json" and "as=" not in params:
            return
    if stream:
        raise NotAcceptable("only the following media types are accepted: "
                            "application/json;stream=watch, "
                            "application/vnd.kubernetes.protobuf;stream=watch")
    raise NotAcceptable("only the following media types are accepted: application/json, "
                        "application/yaml, application/vnd.kubernetes.protobuf")


def json_response(status: int, value: Any, headers: list[tuple[str, str]] | None = None,
                  ) -> Response:
    """An API object answer encoded from ``value``, ending with ``\\n`` (one encode)."""
    return Response(status, _encode_lines([value]), headers=headers or [], compressible=True)


def object_response(status: int, encoded: bytes, headers: list[tuple[str, str]] | None = None,
                    ) -> Response:
    """An API object answer from bytes already encoded (a stored object, a list, a Table).

    Its ``\\n`` is the response's ``tail``, joined when the response is rendered: ``encoded`` is
    often the watch cache's own bytes, up to the 1.5 MiB object bound, and is not copied.
    """
    return Response(status, encoded, headers=headers or [], compressible=True, tail=JSON_END)


def type_meta_prefix(resource: Resource) -> bytes:
    """How every stored object of ``resource`` begins: kind and apiVersion first."""
    return b'{"kind":"%b","apiVersion":"%b",' % (resource.kind.encode(),
                                                  resource.api_version.encode())


def list_item(value: bytes, prefix: bytes) -> bytes:
    """A list item: built-in kinds drop kind/apiVersion in lists (watch-protocol.md §10.1)."""
    return b"{" + value[len(prefix):] if value.startswith(prefix) else value


def with_type_meta(resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``obj`` whose first keys are kind and apiVersion (stored form)."""
    out: dict[str, Any] = {"kind": resource.kind, "apiVersion": resource.api_version}
    for key, value in obj.items():
        if key not in out:
            out[key] = value
    return out
