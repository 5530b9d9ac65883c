"""What the CRD controllers decide about names and conditions (crds.md §2.2-2.5).

Sources (apiextensions-apiserver v0.32): ``pkg/controller/status/naming_controller.go``
(``getAcceptedNamesForGroup``, ``calculateNamesAndConditions``, ``equalToAcceptedOrFresh``),
``pkg/controller/establish/establishing_controller.go`` (``sync``),
``pkg/controller/finalizer/crd_finalizer.go`` and ``pkg/registry/customresourcedefinition/
etcd.go`` (the Terminating conditions), ``pkg/apihelpers/helpers.go`` (``SetCRDCondition``).

Names are claimed per group in two namespaces: resources (plural, singular, short names) and
kinds (kind, listKind), from the *accepted* names of every CRD of the group, the CRD itself
included (kube's lister holds it too). A requested name equal to the CRD's own accepted one is
never a conflict; a conflicting field keeps its accepted value, the others take the request.

Built-in kinds claim nothing here: kube's built-in handlers simply shadow a CRD's paths.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kubewire.json_types import JSON
from kubewire.server.apiextensions.crd.crd_internal import (
    ESTABLISHED,
    NAMES_ACCEPTED,
    TERMINATING,
    as_dict,
    as_list,
    as_str,
    find_condition,
    is_condition_true,
    strings,
)
from kubewire.server.apiextensions.crd.webhook_config import validate_ca_bundle

_NAME_KEYS = ("plural", "singular", "shortNames", "kind", "listKind", "categories")


def _claimed(crd: Mapping[str, JSON],
             others: Iterable[Mapping[str, JSON]]) -> tuple[set[str], set[str]]:
    """``getAcceptedNamesForGroup``: (resource names, kind names) claimed in the CRD's group."""
    group = as_str(as_dict(crd.get("spec")).get("group"))
    name = as_str(as_dict(crd.get("metadata")).get("name"))
    resources: set[str] = set()
    kinds: set[str] = set()
    every = [crd, *(o for o in others
                    if as_str(as_dict(o.get("metadata")).get("name")) != name)]
    for item in every:
        if as_str(as_dict(item.get("spec")).get("group")) != group:
            continue
        accepted = as_dict(as_dict(item.get("status")).get("acceptedNames"))
        resources.add(as_str(accepted.get("plural")))
        resources.add(as_str(accepted.get("singular")))
        resources.update(strings(accepted.get("shortNames")))
        kinds.add(as_str(accepted.get("kind")))
        kinds.add(as_str(accepted.get("listKind")))
    return resources, kinds


def _conflict(requested: str, accepted: str, used: set[str]) -> str | None:
    """``equalToAcceptedOrFresh``: the error text, or None when the name may be taken."""
    if requested == accepted or requested not in used:
        return None
    return f'"{requested}" is already in use'


def accepted_names(crd: Mapping[str, JSON], others: Iterable[Mapping[str, JSON]],
                   ) -> tuple[dict[str, JSON], dict[str, JSON]]:
    """The naming controller's decision: (new ``status.acceptedNames``, the ``NamesAccepted``
    condition as ``{type, status, reason, message}``). ``others`` are the other stored CRDs (an
    entry named like ``crd`` is skipped: ``crd`` itself is the current version)."""
    resources, kinds = _claimed(crd, others)
    requested = as_dict(as_dict(crd.get("spec")).get("names"))
    accepted = as_dict(as_dict(crd.get("status")).get("acceptedNames"))
    names: dict[str, JSON] = {k: accepted[k] for k in _NAME_KEYS if k in accepted}
    reason = message = ""
    for key, reason_text, used in (("plural", "PluralConflict", resources),
                                   ("singular", "SingularConflict", resources)):
        problem = _conflict(as_str(requested.get(key)), as_str(accepted.get(key)), used)
        if problem:
            reason, message = reason_text, problem
        else:
            _set_name(names, key, requested.get(key))
    want_short = as_list(requested.get("shortNames"))
    have_short = as_list(accepted.get("shortNames"))
    if want_short != have_short:
        owned = set(strings(have_short))
        problems = list(dict.fromkeys(p for s in strings(want_short) if s not in owned
                                      for p in [_conflict(s, "", resources)] if p))
        if problems:  # utilerrors.NewAggregate: de-duplicated, bracketed when several
            reason = "ShortNamesConflict"
            message = problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
        else:
            _set_name(names, "shortNames", requested.get("shortNames"))
    for key, reason_text in (("kind", "KindConflict"), ("listKind", "ListKindConflict")):
        problem = _conflict(as_str(requested.get(key)), as_str(accepted.get(key)), kinds)
        if problem:
            reason, message = reason_text, problem
        else:
            _set_name(names, key, requested.get(key))
    _set_name(names, "categories", requested.get("categories"))
    if reason:
        condition = _condition(NAMES_ACCEPTED, "False", reason, message)
    else:
        condition = _condition(NAMES_ACCEPTED, "True", "NoConflicts", "no conflicts found")
    return {k: names[k] for k in _NAME_KEYS if k in names}, condition


def _set_name(names: dict[str, JSON], key: str, value: JSON) -> None:
    """Take the requested value; an empty one is dropped as ``omitempty`` would drop it
    (plural and kind are always written: kube's v1 type has no omitempty on them)."""
    if value in (None, "", []) and key not in ("plural", "kind"):
        names.pop(key, None)
    else:
        names[key] = value if value is not None else ""


def _condition(kind: str, status: str, reason: str, message: str) -> dict[str, JSON]:
    return {"type": kind, "status": status, "reason": reason, "message": message}


def set_condition(conditions: list[dict[str, JSON]], new: Mapping[str, JSON],
                  now: str) -> list[dict[str, JSON]]:
    """``SetCRDCondition`` on a copy: replace the condition of ``new``'s type (its
    ``lastTransitionTime`` moves to ``now`` only when the status changes or was unset), or append
    it. Conditions come out in kube's field order: type, status, lastTransitionTime, reason,
    message."""
    out = [dict(c) for c in conditions]
    for i, cond in enumerate(out):
        if cond.get("type") == new.get("type"):
            moved = cond.get("status") != new.get("status") or not cond.get("lastTransitionTime")
            out[i] = _ordered(new, now if moved else cond["lastTransitionTime"])
            return out
    out.append(_ordered(new, now))
    return out


def _ordered(cond: Mapping[str, JSON], when: JSON) -> dict[str, JSON]:
    return {"type": cond.get("type"), "status": cond.get("status"), "lastTransitionTime": when,
            "reason": cond.get("reason", ""), "message": cond.get("message", "")}


def _conditions(crd: Mapping[str, JSON]) -> list[dict[str, JSON]]:
    return [c for c in as_list(as_dict(crd.get("status")).get("conditions"))
            if isinstance(c, dict)]


def conditions_after_naming(crd: Mapping[str, JSON], names_condition: Mapping[str, JSON],
                            now: str) -> list[dict[str, JSON]]:
    """The conditions the naming controller writes with its accepted names: ``NamesAccepted``
    as decided, and ``Established`` as kept, or ``False NotAccepted`` when absent, or
    ``False Installing`` once names are accepted and it is not yet True. The establishing
    controller then turns that into ``True`` (``conditions_after_establishing``)."""
    established = find_condition(crd, ESTABLISHED) or _condition(
        ESTABLISHED, "False", "NotAccepted", "not all names are accepted")
    if established.get("status") != "True" and names_condition.get("status") == "True":
        established = _condition(ESTABLISHED, "False", "Installing",
                                 "the initial names have been accepted")
    conditions = set_condition(_conditions(crd), names_condition, now)
    return set_condition(conditions, established, now)


def naming_needed(crd: Mapping[str, JSON]) -> bool:
    """The naming controller acts only while ``spec.names`` differs from the accepted names."""
    spec_names = as_dict(as_dict(crd.get("spec")).get("names"))
    accepted = as_dict(as_dict(crd.get("status")).get("acceptedNames"))
    return any(_empty_as_none(spec_names.get(k)) != _empty_as_none(accepted.get(k))
               for k in _NAME_KEYS)


def _empty_as_none(value: JSON) -> JSON:
    return None if value in ("", [], None) else value


def establishing_needed(crd: Mapping[str, JSON]) -> bool:
    """The establishing controller acts when NamesAccepted is True and Established is not."""
    return is_condition_true(crd, NAMES_ACCEPTED) and not is_condition_true(crd, ESTABLISHED)


def conditions_after_establishing(crd: Mapping[str, JSON], now: str) -> list[dict[str, JSON]]:
    """The establishing controller's write: ``Established`` True ``InitialNamesAccepted``, or
    False ``InvalidCABundle`` when the conversion webhook's CA bundle does not load."""
    conversion = as_dict(as_dict(crd.get("spec")).get("conversion"))
    client = as_dict(conversion.get("webhook")).get("clientConfig")
    if isinstance(client, dict) and validate_ca_bundle("", client.get("caBundle")):
        established = _condition(ESTABLISHED, "False", "InvalidCABundle",
                                 "The conversion webhook CABundle is invalid")
    else:
        established = _condition(ESTABLISHED, "True", "InitialNamesAccepted",
                                 "the initial names have been accepted")
    return set_condition(_conditions(crd), established, now)


TERMINATING_REASONS: Mapping[str, tuple[str, str]] = {
    "InstanceDeletionPending": (
        "True", "CustomResourceDefinition marked for deletion; CustomResource deletion will "
                "begin soon"),
    "InstanceDeletionInProgress": ("True", "CustomResource deletion is in progress"),
    "InstanceDeletionCompleted": ("False", "removed all instances"),
    "NeverEstablished": ("False", "resource was never established"),
    "OverlappingBuiltInResource": ("False", "instances overlap with built-in resources in storage"),
}
"""Terminating reasons with fixed texts: reason -> (status, message)."""

_DETAILED_TERMINATING = {
    "InstanceDeletionFailed": "True",  # message "could not list instances: ..." / "could not
    "InstanceDeletionCheck": "True",   # issue all deletes: ..." / "could not confirm zero ..."
}


def terminating_condition(reason: str, detail: str = "") -> dict[str, JSON]:
    """The ``Terminating`` condition of one deletion step (crds.md §2.5) as
    ``{type, status, reason, message}``: ``reason`` is one of ``TERMINATING_REASONS``, or
    ``InstanceDeletionFailed``/``InstanceDeletionCheck`` with ``detail`` as the message (kube's
    ``could not list instances: <err>``, ``could not issue all deletes: <err>``,
    ``could not confirm zero CustomResources remaining: <err>``)."""
    if reason in TERMINATING_REASONS:
        status, message = TERMINATING_REASONS[reason]
        return _condition(TERMINATING, status, reason, message)
    if reason in _DETAILED_TERMINATING:
        return _condition(TERMINATING, _DETAILED_TERMINATING[reason], reason, detail)
    raise ValueError(f"unknown Terminating reason {reason!r}")


def finalizer_outcome(crd: Mapping[str, JSON],
                      overlapping_builtin: Iterable[tuple[str, str]] = (
                          ("apiregistration.k8s.io", "apiservices"),
                          ("apiextensions.k8s.io", "customresourcedefinitions"))) -> str:
    """What the finalizer controller does with a deleted CRD: ``OverlappingBuiltInResource``
    (skip instance deletion), ``delete`` (Established: delete the instances, then
    ``InstanceDeletionCompleted``) or ``NeverEstablished``."""
    spec = as_dict(crd.get("spec"))
    pair = (as_str(spec.get("group")), as_str(as_dict(spec.get("names")).get("plural")))
    if pair in set(overlapping_builtin):
        return "OverlappingBuiltInResource"
    return "delete" if is_condition_true(crd, ESTABLISHED) else "NeverEstablished"
