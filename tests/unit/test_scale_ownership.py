"""The parent's managedFields seen from ``/scale`` and back (apimachinery ``scalehandler.go``;
cases after its ``scalehandler_test.go``)."""

from __future__ import annotations

from typing import Any

import pytest

from kubewire.server.patch.scale_ownership import (
    ScaleOwnershipError,
    builtin_replicas_paths,
    custom_replicas_paths,
    field_path,
    to_parent,
    to_subresource,
)

DEPLOYMENTS = builtin_replicas_paths("apps", "deployments")
REPLICAS: dict[str, Any] = {"f:spec": {"f:replicas": {}}}
T1, T2 = "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"


def entry(manager: str, operation: str, api_version: str, fields: dict[str, Any],
          time: str | None = None, subresource: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"manager": manager, "operation": operation, "apiVersion": api_version}
    if time is not None:
        out["time"] = time
    out |= {"fieldsType": "FieldsV1", "fieldsV1": fields}
    if subresource:
        out["subresource"] = subresource
    return out


def test_mappings_are_kubes_per_kind_and_per_crd_version() -> None:
    assert set(DEPLOYMENTS) == {"apps/v1beta1", "apps/v1beta2", "apps/v1"}
    assert set(builtin_replicas_paths("apps", "replicasets")) == {"apps/v1beta2", "apps/v1"}
    assert builtin_replicas_paths("", "replicationcontrollers") == {
        "v1": ("f:spec", "f:replicas")}
    assert builtin_replicas_paths("apps", "daemonsets") == {}
    assert custom_replicas_paths("example.com", {"v1": ".spec.size", "v0": None}) == {
        "example.com/v1": ("f:spec", "f:size"), "example.com/v0": None}
    assert field_path(".spec.scaling.replicas") == ("f:spec", "f:scaling", "f:replicas")


def test_to_subresource_keeps_only_replicas_owners_at_the_scale_version() -> None:
    parent = [
        entry("owner", "Apply", "apps/v1", {"f:spec": {"f:replicas": {}, "f:paused": {}}}, T1),
        entry("editor", "Update", "apps/v1", {"f:spec": {"f:paused": {}}}, T1),
        entry("scaler", "Update", "apps/v1", REPLICAS, T2, "scale"),
        entry("stranger", "Update", "v1", REPLICAS, T2),  # an apiVersion not in the mapping
    ]
    assert to_subresource(parent, DEPLOYMENTS) == [
        entry("owner", "Apply", "autoscaling/v1", REPLICAS, T1),
        entry("scaler", "Update", "autoscaling/v1", REPLICAS, T2, "scale"),
    ]
    assert to_subresource(None, DEPLOYMENTS) == []


def test_a_version_without_scale_gives_the_scale_no_owner() -> None:
    mappings = custom_replicas_paths("example.com", {"v1": ".spec.size", "v0": None})
    parent = [entry("old", "Update", "example.com/v0", {"f:spec": {"f:size": {}}}, T1),
              entry("new", "Apply", "example.com/v1", {"f:spec": {"f:size": {}}}, T1)]
    assert to_subresource(parent, mappings) == [
        entry("new", "Apply", "autoscaling/v1", REPLICAS, T1)]


def test_a_new_scale_applier_owns_the_parents_path_with_no_time() -> None:
    """ToParent takes the time from the parent's entry of that identity: none for a new one."""
    mappings = custom_replicas_paths("example.com", {"v1": ".spec.size"})
    parent = [entry("owner", "Apply", "example.com/v1",
                    {"f:spec": {"f:size": {}, "f:color": {}}}, T1)]
    scale = [entry("owner", "Apply", "autoscaling/v1", REPLICAS, T1),
             entry("scaler", "Apply", "autoscaling/v1", REPLICAS, T2, "scale")]
    assert to_parent(parent, scale, "example.com/v1", mappings) == [  # no time sorts first
        entry("scaler", "Apply", "example.com/v1", {"f:spec": {"f:size": {}}},
              subresource="scale"),
        entry("owner", "Apply", "example.com/v1", {"f:spec": {"f:size": {}, "f:color": {}}}, T1),
    ]


def test_an_owner_missing_from_the_scale_loses_the_replicas_path() -> None:
    parent = [
        entry("owner", "Apply", "apps/v1", {"f:spec": {"f:replicas": {}, "f:paused": {}}}, T1),
        entry("scaler", "Apply", "apps/v1", REPLICAS, None, "scale"),
        entry("editor", "Update", "apps/v1", {"f:spec": {"f:paused": {}}}, T1),
    ]
    scale = [entry("taker", "Apply", "autoscaling/v1", REPLICAS, T2, "scale")]
    assert to_parent(parent, scale, "apps/v1", DEPLOYMENTS) == [
        entry("taker", "Apply", "apps/v1", REPLICAS, subresource="scale"),
        entry("owner", "Apply", "apps/v1", {"f:spec": {"f:paused": {}}}, T1),
        entry("editor", "Update", "apps/v1", {"f:spec": {"f:paused": {}}}, T1),
    ]


def test_an_applier_still_on_the_scale_keeps_its_parent_entry_whole() -> None:
    """An applier's identity has no apiVersion: the same on both sides, so its parent entry is
    kept as it is (time included), even when its Scale entry no longer owns the replicas."""
    parent = [entry("owner", "Apply", "apps/v1", {"f:spec": {"f:replicas": {}, "f:paused": {}}},
                    T1)]
    scale = [entry("owner", "Apply", "autoscaling/v1", {"f:metadata": {"f:labels": {}}}, T2)]
    assert to_parent(parent, scale, "apps/v1", DEPLOYMENTS) == parent


def test_an_updater_through_the_scale_comes_back_as_a_new_identity() -> None:
    """An updater's identity includes its apiVersion: its Scale entry (autoscaling/v1) is not
    its parent entry (apps/v1), so the parent's is taken and a new one, without time, made."""
    parent = [entry("scaler", "Update", "apps/v1", REPLICAS, T1, "scale")]
    scale = [entry("scaler", "Update", "autoscaling/v1", REPLICAS, T1, "scale")]
    assert to_parent(parent, scale, "apps/v1", DEPLOYMENTS) == [
        entry("scaler", "Update", "apps/v1", REPLICAS, subresource="scale")]


def test_entries_of_unknown_versions_are_dropped_and_scale_entries_without_replicas_ignored(
        ) -> None:
    parent = [entry("stranger", "Update", "v1", {"f:spec": {"f:paused": {}}}, T1)]
    scale = [entry("labeller", "Apply", "autoscaling/v1", {"f:metadata": {"f:labels": {}}}, T1)]
    assert to_parent(parent, scale, "apps/v1", DEPLOYMENTS) == []


def test_malformed_entries_are_an_error() -> None:
    with pytest.raises(ScaleOwnershipError):
        to_subresource([{"manager": "x"}], DEPLOYMENTS)
    with pytest.raises(ScaleOwnershipError):
        to_parent([], "not a list", "apps/v1", DEPLOYMENTS)
