"""A custom resource kind whose CRD a test installs through the real API, for scenarios that
run against built-in kinds and custom resources alike.

``GIZMO`` is a namespaced kind of a CRD created at the start of the test (POST, then wait for
``Established``), not one of the server's preinstalled CRDs (Gateway API): the scenarios then
cover the whole run-time path (naming, establishing, ``Registry.with_custom``, the watch cache's
``add_kind``) as well as the custom-resource write path (pruning, defaulting, schema and CEL).

Use the ``kind`` fixture (``tests/integration/conftest.py``) with indirect parametrization, or
``serve(server, kind)`` where a test starts its own server.
"""

from __future__ import annotations

from typing import Any

from tests.integration.kinds import Kind
from tests.integration.wire import HasURL, call, create, get, wait_for

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

GIZMO = Kind("Gizmo", "tests.kubewire.io/v1", "gizmos", True, {"spec": {"size": 1}},
             {"spec": {"size": 2}}, is_custom=True)

GIZMO_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "gizmos.tests.kubewire.io"},
    "spec": {
        "group": "tests.kubewire.io", "scope": "Namespaced",
        "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo",
                  "listKind": "GizmoList"},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {
                        "type": "object",
                        "x-kubernetes-validations": [
                            {"rule": "self.size <= 100", "message": "too big"}],
                        "properties": {
                            "size": {"type": "integer", "minimum": 0},
                            "shape": {"type": "string", "default": "round"}}},
                    "status": {"type": "object",
                               "properties": {"ready": {"type": "boolean"}}}}}},
        }],
    },
}

CRD_OF: dict[str, dict[str, Any]] = {GIZMO.group_kind: GIZMO_CRD}  # by group and kind


def established(server: HasURL, name: str, timeout: float = 10.0) -> dict[str, Any]:
    """Wait until the CRD ``name`` has ``Established=True``; returns it."""
    def ready() -> dict[str, Any] | None:
        found: dict[str, Any] = get(server, f"{CRDS}/{name}")
        conditions = {c["type"]: c for c in found.get("status", {}).get("conditions") or ()}
        return found if conditions.get("Established", {}).get("status") == "True" else None

    found: dict[str, Any] = wait_for(ready, timeout, f"the CRD {name} to be established")
    return found


def serve(server: HasURL, kind: Kind) -> Kind:
    """Make ``kind`` served: install its CRD if it is a run-time custom kind; returns it."""
    crd = CRD_OF.get(kind.group_kind)
    if crd is not None:
        create(server, CRDS, crd)
        established(server, crd["metadata"]["name"])
        # Served once established: the collection answers (kube: the handler is swapped in).
        wait_for(lambda: call(server, "GET", kind.collection()).status == 200, 10,
                 f"{kind.plural} to be served")
    return kind
