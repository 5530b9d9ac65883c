"""Impersonation, as kube-apiserver's ``endpoints/filters/impersonation.go`` does it.

A request may ask to act as someone else with ``Impersonate-User`` (its first value),
``Impersonate-Group`` (each value), ``Impersonate-Uid`` (first value) and
``Impersonate-Extra-<key>`` (each value; the key lower-cased, then percent-decoded as Go's
``url.PathUnescape``, or kept as sent when that fails). ``system:serviceaccount:NS:NAME``
(valid names) asks for a service account.

Each thing asked for is authorized for the requesting user, in that order, with verb
``impersonate``: ``users`` / ``groups`` by name and ``serviceaccounts`` by name in the account's
namespace (API group ""), ``userextras/<key>`` by value and ``uids`` by value (API group
``authentication.k8s.io``). The first refusal is the request's 403 (``responsewriters.Forbidden``).

The user then is the name asked for, with the groups asked for (for a service account without
any: ``system:serviceaccounts`` and ``system:serviceaccounts:NS``) plus ``system:authenticated``
unless ``system:authenticated`` or ``system:unauthenticated`` is among them (for
``system:anonymous``: plus ``system:unauthenticated``), and the extra and uid asked for.

Groups, extra or a uid without a user is a client's mistake: 400 with kube's text. (kube 1.32
writes that text as a plain 500; kube 1.35 made it this 400 ``BadRequest`` Status.)

Pure: headers in, ``Wanted`` requests and a ``UserInfo`` out; the caller authorizes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes

from kubewire.names import is_dns1123_label, is_dns1123_subdomain
from kubewire.server.access.authn import (
    ANONYMOUS,
    AUTHENTICATED,
    UNAUTHENTICATED,
    UserInfo,
)
from kubewire.server.access.authz import Attributes
from kubewire.status import BadRequest

USER_HEADER = "impersonate-user"
GROUP_HEADER = "impersonate-group"
UID_HEADER = "impersonate-uid"
EXTRA_PREFIX = "impersonate-extra-"
HEADER_PREFIX = "impersonate-"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
AUTHENTICATION_V1 = "authentication.k8s.io/v1"
_MALFORMED_ESCAPE = re.compile(rb"%(?![0-9A-Fa-f]{2})")


@dataclass(frozen=True, slots=True)
class Wanted:
    """One thing to impersonate: a ``v1.ObjectReference`` of ``buildImpersonationRequests``."""

    kind: str  # ServiceAccount, User, Group, UserExtra or UID
    name: str
    namespace: str = ""
    api_version: str = ""
    field_path: str = ""  # the extra's key

    def go_text(self) -> str:
        """Go's ``%v`` of the ObjectReference: its seven fields in braces (UID and
        ResourceVersion empty)."""
        fields = (self.kind, self.namespace, self.name, "", self.api_version, "", self.field_path)
        return "{" + " ".join(fields) + "}"

    def attributes(self, requestor: UserInfo) -> Attributes:
        """What the requestor must be allowed: verb ``impersonate`` on this."""
        group, _, version = self.api_version.rpartition("/")
        resource, subresource = _RESOURCES[self.kind], ""
        if self.kind == "UserExtra":
            subresource = self.field_path
        return Attributes(user=requestor, verb="impersonate", resource_request=True,
                          namespace=self.namespace, api_group=group, api_version=version,
                          resource=resource, subresource=subresource, name=self.name)


_RESOURCES = {"ServiceAccount": "serviceaccounts", "User": "users", "Group": "groups",
              "UserExtra": "userextras", "UID": "uids"}


def go_string(header_value: str) -> str:
    """A header value as Go holds it: its bytes, read as UTF-8 (the server decodes latin-1)."""
    if header_value.isascii():
        return header_value
    return header_value.encode("latin-1").decode("utf-8", "replace")


def unescape_extra_key(key: str) -> str:
    """Go's ``url.PathUnescape``, or the key as it is when its escapes are malformed."""
    raw = key.encode("latin-1")
    if b"%" not in raw:
        return go_string(key)
    if _MALFORMED_ESCAPE.search(raw):
        return go_string(key)
    return unquote_to_bytes(raw).decode("utf-8", "replace")


def split_service_account(username: str) -> tuple[str, str] | None:
    """``serviceaccount.SplitUsername``: (namespace, name) of ``system:serviceaccount:NS:NAME``."""
    if not username.startswith(SERVICE_ACCOUNT_PREFIX):
        return None
    parts = username[len(SERVICE_ACCOUNT_PREFIX):].split(":")
    if len(parts) != 2:
        return None
    namespace, name = parts
    if is_dns1123_label(namespace) or is_dns1123_subdomain(name):
        return None
    return namespace, name


def is_requested(header_names: Iterable[str]) -> bool:
    """Whether any impersonation header came (the common answer, no, costs one scan)."""
    return any(name.startswith(HEADER_PREFIX) for name in header_names)


def wanted(header_names: Iterable[str], values: Callable[[str], list[str]]) -> list[Wanted]:
    """``buildImpersonationRequests``: what the headers ask for, in kube's order.

    ``values(name)`` gives each value of a (lower-case) header. Raises ``BadRequest``.
    """
    found: list[Wanted] = []
    user = go_string(next(iter(values(USER_HEADER)), ""))
    if user:
        account = split_service_account(user)
        found.append(Wanted("ServiceAccount", account[1], account[0]) if account
                     else Wanted("User", user))
    groups = [Wanted("Group", go_string(group)) for group in values(GROUP_HEADER)]
    extras = [Wanted("UserExtra", go_string(value), api_version=AUTHENTICATION_V1,
                     field_path=unescape_extra_key(name[len(EXTRA_PREFIX):]))
              for name in header_names if name.startswith(EXTRA_PREFIX)
              for value in values(name)]
    found += groups + extras
    uid = go_string(next(iter(values(UID_HEADER)), ""))
    if uid:
        found.append(Wanted("UID", uid, api_version=AUTHENTICATION_V1))
    if (groups or extras or uid) and not user:
        listed = " ".join(item.go_text() for item in found)
        raise BadRequest(f"requested [{listed}] without impersonating a user")
    return found


def consumed_headers(header_names: Iterable[str]) -> list[str]:
    """The headers kube deletes from the request once impersonation is done."""
    return [name for name in header_names
            if name in (USER_HEADER, GROUP_HEADER, UID_HEADER) or name.startswith(EXTRA_PREFIX)]


def impersonated_user(requests: list[Wanted]) -> UserInfo:
    """The user the (authorized) ``requests`` make, as ``WithImpersonation`` builds it."""
    groups_specified = any(item.kind == "Group" for item in requests)
    name, uid = "", ""
    groups: list[str] = []
    extra: dict[str, list[str]] = {}
    for item in requests:
        if item.kind == "ServiceAccount":
            name = f"{SERVICE_ACCOUNT_PREFIX}{item.namespace}:{item.name}"
            if not groups_specified:
                groups = ["system:serviceaccounts", f"system:serviceaccounts:{item.namespace}"]
        elif item.kind == "User":
            name = item.name
        elif item.kind == "Group":
            groups.append(item.name)
        elif item.kind == "UserExtra":
            extra.setdefault(item.field_path, []).append(item.name)
        else:
            uid = item.name
    if name != ANONYMOUS:
        if AUTHENTICATED not in groups and UNAUTHENTICATED not in groups:
            groups.append(AUTHENTICATED)
    elif UNAUTHENTICATED not in groups:
        groups.append(UNAUTHENTICATED)
    return UserInfo(name, uid, tuple(groups),
                    tuple((key, tuple(extra[key])) for key in sorted(extra)))
