"""An answer's encode keeps nothing alive: msgspec 0.22's ``encode_lines`` leaked one iterator
per call when given a tuple (one per merge PATCH and per error answer, for the server's life)."""

from __future__ import annotations

import gc

from kubewire.server.wire.encoding import json_response
from kubewire.server.wire.http_messages import status_response
from kubewire.status import NotFound


def _iterators() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o).__name__.endswith("_iterator"))


def test_json_and_status_responses_leak_no_iterator() -> None:
    json_response(200, {"warm": "up"})
    status_response(NotFound("x"))
    before = _iterators()
    for i in range(500):
        assert json_response(200, {"i": i}).body == b'{"i":%d}\n' % i
        status_response(NotFound(str(i)))
    assert _iterators() - before < 50
