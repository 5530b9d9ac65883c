"""Query options of list/watch and get requests, decoded as kube does; the module callers import
every request option from.

Pure functions from the parsed query (``{name: [values...]}``, blank values kept) to frozen option
values, raising ``StatusError`` with kube-apiserver v1.32's exact texts (watch-protocol.md §1.2,
§1.3, §2.2, §10.2). Write options live in ``write_options``, delete options in
``delete_options``, continue tokens in ``continue_tokens`` and parameter readers in
``query_params``; all are re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubewire.go_text import go_quote
from kubewire.resources import Resource
from kubewire.selectors.errors import SelectorError
from kubewire.selectors.fields import (
    FieldRequirement,
    FieldSelector,
    convert_field_selector,
    parse_field_selector,
)
from kubewire.selectors.labels import LabelSelector, parse_label_selector
from kubewire.server.request.continue_tokens import (
    CONTINUE_VERSION,
    decode_continue,
    encode_continue,
)
from kubewire.server.request.delete_options import DeleteOptions, parse_delete_options
from kubewire.server.request.query_params import (
    Query,
    first_value,
    int64_param,
    optional_bool,
    parse_bool,
)
from kubewire.server.request.write_options import (
    MAX_FIELD_MANAGER_BYTES,
    WriteOptions,
    WriteVerb,
    parse_write_options,
)
from kubewire.status import BadRequest, FieldError, forbidden, invalid_object, not_supported

__all__ = [
    "CONTINUE_VERSION",
    "MAX_FIELD_MANAGER_BYTES",
    "NOT_OLDER_THAN",
    "DeleteOptions",
    "ListOptions",
    "Query",
    "WriteOptions",
    "WriteVerb",
    "decode_continue",
    "encode_continue",
    "parse_bool",
    "parse_delete_options",
    "parse_get_options",
    "parse_list_options",
    "parse_write_options",
]

NOT_OLDER_THAN = "NotOlderThan"


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

    @property
    def resource_version_int(self) -> int:
        """The resourceVersion as an int; ``""`` and ``"0"`` are 0."""
        return int(self.resource_version) if self.resource_version not in ("", "0") else 0


def _decode_list_query(query: Query) -> dict[str, Any]:
    """url.Values -> v1.ListOptions -> internal, in kube's field order (first error wins)."""
    timeout, limit = first_value(query, "timeoutSeconds"), first_value(query, "limit")
    values: dict[str, Any] = {
        "watch": bool(optional_bool(query, "watch")),
        "allow_watch_bookmarks": bool(optional_bool(query, "allowWatchBookmarks")),
        "resource_version": first_value(query, "resourceVersion") or "",
        "resource_version_match": first_value(query, "resourceVersionMatch") or "",
        "timeout_seconds": None if timeout is None else int64_param(timeout),
        "limit": 0 if limit is None else int64_param(limit),
        "continue_token": first_value(query, "continue") or "",
        "send_initial_events": optional_bool(query, "sendInitialEvents"),
    }
    try:
        values["label_selector"] = parse_label_selector(first_value(query, "labelSelector") or "")
        values["field_selector"] = parse_field_selector(first_value(query, "fieldSelector") or "")
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


# --- get -----------------------------------------------------------------------------------------

def parse_get_options(query: Query) -> str:
    """The resourceVersion of a GET on one object (``GetResource``), validated as numeric.

    Raises BadRequest for ``export=true`` (removed upstream) and for a non-numeric RV.
    """
    export = first_value(query, "export")
    if export is not None and parse_bool(export):
        raise BadRequest("the export parameter, deprecated since v1.14, is no longer supported")
    rv = first_value(query, "resourceVersion") or ""
    _check_resource_version(rv)
    return rv
