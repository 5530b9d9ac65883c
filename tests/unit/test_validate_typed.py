"""The typed decode of schema checks (kubewire.schema.validate_typed) never accepts what
``check_object`` would report (type errors, unknown fields), and accepts valid objects."""

from __future__ import annotations

import random

import pytest

from kubewire.resources import REGISTRY
from kubewire.schema.validate import check_object
from kubewire.schema.validate_typed import checks_cleanly
from tests.unit.test_go_decode_typed import SAMPLES, mutated


@pytest.mark.parametrize("version_kind", sorted(SAMPLES), ids="/".join)
def test_valid_objects_take_the_typed_path(version_kind: tuple[str, str]) -> None:
    api_version, kind = version_kind
    obj = {"apiVersion": api_version, "kind": kind, **SAMPLES[version_kind]}
    assert check_object(api_version, kind, obj, schema_required=False) == ([], [])
    assert checks_cleanly(api_version, kind, obj)


@pytest.mark.parametrize("version_kind", sorted(SAMPLES), ids="/".join)
def test_the_typed_decode_accepts_nothing_the_walk_reports(
        version_kind: tuple[str, str]) -> None:
    api_version, kind = version_kind
    obj = {"apiVersion": api_version, "kind": kind, **SAMPLES[version_kind]}
    rng = random.Random(f"check {api_version}/{kind}")
    accepted = reported = 0
    for _ in range(1500):
        candidate = mutated(obj, rng)
        walked = check_object(api_version, kind, candidate, schema_required=False)
        if checks_cleanly(api_version, kind, candidate):
            assert walked == ([], []), candidate
            accepted += 1
        else:
            reported += walked != ([], [])
    assert accepted > 100 and reported > 100  # both sides of the line were exercised


RECURSIVE_KIND = "apiextensions.k8s.io/customresourcedefinitions"


def test_every_builtin_kind_has_a_typed_form() -> None:
    # The CRD's JSONSchemaProps is recursive, which no msgspec type expresses: walked instead.
    for resource in REGISTRY:
        if not resource.is_custom and resource.id != RECURSIVE_KIND:
            assert checks_cleanly(resource.api_version, resource.kind,
                                  {"apiVersion": resource.api_version, "kind": resource.kind,
                                   "metadata": {"name": "x"}}), resource.id
