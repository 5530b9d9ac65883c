"""The informer's store: keys, named indexes, no empty index sets left behind."""

from __future__ import annotations

import pytest

from kubewire.client.informers.indexer import Indexer

Obj = dict[str, str]


def by_team(obj: Obj) -> list[str]:
    return [obj["team"]] if "team" in obj else []


def test_upsert_refiles_and_delete_unfiles() -> None:
    store: Indexer[Obj] = Indexer({"team": by_team})
    assert store.upsert("a", {"team": "x"}) is None
    store.upsert("b", {"team": "x"})
    assert store.by_index("team", "x") == [{"team": "x"}, {"team": "x"}]
    assert store.upsert("a", {"team": "y"}) == {"team": "x"}
    assert store.by_index("team", "x") == [{"team": "x"}]
    assert store.index_values("team") == ["x", "y"]
    assert store.delete("b") == {"team": "x"}
    assert store.index_values("team") == ["y"]  # the emptied set is gone
    assert store.delete("missing") is None
    assert ("a" in store, len(store), store.get("a")) == (True, 1, {"team": "y"})


def test_indexes_added_later_cover_existing_objects() -> None:
    store: Indexer[Obj] = Indexer()
    store.upsert("a", {"team": "x", "zone": "1"})
    store.add_indexer("zone", lambda o: [o["zone"]])
    assert store.by_index("zone", "1") == [{"team": "x", "zone": "1"}]
    with pytest.raises(ValueError, match="already exists"):
        store.add_indexer("zone", by_team)
    with pytest.raises(KeyError):
        store.by_index("nope", "1")
