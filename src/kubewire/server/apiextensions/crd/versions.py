"""How a CRD's objects move between its versions: kube's custom-resource storage codec.

apiextensions-apiserver builds one storage per served version whose codec
(``customresource_handler.go`` ``crdConversionRESTOptionsGetter``; crds.md §4.3, §6.1) does,
for every object read from etcd:

1. ``schemaCoercingDecoder``: prune with the schema of the version the object is *stored* in
   (unknown fields, non-nullable nulls without defaults, embedded metadata);
2. ``unstructuredDefaulter``: apply that same version's defaults (a default added to the CRD
   later shows on reads of old objects before they are written again);
3. ``schemaCoercingConverter``: convert to the version read (the CRD's converter, always called,
   even when the versions are equal) and prune with *that* version's schema. No defaulting
   after conversion.

A write goes the other way: the request's object (pruned and defaulted with the request version
when decoded, ``writes/custom_resources.py``) is converted to the storage version and pruned with
its schema before it is stored. ``None`` conversion (``nop_converter.go``) only rewrites
``apiVersion``. ``Webhook`` conversion is a call to the user's webhook: ``CRDConversion`` then
does steps 1 and 2 only and leaves the object in its version; the server's conversion room
(``server/conversion``) calls the webhook (``conversion_review`` builds and checks the review)
and ``converted`` prunes the result.

The schemas are parsed once per CRD object (one ``CRDConversion`` per CRD generation, shared by
its versions' registry entries).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubewire.json_types import JSON
from kubewire.server.apiextensions.crd.crd_internal import as_dict, as_list, as_str
from kubewire.server.apiextensions.schemas import defaulting, pruning
from kubewire.server.apiextensions.schemas.structural import Structural, parse


class CRDConversion:
    """``kubewire.conversions.SchemaConversion`` for one CRD object."""

    __slots__ = ("_raw", "_schemas", "group", "preserve_unknown_fields", "strategy")

    def __init__(self, crd: Mapping[str, Any]) -> None:
        spec = as_dict(crd.get("spec"))
        self.group = as_str(spec.get("group"))
        self.strategy = as_str(as_dict(spec.get("conversion")).get("strategy")) or "None"
        self.preserve_unknown_fields = spec.get("preserveUnknownFields") is True
        self._raw: dict[str, JSON] = {}
        for version in map(as_dict, as_list(spec.get("versions"))):
            raw = as_dict(version.get("schema")).get("openAPIV3Schema")
            if isinstance(raw, dict):
                self._raw[as_str(version.get("name"))] = raw
        self._schemas: dict[str, Structural | None] = {}

    @property
    def webhook(self) -> bool:
        return self.strategy == "Webhook"

    def schema(self, api_version: str) -> Structural | None:
        """The structural schema of ``<group>/<version>`` (None: not a version of this CRD, or
        one without a schema)."""
        group, _, version = api_version.rpartition("/")
        if group != self.group:
            return None
        if version not in self._schemas:
            raw = self._raw.get(version)
            self._schemas[version] = parse(raw) if isinstance(raw, Mapping) else None
        return self._schemas[version]

    def coerce(self, obj: dict[str, JSON], api_version: str) -> None:
        """``unstructuredSchemaCoercer.apply`` with ``api_version``'s schema, in place."""
        schema = self.schema(api_version)
        if schema is not None and not self.preserve_unknown_fields:
            pruning.prune(schema, obj)

    def read(self, obj: dict[str, JSON], api_version: str) -> dict[str, JSON]:
        """Steps 1-3 on a stored object (changed in place, and returned): as read through the
        storage of ``api_version``; with a webhook, steps 1-2 only (still in its version)."""
        source = obj.get("apiVersion")
        if not isinstance(source, str):
            return obj
        self.coerce(obj, source)
        schema = self.schema(source)
        if schema is not None:
            defaulting.apply_defaults(schema, obj)
        if source == api_version:
            # Pruning again with the schema just applied changes nothing: its defaults are
            # pruned and valid (CRD validation, ``default_rules``), so they add no unknown
            # field and no null. Skipped: a third of a custom resource's read.
            return obj
        if self.webhook:
            return obj
        obj["apiVersion"] = api_version
        self.coerce(obj, api_version)
        return obj

    def write(self, obj: dict[str, JSON], api_version: str) -> dict[str, JSON]:
        """A request's object as stored in ``api_version`` (the storage version), changed in
        place: converted (``None`` only; a webhook's object is converted by the caller) and
        pruned with the storage version's schema."""
        if not self.webhook:
            obj["apiVersion"] = api_version
        if obj.get("apiVersion") == api_version:
            self.coerce(obj, api_version)
        return obj

    def converted(self, obj: dict[str, JSON], api_version: str) -> dict[str, JSON]:
        """What the webhook returned for ``api_version``, pruned with that version's schema
        (``schemaCoercingConverter``), in place."""
        self.coerce(obj, api_version)
        return obj
