"""CertificateSigningRequests' strategies: what a create stores and what each endpoint (the
object, ``/status``, ``/approval``) may change.

Source: kubernetes pkg/registry/certificates/certificates/strategy.go (v1.32):

- create (``PrepareForCreate``): ``spec.username``, ``uid``, ``groups`` and ``extra`` are the
  requesting user's, whatever the body said; the status is emptied (no pre-approved requests);
- the object (``PrepareForUpdate``): spec and status are the stored ones (only metadata moves);
- ``/status``: the stored spec; Approved and Denied conditions are put back as stored when the
  body keeps as many of each (adding or removing them is left to validation to refuse); new
  conditions get ``lastUpdateTime`` and ``lastTransitionTime`` (``populateConditionTimestamps``);
- ``/approval``: the stored spec and status, but the body's conditions (timestamps filled).

Pure: JSON objects in and out; the caller's copy of the new object is changed in place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from kubewire.json_copy import copy_json
from kubewire.times import format_time

APPROVED, DENIED = "Approved", "Denied"


def prepare_create(obj: dict[str, Any], user: str | None, uid: str = "",
                   groups: Sequence[str] = (),
                   extra: Sequence[tuple[str, Sequence[str]]] = ()) -> dict[str, Any]:
    """The requester's identity in the spec (``user`` None: no user in the request, as for
    the server's own writes) and an empty status."""
    spec = obj.get("spec")
    spec = dict(spec) if isinstance(spec, dict) else {}
    for key in ("username", "uid", "groups", "extra"):
        spec.pop(key, None)
    if user is not None:
        if user:
            spec["username"] = user
        if uid:
            spec["uid"] = uid
        if groups:
            spec["groups"] = list(groups)
        if extra:
            spec["extra"] = {key: list(values) for key, values in extra}
    # stored in the Go struct's field order, as kube encodes it
    ordered = {key: spec[key] for key in _SPEC_ORDER if key in spec}
    ordered.update((key, value) for key, value in spec.items() if key not in ordered)
    obj["spec"] = ordered
    obj["status"] = {}
    return obj


_SPEC_ORDER = ("request", "signerName", "expirationSeconds", "usages", "username", "uid",
               "groups", "extra")


def prepare_update(old: Mapping[str, Any], new: dict[str, Any], subresource: str,
                   now: datetime) -> dict[str, Any]:
    """``new`` as the endpoint's strategy leaves it (metadata is the body's on every one)."""
    new["spec"] = copy_json(old.get("spec"))
    if subresource == "status":
        status = new.get("status")
        status = dict(status) if isinstance(status, dict) else {}
        conditions = _conditions(status)
        for kind in (APPROVED, DENIED):
            _preserve_instances(conditions, _conditions(old.get("status")), kind)
        if conditions:
            status["conditions"] = conditions
        _populate_timestamps(conditions, _conditions(old.get("status")), now)
        new["status"] = status
    elif subresource == "approval":
        wanted = _conditions(new.get("status"))
        _populate_timestamps(wanted, _conditions(old.get("status")), now)
        status = copy_json(old.get("status"))
        status = status if isinstance(status, dict) else {}
        if wanted:
            status["conditions"] = wanted
        else:
            status.pop("conditions", None)
        new["status"] = status
    else:
        new["status"] = copy_json(old.get("status"))
    if new.get("status") is None:
        new.pop("status", None)
    return new


def _conditions(status: Any) -> list[Any]:
    found = status.get("conditions") if isinstance(status, dict) else None
    return list(found) if isinstance(found, list) else []


def _preserve_instances(new: list[Any], old: list[Any], kind: str) -> None:
    """``preserveConditionInstances``: the stored instances of ``kind`` in place of the body's,
    when there are as many."""
    old_at = [i for i, c in enumerate(old) if isinstance(c, dict) and c.get("type") == kind]
    new_at = [i for i, c in enumerate(new) if isinstance(c, dict) and c.get("type") == kind]
    if len(old_at) != len(new_at):
        return
    for o, n in zip(old_at, new_at, strict=True):
        new[n] = copy_json(old[o])


def _populate_timestamps(new: list[Any], old: list[Any], now: datetime) -> None:
    """``populateConditionTimestamps``: a missing ``lastUpdateTime`` is now; a missing
    ``lastTransitionTime`` is the stored one of a condition of the same type and status, else
    now."""
    stamp = format_time(now)
    for i, condition in enumerate(new):
        if not isinstance(condition, dict):
            continue
        condition = dict(condition)
        if not condition.get("lastUpdateTime"):
            condition["lastUpdateTime"] = stamp
        if not condition.get("lastTransitionTime"):
            transition = stamp
            for before in old:
                if (isinstance(before, dict) and before.get("type") == condition.get("type")
                        and before.get("status") == condition.get("status")
                        and before.get("lastTransitionTime")):
                    transition = before["lastTransitionTime"]
                    break
            condition["lastTransitionTime"] = transition
        new[i] = condition
