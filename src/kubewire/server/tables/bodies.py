"""Tables on the wire: stored object bytes in, encoded ``meta.k8s.io`` Table bytes out.

Only requests that negotiated a Table come here, so the plain JSON path never decodes an
object. Pure: bytes and a clock reading in, bytes out.

- ``list_table_body`` / ``object_table_body``: the body of a LIST or a GET.
- ``TableEventLines``: rewrites one watch stream's lines. Every event's object becomes a
  one-row Table, with ``columnDefinitions`` on the stream's first event only
  (``handlers/response.go`` ``watchEmbeddedEncoder.doEncode``). That includes BOOKMARKs: kube
  transforms every object but a Status, so a bookmark's empty object becomes a row of an empty
  object's cells whose metadata carries the revision. ERROR lines (a Status) pass unchanged.
  An object that cannot be rendered is sent as it is, as kube does (``doEncode`` logs the
  transform error and encodes the original object).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import msgspec

from kubewire.go_json_bytes import GoJSONEncoder
from kubewire.json_types import JSON
from kubewire.resources import Resource
from kubewire.server.tables.output import (
    TableRequest,
    table_event_object,
    table_for_list,
    table_for_object,
)
from kubewire.storage.cached import event_line

log = logging.getLogger(__name__)

_decode_object = msgspec.json.Decoder(dict[str, Any]).decode
_encode = GoJSONEncoder().encode
_TABLE_EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK"})


class _WatchEvent(msgspec.Struct):
    """A watch line, its object left encoded."""

    type: str
    object: msgspec.Raw


_decode_event = msgspec.json.Decoder(_WatchEvent).decode


def list_table_body(resource: Resource, values: Iterable[bytes], list_meta: Mapping[str, JSON],
                    request: TableRequest, now: datetime) -> bytes:
    """A LIST's Table: one row per stored object, the list's RV, continue and remaining count."""
    objects = [_decode_object(value) for value in values]
    return _encode(table_for_list(resource, objects, list_meta=list_meta, request=request,
                                  now=now))


def object_table_body(resource: Resource, value: bytes, request: TableRequest,
                      now: datetime) -> bytes:
    """A GET's Table: one row, the object's resourceVersion."""
    return _encode(table_for_object(resource, _decode_object(value), request=request, now=now))


class TableEventLines:
    """The Table form of one watch stream's event lines (stateful: headers go out once)."""

    __slots__ = ("_headers_pending", "request", "resource")

    def __init__(self, resource: Resource, request: TableRequest) -> None:
        self.resource = resource
        self.request = request
        self._headers_pending = True

    def rewrite(self, lines: list[bytes], now: datetime) -> list[bytes]:
        """``lines`` with each data event's object replaced by its one-row Table."""
        return [self._rewrite_line(line, now) for line in lines]

    def _rewrite_line(self, line: bytes, now: datetime) -> bytes:
        try:
            event = _decode_event(line)
            if event.type not in _TABLE_EVENT_TYPES:
                return line
            obj = _decode_object(event.object)
            if event.type == "BOOKMARK":
                # The row's PartialObjectMetadata is a typed ObjectMeta, so its unset
                # creationTimestamp encodes as null even for custom kinds, whose bookmark
                # objects (unstructured) lack it; built-in kinds' already carry it.
                obj.setdefault("metadata", {}).setdefault("creationTimestamp", None)
            table = table_event_object(self.resource, obj, first=self._headers_pending,
                                       request=self.request, now=now)
        except Exception:
            log.exception("cannot render a %s watch event as a Table", self.resource.kind)
            return line
        self._headers_pending = False
        return event_line(event.type.encode(), _encode(table))
