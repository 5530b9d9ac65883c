"""The defaults kube applies to an ``apiextensions.k8s.io/v1`` CustomResourceDefinition on decode.

Source: ``apiextensions-apiserver:pkg/apis/apiextensions/v1/defaults.go`` and its generated
``zz_generated.defaults.go`` (crds.md §1.1), in their order: ``names.singular`` ← lowercase
``kind``, ``names.listKind`` ← ``kind + "List"`` when a kind is set,
``conversion`` ← ``{strategy: None}`` when absent, ``status.storedVersions`` ← the storage
version when empty, then ``conversion.webhook.clientConfig.service.port`` ← 443. Nothing else of
the object (schemas included) has a v1 default.
"""

from __future__ import annotations

from kubewire.json_types import JSON

SERVICE_PORT_DEFAULT = 443


def _object_at(parent: dict[str, JSON], key: str) -> dict[str, JSON] | None:
    value = parent.get(key)
    return value if isinstance(value, dict) else None


def default_crd(crd: dict[str, JSON]) -> None:
    """Apply the v1 defaults to ``crd`` in place. Fields of the wrong JSON type are left alone
    (decoding rejects them before defaults run); an empty default (``singular`` of an empty kind)
    is not written, as ``omitempty`` would drop it."""
    spec = _object_at(crd, "spec")
    if spec is not None:
        _default_spec(spec)
    _default_stored_versions(crd, spec)
    if spec is not None:
        conversion = _object_at(spec, "conversion")
        webhook = _object_at(conversion, "webhook") if conversion else None
        client = _object_at(webhook, "clientConfig") if webhook else None
        service = _object_at(client, "service") if client else None
        if service is not None and service.get("port") is None:
            service["port"] = SERVICE_PORT_DEFAULT


def _default_spec(spec: dict[str, JSON]) -> None:
    """``SetDefaults_CustomResourceDefinitionSpec``."""
    names = _object_at(spec, "names")
    if names is not None:
        kind = names.get("kind") if isinstance(names.get("kind"), str) else ""
        if not names.get("singular") and kind:  # an empty result is omitted on the wire
            names["singular"] = kind.lower()
        if not names.get("listKind") and kind:
            names["listKind"] = kind + "List"
    if spec.get("conversion") is None:
        spec["conversion"] = {"strategy": "None"}


def _default_stored_versions(crd: dict[str, JSON], spec: dict[str, JSON] | None) -> None:
    """``status.storedVersions`` ← ``[<first storage version>]`` when empty."""
    status = _object_at(crd, "status")
    stored = status.get("storedVersions") if status is not None else None
    if stored:
        return
    versions = spec.get("versions") if spec is not None else None
    for version in versions if isinstance(versions, list) else []:
        if isinstance(version, dict) and version.get("storage") is True:
            if status is None:
                if crd.get("status") is not None:
                    return  # a mistyped status: decoding reports it
                status = crd["status"] = {}
            status["storedVersions"] = [version.get("name", "")]
            return
