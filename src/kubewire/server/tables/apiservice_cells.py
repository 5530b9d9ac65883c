"""Cells of apiregistration.k8s.io APIServices (pure). kube-aggregator prints them with its own
table convertor (``pkg/registry/apiservice/etcd/etcd.go`` ``ConvertToTable``), not printers.go:
SERVICE is ``namespace/name`` or ``Local``; AVAILABLE the ``Available`` condition's status,
``Status (Reason)`` when not True and a reason is given, ``Unknown`` without the condition.
"""

from __future__ import annotations

from datetime import datetime

from kubewire.json_types import JSON
from kubewire.server.tables.cells import Cell, as_dict, as_str, dicts

_UNKNOWN = "Unknown"  # apiregistration.ConditionUnknown


def apiservice_service(value: JSON, now: datetime) -> Cell:
    """SERVICE, from ``spec.service``."""
    if not isinstance(value, dict):
        return "Local"
    return f"{as_str(value.get('namespace'))}/{as_str(value.get('name'))}"


def apiservice_available(value: JSON, now: datetime) -> Cell:
    """AVAILABLE, from ``status``."""
    for cond in dicts(as_dict(value).get("conditions")):
        if cond.get("type") != "Available":
            continue
        status, reason = as_str(cond.get("status")), as_str(cond.get("reason"))
        return f"{status} ({reason})" if status != "True" and reason else status
    return _UNKNOWN
