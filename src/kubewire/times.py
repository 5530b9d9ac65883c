"""``metav1.Time`` and ``metav1.MicroTime`` as text: one formatter and one parser for each use.

- ``format_time``: RFC 3339 in UTC to the second with ``Z`` (``Time.MarshalJSON``); every write
  formats "now" at least once, so the text of the last second is kept;
- ``format_micro_time``: the same with six fraction digits (``MicroTime.MarshalJSON``);
- ``parse_time``: any RFC 3339 text back to an aware ``datetime`` (raises ``ValueError``);
- ``parse_time_or_none``: the same for values read out of stored objects, where a missing or
  malformed time is an answer (``<unknown>``, no deadline), not an error.

Times without an offset are taken as UTC, the zone kube-apiserver writes. Go's own parse errors
(the texts a client sees for a bad time) live in ``kubewire.schema.go_values``.
Core module: imports nothing of kubewire.
"""

from __future__ import annotations

from datetime import MAXYEAR, UTC, datetime, timedelta
from functools import lru_cache
from typing import Any


def format_time(moment: datetime) -> str:
    """``metav1.Time`` text: RFC 3339, UTC, whole seconds, ``Z``."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    # every write formats "now" (often twice): strftime once per second, not per call, and
    # a "now" in the same second as the last one is its text without any conversion
    last = _last_second
    if moment.tzinfo is UTC and last[0] <= moment < last[1]:
        return last[2]
    second = moment.astimezone(UTC).replace(microsecond=0)
    text = _format_second(second)
    if second.year < MAXYEAR:  # the next second must exist
        _remember_second(second, text)
    return text


def _remember_second(second: datetime, text: str) -> None:
    global _last_second
    _last_second = (second, second + _ONE_SECOND, text)


_ONE_SECOND = timedelta(seconds=1)
_last_second = (datetime.max.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC), "")


@lru_cache(maxsize=16)
def _format_second(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(moment: datetime) -> str:
    """``metav1.MicroTime`` text: RFC 3339 with microseconds, in UTC."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime:
    """Parse any RFC 3339 time (``Z``, offsets, fractions); naive times are taken as UTC."""
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def parse_time_or_none(value: Any) -> datetime | None:
    """An RFC 3339 ``Time``/``MicroTime``, or None for missing, empty or malformed values."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_time(value)
    except ValueError:
        return None


__all__ = ["format_micro_time", "format_time", "parse_time", "parse_time_or_none"]
