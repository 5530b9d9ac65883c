"""server/impersonation.py: kube's impersonation filter, headers in and a user out."""

from __future__ import annotations

import pytest

from kubewire.server.access.authn import UserInfo
from kubewire.server.access.authz import Attributes, forbidden
from kubewire.server.access.impersonation import (
    Wanted,
    consumed_headers,
    impersonated_user,
    is_requested,
    split_service_account,
    unescape_extra_key,
    wanted,
)
from kubewire.status import BadRequest

BOB = UserInfo("bob", "", ("system:authenticated",))


def _wanted(*headers: tuple[str, str]) -> list[Wanted]:
    """``wanted`` over header lines as a client sends them (names lower-cased by the server)."""
    values: dict[str, list[str]] = {}
    for name, value in headers:
        values.setdefault(name.lower(), []).append(value)
    return wanted(list(values), lambda name: values.get(name, []))


def test_headers_become_requests_in_kubes_order() -> None:
    found = _wanted(("Impersonate-Uid", "u-1"), ("Impersonate-Extra-Scopes", "a"),
                    ("Impersonate-Group", "g1"), ("Impersonate-User", "alice"),
                    ("Impersonate-Group", "g2"), ("Impersonate-Extra-Scopes", "b"))
    assert found == [
        Wanted("User", "alice"), Wanted("Group", "g1"), Wanted("Group", "g2"),
        Wanted("UserExtra", "a", api_version="authentication.k8s.io/v1", field_path="scopes"),
        Wanted("UserExtra", "b", api_version="authentication.k8s.io/v1", field_path="scopes"),
        Wanted("UID", "u-1", api_version="authentication.k8s.io/v1")]
    assert impersonated_user(found) == UserInfo(
        "alice", "u-1", ("g1", "g2", "system:authenticated"), (("scopes", ("a", "b")),))
    assert not is_requested(["accept", "authorization", "user-agent"])
    assert is_requested(["accept", "impersonate-user"])
    assert consumed_headers(["accept", "impersonate-user", "impersonate-extra-x",
                             "impersonate-uid", "impersonate-group"]) == [
        "impersonate-user", "impersonate-extra-x", "impersonate-uid", "impersonate-group"]


def test_each_request_is_authorized_as_kube_builds_its_attributes() -> None:
    sa = _wanted(("Impersonate-User", "system:serviceaccount:ns1:builder"))[0]
    assert sa.attributes(BOB) == Attributes(
        user=BOB, verb="impersonate", resource_request=True, namespace="ns1",
        resource="serviceaccounts", name="builder")
    extra = _wanted(("Impersonate-User", "x"), ("Impersonate-Extra-K", "v"))[1]
    attrs = extra.attributes(BOB)
    assert (attrs.api_group, attrs.api_version, attrs.resource, attrs.subresource,
            attrs.name) == ("authentication.k8s.io", "v1", "userextras", "k", "v")
    assert forbidden(attrs, "No policy matched.").message == (
        'userextras.authentication.k8s.io "v" is forbidden: User "bob" cannot impersonate '
        'resource "userextras/k" in API group "authentication.k8s.io" at the cluster scope: '
        "No policy matched.")


def test_service_accounts_get_their_groups_unless_groups_are_asked_for() -> None:
    account = _wanted(("Impersonate-User", "system:serviceaccount:ns1:builder"))
    assert impersonated_user(account) == UserInfo(
        "system:serviceaccount:ns1:builder", "",
        ("system:serviceaccounts", "system:serviceaccounts:ns1", "system:authenticated"))
    with_group = _wanted(("Impersonate-User", "system:serviceaccount:ns1:builder"),
                         ("Impersonate-Group", "system:authenticated"))
    assert impersonated_user(with_group).groups == ("system:authenticated",)
    # Not a valid account name: an ordinary user of that name.
    for name in ("system:serviceaccount:NS:x", "system:serviceaccount:a:b:c",
                 "system:serviceaccount:a:"):
        assert split_service_account(name) is None
        assert _wanted(("Impersonate-User", name)) == [Wanted("User", name)]


def test_authenticated_and_unauthenticated_groups() -> None:
    assert impersonated_user(_wanted(("Impersonate-User", "system:anonymous"))).groups == (
        "system:unauthenticated",)
    unauth = _wanted(("Impersonate-User", "bob"), ("Impersonate-Group", "system:unauthenticated"))
    assert impersonated_user(unauth).groups == ("system:unauthenticated",)


def test_extra_keys_are_lower_cased_then_percent_decoded() -> None:
    assert unescape_extra_key("example.com%2fscopes") == "example.com/scopes"
    assert unescape_extra_key("a%zz") == "a%zz"  # malformed: kept as sent
    assert unescape_extra_key("a%2") == "a%2"
    assert unescape_extra_key("%c3%a9") == "\u00e9"
    found = _wanted(("Impersonate-User", "u"), ("Impersonate-Extra-Example.com%2FScopes", "v"))
    assert found[1].field_path == "example.com/scopes"


def test_header_bytes_are_read_as_utf8() -> None:
    latin1_of_utf8 = "J\u00f6rg".encode().decode("latin-1")  # what the server's parser holds
    assert _wanted(("Impersonate-User", latin1_of_utf8)) == [Wanted("User", "J\u00f6rg")]


def test_groups_without_a_user_is_a_bad_request_with_kubes_text() -> None:
    with pytest.raises(BadRequest) as info:
        _wanted(("Impersonate-Group", "g"), ("Impersonate-Extra-K", "v"))
    assert info.value.message == (
        "requested [{Group  g    } {UserExtra  v  authentication.k8s.io/v1  k}] without "
        "impersonating a user")
    with pytest.raises(BadRequest):
        _wanted(("Impersonate-User", ""), ("Impersonate-Uid", "1"))
    assert _wanted(("Accept", "*/*")) == []


def test_forbidden_messages_are_html_escaped_as_kubes() -> None:
    attrs = Attributes(user=UserInfo("<b>"), verb="impersonate", resource_request=True,
                       resource="users", name="a&b")
    assert forbidden(attrs, "<reason>").message == (
        'users "a&b" is forbidden: User "&lt;b&gt;" cannot impersonate resource "users" in API '
        'group "" at the cluster scope: <reason>')
