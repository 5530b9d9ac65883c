"""Cells of HorizontalPodAutoscalers, either version: each formatter converts an autoscaling/v1
object to v2 first, as kube's printer works on the internal type (v2's layout).

Source: ``kubernetes/kubernetes:pkg/printers/internalversion/printers.go`` v1.32
(``printHorizontalPodAutoscaler``, ``formatHPAMetrics``: at most two metrics, then
``+ N more...``; a resource metric reads ``cpu: <current>/<target>``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from kubewire.hpa_conversion import as_v2
from kubewire.json_types import JSON
from kubewire.server.tables.cells import NONE, UNKNOWN, UNSET, Cell, as_dict, as_int

_SHOWN = 2


def _hpa(value: JSON) -> dict[str, Any]:
    return dict(as_v2(as_dict(value)))


def _text(value: Any) -> str:
    """A Quantity's ``String()`` (stored canonical); a nil one prints as ``0``."""
    return str(value) if value is not None else "0"


def _metric_text(spec: dict[str, Any], status: dict[str, Any] | None) -> str:
    kind = spec.get("type")
    member = {"External": "external", "Pods": "pods", "Object": "object",
              "Resource": "resource", "ContainerResource": "containerResource"}.get(str(kind))
    if member is None:
        return "<unknown type>"
    src, target = as_dict(spec.get(member)), as_dict(as_dict(spec.get(member)).get("target"))
    current = as_dict(as_dict(status.get(member)).get("current")) \
        if status is not None and isinstance(status.get(member), dict) else None
    if member in ("external", "object"):
        if target.get("averageValue") is not None:
            shown = UNKNOWN if current is None or current.get("averageValue") is None \
                else _text(current["averageValue"])
            return f"{shown}/{_text(target['averageValue'])} (avg)"
        shown = UNKNOWN if current is None else _text(current.get("value"))
        return f"{shown}/{_text(target.get('value'))}"
    if member == "pods":
        shown = UNKNOWN if current is None else _text(current.get("averageValue"))
        return f"{shown}/{_text(target.get('averageValue'))}"
    name = str(src.get("name") or "")
    if target.get("averageValue") is not None:
        shown = UNKNOWN if current is None else _text(current.get("averageValue"))
        return f"{name}: {shown}/{_text(target['averageValue'])}"
    shown = UNKNOWN if current is None or current.get("averageUtilization") is None \
        else f"{as_int(current['averageUtilization'])}%"
    wanted = "<auto>" if target.get("averageUtilization") is None \
        else f"{as_int(target['averageUtilization'])}%"
    return f"{name}: {shown}/{wanted}"


def hpa_targets(value: JSON, now: datetime) -> Cell:
    """``formatHPAMetrics`` of the whole object."""
    hpa = _hpa(value)
    specs = [as_dict(m) for m in as_dict(hpa.get("spec")).get("metrics") or ()]
    if not specs:
        return NONE
    statuses = [as_dict(m) for m in as_dict(hpa.get("status")).get("currentMetrics") or ()]
    shown = [_metric_text(spec, statuses[i] if i < len(statuses) else None)
             for i, spec in enumerate(specs)]
    text = ", ".join(shown[:_SHOWN])
    return text if len(shown) <= _SHOWN else f"{text} + {len(shown) - _SHOWN} more..."


def hpa_reference(value: JSON, now: datetime) -> Cell:
    """REFERENCE: ``Kind/name`` of the scale target."""
    ref = as_dict(as_dict(_hpa(value).get("spec")).get("scaleTargetRef"))
    return f"{ref.get('kind') or ''}/{ref.get('name') or ''}"


def hpa_min_pods(value: JSON, now: datetime) -> Cell:
    """MINPODS: ``<unset>`` without minReplicas."""
    low = as_dict(value).get("minReplicas")
    return UNSET if low is None else str(as_int(low))
