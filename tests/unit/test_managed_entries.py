"""server.patch.managed_fields.record_update_entries: the entries an update keeps or rewrites
are exactly ``encode_managed(record_update(decode_managed(entries), changes, record))``, also
when the writer's own ``fieldsV1`` is kept as it is (it writes again only fields it owns)."""

from __future__ import annotations

import itertools

import msgspec

from kubewire.server.patch.field_paths import Comparison
from kubewire.server.patch.managed_fields import (
    ManagedSet,
    UpdateRecord,
    canonical_keys,
    decode_managed,
    encode_managed,
    manager_key,
    record_update,
    record_update_entries,
)

LABEL = ("f:metadata", "f:labels", "f:a")
ANNOTATION = ("f:metadata", "f:annotations", "f:b")
SPEC_X = ("f:spec", "f:x")
SPEC_Y = ("f:spec", "f:y")
UNIVERSE = (LABEL, ANNOTATION, SPEC_X, SPEC_Y)
API = "v1"
EARLIER, NOW = "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"
OWNERS = {"creator": {LABEL, SPEC_X}, "patcher": {ANNOTATION}}


def entries() -> list[dict[str, object]]:
    managed = {manager_key(name, "Update", API): ManagedSet(frozenset(paths), API, EARLIER)
               for name, paths in OWNERS.items()}
    return encode_managed(managed)


def test_every_change_of_four_fields_by_each_manager_matches_the_decoded_path() -> None:
    kept_as_is = 0
    for states in itertools.product(("", "added", "modified", "removed"), repeat=len(UNIVERSE)):
        changes = Comparison(
            added={p for p, s in zip(UNIVERSE, states, strict=True) if s == "added"},
            modified={p for p, s in zip(UNIVERSE, states, strict=True) if s == "modified"},
            removed={p for p, s in zip(UNIVERSE, states, strict=True) if s == "removed"})
        for writer in ("creator", "patcher", "newcomer"):
            live = entries()
            keys = canonical_keys(live)
            assert keys is not None
            record = UpdateRecord(manager_key(writer, "Update", API), NOW)
            before = msgspec.json.encode(live)
            got = record_update_entries(list(live), keys, changes, record)
            decoded = decode_managed(live)
            assert decoded is not None
            expected = encode_managed(record_update(decoded, changes, record))
            assert got is not None
            assert msgspec.json.encode(got) == msgspec.json.encode(expected), (writer, states)
            assert msgspec.json.encode(live) == before  # the live entries are not changed
            own = [e for e in live if e["manager"] == writer]
            kept_as_is += any(e["fieldsV1"] is own[0]["fieldsV1"] for e in got) if own else 0
    assert kept_as_is > 0  # the writer's own tree was kept for some of them
