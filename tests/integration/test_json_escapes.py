"""Objects come back with the escapes Go's json.Encoder writes (kubewire.go_json_bytes).

kube-apiserver encodes responses, watch events and stored values with
``json.NewEncoder(w).Encode(obj)`` (apimachinery runtime/serializer/json ``doEncode``), whose
HTML escaping is on by default: ``<``, ``>``, ``&`` become ``\\u003c``, ``\\u003e``,
``\\u0026``, and U+2028/U+2029 ``\\u2028``/``\\u2029``. A shell command with ``&&`` in a
container's args is the everyday case.
"""

from __future__ import annotations

import json

from tests.integration.harness import ServerThread
from tests.integration.kinds import CONFIG_MAP, POD
from tests.integration.wire import call, create, list_rv, ok, watch

TEXT = "sh -c 'a && b > /tmp/x < /dev/null'\u2028"
ESCAPED = b"sh -c 'a \\u0026\\u0026 b \\u003e /tmp/x \\u003c /dev/null'\\u2028"


def test_reads_writes_and_watch_events_escape_as_go(server: ServerThread) -> None:
    start = list_rv(server, CONFIG_MAP.collection())
    with watch(server, CONFIG_MAP.collection(), resourceVersion=start) as stream:
        created = call(server, "POST", CONFIG_MAP.collection(),
                       {**CONFIG_MAP.obj("esc"), "data": {"cmd": TEXT}})
        ok(created, 201)
        stream.next_event()
        line = stream.lines[0]
    replies = [created, call(server, "GET", CONFIG_MAP.item("esc")),
               call(server, "GET", CONFIG_MAP.collection())]
    for body in [r.body for r in replies] + [line]:
        assert ESCAPED in body and b"&" not in body and b"<" not in body, body
    assert json.loads(line)["object"]["data"]["cmd"] == TEXT  # the same text, decoded


def test_tables_and_statuses_escape_as_go(server: ServerThread) -> None:
    create(server, POD.collection(), POD.obj("t"))  # unscheduled: its NODE cell is <none>
    table = call(server, "GET", POD.item("t"),
                 headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    cells = ok(table, 200)["rows"][0]["cells"]
    assert "<none>" in cells
    assert b'"\\u003cnone\\u003e"' in table.body and b"<" not in table.body
    # a Status quoting what the client sent: the name of a missing object
    missing = call(server, "GET", CONFIG_MAP.item("a&b"))
    assert missing.status == 404
    assert b'"a\\u0026b"' in missing.body and b"&" not in missing.body
    assert missing.status_object()["details"]["name"] == "a&b"
