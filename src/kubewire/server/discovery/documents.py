"""Discovery documents: ``/api``, ``/apis``, ``/apis/<g>``, ``/api/v1``, ``/apis/<g>/<v>``.

Pure functions of the registry, legacy (APIVersions, APIGroupList, APIGroup, APIResourceList)
and aggregated (``apidiscovery.k8s.io`` v2 and v2beta1 APIGroupDiscoveryList), following
objects-and-clients.md §4.2-4.3 and kube-apiserver v1.32.

Guarantees:
- Every body is encoded once per (registry, document, format) and then shared: the same
  ``bytes`` object answers every request (``/api`` also keys on the server address).
- Output is deterministic: groups in kube's priority order (ties by name), resources sorted by
  name (``installer.go`` ``Install`` sorts paths), verbs sorted for built-ins and in the CRD
  order for ``is_custom`` kinds, exactly as kube-apiserver lists them.
- Only verbs kubewire serves are listed (no ``proxy``, ``exec``, ``log``, ...).
- Bodies end with ``\\n`` like Go's ``json.Encoder`` in kube's serializer.
- Aggregated documents carry kube's cache headers (``aggregated/etag.go``
  ``ServeHTTPWithETag``): ``ETag`` (the quoted upper-case hex SHA-512 of the document),
  ``Vary: Accept``, ``Cache-Control: public``, and a 304 without body when ``If-None-Match``
  is exactly that ETag; so a client caching discovery (kubectl's disk cache) revalidates and
  sees a CRD added or removed at once. Legacy documents have none (kube's default
  ``Cache-Control: no-cache, private`` applies).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cmp_to_key, lru_cache
from types import MappingProxyType
from typing import Literal

import msgspec

from kubewire.json_types import JSON
from kubewire.resources import Registry, Resource
from kubewire.server.apiextensions.crd.crd_internal import storage_version
from kubewire.server.apiextensions.crd.crd_resources import compare_kube_aware_versions

DiscoveryFormat = Literal["v2", "v2beta1", "legacy"]
"""Which discovery document a request gets: aggregated v2, aggregated v2beta1, or legacy."""

LEGACY_CONTENT_TYPE = "application/json"
AGGREGATED_CONTENT_TYPES: Mapping[DiscoveryFormat, str] = MappingProxyType({
    # client-go discovery_client.go AcceptV2 / AcceptV2Beta1; it checks the response's
    # Content-Type parameters, so these must be exact (objects-and-clients.md §4.3).
    "v2": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
    "v2beta1": "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList",
})
NOT_FOUND_BODY = b"404 page not found\n"  # Go net/http NotFound, as kube's notfoundhandler
NOT_FOUND_CONTENT_TYPE = "text/plain; charset=utf-8"

_DISCOVERY_GROUP = "apidiscovery.k8s.io"
_DISCOVERY_KIND = "APIGroupDiscoveryList"
_CACHED_REGISTRIES = 8  # one per Registry object in use; tests build a few
_CACHED_ADDRESSES = 64  # /api bodies per (registry, server address); a server has one or two

# kube's group order (kube-aggregator APIService groupPriorityMinimum, pkg/controlplane
# apiserver/aggregator.go DefaultGenericAPIServicePriorities and its kube-apiserver list);
# higher sorts first, ties by name (aggregated/handler.go calculateAPIGroupsLocked).
_GROUP_PRIORITY: Mapping[str, int] = MappingProxyType({
    "apps": 17800, "events.k8s.io": 17750, "authentication.k8s.io": 17700,
    "authorization.k8s.io": 17600, "certificates.k8s.io": 17300,
    "networking.k8s.io": 17200,
    "rbac.authorization.k8s.io": 17000, "storage.k8s.io": 16800,
    "batch": 17400, "autoscaling": 17500, "policy": 17100, "scheduling.k8s.io": 16600,
    "apiextensions.k8s.io": 16700, "coordination.k8s.io": 16500, "discovery.k8s.io": 16200,
    # kube-aggregator lists its own group first, above any APIService (handler_apis.go "It's
    # good to be king"; aggregated discovery: APIRegistrationGroupPriority 20001)
    "apiregistration.k8s.io": 20001,
})
# metrics-server's APIService v1beta1.metrics.k8s.io: groupPriorityMinimum 100, after CRDs
_GROUP_PRIORITY_METRICS = 100
_OTHER_GROUP_PRIORITY = 1000  # CRD groups (customresource_discovery_controller.go) and unknown

# Built-in verbs, sorted (installer.go registerResourceHandlers: sort.Strings).
_BUILTIN_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update",
                  "watch")
# CRD verbs in apiextensions' own order (customresource_discovery_controller.go sync).
_CUSTOM_VERBS = ("delete", "deletecollection", "get", "list", "patch", "create", "update",
                 "watch")
# Verbs kubewire does not serve for a kind, keyed by Resource.id, until the registry has a
# field for it: namespaces have no deletecollection (registry/core/namespace/storage).
_UNSERVED_VERBS: Mapping[str, frozenset[str]] = MappingProxyType({
    "core/namespaces": frozenset({"deletecollection"}),
})
# The storage group/version hashed into storageVersionHash when it is not the served one,
# keyed by Resource.id: events.k8s.io events are stored as core/v1 Events
# (pkg/controlplane/storageversionhashdata/data.go: "r2yiGXH7wu8=" for both).
_STORAGE_GROUP_VERSION: Mapping[str, tuple[str, str]] = MappingProxyType({
    "events.k8s.io/events": ("", "v1"),
    "autoscaling/horizontalpodautoscalers": ("autoscaling", "v2"),  # "qwQve8ut294=" for both
})


@dataclass(frozen=True, slots=True)
class SubresourceFacts:
    """What discovery says about one subresource name (a table keyed by Resource.subresources)."""

    verbs: tuple[str, ...]  # sorted, as kube lists them
    response_kind: tuple[str, str, str] | None = None  # (group, version, kind); None: parent's


_SUBRESOURCES: Mapping[str, SubresourceFacts] = MappingProxyType({
    "status": SubresourceFacts(("get", "patch", "update")),
    # deployment/storage/storage.go ScaleREST.GroupVersionKind: autoscaling/v1 Scale
    "scale": SubresourceFacts(("get", "patch", "update"), ("autoscaling", "v1", "Scale")),
    "finalize": SubresourceFacts(("update",)),  # namespace/storage FinalizeREST: Update only
    # registry/core/pod/storage: connect verbs (GET and POST) answer their options kinds,
    # eviction and binding are Creaters; an empty group and version mean the parent's.
    "log": SubresourceFacts(("get",)),
    "exec": SubresourceFacts(("create", "get"), ("", "", "PodExecOptions")),
    "attach": SubresourceFacts(("create", "get"), ("", "", "PodAttachOptions")),
    "portforward": SubresourceFacts(("create", "get"), ("", "", "PodPortForwardOptions")),
    "eviction": SubresourceFacts(("create",), ("policy", "v1", "Eviction")),
    "binding": SubresourceFacts(("create",), ("", "", "Binding")),
    "ephemeralcontainers": SubresourceFacts(("get", "patch", "update")),
    # registry/certificates/certificates/storage ApprovalREST: Get and Update
    "approval": SubresourceFacts(("get", "patch", "update")),
    # registry/core/serviceaccount/storage TokenREST
    "token": SubresourceFacts(("create",), ("authentication.k8s.io", "v1", "TokenRequest")),
})


@dataclass(frozen=True, slots=True)
class DiscoveryDocuments:
    """Every registry-only discovery body, encoded once (``/api`` is separate: it has an address).

    ``groups`` maps a group name to its APIGroup body; ``resource_lists`` maps (group, version)
    to its APIResourceList body; ``aggregated`` maps (format, is_core) to an
    APIGroupDiscoveryList body (``is_core``: the ``/api`` document, else ``/apis``).
    """

    group_list: bytes
    groups: Mapping[str, bytes]
    resource_lists: Mapping[tuple[str, str], bytes]
    aggregated: Mapping[tuple[DiscoveryFormat, bool], bytes]
    aggregated_etags: Mapping[tuple[DiscoveryFormat, bool], str]  # quoted, as sent


_TERMINATING_CUSTOM_VERBS = ("delete", "deletecollection", "get", "list", "watch")
_encoder = msgspec.json.Encoder()


def _encode(value: JSON) -> bytes:
    return _encoder.encode(value) + b"\n"


# --- pure facts -------------------------------------------------------------------------------

def storage_version_hash(group: str, version: str, kind: str) -> str:
    """kube's ``StorageVersionHash``: base64 of the first 8 bytes of sha256("g/v/Kind").

    (apiserver pkg/endpoints/discovery/storageversionhash.go; core uses group "".)
    """
    digest = hashlib.sha256(f"{group}/{version}/{kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode("ascii")


def resource_verbs(resource: Resource) -> tuple[str, ...]:
    """The verbs kubewire serves on a kind's collection and objects, in kube's listing order."""
    if resource.create_only:
        return ("create",)
    if resource.computed:  # metrics-server's Getter and Lister
        return ("get", "list")
    if resource.crd is not None and (resource.crd.get("metadata") or {}).get(
            "deletionTimestamp"):
        return _TERMINATING_CUSTOM_VERBS  # customresource_discovery_controller.go
    verbs = _CUSTOM_VERBS if resource.is_custom else _BUILTIN_VERBS
    unserved = _UNSERVED_VERBS.get(resource.id, frozenset())
    return tuple(v for v in verbs if v not in unserved)


def subresource_facts(name: str) -> SubresourceFacts:
    """Discovery facts for a subresource name; ValueError for one discovery does not know."""
    facts = _SUBRESOURCES.get(name)
    if facts is None:
        raise ValueError(f"discovery has no facts for subresource {name!r}")
    return facts


def _resource_hash(resource: Resource) -> str:
    if resource.crd is not None:  # every served version reports the storage version's hash
        stored = storage_version(resource.crd) or resource.version
        return storage_version_hash(resource.group, stored, resource.kind)
    group, version = _STORAGE_GROUP_VERSION.get(resource.id, (resource.group, resource.version))
    return storage_version_hash(group, version, resource.kind)


def _group_priority(group: str) -> int:
    if group == "metrics.k8s.io":
        return _GROUP_PRIORITY_METRICS
    return _GROUP_PRIORITY.get(group, _OTHER_GROUP_PRIORITY)


def _named_groups(registry: Registry) -> list[str]:
    """Non-core groups in kube's discovery order: priority descending, then name."""
    names = {g for g, _ in registry.group_versions() if g}
    return sorted(names, key=lambda g: (-_group_priority(g), g))


def _versions_of(registry: Registry, group: str) -> list[str]:
    """Served versions of ``group`` in kube's version priority (``v2 > v1 > v1beta2 > v1beta1 >
    v1alpha1 >`` other names, by name: a CRD's versions, and the built-in groups' as
    kube-aggregator's priorities order them, autoscaling/v2 before v1); the first is the
    preferred one."""
    versions = [v for g, v in registry.group_versions() if g == group]
    versions.sort(key=cmp_to_key(compare_kube_aware_versions), reverse=True)
    return versions


def _kinds_in(registry: Registry, group: str, version: str) -> list[Resource]:
    return sorted((r for r in registry if (r.group, r.version) == (group, version)),
                  key=lambda r: r.plural)


# --- legacy documents -------------------------------------------------------------------------

def _group_version_entry(group: str, version: str) -> dict[str, JSON]:
    return {"groupVersion": f"{group}/{version}", "version": version}


def _api_group(registry: Registry, group: str) -> dict[str, JSON]:
    """metav1.APIGroup without type meta (aggregator apis.go convertToDiscoveryAPIGroup)."""
    versions = [_group_version_entry(group, v) for v in _versions_of(registry, group)]
    return {"name": group, "versions": versions, "preferredVersion": versions[0]}


def _group_list(registry: Registry) -> dict[str, JSON]:
    return {"kind": "APIGroupList", "apiVersion": "v1",
            "groups": [_api_group(registry, g) for g in _named_groups(registry)]}


def _legacy_resource(resource: Resource) -> dict[str, JSON]:
    """One metav1.APIResource for a kind itself (field order as kube encodes it)."""
    out: dict[str, JSON] = {"name": resource.plural, "singularName": resource.singular,
                            "namespaced": resource.namespaced, "kind": resource.kind,
                            "verbs": list(resource_verbs(resource))}
    if resource.short_names:
        out["shortNames"] = list(resource.short_names)
    if resource.categories:
        out["categories"] = list(resource.categories)
    if not (resource.create_only or resource.computed):  # nothing stored, no hash
        out["storageVersionHash"] = _resource_hash(resource)
    return out


def _legacy_subresource(resource: Resource, name: str) -> dict[str, JSON]:
    """``pods/status`` etc.: empty singularName, group/version only when they differ."""
    facts = subresource_facts(name)
    out: dict[str, JSON] = {"name": f"{resource.plural}/{name}", "singularName": "",
                            "namespaced": resource.namespaced}
    if facts.response_kind is None:
        out["kind"] = resource.kind
    else:
        group, version, kind = facts.response_kind
        if group or version:  # omitempty: only a kind of another group-version names them
            out["group"], out["version"] = group, version
        out["kind"] = kind
    out["verbs"] = list(facts.verbs)
    return out


def _resource_list(registry: Registry, group: str, version: str) -> dict[str, JSON]:
    """APIResourceList; the core one has no apiVersion, as kube-apiserver sends it."""
    entries: list[JSON] = []
    for resource in _kinds_in(registry, group, version):
        entries.append(_legacy_resource(resource))
        entries.extend(_legacy_subresource(resource, s) for s in sorted(resource.subresources))
    head: dict[str, JSON] = {"kind": "APIResourceList"}
    if group:
        head["apiVersion"] = "v1"
    head["groupVersion"] = f"{group}/{version}" if group else version
    head["resources"] = entries
    return head


def _api_versions(registry: Registry, server_address: str) -> dict[str, JSON]:
    """``/api``: APIVersions has no apiVersion on the wire (legacy.go, GroupVersion{})."""
    return {"kind": "APIVersions", "versions": _versions_of(registry, ""),
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                            "serverAddress": server_address}]}


# --- aggregated documents ---------------------------------------------------------------------

def _response_kind(resource: Resource, facts: SubresourceFacts | None) -> dict[str, JSON]:
    """Built-ins leave group/version empty unless they differ (installer.go
    ConvertGroupVersionIntoToDiscovery); CRDs always fill them (customresource_discovery)."""
    if facts is not None and facts.response_kind is not None:
        group, version, kind = facts.response_kind
        return {"group": group, "version": version, "kind": kind}
    if resource.is_custom:
        return {"group": resource.group, "version": resource.version, "kind": resource.kind}
    return {"group": "", "version": "", "kind": resource.kind}


def _aggregated_resource(resource: Resource) -> dict[str, JSON]:
    """One APIResourceDiscovery with its subresources folded in."""
    out: dict[str, JSON] = {
        "resource": resource.plural, "responseKind": _response_kind(resource, None),
        "scope": "Namespaced" if resource.namespaced else "Cluster",
        "singularResource": resource.singular, "verbs": list(resource_verbs(resource))}
    if resource.short_names:
        out["shortNames"] = list(resource.short_names)
    if resource.categories:
        out["categories"] = list(resource.categories)
    subs: list[JSON] = []
    for name in sorted(resource.subresources):
        facts = subresource_facts(name)
        subs.append({"subresource": name, "responseKind": _response_kind(resource, facts),
                     "verbs": list(facts.verbs)})
    if subs:
        out["subresources"] = subs
    return out


def _group_discovery(registry: Registry, group: str) -> dict[str, JSON]:
    """APIGroupDiscovery; metadata carries ``creationTimestamp: null`` like Go's ObjectMeta."""
    meta: dict[str, JSON] = {"name": group} if group else {}
    meta["creationTimestamp"] = None
    versions: list[JSON] = [
        {"version": v,
         "resources": [_aggregated_resource(r) for r in _kinds_in(registry, group, v)],
         "freshness": "Current"}
        for v in _versions_of(registry, group)]
    return {"metadata": meta, "versions": versions}


def _group_discovery_list(registry: Registry, fmt: DiscoveryFormat,
                          is_core: bool) -> dict[str, JSON]:
    groups = ([""] if _versions_of(registry, "") else []) if is_core else _named_groups(registry)
    return {"kind": _DISCOVERY_KIND, "apiVersion": f"{_DISCOVERY_GROUP}/{fmt}", "metadata": {},
            "items": [_group_discovery(registry, g) for g in groups]}


# --- encoding once ----------------------------------------------------------------------------

@lru_cache(maxsize=_CACHED_REGISTRIES)
def discovery_documents(registry: Registry) -> DiscoveryDocuments:
    """Build and encode every registry-only document; cached per Registry object.

    Raises ValueError if a kind lists a subresource discovery has no facts for; call it once
    at startup to fail there rather than on the first request.
    """
    named = _named_groups(registry)
    formats: tuple[DiscoveryFormat, ...] = ("v2", "v2beta1")
    aggregated = {(fmt, is_core): _encode(_group_discovery_list(registry, fmt, is_core))
                  for fmt in formats for is_core in (True, False)}
    return DiscoveryDocuments(
        group_list=_encode(_group_list(registry)),
        groups=MappingProxyType({g: _encode({"kind": "APIGroup", "apiVersion": "v1",
                                             **_api_group(registry, g)}) for g in named}),
        resource_lists=MappingProxyType({gv: _encode(_resource_list(registry, *gv))
                                         for gv in registry.group_versions()}),
        aggregated=MappingProxyType(aggregated),
        aggregated_etags=MappingProxyType({
            key: f'"{hashlib.sha512(body).hexdigest().upper()}"'
            for key, body in aggregated.items()}))


@lru_cache(maxsize=_CACHED_ADDRESSES)
def _api_versions_body(registry: Registry, server_address: str) -> bytes:
    return _encode(_api_versions(registry, server_address))


# --- negotiation and the entry point ----------------------------------------------------------

def _accept_clauses(accept: str) -> list[tuple[str, str, dict[str, str], float]]:
    """(type, subtype, params, q) per clause, ordered like goautoneg ParseAccept: q descending,
    then concrete before wildcard type/subtype, otherwise in header order."""
    clauses: list[tuple[str, str, dict[str, str], float]] = []
    for part in accept.split(","):
        fields = [f.strip() for f in part.split(";")]
        media = fields[0].lower()
        kind, _, sub = ("*", "/", "*") if media == "*" else media.partition("/")
        if not kind or not sub or "/" in sub:
            continue
        params: dict[str, str] = {}
        for field in fields[1:]:
            key, eq, value = field.partition("=")
            if eq:
                params[key.strip().lower()] = value.strip().strip('"')
        q = _parse_q(params.pop("q", "1"))
        clauses.append((kind, sub, params, q))
    clauses.sort(key=lambda c: (-c[3], c[0] == "*", c[1] == "*"))
    return clauses


def _parse_q(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 0.0  # goautoneg: a malformed q parses as 0


def _clause_format(kind: str, sub: str, params: Mapping[str, str]) -> DiscoveryFormat | None:
    """The format one Accept clause asks for; None if it cannot be served as JSON."""
    if (kind, sub) not in (("application", "json"), ("application", "*"), ("*", "*")):
        return None
    if not {"g", "v", "as"} & params.keys():
        return "legacy"
    version = params.get("v", "")
    if (params.get("g") == _DISCOVERY_GROUP and params.get("as") == _DISCOVERY_KIND
            and version in ("v2", "v2beta1")):
        return "v2" if version == "v2" else "v2beta1"
    return None  # e.g. as=Table: not a transform discovery allows (aggregated/negotiation.go)


def negotiate_discovery(accept: str) -> DiscoveryFormat:
    """Pick the discovery format for an Accept header, as kube-apiserver does.

    The first clause (by q, then header order: goautoneg) that is an aggregated
    APIGroupDiscoveryList request (``v2`` or ``v2beta1``) or plain JSON/``*/*`` decides;
    clauses kubewire cannot serve (protobuf, YAML, ``as=Table``) are skipped. No usable
    clause, or an empty header, means legacy JSON. kubectl's
    ``application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,...v2beta1...,
    application/json`` therefore gets v2, and kr8s's ``*/*`` gets legacy
    (aggregated/wrapper.go WrappedHandler; objects-and-clients.md §4.3, §7.4).
    """
    for kind, sub, params, _ in _accept_clauses(accept):
        fmt = _clause_format(kind, sub, params)
        if fmt is not None:
            return fmt
    return "legacy"


def discovery_response(registry: Registry, path: str, accept: str,
                       server_address: str) -> tuple[int, bytes, str] | None:
    """(status, body, content type) for a discovery path, or None for any other path.

    Serves ``/api``, ``/apis`` (aggregated or legacy per ``negotiate_discovery``), ``/apis/<g>``
    (APIGroup), ``/api/<v>`` and ``/apis/<g>/<v>`` (APIResourceList), each with or without one
    trailing slash. A group, core version or group-version the registry does not serve at
    those depths gets kube's plain-text ``404 page not found``. Any deeper or other path
    returns None so the caller routes it to resources. ``server_address`` (``host:port``) fills
    APIVersions' serverAddressByClientCIDRs. Bodies are shared, precomputed ``bytes``; call it
    for GET/HEAD only. Raises ValueError like ``discovery_documents``.
    """
    trimmed = path[:-1] if path.endswith("/") else path
    segments = trimmed.split("/")[1:] if trimmed.startswith("/") else []
    if not segments or "" in segments or segments[0] not in ("api", "apis"):
        return None
    is_core = segments[0] == "api"
    rest = segments[1:]
    if len(rest) > (1 if is_core else 2):
        return None
    docs = discovery_documents(registry)
    if not rest:
        return _root(registry, docs, is_core, accept, server_address)
    if is_core:
        return _found(docs.resource_lists.get(("", rest[0])))
    if len(rest) == 1:
        return _found(docs.groups.get(rest[0]))
    return _found(docs.resource_lists.get((rest[0], rest[1])))


@dataclass(frozen=True, slots=True)
class DiscoveryAnswer:
    """A discovery answer with its headers (``discovery_answer``)."""

    status: int
    body: bytes
    content_type: str
    headers: tuple[tuple[str, str], ...] = ()


def discovery_answer(registry: Registry, path: str, accept: str, server_address: str,
                     if_none_match: str = "") -> DiscoveryAnswer | None:
    """``discovery_response`` with kube's headers: an aggregated ``/api`` or ``/apis``
    document carries its ETag (and ``Vary``, ``Cache-Control: public``), and is 304 without a
    body when ``if_none_match`` is exactly that ETag (kube compares the header as a string)."""
    found = discovery_response(registry, path, accept, server_address)
    if found is None:
        return None
    status, body, content_type = found
    if content_type not in AGGREGATED_CONTENT_TYPES.values():
        return DiscoveryAnswer(status, body, content_type)
    docs = discovery_documents(registry)
    fmt = negotiate_discovery(accept)
    is_core = path.rstrip("/") == "/api"
    etag = docs.aggregated_etags[(fmt, is_core)]
    headers = (("Etag", etag), ("Vary", "Accept"), ("Cache-Control", "public"))
    if if_none_match == etag:
        return DiscoveryAnswer(304, b"", "", headers)
    return DiscoveryAnswer(status, body, content_type, headers)


def _root(registry: Registry, docs: DiscoveryDocuments, is_core: bool, accept: str,
          server_address: str) -> tuple[int, bytes, str]:
    fmt = negotiate_discovery(accept)
    if fmt != "legacy":
        return 200, docs.aggregated[(fmt, is_core)], AGGREGATED_CONTENT_TYPES[fmt]
    body = _api_versions_body(registry, server_address) if is_core else docs.group_list
    return 200, body, LEGACY_CONTENT_TYPE


def _found(body: bytes | None) -> tuple[int, bytes, str]:
    if body is None:
        return 404, NOT_FOUND_BODY, NOT_FOUND_CONTENT_TYPE
    return 200, body, LEGACY_CONTENT_TYPE
