"""server.apiextensions.crd.naming, crd_defaults, crd_strategy: the CRD controllers' decisions,
the v1 defaults and the strategy (crds.md §1.1, §2.1-2.5, §9 items 8, 9)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubewire.server.apiextensions.crd.crd_defaults import default_crd
from kubewire.server.apiextensions.crd.crd_strategy import (
    prepare_for_create,
    prepare_for_status_update,
    prepare_for_update,
)
from kubewire.server.apiextensions.crd.naming import (
    accepted_names,
    conditions_after_establishing,
    conditions_after_naming,
    establishing_needed,
    finalizer_outcome,
    naming_needed,
    terminating_condition,
)

T0, T1 = "2024-01-01T00:00:00Z", "2024-01-01T00:00:05Z"


def crd(plural: str = "widgets", kind: str = "Widget", group: str = "example.com",
        **names: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": plural, "kind": kind, **names},
                 "versions": [{"name": "v1", "served": True, "storage": True}]}}
    default_crd(obj)
    prepare_for_create(obj)
    return obj


def accept(obj: dict[str, Any], others: list[dict[str, Any]] | None = None,
           now: str = T0) -> dict[str, Any]:
    """Run the naming and establishing controllers' decisions once, as the lead's loop would."""
    names, cond = accepted_names(obj, others or [])
    out = copy.deepcopy(obj)
    out["status"]["acceptedNames"] = names
    out["status"]["conditions"] = conditions_after_naming(out, cond, now)
    if establishing_needed(out):
        out["status"]["conditions"] = conditions_after_establishing(out, now)
    return out


# --- defaults and strategy ---------------------------------------------------------------------

def test_v1_defaults() -> None:
    obj: dict[str, Any] = {"spec": {
        "names": {"plural": "widgets", "kind": "Widget"},
        "versions": [{"name": "v1beta1", "storage": False}, {"name": "v1", "storage": True}],
        "conversion": None}}
    default_crd(obj)
    assert obj["spec"]["names"] == {"plural": "widgets", "kind": "Widget", "singular": "widget",
                                    "listKind": "WidgetList"}
    assert obj["spec"]["conversion"] == {"strategy": "None"}
    assert obj["status"] == {"storedVersions": ["v1"]}
    hook: dict[str, Any] = {"spec": {"names": {"kind": "W", "singular": "w", "listKind": "Ws"},
                                     "conversion": {"strategy": "Webhook", "webhook": {
                                         "clientConfig": {"service": {"name": "s"}}}}},
                            "status": {"storedVersions": ["v0"]}}
    default_crd(hook)
    assert hook["spec"]["names"] == {"kind": "W", "singular": "w", "listKind": "Ws"}
    assert hook["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["port"] == 443
    assert hook["status"] == {"storedVersions": ["v0"]}


def test_prepare_for_create_resets_status() -> None:
    obj: dict[str, Any] = {"metadata": {"name": "x", "generation": 7},
                           "spec": {"versions": [{"name": "v2", "storage": True}]},
                           "status": {"conditions": [{"type": "Established"}],
                                      "storedVersions": ["v0"]}}
    prepare_for_create(obj)
    assert obj["metadata"]["generation"] == 1
    assert obj["status"] == {"conditions": None, "acceptedNames": {"plural": "", "kind": ""},
                             "storedVersions": ["v2"]}


def test_prepare_for_update_keeps_status_bumps_generation_appends_storage() -> None:
    old = accept(crd())
    old["metadata"]["generation"] = 3
    new = copy.deepcopy(old)
    new["status"] = {"storedVersions": ["bogus"]}
    prepare_for_update(new, old)
    assert new["status"] == old["status"] and new["metadata"]["generation"] == 3
    new["spec"]["versions"] = [{"name": "v1", "served": True, "storage": False},
                               {"name": "v2", "served": True, "storage": True}]
    prepare_for_update(new, old)
    assert new["metadata"]["generation"] == 4
    assert new["status"]["storedVersions"] == ["v1", "v2"]


def test_prepare_for_status_update_resets_spec_not_metadata() -> None:
    old = accept(crd())
    new = copy.deepcopy(old)
    new["spec"]["scope"] = "Cluster"
    new["metadata"]["finalizers"] = []
    new["status"]["storedVersions"] = ["v1", "v0"]
    prepare_for_status_update(new, old)
    assert new["spec"] == old["spec"]
    assert new["metadata"]["finalizers"] == [] and new["status"]["storedVersions"] == ["v1", "v0"]


# --- naming ------------------------------------------------------------------------------------

def test_fresh_crd_is_accepted_and_established() -> None:
    obj = crd(shortNames=["wd"], categories=["all"])
    assert naming_needed(obj)
    names, cond = accepted_names(obj, [])
    assert names == {"plural": "widgets", "singular": "widget", "shortNames": ["wd"],
                     "kind": "Widget", "listKind": "WidgetList", "categories": ["all"]}
    assert cond == {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                    "message": "no conflicts found"}
    staged = copy.deepcopy(obj)
    staged["status"]["acceptedNames"] = names
    staged["status"]["conditions"] = conditions_after_naming(staged, cond, T0)
    assert staged["status"]["conditions"] == [
        {"type": "NamesAccepted", "status": "True", "lastTransitionTime": T0,
         "reason": "NoConflicts", "message": "no conflicts found"},
        {"type": "Established", "status": "False", "lastTransitionTime": T0,
         "reason": "Installing", "message": "the initial names have been accepted"}]
    assert establishing_needed(staged) and not naming_needed(staged)
    assert conditions_after_establishing(staged, T1)[1] == {
        "type": "Established", "status": "True", "lastTransitionTime": T1,
        "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"}


@pytest.mark.parametrize(("names", "reason", "message"), [
    ({"plural": "gadgets", "kind": "Gadget", "singular": "widget"}, "SingularConflict",
     '"widget" is already in use'),
    ({"plural": "gadgets", "kind": "Gadget", "shortNames": ["wd", "g", "widgets"]},
     "ShortNamesConflict", '["wd" is already in use, "widgets" is already in use]'),
    ({"plural": "gadgets", "kind": "Widget", "singular": "gadget", "listKind": "GadgetList"},
     "KindConflict", '"Widget" is already in use'),
    # several conflicts: the last field checked names the reason (kube overwrites it)
    ({"plural": "gadgets", "kind": "Widget"}, "ListKindConflict", '"WidgetList" is already in use'),
    ({"plural": "gadgets", "kind": "Gadget", "listKind": "WidgetList"}, "ListKindConflict",
     '"WidgetList" is already in use'),
    ({"plural": "wd", "kind": "Gadget"}, "PluralConflict", '"wd" is already in use'),
])
def test_conflicts_in_the_same_group(names: dict[str, Any], reason: str, message: str) -> None:
    first = accept(crd(shortNames=["wd"]))
    second = crd(**names)
    accepted, cond = accepted_names(second, [first])
    assert cond == {"type": "NamesAccepted", "status": "False", "reason": reason,
                    "message": message}
    staged = copy.deepcopy(second)
    staged["status"]["acceptedNames"] = accepted
    conditions = conditions_after_naming(staged, cond, T0)
    assert conditions[1] == {"type": "Established", "status": "False", "lastTransitionTime": T0,
                             "reason": "NotAccepted", "message": "not all names are accepted"}
    assert not establishing_needed({"status": {"conditions": conditions}})


def test_conflicting_fields_keep_their_accepted_values() -> None:
    first = accept(crd())
    second = crd(plural="gadgets", kind="Widget", singular="gadget", listKind="GadgetList")
    names, cond = accepted_names(second, [first])
    assert names == {"plural": "gadgets", "singular": "gadget", "kind": "",
                     "listKind": "GadgetList"}
    assert cond["reason"] == "KindConflict"


def test_other_groups_and_own_names_never_conflict() -> None:
    other_group = accept(crd(group="other.example.com"))
    names, cond = accepted_names(crd(), [other_group])
    assert cond["status"] == "True"
    own = accept(crd(shortNames=["wd"]))
    renamed = copy.deepcopy(own)
    renamed["spec"]["names"]["shortNames"] = ["wd", "wdg"]
    names, cond = accepted_names(renamed, [own])  # the stored copy of itself is skipped
    assert cond["status"] == "True" and names["shortNames"] == ["wd", "wdg"]


def test_freed_names_can_be_taken() -> None:
    first = accept(crd(shortNames=["wd"]))
    blocked = accept(crd(plural="gadgets", kind="Gadget", shortNames=["wd"]), [first])
    assert blocked["status"]["conditions"][0]["reason"] == "ShortNamesConflict"
    again = accept(blocked, [], now=T1)  # the first CRD was deleted
    assert again["status"]["acceptedNames"]["shortNames"] == ["wd"]
    assert again["status"]["conditions"][0] == {
        "type": "NamesAccepted", "status": "True", "lastTransitionTime": T1,
        "reason": "NoConflicts", "message": "no conflicts found"}


def test_last_transition_time_moves_only_with_status() -> None:
    obj = accept(crd())
    _, cond = accepted_names(obj, [])
    again = conditions_after_naming(obj, cond, T1)
    assert [c["lastTransitionTime"] for c in again] == [T0, T0]
    flipped = conditions_after_naming(obj, {**cond, "status": "False", "reason": "X"}, T1)
    assert [c["lastTransitionTime"] for c in flipped] == [T1, T0]
    assert flipped[1]["status"] == "True"  # Established stays True once reached


def test_invalid_ca_bundle_blocks_establishing() -> None:
    obj = crd()
    obj["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
        "clientConfig": {"url": "https://h", "caBundle": "bm90IGEgcGVt"},
        "conversionReviewVersions": ["v1"]}}
    staged = accept(obj)
    assert staged["status"]["conditions"][1] == {
        "type": "Established", "status": "False", "lastTransitionTime": T0,
        "reason": "InvalidCABundle", "message": "The conversion webhook CABundle is invalid"}


def test_terminating_conditions() -> None:
    assert terminating_condition("InstanceDeletionPending") == {
        "type": "Terminating", "status": "True", "reason": "InstanceDeletionPending",
        "message": "CustomResourceDefinition marked for deletion; CustomResource deletion will "
                   "begin soon"}
    assert terminating_condition("InstanceDeletionCompleted")["message"] == "removed all instances"
    assert terminating_condition("NeverEstablished")["status"] == "False"
    assert terminating_condition("InstanceDeletionFailed", "could not list instances: x") == {
        "type": "Terminating", "status": "True", "reason": "InstanceDeletionFailed",
        "message": "could not list instances: x"}
    with pytest.raises(ValueError, match="unknown Terminating reason"):
        terminating_condition("Whatever")
    assert finalizer_outcome(crd()) == "NeverEstablished"
    assert finalizer_outcome(accept(crd())) == "delete"
