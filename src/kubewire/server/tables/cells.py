"""Table cells as kube-apiserver's printers render them: ages, counts, lists, selectors.

Each formatter is a pure function ``(value, now) -> Cell``: ``value`` is what the column's path
selects (the whole object when the path is empty) and ``now`` is the clock the ages are measured
against. Sources: ``kubernetes/kubernetes:pkg/printers/internalversion/printers.go`` and
``apimachinery:pkg/util/duration/duration.go`` (``HumanDuration``); none of them raises.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from kubewire.json_types import JSON
from kubewire.selectors.errors import SelectorError
from kubewire.selectors.labels import label_selector_from_match
from kubewire.times import format_time, parse_time_or_none

Cell = str | int | float | bool | None
"""One table cell: kube sends strings, integers, numbers, booleans or null."""

UNKNOWN = "<unknown>"
NONE = "<none>"
UNSET = "<unset>"
LIST_LIMIT = 3  # printers.go shows three hosts, ports or endpoints, then "+ N more..."


# -- time ------------------------------------------------------------------------------------

def human_duration(delta: timedelta) -> str:
    """``duration.HumanDuration``: ``45s``, ``5m3s``, ``3h10m``, ``2d4h``, ``400d``, ``3y20d``."""
    nanos = (delta.days * 86400 + delta.seconds) * 10**9 + delta.microseconds * 1000
    seconds = math.trunc(nanos / 10**9)
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes = nanos // (60 * 10**9)
    if minutes < 10:
        rest = seconds % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = nanos // (3600 * 10**9)
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    return _human_days(hours)


def _human_days(hours: int) -> str:
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        years = hours // 24 // 365
        return f"{years}y{rest}d" if rest else f"{years}y"
    return f"{hours // 24 // 365}y"


def since(value: JSON, now: datetime) -> str:
    """``translateTimestampSince``: the age of a timestamp, ``<unknown>`` when it is unset."""
    when = parse_time_or_none(value)
    return UNKNOWN if when is None else human_duration(now - when)


def age(value: JSON, now: datetime) -> Cell:
    return since(value, now)


def rfc3339(value: JSON, now: datetime) -> Cell:
    """The default table's ``Created At``: the timestamp in UTC, second precision."""
    return format_time(parse_time_or_none(value) or datetime(1, 1, 1, tzinfo=UTC))


# -- generic ---------------------------------------------------------------------------------

def text(value: JSON, now: datetime) -> Cell:
    """A string field as Go prints its zero value: missing is ``""``."""
    return value if isinstance(value, str) else ""


def text_or_none(value: JSON, now: datetime) -> Cell:
    return value if isinstance(value, str) and value else NONE


def set_or_none(value: JSON, now: datetime) -> Cell:
    """An optional (pointer) string: ``<none>`` only when it is absent."""
    return value if isinstance(value, str) else NONE


def text_or_unknown(value: JSON, now: datetime) -> Cell:
    return value if isinstance(value, str) and value else UNKNOWN


def as_int(value: JSON) -> int:
    """An integer field as Go reads it: missing (or not an integer) is 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def integer(value: JSON, now: datetime) -> Cell:
    """An integer cell (``int64(...)`` in the printers)."""
    return as_int(value)


def count(value: JSON, now: datetime) -> Cell:
    """``int64(len(...))`` of a map or list."""
    return len(value) if isinstance(value, dict | list) else 0


def trimmed(value: JSON, now: datetime) -> Cell:
    """``strings.TrimSpace``."""
    return value.strip() if isinstance(value, str) else ""


def labels(value: JSON, now: datetime) -> Cell:
    """``labels.FormatLabels``: sorted ``k=v`` pairs, ``<none>`` when empty."""
    if not isinstance(value, dict) or not value:
        return NONE
    return ",".join(f"{k}={value[k]}" for k in sorted(value))


def selector_or_none(value: JSON, now: datetime) -> Cell:
    """``metav1.FormatLabelSelector``: ``<none>`` when empty, ``<error>`` when invalid."""
    try:
        formatted = str(label_selector_from_match(value if isinstance(value, dict) else {}))
    except SelectorError:
        return "<error>"
    return formatted or NONE


def selector(value: JSON, now: datetime) -> Cell:
    """``LabelSelectorAsSelector(...).String()``: ``""`` when empty, ``<invalid>`` on error."""
    if not isinstance(value, dict):
        return ""
    try:
        return str(label_selector_from_match(value))
    except SelectorError:
        return "<invalid>"


def container_names(value: JSON, now: datetime) -> Cell:
    """``layoutContainerCells`` names: comma-joined, in spec order."""
    return ",".join(as_str(c.get("name")) for c in dicts(value))


def container_images(value: JSON, now: datetime) -> Cell:
    return ",".join(as_str(c.get("image")) for c in dicts(value))


def replicas_ready(value: JSON, now: datetime) -> Cell:
    """Deployments' READY: ``status.readyReplicas/spec.replicas``. Stored Deployments always
    carry replicas (defaulted to 1); an object without it (a bookmark's empty object) prints
    Go's zero, as kube's printer does with the internal type."""
    obj = as_dict(value)
    ready = as_int(as_dict(obj.get("status")).get("readyReplicas"))
    desired = as_int(as_dict(obj.get("spec")).get("replicas", 0))
    return f"{ready}/{desired}"


def list_with_more(items: list[str], total: int) -> str:
    """``listWithMoreString``: ``a,b,c + 2 more...``; ``<unset>`` for an empty list."""
    joined = ",".join(items[:LIST_LIMIT])
    if total > LIST_LIMIT:
        return f"{joined} + {total - LIST_LIMIT} more..."
    return joined or UNSET


def as_dict(value: JSON) -> dict[str, JSON]:
    return value if isinstance(value, dict) else {}


def dicts(value: JSON) -> list[dict[str, JSON]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def as_str(value: JSON) -> str:
    return value if isinstance(value, str) else ""


def get_path(obj: JSON, path: str) -> JSON:
    """The value at a dotted path (``spec.template.spec.containers``); None when missing."""
    value = obj
    for part in path.split(".") if path else ():
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value
