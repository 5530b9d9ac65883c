"""The RBAC authorizer's memos (``access/rbac_authorizer.py``) stay bounded whatever a client
names: by entries and by the characters of their keys; and the users it resolves share each
role's parsed rules instead of holding copies."""

from __future__ import annotations

from kubewire.server.access.authn import UserInfo
from kubewire.server.access.rbac_authorizer import (
    MEMO_BYTES,
    MEMO_LIMIT,
    RbacAuthorizer,
    _key_size,
)
from tests.unit.test_authorizers import ALICE, Objects, attrs, binding, role, user

RULES = [{"apiGroups": [""], "resources": [f"r{i}"], "verbs": ["get", "list"]}
         for i in range(30)]


def _objects() -> Objects:
    store = Objects()
    for plural, obj in (role("clusterroles", "big", RULES),
                        binding("alice-big", "ClusterRole", "big", [user("alice")])):
        store.put(plural, obj)
    return store


def _held_chars(authorizer: RbacAuthorizer) -> int:
    return sum(memo.size for memo in (authorizer._namespaced, authorizer._resolved,
                                      authorizer._decisions))


def test_long_names_are_bounded_by_characters() -> None:
    authorizer = RbacAuthorizer(_objects())
    long = "n" * (256 * 1024)
    for i in range(100):  # 25 MiB of names, 75 MiB over the three memos unbounded
        namespace = f"{i}{long}"
        assert not authorizer.decide(attrs(ALICE, "delete", "r1", namespace, name=long)).allowed
        assert authorizer.decide(attrs(ALICE, "get", "r1", namespace, name=f"{i}{long}")).allowed
    for memo in (authorizer._namespaced, authorizer._resolved, authorizer._decisions):
        assert 0 < memo.size <= MEMO_BYTES
        assert memo.size == sum(_key_size(key) for key in memo.items)
    assert _held_chars(authorizer) <= 3 * MEMO_BYTES


def test_many_short_keys_are_bounded_by_count() -> None:
    authorizer = RbacAuthorizer(_objects())
    for i in range(MEMO_LIMIT + 10):
        authorizer.decide(attrs(ALICE, "get", "r1", "team", name=f"x{i}"))
    assert len(authorizer._decisions) <= MEMO_LIMIT


def test_users_share_a_roles_parsed_rules_until_it_changes() -> None:
    objects = _objects()
    authorizer = RbacAuthorizer(objects)
    resolved = [authorizer.resolve(ALICE, f"ns-{i}") for i in range(50)]
    first = resolved[0].grants[0].rules
    assert len(first) == 30
    assert all(r.grants[0].rules is first for r in resolved)  # one copy, not fifty
    other = UserInfo("bob", groups=("devs",))
    objects.put(*binding("bob-big", "ClusterRole", "big", [user("bob")]))
    assert authorizer.resolve(other, "x").grants[0].rules == first
    objects.put(*role("clusterroles", "big", RULES[:2]))  # the role changed: parsed again
    assert len(authorizer.resolve(ALICE, "ns-0").grants[0].rules) == 2
