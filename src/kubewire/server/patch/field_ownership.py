"""Who owns which fields: the ``managedFields`` step of every create, update, patch and apply.

Writes call ``track_write`` once, after the lifecycle rules and validation and before the store
(kube runs its field manager in the handlers, ``fieldmanager.go`` ``UpdateNoErrors``/``Apply``).
An apply has already computed its entries (``apply.apply_config``), and so has a write of a
Scale (``PrecomputedOptions``); any other write is an Update
operation for its manager: the ``fieldManager`` parameter, else the User-Agent's product name
(``handlers/rest.go`` ``managerOrUserAgent``, ``prefixFromUserAgent``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache
from typing import Any

from kubewire.go_text import go_utf8_of_latin1
from kubewire.json_types import JSON
from kubewire.resources import Resource
from kubewire.schema import TypeNode, type_for
from kubewire.schema.crd_types import crd_type
from kubewire.server.patch.apply import ApplyRequest
from kubewire.server.patch.apply_request import ServerSideApply, decode_apply_body
from kubewire.server.patch.field_paths import (
    MissingKeyError,
    Path,
    Strip,
    compare,
    create_fields_v1,
)
from kubewire.server.patch.managed_fields import (
    STRIPPED_PATHS,
    UNKNOWN_MANAGER,
    Managed,
    ManagerKey,
    UpdateRecord,
    canonical_keys,
    decode_managed,
    encode_managed,
    live_or_new,
    managed_entries,
    manager_key,
    record_update,
    record_update_entries,
)
from kubewire.server.request.query_params import Query
from kubewire.server.request.routes import Route
from kubewire.server.request.write_options import (
    MAX_FIELD_MANAGER_BYTES,
    WriteOptions,
    WriteVerb,
    parse_write_options,
)
from kubewire.times import format_time

__all__ = ["APPLY_PATCH_MEDIA_TYPE", "ApplyOptions", "Mutation", "PrecomputedOptions",
           "WriteFacts",
           "default_field_manager", "parse_apply", "parse_apply_options",
           "parse_tracked_write_options",
           "requested_managed_fields", "resource_schema", "track_write"]

APPLY_PATCH_MEDIA_TYPE = "application/apply-patch+yaml"
Mutation = Callable[[dict[str, JSON]], dict[str, JSON]]
"""What a read-modify-write does to the live object."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PrecomputedOptions(WriteOptions):
    """Write options of a write that computed its managedFields itself: ``track_write`` keeps
    them (a Scale's write, whose field manager runs on the Scale: ``writes.scale_subresource``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApplyOptions(PrecomputedOptions):
    """Write options of an apply patch: its managedFields come from the apply itself."""


@dataclass(frozen=True, slots=True)
class WriteFacts:
    """The endpoint, options and time of one write."""

    route: Route
    options: WriteOptions
    now: datetime


def default_field_manager(options: WriteOptions, user_agent: str) -> WriteOptions:
    """``options`` naming the User-Agent's product when no ``fieldManager`` was given."""
    if options.field_manager:
        return options
    return replace(options, field_manager=_user_agent_manager(user_agent))


@lru_cache(maxsize=256)  # a client sends the same User-Agent with every request
def _user_agent_manager(user_agent: str) -> str:
    """The manager a User-Agent names: its product (before "/"), as Go ranges over the
    header's bytes (U+FFFD, printable, for each invalid one), its printable characters up to
    ``MAX_FIELD_MANAGER_BYTES``."""
    product = user_agent.split("/", 1)[0]
    if product.isascii() and product.isprintable() and len(product) <= MAX_FIELD_MANAGER_BYTES:
        return product  # what the loop below keeps of it
    product = go_utf8_of_latin1(product)
    name = ""
    for ch in product:
        if not ch.isprintable():
            continue
        if len((name + ch).encode("utf-8", "surrogatepass")) > MAX_FIELD_MANAGER_BYTES:
            break
        name += ch
    return name


def parse_tracked_write_options(query: Query, user_agent: str, *,
                                verb: WriteVerb = "create") -> WriteOptions:
    """A create's, update's or non-apply patch's options, its manager defaulted from
    ``user_agent`` (``default_field_manager``)."""
    if not query:  # most writes: nothing to parse or refuse
        return WriteOptions(field_manager=_user_agent_manager(user_agent))
    return default_field_manager(parse_write_options(query, verb=verb), user_agent)


def parse_apply(query: Query, body: bytes, route: Route,
                now: datetime) -> tuple[ApplyOptions, ServerSideApply]:
    """An apply request's options (422 without ``fieldManager``) and its decoded body (400)."""
    apply_options = parse_apply_options(query)
    applied = decode_apply_body(body)
    resource = route.resource
    request = ApplyRequest(manager=apply_options.field_manager,
                           api_version=resource.api_version, kind=resource.kind,
                           now=format_time(now), force=apply_options.force,
                           subresource=route.subresource, is_custom=resource.is_custom,
                           has_status=resource.has_status)
    return apply_options, ServerSideApply(applied, resource_schema(resource), request,
                                          strict=apply_options.field_validation == "Strict",
                                          plural=resource.plural)


def parse_apply_options(query: Query) -> ApplyOptions:
    """An apply request's options: 422 without ``fieldManager`` (``ValidatePatchOptions``)."""
    options = parse_write_options(query, verb="apply")
    return ApplyOptions(dry_run=options.dry_run, field_manager=options.field_manager,
                        field_validation=options.field_validation, force=options.force)


def resource_schema(resource: Resource) -> TypeNode | None:
    """The kind's root schema, or None when kubewire has none (fields are then deduced).

    A custom resource's comes from its CRD version's schema, as kube builds its apply type
    converter (``schema.crd_types``): the list and map types decide merges and ownership.
    """
    crd = resource.crd
    if crd is not None:
        meta = crd.get("metadata") or {}
        return _crd_schema(str(meta.get("uid")), int(meta.get("generation") or 0),
                           resource.version, _Carried(crd))
    try:
        return type_for(resource.api_version, resource.kind)
    except KeyError:
        return None


class _Carried:
    """A CRD carried through ``lru_cache`` without taking part in its key."""

    __slots__ = ("crd",)

    def __init__(self, crd: Any) -> None:
        self.crd = crd

    def __hash__(self) -> int:
        return 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Carried)


# One root per CRD version and generation: an update of the CRD builds the next one.
@lru_cache(maxsize=256)
def _crd_schema(uid: str, generation: int, version: str, carried: _Carried) -> TypeNode | None:
    for entry in (carried.crd.get("spec") or {}).get("versions") or ():
        if isinstance(entry, dict) and entry.get("name") == version:
            schema = (entry.get("schema") or {}).get("openAPIV3Schema")
            return crd_type(schema) if isinstance(schema, dict) else None
    return None


def track_write(facts: WriteFacts, old: dict[str, JSON] | None, new: dict[str, JSON],
                prepared: dict[str, JSON]) -> dict[str, JSON]:
    """``prepared`` with its ``metadata.managedFields`` for this write (mutated and returned).

    ``old`` is the live object (None on create), ``new`` what the request asked for before the
    lifecycle rules (an apply's or a Scale write's result carries its computed entries there).
    """
    meta = prepared.setdefault("metadata", {})
    if isinstance(facts.options, PrecomputedOptions):
        entries = (new.get("metadata") or {}).get("managedFields")
        _set_entries(meta, entries)
        return prepared
    resource, subresource = facts.route.resource, facts.route.subresource
    if old is None and not subresource and managed_entries(new) is None:
        return _track_create(facts, prepared, meta)
    kept = _kept_live_entries(old, new, subresource)
    base: Managed | None = None
    if kept is None:
        base, entries = live_or_new(old, new, subresource)
    else:
        entries, keys = kept
    try:
        changes = compare(_bare(old), _bare(prepared), resource_schema(resource),
                          is_custom=resource.is_custom)
    except MissingKeyError:  # validation let a keyless list item through
        changes = None
    if changes is None or changes.is_same:  # nobody gains or loses a field: entries as they are
        _set_entries(meta, entries)
        return prepared
    key = manager_key(facts.options.field_manager, "Update", resource.api_version, subresource)
    record = UpdateRecord(key, format_time(facts.now), resource.has_status)
    if kept is not None:
        updated = record_update_entries(entries, keys, changes, record)
        if updated is not None:
            _set_entries(meta, updated)
            return prepared
        base = decode_managed(entries)
    assert base is not None
    managed = record_update(base, changes, record)
    _set_entries(meta, encode_managed(managed) if managed else None)
    return prepared


def requested_managed_fields(new: dict[str, JSON]) -> dict[str, JSON]:
    """What ``track_write`` reads of a request's object (its ``metadata.managedFields``), kept
    apart before the steps that change the object in place drop them."""
    entries = managed_entries(new)
    return {} if entries is None else {"metadata": {"managedFields": entries}}


def _kept_live_entries(old: dict[str, JSON] | None, new: dict[str, JSON], subresource: str,
                       ) -> tuple[list[dict[str, JSON]], list[ManagerKey]] | None:
    """The entries an update starts from, with their keys, when they need no decoding: the
    live object's (``live_or_new`` picks them: a subresource, or a request that left them as
    they are), already in the form ``encode_managed`` writes (``canonical_keys``)."""
    if old is None:
        return None
    live, asked = managed_entries(old), managed_entries(new)
    if not subresource and asked != live:
        return None
    keys = canonical_keys(live)
    if keys is None:
        return None
    assert isinstance(live, list)
    # the live list, not the request's: == does not see the order of keys
    return list(live), keys


def _track_create(facts: WriteFacts, prepared: dict[str, JSON],
                  meta: dict[str, JSON]) -> dict[str, JSON]:
    """A create whose body brought no managedFields: its manager owns exactly the fields it
    set, so the one entry comes from a single walk of the object (no diff, no path sets). Gives
    what the general path (compare with nothing, ``record_update`` from no entries) gives."""
    resource = facts.route.resource
    try:
        # endpoint_fields: server-set metadata is nobody's, and the main endpoint never owns
        # .status
        fields = create_fields_v1(_bare(prepared), resource_schema(resource),
                                  is_custom=resource.is_custom,
                                  stripped=_STRIP_WITH_STATUS if resource.has_status else _STRIP)
    except MissingKeyError:  # validation let a keyless list item through: no entries
        meta.pop("managedFields", None)
        return prepared
    if not fields:
        meta.pop("managedFields", None)
        return prepared
    # manager_key's manager, without building the key: an empty name is "unknown"
    meta["managedFields"] = [{"manager": facts.options.field_manager or UNKNOWN_MANAGER,
                              "operation": "Update", "apiVersion": resource.api_version,
                              "time": format_time(facts.now), "fieldsType": "FieldsV1",
                              "fieldsV1": fields}]
    return prepared


def _strip_of(paths: frozenset[Path], *, without_status: bool) -> Strip:
    """``STRIPPED_PATHS`` (and ``.status``) as ``create_fields_v1`` takes them."""
    tops = {path[0] for path in paths if len(path) == 1}
    assert all(len(path) == 1 or (len(path) == 2 and path[0] in tops) for path in paths)
    strip: set[tuple[str, Strip | None]] = {
        (top, frozenset((path[1], frozenset()) for path in paths
                        if len(path) == 2 and path[0] == top)) for top in tops}
    if without_status:
        strip.add(("f:status", None))
    return frozenset(strip)


_STRIP = _strip_of(STRIPPED_PATHS, without_status=False)
_STRIP_WITH_STATUS = _strip_of(STRIPPED_PATHS, without_status=True)


def _set_entries(meta: dict[str, JSON], entries: JSON) -> None:
    if entries:
        meta["managedFields"] = entries
    else:
        meta.pop("managedFields", None)


def _bare(obj: dict[str, JSON] | None) -> dict[str, JSON]:
    """The object without its managedFields (never compared as data)."""
    if obj is None:
        return {}
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
