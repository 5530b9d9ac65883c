"""The Gateway API kinds as a server serves them: registry entries built from the pre-installed
CRDs (``gateway_crds()``, defaulted, accepted and established as the CRD controllers leave
them), for unit tests of the pure code that used to find Gateway and HTTPRoute in ``REGISTRY``.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from kubewire.resources import REGISTRY, Registry, Resource
from kubewire.server.apiextensions.crd.crd_defaults import default_crd
from kubewire.server.apiextensions.crd.crd_resources import resources_for
from kubewire.server.apiextensions.crd.crd_strategy import prepare_for_create
from kubewire.server.apiextensions.crd.gateway_crds import gateway_crds
from kubewire.server.apiextensions.crd.naming import (
    accepted_names,
    conditions_after_establishing,
    conditions_after_naming,
)

GROUP = "gateway.networking.k8s.io"
NOW = "2025-01-01T00:00:00Z"


def established(crd: dict[str, Any], uid: str) -> dict[str, Any]:
    """A CRD as the server stores it once named and established."""
    default_crd(crd)
    prepare_for_create(crd)
    crd["metadata"].update(uid=uid, generation=1, resourceVersion="1")
    names, condition = accepted_names(crd, [])
    crd["status"]["acceptedNames"] = names
    crd["status"]["conditions"] = conditions_after_naming(crd, condition, NOW)
    crd["status"]["conditions"] = conditions_after_establishing(crd, NOW)
    return crd


@cache
def gateway_entries() -> tuple[Resource, ...]:
    """Every entry the five CRDs serve (each served version of each kind)."""
    entries: list[Resource] = []
    for i, crd in enumerate(gateway_crds()):
        entries += resources_for(established(crd, f"00000000-0000-0000-0000-00000000000{i}"))
    return tuple(entries)


@cache
def gateway_registry() -> Registry:
    """``REGISTRY`` with the Gateway API kinds served, as a started server's registry."""
    registry = REGISTRY
    for entry in gateway_entries():
        if entry.is_stored_version:
            registry = registry.with_custom(entry.crd_name, tuple(
                e for e in gateway_entries() if e.crd_name == entry.crd_name))
    return registry


def gateway_resource(plural: str, version: str = "v1") -> Resource:
    found = gateway_registry().lookup(GROUP, version, plural)
    assert found is not None, (plural, version)
    return found
