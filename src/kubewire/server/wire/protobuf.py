"""Decode ``application/vnd.kubernetes.protobuf`` request bodies into kube's JSON form.

Pure (bytes in, dict out). A body is ``k8s\\0`` + a ``runtime.Unknown`` whose ``typeMeta``
names the kind and whose ``raw`` is the object's message (shared/proto/README.md). Field
numbers, JSON names and types come from ``schema/proto_facts.json`` (``tools/gen_proto.py``).

The JSON form is what ``json.Marshal`` of the Go object would give: field-number order (Go
struct order), map keys sorted, ``bytes`` as base64, ``metav1.Time`` as RFC 3339 seconds (nanos
dropped; an empty message is the zero time, ``null``), ``MicroTime`` with microseconds,
``IntOrString`` as a number or string, ``Quantity`` as its string (empty: ``"0"``),
``RawExtension``/``FieldsV1`` as the embedded JSON, inlined embedded structs flattened. A zero
scalar in an ``omitempty`` non-pointer field is left out, as gogo always writes those fields.

Every malformed input raises ``BadRequest`` with kube's text (``handlers/rest.go``
``transformDecodeError`` around the gogo ``Unmarshal`` errors of ``generated.pb.go``); nothing
else escapes. Bounds: input length is the HTTP body limit; nesting is ``MAX_MESSAGE_DEPTH``.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from importlib import resources

import msgspec

from kubewire.go_text import decode_go_json, go_utf8
from kubewire.json_types import JSON
from kubewire.status import BadRequest
from kubewire.times import format_micro_time, format_time

PROTOBUF_MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
ENVELOPE_PREFIX = b"k8s\x00"
MAX_MESSAGE_DEPTH = 64  # kube's deepest request type nests ~15 messages; bounds recursion
_SCHEME = "pkg/api/legacyscheme/scheme.go:30"  # kube-apiserver's scheme name in errors
_SUMMARY_BYTES = 30  # handlers/rest.go summarizeData
_UINT64 = (1 << 64) - 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_META = "k8s.io.apimachinery.pkg.apis.meta.v1."
_TIME, _MICRO_TIME, _FIELDS_V1 = _META + "Time", _META + "MicroTime", _META + "FieldsV1"
_INT_OR_STRING = "k8s.io.apimachinery.pkg.util.intstr.IntOrString"
_QUANTITY = "k8s.io.apimachinery.pkg.api.resource.Quantity"
_RAW_EXTENSION = "k8s.io.apimachinery.pkg.runtime.RawExtension"
_UNKNOWN = "k8s.io.apimachinery.pkg.runtime.Unknown"
# Go ``[]string`` types that go-to-protobuf wraps in a message of ``items``: their JSON is the
# list itself (``null`` when empty, as a nil slice).
_STRING_LISTS = frozenset({"k8s.io.api.authorization.v1.ExtraValue",
                           "k8s.io.api.authentication.v1.ExtraValue",
                           "k8s.io.api.certificates.v1.ExtraValue"})
_GO_NAMES = {"uid": "UID", "apiVersion": "APIVersion", "apiGroup": "APIGroup", "ip": "IP",
             "ips": "IPs", "fsType": "FSType", "url": "URL", "tls": "TLS"}
_ZEROS: tuple[JSON, ...] = ("", 0, b"")


class WireError(Exception):
    """A gogo ``Unmarshal`` error; ``str()`` is Go's text (``unexpected EOF``, ...)."""


@dataclass(frozen=True, slots=True)
class FieldFact:
    """One .proto field: number, JSON key, scalar or message type and its flags."""

    number: int
    json_name: str
    type: str
    is_repeated: bool
    is_map: bool
    is_inline: bool
    omits_zero: bool

    @property
    def go_name(self) -> str:
        """The Go field name gogo puts in ``wrong wireType`` errors (best effort)."""
        if self.is_inline:
            return self.type.rsplit(".", 1)[-1]
        return _GO_NAMES.get(self.json_name) or self.json_name[:1].upper() + self.json_name[1:]


@dataclass(frozen=True, slots=True)
class ProtoFacts:
    kinds: Mapping[str, Mapping[str, str]]  # apiVersion -> kind -> message
    messages: Mapping[str, Mapping[int, FieldFact]]


@cache
def load_proto_facts() -> ProtoFacts:
    """The generated facts, read once from ``kubewire/schema/proto_facts.json``."""
    raw = msgspec.json.decode(
        resources.files("kubewire.schema").joinpath("proto_facts.json").read_bytes())
    messages = {
        name: {row[0]: FieldFact(row[0], row[1], row[2], "r" in row[3], "m" in row[3],
                                 "i" in row[3], "e" in row[3]) for row in rows}
        for name, rows in raw["messages"].items()}
    return ProtoFacts(raw["kinds"], messages)


# --- entry point -------------------------------------------------------------------------------

def decode_protobuf_object(body: bytes, expected_api_version: str, expected_kind: str,
                           ) -> dict[str, JSON]:
    """The JSON form of a protobuf request body; kind/apiVersion come first.

    Missing ``typeMeta`` parts default to the expected ones (gogo ``copyKindDefaults``); the
    returned ``kind``/``apiVersion`` are the body's, so the caller's usual type-meta check
    rejects a mismatch. Raises BadRequest for anything undecodable.
    """
    try:
        type_meta, raw = _open_envelope(body)
    except WireError as exc:
        raise BadRequest(f"the object provided is unrecognized (must be of type "
                         f"{expected_kind}): {exc} ({_summarize(body)})") from None
    api_version, kind = _default_kind(type_meta, expected_api_version, expected_kind)
    version = api_version.rsplit("/", 1)[-1]
    try:
        obj = _decode_kind(raw, api_version, kind)
    except WireError as exc:
        raise BadRequest(f'{kind} in version "{version}" cannot be handled as a '
                         f"{expected_kind}: {exc}") from None
    return {"kind": kind, "apiVersion": api_version, **obj}


def _open_envelope(body: bytes) -> tuple[dict[str, JSON], bytes]:
    if not body:
        raise WireError("empty data")
    if not body.startswith(ENVELOPE_PREFIX):
        raise WireError("provided data does not appear to be a protobuf message, expected "
                        "prefix [107 56 115 0]")
    if len(body) == len(ENVELOPE_PREFIX):
        raise WireError("empty body")
    state = _parse(memoryview(body)[len(ENVELOPE_PREFIX):], _UNKNOWN, 0, {})
    type_meta = _finish(state.get(1, {}), "k8s.io.apimachinery.pkg.runtime.TypeMeta")
    raw = state.get(2, b"")
    return type_meta, raw if isinstance(raw, bytes) else b""


def _default_kind(type_meta: Mapping[str, JSON], expected_api_version: str,
                  expected_kind: str) -> tuple[str, str]:
    """apimachinery ``copyKindDefaults``: empty kind/version come from the URL's."""
    api_version = str(type_meta.get("apiVersion") or "")
    kind = str(type_meta.get("kind") or "") or expected_kind
    if api_version.count("/") > 1:  # schema.ParseGroupVersion fails: only the kind survives
        api_version = ""
    version = api_version.rsplit("/", 1)[-1]
    if not version:
        api_version = expected_api_version
    return api_version, kind


def _decode_kind(raw: bytes, api_version: str, kind: str) -> dict[str, JSON]:
    message = load_proto_facts().kinds.get(api_version, {}).get(kind)
    if message is None:
        raise WireError(f'no kind "{kind}" is registered for version "{api_version}" in '
                        f'scheme "{_SCHEME}"')
    value = _finish(_parse(memoryview(raw), message, 0, {}), message)
    return value if isinstance(value, dict) else {}


def _summarize(body: bytes) -> str:
    if not body:
        return "<empty>"
    head = body[:_SUMMARY_BYTES]
    text = go_utf8(head) if body[:1] == b"{" else head.hex()
    return text + (" ..." if len(body) > _SUMMARY_BYTES else "")


# --- wire reading (gogo generated.pb.go semantics) ---------------------------------------------

def _varint(data: memoryview, pos: int) -> tuple[int, int]:
    """An unsigned varint, truncated to 64 bits like gogo's loop."""
    value = 0
    shift = 0
    while True:
        if shift >= 64:
            raise WireError("proto: integer overflow")
        if pos >= len(data):
            raise WireError("unexpected EOF")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value & _UINT64, pos
        shift += 7


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _chunk(data: memoryview, pos: int) -> tuple[memoryview, int]:
    """A length-delimited payload starting at ``pos`` (its length varint first)."""
    length, pos = _varint(data, pos)
    length = _signed(length, 64)
    if length < 0 or pos + length >= 1 << 63:
        raise WireError("proto: negative length found during unmarshaling")
    if pos + length > len(data):
        raise WireError("unexpected EOF")
    return data[pos:pos + length], pos + length


def _skip(data: memoryview, pos: int) -> int:
    """gogo ``skipGenerated``: the position after one unknown field (groups included)."""
    depth = 0
    while pos < len(data):
        wire, pos = _varint(data, pos)
        wire_type = wire & 7
        if wire_type == 3:
            depth += 1
        elif wire_type == 4:
            if depth == 0:
                raise WireError("proto: unexpected end of group")
            depth -= 1
        else:
            pos = _skip_payload(data, pos, wire_type)
        if depth == 0:
            if pos > len(data):
                raise WireError("unexpected EOF")
            return pos
    raise WireError("unexpected EOF")


def _skip_payload(data: memoryview, pos: int, wire_type: int) -> int:
    if wire_type == 0:
        return _varint(data, pos)[1]
    if wire_type in (1, 5):
        return pos + (8 if wire_type == 1 else 4)
    if wire_type != 2:
        raise WireError(f"proto: illegal wireType {wire_type}")
    length, pos = _varint(data, pos)
    if _signed(length, 64) < 0 or pos + length >= 1 << 63:  # Go's int turns negative
        raise WireError("proto: negative length found during unmarshaling")
    return pos + length


def _tag_fact(wire: int, facts: Mapping[int, FieldFact], message: str) -> FieldFact | None:
    """The field a tag names (None: unknown, to be skipped); gogo's tag checks first."""
    number = _signed(wire >> 3, 32)
    if wire & 7 == 4:
        raise WireError(f"proto: {message.rsplit('.', 1)[-1]}: wiretype end group for non-group")
    if number <= 0:
        raise WireError(f"proto: {message.rsplit('.', 1)[-1]}: illegal tag {number} "
                        f"(wire type {wire})")
    return facts.get(number)


def _parse(data: memoryview, message: str, depth: int, state: dict[int, JSON],
           ) -> dict[int, JSON]:
    """Merge one encoded ``message`` into ``state`` (field number -> raw decoded value)."""
    if depth > MAX_MESSAGE_DEPTH:
        raise WireError(f"proto: {message.rsplit('.', 1)[-1]}: nesting deeper than "
                        f"{MAX_MESSAGE_DEPTH} messages")
    facts = load_proto_facts().messages[message]
    pos = 0
    while pos < len(data):
        start = pos
        wire, pos = _varint(data, pos)
        fact = _tag_fact(wire, facts, message)
        if fact is None:
            pos = _skip(data, start)
        elif _wire_type_of(fact, wire & 7) == 0:
            value, pos = _varint(data, pos)
            _store(state, fact, _scalar(value, fact.type))
        else:
            chunk, pos = _chunk(data, pos)
            _read_chunk(chunk, fact, depth, state)
    return state


_VARINT_TYPES = frozenset({"int32", "int64", "bool"})


def _wire_type_of(fact: FieldFact, wire_type: int) -> int:
    """Check the tag's wire type against the field (repeated numbers may come packed)."""
    expected = 0 if fact.type in _VARINT_TYPES and not fact.is_map else 2
    if wire_type != expected and not (fact.is_repeated and expected == 0 and wire_type == 2):
        raise WireError(f"proto: wrong wireType = {wire_type} for field {fact.go_name}")
    return wire_type


def _read_chunk(chunk: memoryview, fact: FieldFact, depth: int, state: dict[int, JSON]) -> None:
    """Store one length-delimited field: packed numbers, map entry, text, bytes or message."""
    if fact.type in _VARINT_TYPES and not fact.is_map:
        values: list[JSON] = state.setdefault(fact.number, [])
        at = 0
        while at < len(chunk):
            value, at = _varint(chunk, at)
            values.append(_scalar(value, fact.type))
    elif fact.is_map:
        key, entry = _map_entry(chunk, fact, depth)
        state.setdefault(fact.number, {})[key] = entry
    elif fact.type in ("string", "bytes"):
        _store(state, fact, bytes(chunk))
    else:
        previous = None if fact.is_repeated else state.get(fact.number)
        _store(state, fact, _message_value(chunk, fact.type, depth + 1, previous))


def _scalar(value: int, type_name: str) -> JSON:
    if type_name == "bool":
        return value != 0
    return _signed(value, 32 if type_name == "int32" else 64)


def _store(state: dict[int, JSON], fact: FieldFact, value: JSON) -> None:
    if fact.is_repeated:
        state.setdefault(fact.number, []).append(value)
    else:
        state[fact.number] = value


def _map_entry(chunk: memoryview, fact: FieldFact, depth: int) -> tuple[str, JSON]:
    """A ``map<string, V>`` entry: key = field 1, value = field 2, anything else skipped."""
    key, value = b"", None
    pos = 0
    while pos < len(chunk):
        start = pos
        wire, pos = _varint(chunk, pos)
        if wire >> 3 not in (1, 2):
            pos = _skip(chunk, start)
            continue
        payload, pos = _chunk(chunk, pos)
        if wire >> 3 == 1:
            key = bytes(payload)
        else:
            value = payload
    text_key = go_utf8(key)
    if fact.type in ("string", "bytes"):
        return text_key, bytes(value or b"")
    return text_key, _message_value(value or memoryview(b""), fact.type, depth + 1, None)


# --- special types and JSON rendering ----------------------------------------------------------

class _Rendered:
    """A value already in its final JSON form (special types)."""

    __slots__ = ("value",)

    def __init__(self, value: JSON) -> None:
        self.value = value


def _message_value(chunk: memoryview, message: str, depth: int, previous: JSON) -> JSON:
    if message in (_TIME, _MICRO_TIME):  # custom Unmarshal: each occurrence replaces
        return _Rendered(_time(chunk, message == _MICRO_TIME, depth))
    if message in (_QUANTITY, _RAW_EXTENSION, _FIELDS_V1, _INT_OR_STRING):
        return _Rendered(_special(_parse(chunk, message, depth, {}), message))
    if message in _STRING_LISTS:
        items = _parse(chunk, message, depth, {}).get(1)
        return _Rendered([go_utf8(item) for item in items] if isinstance(items, list) and items
                         else None)
    return _parse(chunk, message, depth, previous if isinstance(previous, dict) else {})


def _time(chunk: memoryview, is_micro: bool, depth: int) -> JSON:
    """metav1.Time/MicroTime ``Unmarshal``: empty is the zero time (``null``)."""
    if not len(chunk):
        return None
    state = _parse(chunk, _TIME, depth, {})
    seconds, nanos = state.get(1, 0), state.get(2, 0) if is_micro else 0
    micros = abs(nanos) // 1000 * (1 if nanos >= 0 else -1)  # Duration.Truncate: toward 0
    try:
        moment = _EPOCH + timedelta(seconds=seconds, microseconds=micros)
    except OverflowError:
        raise WireError(f"Time.MarshalJSON: year outside of range [0,9999] ({seconds})") \
            from None
    if not 1 <= moment.year <= 9999:
        raise WireError(f"Time.MarshalJSON: year outside of range [0,9999] ({seconds})")
    return format_micro_time(moment) if is_micro else format_time(moment)


def _special(state: dict[int, JSON], message: str) -> JSON:
    if message == _QUANTITY:
        return _text(state.get(1, b"")) or "0"
    if message == _INT_OR_STRING:
        kind = state.get(1, 0)
        if kind not in (0, 1):
            raise WireError("impossible IntOrString.Type")
        return _text(state.get(3, b"")) if kind == 1 else state.get(2, 0)
    raw = state.get(1, b"")
    if not raw:
        return None
    try:
        return decode_go_json(raw)
    except msgspec.DecodeError as exc:
        raise WireError(f"invalid character in embedded JSON: {exc}") from None
    except RecursionError:  # msgspec's depth limit (Go's is 10000)
        raise WireError("exceeded max depth") from None


def _text(value: JSON) -> str:
    return go_utf8(value) if isinstance(value, bytes) else ""


def _finish(state: dict[int, JSON], message: str) -> dict[str, JSON]:
    """Raw field values -> the JSON object, in .proto declaration (Go struct) order."""
    out: dict[str, JSON] = {}
    for number, fact in load_proto_facts().messages[message].items():
        if number not in state:
            continue
        value = _json_value(state[number], fact)
        if fact.omits_zero and (value in _ZEROS or value is False):
            continue
        if fact.is_inline and isinstance(value, dict):
            out.update(value)
        else:
            out[fact.json_name] = value
    return out


def _json_value(value: JSON, fact: FieldFact) -> JSON:
    if fact.is_map:
        return {key: _one_value(value[key], fact.type) for key in sorted(value)}
    if fact.is_repeated:
        return [_one_value(item, fact.type) for item in value]
    return _one_value(value, fact.type)


def _one_value(value: JSON, type_name: str) -> JSON:
    if isinstance(value, _Rendered):
        return value.value
    if type_name == "bytes":
        return base64.b64encode(value).decode("ascii")
    if type_name == "string":
        return go_utf8(value)  # gogo keeps the bytes; encoding the object gives U+FFFD
    if isinstance(value, dict):
        return _finish(value, type_name)
    return value
