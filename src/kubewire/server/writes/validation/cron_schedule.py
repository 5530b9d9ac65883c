"""A CronJob schedule's parse error, as robfig/cron v3's ``ParseStandard`` words it (pure).

kube validates ``spec.schedule`` with ``cron.ParseStandard`` (``pkg/apis/batch/validation``)
and puts the parser's error text in the field error; clients show it. Written by hand: the
texts are robfig/cron v3.0.1's (``parser.go``: ``Parse``, ``normalizeFields``, ``getField``,
``getRange``, ``parseIntOrName``, ``mustParseInt``, ``parseDescriptor``), and no Python cron
library words its errors that way. Only the error is computed; kubewire never runs schedules.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["cron_schedule_error"]

# (min, max, names) of the five standard fields, after the implicit seconds field
_SECONDS = (0, 59, None)
_MONTHS = {name: i for i, name in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1)}
_DAYS = {name: i for i, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
_FIELDS: tuple[tuple[int, int, dict[str, int] | None], ...] = (
    _SECONDS, (0, 59, None), (0, 23, None), (1, 31, None), (1, 12, _MONTHS), (0, 6, _DAYS))
_DESCRIPTORS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight",
                "@hourly")
_INT = re.compile(r"[+-]?[0-9]+")
_GO_DURATION_UNIT = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")


class _CronError(Exception):
    pass


def _atoi(expr: str) -> int:
    """Go's ``strconv.Atoi`` as ``mustParseInt`` wraps it."""
    if not _INT.fullmatch(expr):
        raise _CronError(f'failed to parse int from {expr}: strconv.Atoi: parsing "{expr}": '
                         "invalid syntax")
    value = int(expr)
    if not -(2**63) <= value < 2**63:
        raise _CronError(f'failed to parse int from {expr}: strconv.Atoi: parsing "{expr}": '
                         "value out of range")
    if value < 0:
        raise _CronError(f"negative number ({value}) not allowed: {expr}")
    return value


def _int_or_name(expr: str, names: dict[str, int] | None) -> int:
    if names is not None and expr.lower() in names:
        return names[expr.lower()]
    return _atoi(expr)


def _bounds(low_and_high: list[str], expr: str, low: int, high: int,
            names: dict[str, int] | None) -> tuple[int, int]:
    if low_and_high[0] in ("*", "?"):
        return low, high
    start = _int_or_name(low_and_high[0], names)
    if len(low_and_high) == 1:
        return start, start
    if len(low_and_high) == 2:
        return start, _int_or_name(low_and_high[1], names)
    raise _CronError(f"too many hyphens: {expr}")


def _check_range(expr: str, low: int, high: int, names: dict[str, int] | None) -> None:
    """``getRange``'s checks (the bits it computes are not needed)."""
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    start, end = _bounds(low_and_high, expr, low, high, names)
    step = 1
    if len(range_and_step) == 2:
        step = _atoi(range_and_step[1])
        if len(low_and_high) == 1:  # "N/step" means "N-max/step"
            end = high
    elif len(range_and_step) > 2:
        raise _CronError(f"too many slashes: {expr}")
    if start < low:
        raise _CronError(f"beginning of range ({start}) below minimum ({low}): {expr}")
    if end > high:
        raise _CronError(f"end of range ({end}) above maximum ({high}): {expr}")
    if start > end:
        raise _CronError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise _CronError(f"step of range should be a positive number: {expr}")


def _go_fields(fields: list[str]) -> str:
    return "[" + " ".join(fields) + "]"


def _duration_error(text: str) -> str:
    """Go's ``time.ParseDuration`` error for ``text`` ("" when it parses)."""
    body = text.lstrip("+-")
    if body == "0":
        return ""
    pos = 0
    if not body:
        return f'time: invalid duration "{text}"'
    while pos < len(body):
        match = _GO_DURATION_UNIT.match(body, pos)
        if match is None or match.group(1) in ("", "."):
            if match is None and re.match(r"[0-9.]+", body[pos:]):
                number = re.match(r"[0-9.]*", body[pos:])
                rest = body[pos + (number.end() if number else 0):]
                unit = re.match(r"[^0-9.]*", rest)
                if unit is None or not unit.group(0):
                    return f'time: missing unit in duration "{text}"'
                return f'time: unknown unit "{unit.group(0)}" in duration "{text}"'
            return f'time: invalid duration "{text}"'
        pos = match.end()
    return ""


def _descriptor_error(spec: str) -> str:
    """``parseDescriptor``'s error ("" for a known descriptor)."""
    if spec in _DESCRIPTORS:
        return ""
    every = "@every "
    if spec.startswith(every):
        text = spec[len(every):]
        problem = _duration_error(text)
        return f"failed to parse duration {spec}: {problem}" if problem else ""
    return f"unrecognized descriptor: {spec}"


def cron_schedule_error(spec: str, location_error: Callable[[str], str]) -> str:
    """The text of ``cron.ParseStandard(spec)``'s error, "" when it parses.
    ``location_error`` is Go's ``time.LoadLocation`` error text for a zone name ("" if known)."""
    if not spec:
        return "empty spec string"
    if spec.startswith(("TZ=", "CRON_TZ=")):
        space, eq = spec.find(" "), spec.find("=")
        if space < 0:  # Go slices spec[eq+1:-1] and panics; kube answers with the panic
            return f"provided bad location {spec[eq + 1:]}: unknown time zone {spec[eq + 1:]}"
        name = spec[eq + 1:space]
        problem = location_error(name)
        if problem:
            return f"provided bad location {name}: {problem}"
        spec = spec[space:].strip()
    if spec.startswith("@"):
        return _descriptor_error(spec)
    fields = spec.split()
    if len(fields) != 5:
        return f"expected exactly 5 fields, found {len(fields)}: {_go_fields(fields)}"
    try:
        for expr, (low, high, names) in zip(["0", *fields], _FIELDS, strict=True):
            for part in (p for p in expr.split(",") if p):
                _check_range(part, low, high, names)
    except _CronError as err:
        return str(err)
    return ""
