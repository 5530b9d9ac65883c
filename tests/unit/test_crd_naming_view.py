"""controllers.crds.naming_view: the naming controller reads of the other CRDs only what
``naming.accepted_names`` reads, with the same answers as from the whole object."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from kubewire.server.apiextensions.crd import naming
from kubewire.server.apiextensions.crd.gateway_crds import gateway_crds
from kubewire.server.controllers.crds import naming_view

NAMES = {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList",
         "shortNames": ["wd"]}


def stored(**top: Any) -> dict[str, Any]:
    obj = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com", "uid": "u"},
           "spec": {"group": "example.com", "names": dict(NAMES), "scope": "Namespaced",
                    "versions": [{"name": "v1", "served": True, "storage": True}]},
           "status": {"acceptedNames": dict(NAMES), "conditions": []}}
    obj.update(top)
    return obj


def test_the_view_of_a_gateway_crd_is_its_name_group_and_accepted_names() -> None:
    crd = gateway_crds()[0]
    crd["status"] = {"acceptedNames": {"plural": "x", "kind": "X"}}
    assert naming_view(msgspec.json.encode(crd)) == {
        "metadata": {"name": crd["metadata"]["name"]},
        "spec": {"group": "gateway.networking.k8s.io"},
        "status": {"acceptedNames": {"plural": "x", "kind": "X"}}}


@pytest.mark.parametrize("other", [
    stored(), stored(status={}), stored(status=None), stored(spec=None),
    stored(metadata={"name": 7}), stored(spec={"group": "example.com", "names": None})],
    ids=["whole", "no-accepted", "null-status", "null-spec", "odd-name", "null-names"])
def test_naming_answers_the_same_from_the_view_and_the_whole_object(other: dict[str, Any]) -> None:
    mine = stored(metadata={"name": "gadgets.example.com"},
                  spec={"group": "example.com", "names": dict(NAMES, plural="gadgets")},
                  status={})
    whole = msgspec.json.decode(msgspec.json.encode(other))
    view = naming_view(msgspec.json.encode(other))
    assert naming.accepted_names(mine, [view]) == naming.accepted_names(mine, [whole])
