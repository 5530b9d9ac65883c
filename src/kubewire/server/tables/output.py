"""Table output (``kubectl get``): Accept negotiation, ``includeObject`` and the Table shape.

Pure functions from decoded objects to ``meta.k8s.io`` Table dicts (objects-and-clients.md §5,
watch-protocol.md §3.3), modelled on ``apiserver:pkg/endpoints/handlers/response.go``:

- ``negotiate_table``: the first acceptable Accept clause (by ``q``) decides; a Table clause
  needs ``as=Table;g=meta.k8s.io;v=v1|v1beta1`` on ``application/json`` (or a wildcard).
- ``parse_include_object``: ``None``/``Metadata``/``Object`` (empty means Metadata); other
  values are kube's 400, raised only when a Table was negotiated (``optionsForTransform``).
- ``negotiate_output``: what a GET, LIST or WATCH answers with: a ``NegotiatedTable``, plain
  JSON (None), or kube's 406. ``includeObject`` is checked later, by ``resolve``, because kube
  checks it only when it transforms the read's result (a missing object is 404 first).
- ``table_for_list`` / ``table_for_object``: the Table body. Rows always carry every column,
  priority-1 included (kube prints server-side with ``Wide: true``; kubectl hides them).
- ``table_event_object``: a watch event's one-row Table; ``columnDefinitions`` is null after
  the first event of a stream (``watchEmbeddedEncoder.doEncode`` sets ``NoHeaders``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from kubewire.json_types import JSON
from kubewire.resources import Resource
from kubewire.server.request.query_params import Query, first_value
from kubewire.server.tables.columns import column_definitions, row_cells, row_conditions
from kubewire.server.wire.encoding import negotiate_json, with_type_meta
from kubewire.status import BadRequest, aggregate_messages, invalid

IncludeObject = Literal["None", "Metadata", "Object"]
TableVersion = Literal["v1", "v1beta1"]
META_GROUP = "meta.k8s.io"
_VERSIONS: tuple[TableVersion, ...] = ("v1", "v1beta1")
_INCLUDE: Mapping[str, IncludeObject] = {"": "Metadata", "Metadata": "Metadata",
                                         "None": "None", "Object": "Object"}
_LIST_META_KEYS = ("resourceVersion", "continue", "remainingItemCount")


@dataclass(frozen=True, slots=True)
class TableRequest:
    """How to answer with a Table: the ``meta.k8s.io`` version, what rows embed, and
    whether ``columnDefinitions`` are sent (kube's ``TableOptions.NoHeaders``, inverted).

    Frozen and hashable: a watch fan-out can key shared encodings by (event type, request).
    """

    version: TableVersion = "v1"
    include_object: IncludeObject = "Metadata"
    headers: bool = True

    @property
    def api_version(self) -> str:
        return f"{META_GROUP}/{self.version}"

    def for_event(self, *, first: bool) -> TableRequest:
        """The request for one watch event: headers on the stream's first event only."""
        return TableRequest(self.version, self.include_object, headers=first)


DEFAULT_REQUEST = TableRequest()


@dataclass(frozen=True, slots=True)
class _Clause:
    media_type: str
    params: dict[str, str]
    quality: float


def _parse_accept(accept: str) -> list[_Clause]:
    """Accept clauses, best first: higher ``q``, then concrete types before wildcards."""
    clauses = []
    for part in accept.split(","):
        kind, *raw_params = (p.strip() for p in part.split(";"))
        if not kind:
            continue
        params = dict(p.partition("=")[::2] for p in raw_params if p)
        try:
            quality = float(params.pop("q", "1"))
        except ValueError:
            quality = 0.0
        clauses.append(_Clause(kind.lower(), {k.strip(): v.strip() for k, v in params.items()},
                               quality))
    return sorted(clauses, key=lambda c: (-c.quality, c.media_type.startswith("*/"),
                                          c.media_type.endswith("/*")))


def _serves_json(media_type: str) -> bool:
    return media_type in ("application/json", "application/*", "*/*")


def negotiate_table(accept: str) -> TableRequest | None:
    """The Table to answer with, or None for plain JSON (or when nothing is acceptable).

    kubectl sends ``application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;
    v=v1beta1;g=meta.k8s.io,application/json``: v1 wins. A clause asking for another
    conversion (``as=PartialObjectMetadata``, an unknown version) is skipped, as in kube's
    ``NegotiateMediaTypeOptions``. None with a Table-only Accept means the caller found no
    JSON either: ``negotiate_json`` then answers 406.
    """
    for clause in _parse_accept(accept):
        if clause.quality <= 0 or not _serves_json(clause.media_type):
            continue
        params = clause.params
        if not any(k in params for k in ("as", "g", "v")):
            return None
        if params.get("as") == "Table" and params.get("g") == META_GROUP \
                and params.get("v") in _VERSIONS:
            version: TableVersion = "v1" if params["v"] == "v1" else "v1beta1"
            return TableRequest(version)
    return None


def parse_include_object(value: str) -> IncludeObject:
    """The ``includeObject`` query parameter; 400 with kube's text for other values."""
    policy = _INCLUDE.get(value)
    if policy is None:
        err = invalid("includeObject", value, "must be 'Metadata', 'Object', 'None', or empty")
        raise BadRequest("Unable to convert to Table as requested: "
                         + aggregate_messages([err]))
    return policy


def table_request(accept: str, include_object: str) -> TableRequest | None:
    """``negotiate_table`` plus the validated ``includeObject`` (checked only for Tables)."""
    request = negotiate_table(accept)
    if request is None:
        return None
    return TableRequest(request.version, parse_include_object(include_object))


@dataclass(frozen=True, slots=True)
class NegotiatedTable:
    """A request that negotiated a Table; ``includeObject`` is still the raw query value."""

    version: TableVersion
    include_object: str = ""

    def resolve(self) -> TableRequest:
        """The TableRequest; raises kube's 400 for an unknown ``includeObject``."""
        return TableRequest(self.version, parse_include_object(self.include_object))


def negotiate_output(accept: str, query: Query, *, watch: bool = False,
                     watch_list: bool = False) -> NegotiatedTable | None:
    """A Table when the Accept header's best clause asks for one, else None for JSON.

    Raises kube's 406 when neither is acceptable. Watch-list requests (``sendInitialEvents``
    with bookmarks) are never Tables: kube 1.32 negotiates them with
    ``watchListEndpointRestrictions``, so a Table-only Accept fails the first (non-stream)
    negotiation, while a Table-then-JSON one gets JSON (watch-protocol.md §3.3).
    """
    # The common path: without "table" in it no clause can ask for a Table.
    table = negotiate_table(accept) if "table" in accept.lower() else None
    if table is not None and not watch_list:
        return NegotiatedTable(table.version, first_value(query, "includeObject") or "")
    if watch and table is None and _names_a_serializer(accept):
        negotiate_json(accept, stream=True)  # the watch's own, stream-serializer negotiation
    else:
        negotiate_json(accept)
    return None


_SERIALIZER_TYPES = frozenset({"application/json", "application/yaml",
                               "application/vnd.kubernetes.protobuf", "application/*", "*/*"})


def _names_a_serializer(accept: str) -> bool:
    """kube's first negotiation of a watch passes: some clause names a serialized type
    without asking for a conversion (then a YAML-only Accept fails the stream one)."""
    return any(c.quality > 0 and c.media_type in _SERIALIZER_TYPES and "as" not in c.params
               for c in _parse_accept(accept))


def _row_object(resource: Resource, obj: Mapping[str, JSON], request: TableRequest) -> JSON:
    if request.include_object == "None":
        return None
    if request.include_object == "Object":
        return with_type_meta(resource, dict(obj))
    return {"kind": "PartialObjectMetadata", "apiVersion": request.api_version,
            "metadata": obj.get("metadata") or {}}


def table_row(resource: Resource, obj: Mapping[str, JSON], request: TableRequest,
              now: datetime) -> dict[str, JSON]:
    """One ``TableRow``: cells, conditions when there are any, the embedded object."""
    row: dict[str, JSON] = {"cells": row_cells(resource, obj, now)}
    conditions = row_conditions(resource, obj)
    if conditions:
        row["conditions"] = conditions
    row["object"] = _row_object(resource, obj, request)
    return row


def _table(resource: Resource, rows: list[dict[str, JSON]], meta: dict[str, JSON],
           request: TableRequest) -> dict[str, JSON]:
    return {"kind": "Table", "apiVersion": request.api_version, "metadata": meta,
            "columnDefinitions": column_definitions(resource) if request.headers else None,
            "rows": rows}


def table_for_list(resource: Resource, objects: Iterable[Mapping[str, JSON]], *,
                   list_meta: Mapping[str, JSON], request: TableRequest = DEFAULT_REQUEST,
                   now: datetime) -> dict[str, JSON]:
    """A LIST answered as a Table; ``metadata`` keeps the list's RV, continue, remaining."""
    meta = {k: list_meta[k] for k in _LIST_META_KEYS
            if k in list_meta and list_meta[k] not in (None, "")}
    rows = [table_row(resource, obj, request, now) for obj in objects]
    return _table(resource, rows, meta, request)


def table_for_object(resource: Resource, obj: Mapping[str, JSON], *,
                     request: TableRequest = DEFAULT_REQUEST, now: datetime) -> dict[str, JSON]:
    """A single object (GET, a watch event) as a one-row Table carrying its resourceVersion."""
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    meta = {"resourceVersion": rv} if rv else {}
    return _table(resource, [table_row(resource, obj, request, now)], meta, request)


def table_event_object(resource: Resource, obj: Mapping[str, JSON], *, first: bool,
                       request: TableRequest = DEFAULT_REQUEST, now: datetime,
                       ) -> dict[str, JSON]:
    """The ``object`` of a watch event for a Table watcher (DELETED too: the last state).

    Column definitions only when ``first`` (the stream's first event); later events send
    ``"columnDefinitions": null`` as kube does.
    """
    return table_for_object(resource, obj, request=request.for_event(first=first), now=now)
