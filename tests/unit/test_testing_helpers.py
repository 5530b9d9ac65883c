"""The testing toolkit's pure helpers: manifests read, namespace names made, resources named."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubewire.resources import REGISTRY
from kubewire.testing.pytest_plugin import namespace_name
from kubewire.testing.server import load_manifests
from kubewire.testing.waiting import find_resource, satisfies


def test_manifests_from_dicts_yaml_files_and_lists(tmp_path: Path) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}
    assert load_manifests(cm) == [cm]
    assert load_manifests([cm, cm]) == [cm, cm]
    text = ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\n"
            "apiVersion: v1\nkind: List\nitems:\n"
            "- {apiVersion: v1, kind: Secret, metadata: {name: s}}\n")
    assert [d["kind"] for d in load_manifests(text)] == ["ConfigMap", "Secret"]
    path = tmp_path / "m.yaml"
    path.write_text(text)
    assert [d["kind"] for d in load_manifests(path)] == ["ConfigMap", "Secret"]
    assert [d["kind"] for d in load_manifests(str(path))] == ["ConfigMap", "Secret"]
    with pytest.raises(ValueError):
        load_manifests("- 1\n- 2\n")


def test_namespace_names_are_unique_dns_labels() -> None:
    name = namespace_name("test_x[A_1-" + "y" * 80 + "]")
    assert name.startswith("test-x-a-1-y")
    assert len(name) <= 63
    assert all(c.isalnum() or c == "-" for c in name) and name[0].isalnum()
    assert name[-1].isalnum()
    assert namespace_name("test") != namespace_name("test")
    assert namespace_name("___").startswith("test-")


def test_resources_by_plural_and_group() -> None:
    found = find_resource(REGISTRY, "pods")
    assert found is not None and found.group == "" and found.plural == "pods"
    apps = find_resource(REGISTRY, "deployments.apps")
    assert apps is not None and apps.group == "apps"
    assert find_resource(REGISTRY, "widgets.example.com") is None


def test_conditions() -> None:
    obj = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert satisfies(obj, ("Ready", "True"))
    assert not satisfies(obj, ("Ready", "False"))
    assert not satisfies({}, ("Ready", "True"))
    assert satisfies({}, None)
    assert satisfies(obj, lambda o: "status" in o)
