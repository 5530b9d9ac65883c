"""``kubewire snapshot save FILE`` / ``kubewire snapshot load FILE``: a whole kubewire
server's state, through its admin API.

Save reads ``GET /kubewire/snapshot`` (every stored object, CRDs and namespaces first) and writes
it as a trace (``trace.py``) whose header says ``"source": "snapshot"`` and the revision, and
whose lines are the initial state alone. Load is a fast replay of that file: the objects go
through ``POST /kubewire/import`` as they were (uid, timestamps, status; a new resourceVersion),
which waits for a CRD's kind to be served before writing its objects. Any trace loads the same
way; ``kubewire replay`` does it with pacing.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import IO, Any

import msgspec

from kubewire.client import Client
from kubewire.client.transport import Request
from kubewire.testing.replay import ReplayResult, replay
from kubewire.testing.trace import Header
from kubewire.times import format_time

SNAPSHOT_PATH = "/kubewire/snapshot"
_decode = msgspec.json.Decoder(dict[str, Any]).decode


class _Meta(msgspec.Struct):
    resourceVersion: str = ""


class _Head(msgspec.Struct):
    """What save reads of each object (the rest is copied as it is)."""

    apiVersion: str = ""
    kind: str = ""
    metadata: _Meta = msgspec.field(default_factory=_Meta)


class _Line(msgspec.Struct):
    type: str
    resourceVersion: str
    initial: bool
    object: msgspec.Raw


_head = msgspec.json.Decoder(_Head).decode
_encode = msgspec.json.Encoder().encode


async def save(client: Client, out: IO[bytes]) -> int:
    """Write the server's state to ``out``; returns the number of objects."""
    body = await client.request(Request("GET", SNAPSHOT_PATH))
    lines = [line for line in body.split(b"\n") if line.strip()]
    if not lines:
        raise ValueError("the server sent an empty snapshot")
    revision = _decode(lines[0]).get("revision")
    heads = [_head(line) for line in lines[1:]]
    kinds = dict.fromkeys(f"{h.kind} {h.apiVersion}" for h in heads)
    version = _decode(await client.request(Request("GET", "/version")))
    out.write(Header("snapshot", version, list(kinds), None, format_time(datetime.now(UTC)))
              .line(revision=revision))
    for head, line in zip(heads, lines[1:], strict=True):
        out.write(_encode(_Line("ADDED", head.metadata.resourceVersion, True,
                                msgspec.Raw(line))) + b"\n")
    out.flush()
    return len(heads)


async def load(client: Client, lines: IO[bytes]) -> ReplayResult:
    """Write a snapshot (or any trace) into the server, as fast as it takes it."""
    return await replay(client, lines, None)
