"""Query and body options of list/watch, get, write and delete requests, decoded as kube does.

Pure functions from the parsed query (``{name: [values...]}``, blank values kept) to frozen option
values, raising ``StatusError`` with kube-apiserver v1.32's exact texts (watch-protocol.md §1.2,
§1.3, §2.2, §10.2; objects-and-clients.md §1.12, §2.7). As in kube, a repeated parameter counts
by its first value and unknown parameters are ignored: the generated
``autoConvert_url_Values_To_v1_ListOptions`` (apimachinery pkg/apis/meta/v1) reads named keys only.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from kubewire.resources import Resource
from kubewire.selectors import (
    FieldRequirement,
    FieldSelector,
    LabelSelector,
    SelectorError,
    convert_field_selector,
    go_quote,
    parse_field_selector,
    parse_label_selector,
)
from kubewire.status import (
    BadRequest,
    FieldError,
    forbidden,
    invalid,
    invalid_object,
    not_supported,
    required,
)

Query = Mapping[str, Sequence[str]]
WriteVerb = Literal["create", "update", "patch", "apply"]
NOT_OLDER_THAN = "NotOlderThan"
CONTINUE_VERSION = "meta.k8s.io/v1"
MAX_FIELD_MANAGER_BYTES = 128  # apimachinery validation.FieldManagerMaxLength


def parse_bool(value: str) -> bool:
    """Go ``Convert_Slice_string_To_bool``: ``0`` or any-case ``false`` is False, all else True."""
    return not (value == "0" or value.casefold() == "false")


def _first(query: Query, name: str) -> str | None:
    values = query.get(name)
    return values[0] if values else None


def _parse_int64(text: str) -> int:
    """Go ``strconv.ParseInt(text, 10, 64)``; its error text becomes a 400 (``ListResource``)."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not digits.isascii() or not digits.isdigit():
        raise BadRequest(f"strconv.ParseInt: parsing {go_quote(text)}: invalid syntax")
    value = int(text)
    if not -(2**63) <= value < 2**63:
        raise BadRequest(f"strconv.ParseInt: parsing {go_quote(text)}: value out of range")
    return value


def _check_resource_version(rv: str) -> None:
    """``APIObjectVersioner.ParseResourceVersion``; kube answers 500 on the cache path, we 400."""
    if rv in ("", "0"):
        return
    reason = ""
    if not rv.isascii() or not rv.isdigit():
        reason = "invalid syntax"
    elif int(rv) >= 2**64:
        reason = "value out of range"
    if reason:
        raise BadRequest(f"resourceVersion: Invalid value: {go_quote(rv)}: "
                         f"strconv.ParseUint: parsing {go_quote(rv)}: {reason}")


class _GoLiteral:
    """A value ``status.format_field_value`` prints verbatim (it falls back to ``repr``)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _go_string_slice(values: Sequence[str]) -> _GoLiteral:
    return _GoLiteral("[]string{" + ", ".join(go_quote(v) for v in values) + "}")


# --- list / watch --------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class ListOptions:
    """Decoded, defaulted and validated list/watch options (``metainternalversion.ListOptions``).

    ``field_selector`` is already converted for the resource; ``watch`` includes legacy
    ``/watch/`` paths.
    """

    watch: bool = False
    resource_version: str = ""
    resource_version_match: str = ""
    send_initial_events: bool | None = None
    allow_watch_bookmarks: bool = False
    timeout_seconds: int | None = None
    label_selector: LabelSelector = field(default_factory=LabelSelector)
    field_selector: FieldSelector = field(default_factory=FieldSelector)
    limit: int = 0
    continue_token: str = ""
    pretty: bool | None = None

    @property
    def resource_version_int(self) -> int:
        """The resourceVersion as an int; ``""`` and ``"0"`` are 0."""
        return int(self.resource_version) if self.resource_version not in ("", "0") else 0


def _optional_bool(query: Query, name: str) -> bool | None:
    value = _first(query, name)
    return None if value is None else parse_bool(value)


def _decode_list_query(query: Query) -> dict[str, Any]:
    """url.Values -> v1.ListOptions -> internal, in kube's field order (first error wins)."""
    timeout, limit = _first(query, "timeoutSeconds"), _first(query, "limit")
    values: dict[str, Any] = {
        "watch": bool(_optional_bool(query, "watch")),
        "allow_watch_bookmarks": bool(_optional_bool(query, "allowWatchBookmarks")),
        "resource_version": _first(query, "resourceVersion") or "",
        "resource_version_match": _first(query, "resourceVersionMatch") or "",
        "timeout_seconds": None if timeout is None else _parse_int64(timeout),
        "limit": 0 if limit is None else _parse_int64(limit),
        "continue_token": _first(query, "continue") or "",
        "send_initial_events": _optional_bool(query, "sendInitialEvents"),
        "pretty": _optional_bool(query, "pretty"),
    }
    try:
        values["label_selector"] = parse_label_selector(_first(query, "labelSelector") or "")
        values["field_selector"] = parse_field_selector(_first(query, "fieldSelector") or "")
    except SelectorError as exc:
        raise BadRequest(exc.message) from None
    return values


_RVM = "resourceVersionMatch"
_RVM_WITH_CONTINUE = "resourceVersionMatch is forbidden when continue is provided"


def _watch_option_errors(opts: dict[str, Any]) -> list[FieldError]:
    """``validateWatchOptions`` (apimachinery pkg/apis/meta/internalversion/validation)."""
    match, sie = opts["resource_version_match"], opts["send_initial_events"]
    errs: list[FieldError] = []
    if sie is not None and match != NOT_OLDER_THAN:
        errs.append(forbidden(_RVM, "sendInitialEvents requires setting resourceVersionMatch "
                              "to NotOlderThan"))
    if match:
        if sie is None:
            errs.append(forbidden(_RVM, "resourceVersionMatch is forbidden for watch unless "
                                  "sendInitialEvents is provided"))
        if match != NOT_OLDER_THAN:
            errs.append(not_supported(_RVM, match, [NOT_OLDER_THAN]))
        if opts["continue_token"]:
            errs.append(forbidden(_RVM, _RVM_WITH_CONTINUE))
    return errs


def _list_option_errors(opts: dict[str, Any]) -> list[FieldError]:
    """``ValidateListOptions`` (apimachinery pkg/apis/meta/internalversion/validation)."""
    if opts["watch"]:
        return _watch_option_errors(opts)
    match, rv = opts["resource_version_match"], opts["resource_version"]
    errs: list[FieldError] = []
    if match:
        if not rv:
            errs.append(forbidden(_RVM, "resourceVersionMatch is forbidden unless "
                                  "resourceVersion is provided"))
        if opts["continue_token"]:
            errs.append(forbidden(_RVM, _RVM_WITH_CONTINUE))
        if match not in ("Exact", NOT_OLDER_THAN):
            errs.append(not_supported(_RVM, match, ["Exact", NOT_OLDER_THAN, ""]))
        if match == "Exact" and rv == "0":
            errs.append(forbidden(_RVM, 'resourceVersionMatch "exact" is forbidden for '
                                  'resourceVersion "0"'))
    if opts["send_initial_events"] is not None:
        errs.append(forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
    return errs


def _name_selector(sel: FieldSelector, path_name: str) -> FieldSelector:
    """The legacy ``/watch/.../{name}`` rule of ``ListResource`` (watch-protocol.md §1.4)."""
    if sel.is_empty:
        return FieldSelector((FieldRequirement("metadata.name", "=", path_name),))
    if sel.exact("metadata.name") != path_name:
        raise BadRequest("fieldSelector metadata.name doesn't match requested name")
    return sel


def parse_list_options(query: Query, resource: Resource, *, force_watch: bool = False,
                       path_name: str = "") -> ListOptions:
    """Decode a list/watch query the way kube-apiserver v1.32's ``ListResource`` does.

    Order: decode (400), v1.32 WatchList defaulting, validation (422 ``ListOptions`` Invalid),
    field-label conversion (400), the path-name rule (400), then the storage-level checks kube
    makes later: a list's continue token and resourceVersion with continue, else a numeric
    resourceVersion (400). Defaulting and validation see only the ``watch`` parameter, not a
    legacy ``/watch/`` path (``force_watch``), exactly as kube.
    """
    opts = _decode_list_query(query)
    if (opts["watch"] and opts["resource_version"] in ("", "0")
            and opts["send_initial_events"] is None and not opts["resource_version_match"]):
        # internalversion.SetListOptionsDefaults with the WatchList gate on (§2.2)
        opts["send_initial_events"], opts["resource_version_match"] = True, NOT_OLDER_THAN
    errs = _list_option_errors(opts)
    if errs:
        raise invalid_object("meta.k8s.io", "ListOptions", "", errs)
    try:
        opts["field_selector"] = convert_field_selector(resource, opts["field_selector"])
    except SelectorError as exc:
        raise BadRequest(exc.message) from None
    if path_name:
        opts["field_selector"] = _name_selector(opts["field_selector"], path_name)
    opts["watch"] = opts["watch"] or force_watch
    if not opts["watch"] and opts["continue_token"]:
        decode_continue(opts["continue_token"])  # storage.ValidateListOptions order
        if opts["resource_version"] not in ("", "0"):
            raise BadRequest("specifying resource version is not allowed when using continue")
    else:
        _check_resource_version(opts["resource_version"])
    return ListOptions(**opts)


# --- continue tokens (apiserver pkg/storage/continue.go) ----------------------------------------

_B64URL = {c: i for i, c in enumerate(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                      b"0123456789-_")}


def _go_raw_url_b64decode(token: str) -> bytes:
    """Go ``base64.RawURLEncoding.DecodeString``: CR/LF skipped, same error offsets as Go."""
    src = token.encode("utf-8", "surrogatepass")
    out, si, n = bytearray(), 0, len(src)
    while True:
        quantum: list[int] = []
        while len(quantum) < 4 and si < n:
            ch = src[si]
            si += 1
            if ch in (10, 13):
                continue
            if ch not in _B64URL:
                raise ValueError(f"illegal base64 data at input byte {si - 1}")
            quantum.append(_B64URL[ch])
        if len(quantum) == 1:
            raise ValueError(f"illegal base64 data at input byte {si - 1}")
        if len(quantum) < 2:
            return bytes(out)
        bits = 0
        for value in quantum + [0] * (4 - len(quantum)):
            bits = bits << 6 | value
        out += bits.to_bytes(3, "big")[:len(quantum) - 1]


def _go_json_error(data: bytes, exc: msgspec.DecodeError) -> str:
    """Go ``encoding/json`` wording for the common failures; otherwise msgspec's position."""
    text = str(exc)
    if not data.strip() or "truncated" in text:
        return "unexpected end of JSON input"
    offset = int(text.rsplit("byte ", 1)[-1].rstrip(")")) if "(byte " in text else 0
    char = data[offset:offset + 1].decode("latin-1") or " "
    quoted = "'\\''" if char == "'" else "'" + go_quote(char)[1:-1] + "'"
    if "trailing" in text:
        return f"invalid character {quoted} after top-level value"
    if offset == len(data) - len(data.lstrip()):
        return f"invalid character {quoted} looking for beginning of value"
    return f"invalid character {quoted} at input byte {offset}"


_JSON_KIND = {str: "string", bool: "bool", int: "number", float: "number", list: "array",
              dict: "object"}


def _token_fields(data: bytes) -> dict[str, Any]:
    """``json.Unmarshal`` into ``continueToken``: case-insensitive keys, null leaves zero."""
    try:
        doc = msgspec.json.decode(data.decode("utf-8", "replace").encode())
    except msgspec.DecodeError as exc:
        raise ValueError(_go_json_error(data, exc)) from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ValueError(f"json: cannot unmarshal {_JSON_KIND[type(doc)]} into Go value of type "
                         "storage.continueToken")
    fields: dict[str, Any] = {}
    for key, value in doc.items():
        name = next((n for n in ("v", "rv", "start") if n == key.casefold()), None)
        if name is None or value is None:
            continue
        expected = int if name == "rv" else str
        in_range = not isinstance(value, int) or -(2**63) <= value < 2**63
        if type(value) is not expected or not in_range:
            kind = _JSON_KIND[type(value)]
            shown = f"number {json.dumps(value)}" if kind == "number" and name == "rv" else kind
            go_type = "int64" if name == "rv" else "string"
            raise ValueError(f"json: cannot unmarshal {shown} into Go struct field "
                             f"continueToken.{name} of type {go_type}")
        fields[name] = value
    return fields


def _go_clean_rooted(path: str) -> str:
    """Go ``path.Clean`` for a path starting with ``/``."""
    parts: list[str] = []
    for seg in path.split("/"):
        if seg == "..":
            if parts:
                parts.pop()
        elif seg not in ("", "."):
            parts.append(seg)
    return "/" + "/".join(parts)


def decode_continue(token: str) -> tuple[int, str]:
    """Decode a continue token into (resourceVersion, start key relative to the collection).

    ``rv == -1`` means "continue at the latest revision" (410 recovery, §10.4). Raises
    BadRequest ``invalid continue token: ...`` with ``storage.DecodeContinue``'s reasons.
    """
    try:
        fields = _token_fields(_go_raw_url_b64decode(token))
    except ValueError as exc:
        raise BadRequest(f"invalid continue token: continue key is not valid: {exc}") from None
    version, rv, start = fields.get("v", ""), fields.get("rv", 0), fields.get("start", "")
    prefix = "invalid continue token: continue key is not valid: "
    if version != CONTINUE_VERSION:
        raise BadRequest(f"{prefix}server does not recognize this encoded version {version}")
    if rv == 0:
        raise BadRequest(f"{prefix}incorrect encoded start resourceVersion (version "
                         f"{CONTINUE_VERSION})")
    if not start:
        raise BadRequest(f"{prefix}encoded start key empty (version {CONTINUE_VERSION})")
    key = start if start.startswith("/") else "/" + start
    if _go_clean_rooted(key) != key:  # no climbing out of the collection prefix
        raise BadRequest(prefix + start)
    return rv, key[1:]


def encode_continue(rv: int, start: str) -> str:
    """A continue token as kube writes it (``storage.EncodeContinue``, Go ``json.Marshal``).

    ``start`` is the last returned key relative to the collection prefix plus ``"\\u0000"``.
    """
    doc = json.dumps({"v": CONTINUE_VERSION, "rv": rv, "start": start},
                     separators=(",", ":"), ensure_ascii=False)
    for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                         ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        doc = doc.replace(raw, escaped)  # Go's HTML-safe escaping
    return base64.urlsafe_b64encode(doc.encode("utf-8", "replace")).rstrip(b"=").decode()


# --- get -----------------------------------------------------------------------------------------

def parse_get_options(query: Query) -> str:
    """The resourceVersion of a GET on one object (``GetResource``), validated as numeric.

    Raises BadRequest for ``export=true`` (removed upstream) and for a non-numeric RV.
    """
    export = _first(query, "export")
    if export is not None and parse_bool(export):
        raise BadRequest("the export parameter, deprecated since v1.14, is no longer supported")
    rv = _first(query, "resourceVersion") or ""
    _check_resource_version(rv)
    return rv


# --- writes --------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class WriteOptions:
    """Create/update/patch options; ``field_validation`` ``""`` means the server default (Warn)."""

    dry_run: bool = False
    field_manager: str = ""
    field_validation: str = ""
    force: bool = False


_OPTIONS_KIND = {"create": "CreateOptions", "update": "UpdateOptions", "patch": "PatchOptions",
                 "apply": "PatchOptions"}
_FIELD_VALIDATION = ("", "Ignore", "Strict", "Warn")


def _field_manager_errors(manager: str) -> list[FieldError]:
    """``ValidateFieldManager`` (apimachinery pkg/apis/meta/v1/validation)."""
    errs: list[FieldError] = []
    if len(manager.encode("utf-8", "surrogatepass")) > MAX_FIELD_MANAGER_BYTES:
        errs.append(FieldError("FieldValueTooLong", "fieldManager",
                               detail=f"may not be more than {MAX_FIELD_MANAGER_BYTES} bytes"))
    offset = 0
    for ch in manager:
        if not ch.isprintable():
            errs.append(invalid("fieldManager", _GoLiteral(go_quote(manager)),
                                f"invalid character U+{ord(ch):04X} (at position {offset})"))
        offset += len(ch.encode("utf-8", "surrogatepass"))
    return errs


def _dry_run_errors(values: Sequence[str]) -> list[FieldError]:
    if all(v == "All" for v in values):
        return []
    return [not_supported("dryRun", _go_string_slice(values), ["All"])]


def parse_write_options(query: Query, *, verb: WriteVerb = "create") -> WriteOptions:
    """Decode and validate write options as ``Validate{Create,Update,Patch}Options`` do.

    Raises Invalid (422, ``<Kind>Options.meta.k8s.io "" is invalid: ...``) for a dryRun other
    than ``All``, a bad fieldManager or fieldValidation, ``force`` on a non-apply patch, or an
    apply without fieldManager.
    """
    dry_run = list(query.get("dryRun", ()))
    manager = _first(query, "fieldManager") or ""
    validation = _first(query, "fieldValidation") or ""
    force = _optional_bool(query, "force")
    errs: list[FieldError] = []
    if verb == "patch" and force is not None:
        errs.append(forbidden("force", "may not be specified for non-apply patch"))
    if verb == "apply" and not manager:
        errs.append(required("fieldManager", "is required for apply patch"))
    errs += _field_manager_errors(manager) + _dry_run_errors(dry_run)
    if validation not in _FIELD_VALIDATION:
        errs.append(not_supported("fieldValidation", validation, _FIELD_VALIDATION))
    if errs:
        raise invalid_object("meta.k8s.io", _OPTIONS_KIND[verb], "", errs)
    return WriteOptions(dry_run=bool(dry_run), field_manager=manager,
                        field_validation=validation, force=bool(force) and verb == "apply")


# --- delete --------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteOptions:
    """``metav1.DeleteOptions`` from a DELETE body or, without a body, from the query."""

    grace_period_seconds: int | None = None
    precondition_uid: str | None = None
    precondition_resource_version: str | None = None
    propagation_policy: str | None = None
    orphan_dependents: bool | None = None
    dry_run: bool = False


_PROPAGATION = ("Foreground", "Background", "Orphan")
_FIND_KIND = ('struct { APIVersion string "json:\\"apiVersion,omitempty\\""; '
              'Kind string "json:\\"kind,omitempty\\"" }')
# JSON field -> (Python type, Go type name) for sigs.k8s.io/json's case-sensitive decode.
_BODY_FIELDS: dict[str, tuple[type, str]] = {
    "gracePeriodSeconds": (int, "int64"), "orphanDependents": (bool, "bool"),
    "propagationPolicy": (str, "v1.DeletionPropagation"), "dryRun": (list, "[]string"),
    "preconditions": (dict, "v1.Preconditions"), "preconditions.uid": (str, "types.UID"),
    "preconditions.resourceVersion": (str, "string"), "dryRun[]": (str, "string"),
    "apiVersion": (str, "string"), "kind": (str, "string"),
}
_META_SCHEME = "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme/register.go:28"


def _type_error(value: Any, struct: str, name: str) -> BadRequest | None:
    want, go_type = _BODY_FIELDS[name]
    if want is int:
        ok = type(value) is int and -(2**63) <= value < 2**63
    else:
        ok = isinstance(value, want)
    if value is None or ok:
        return None
    kind = _JSON_KIND[type(value)]
    # Go names the literal only when a number fails to fit a numeric field.
    shown = f"number {json.dumps(value)}" if kind == "number" and want is int else kind
    field_name = name.removesuffix("[]")
    return BadRequest(f"json: cannot unmarshal {shown} into Go struct field "
                      f"{struct}.{field_name} of type {go_type}")


def _decode_delete_body(body: bytes) -> dict[str, Any]:
    """Decode a DeleteOptions body; 400 with Go's decoder text (kube 1.32 answers 500 here)."""
    try:
        doc = msgspec.json.decode(body)
    except msgspec.DecodeError as exc:
        raise BadRequest("couldn't get version/kind; json parse error: "
                         + _go_json_error(body, exc)) from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise BadRequest("couldn't get version/kind; json parse error: json: cannot unmarshal "
                         f"{_JSON_KIND[type(doc)]} into Go value of type {_FIND_KIND}")
    for name in ("apiVersion", "kind"):
        err = _type_error(doc.get(name), "", name)
        if err is not None:
            raise BadRequest("couldn't get version/kind; json parse error: " + err.message)
    version, kind = doc.get("apiVersion") or "", doc.get("kind") or ""
    if version not in ("", "v1", CONTINUE_VERSION) or kind not in ("", "DeleteOptions"):
        raise BadRequest(f'no kind {go_quote(kind or "DeleteOptions")} is registered for version '
                         f'{go_quote(version or CONTINUE_VERSION)} in scheme "{_META_SCHEME}"')
    _check_body_types(doc)
    return doc


def _check_body_types(doc: dict[str, Any]) -> None:
    checks: list[tuple[Any, str]] = [(doc.get(n), n) for n in _BODY_FIELDS
                                     if "." not in n and "[" not in n and n in doc]
    checks += [(v, "dryRun[]") for v in doc.get("dryRun") or () if isinstance(doc["dryRun"], list)]
    pre = doc.get("preconditions")
    if isinstance(pre, dict):
        checks += [(pre.get(n), f"preconditions.{n}") for n in ("uid", "resourceVersion")]
    for value, name in checks:
        err = _type_error(value, "DeleteOptions", name)
        if err is not None:
            raise err


def _delete_query_fields(query: Query) -> dict[str, Any]:
    grace = _first(query, "gracePeriodSeconds")
    return {"gracePeriodSeconds": None if grace is None else _parse_int64(grace),
            "orphanDependents": _optional_bool(query, "orphanDependents"),
            "propagationPolicy": _first(query, "propagationPolicy"),
            "dryRun": list(query.get("dryRun", ()))}


def parse_delete_options(body: bytes, query: Query) -> DeleteOptions:
    """Decode DELETE options as ``DeleteResource`` does: the body if any, else the query.

    Raises BadRequest for an undecodable body or bad integer, and Invalid (422,
    ``DeleteOptions.meta.k8s.io "" is invalid: ...``) per ``ValidateDeleteOptions``.
    """
    doc = _decode_delete_body(body) if body else _delete_query_fields(query)
    policy, orphan = doc.get("propagationPolicy"), doc.get("orphanDependents")
    dry_run = doc.get("dryRun") or []
    errs: list[FieldError] = []
    if orphan is not None and policy is not None:
        errs.append(invalid("propagationPolicy", _GoLiteral(go_quote(policy)),
                            "orphanDependents and deletionPropagation cannot be both set"))
    if policy is not None and policy not in _PROPAGATION:
        errs.append(not_supported("propagationPolicy", _GoLiteral(go_quote(policy)),
                                  [*_PROPAGATION, "nil"]))
    errs += _dry_run_errors(dry_run)
    if errs:
        raise invalid_object("meta.k8s.io", "DeleteOptions", "", errs)
    pre = doc.get("preconditions") or {}
    return DeleteOptions(grace_period_seconds=doc.get("gracePeriodSeconds"),
                         precondition_uid=pre.get("uid"),
                         precondition_resource_version=pre.get("resourceVersion"),
                         propagation_policy=policy, orphan_dependents=orphan,
                         dry_run=bool(dry_run))
