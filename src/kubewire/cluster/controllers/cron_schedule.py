"""CronJob schedules as kube reads them: ``github.com/robfig/cron/v3``'s ``ParseStandard``
(five fields minute hour day-of-month month day-of-week, or a descriptor ``@yearly``,
``@annually``, ``@monthly``, ``@weekly``, ``@daily``, ``@midnight``, ``@hourly``, ``@every
<duration>``, optionally prefixed ``TZ=<zone>``/``CRON_TZ=<zone>``) and ``Next``; and the
CronJob controller's ``mostRecentScheduleTime`` (``pkg/controller/cronjob/utils.go``).

Written by hand: robfig/cron is Go; the Python cron libraries differ from it in the details
kube's users meet (the day-of-month/day-of-week "star" rule, ``?``, ``N/step`` meaning
``N-max/step``, the error texts), so the parser follows robfig's ``parser.go`` and
``spec.go`` closely. Times are epoch seconds; fields are matched in the schedule's zone
(``zoneinfo``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

STAR_BIT = 1 << 63
MANY_MISSED = 100  # more missed start times than this: TooManyMissedTimes


class ScheduleError(ValueError):
    """An unparseable schedule; the message is robfig's."""


@dataclass(frozen=True, slots=True)
class _Bounds:
    low: int
    high: int
    names: dict[str, int]


_MONTHS = {n: i + 1 for i, n in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul",
                                           "aug", "sep", "oct", "nov", "dec"))}
_DAYS = {n: i for i, n in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
_FIELDS = (_Bounds(0, 59, {}), _Bounds(0, 23, {}), _Bounds(1, 31, {}), _Bounds(1, 12, _MONTHS),
           _Bounds(0, 6, _DAYS))


@dataclass(frozen=True, slots=True)
class Schedule:
    """A parsed schedule: bit sets per field (``SpecSchedule``), or a constant delay
    (``@every``)."""

    minute: int = 0
    hour: int = 0
    dom: int = 0
    month: int = 0
    dow: int = 0
    zone: tzinfo = UTC
    every_s: int = 0

    def next(self, after: float) -> float | None:
        """``Next``: the first activation strictly after ``after`` (None: none in five
        years, robfig's zero time)."""
        if self.every_s:
            return float(int(after) + self.every_s)
        return _next_spec(self, after)


def _parse_int(text: str) -> int:
    if not re.fullmatch(r"[+-]?\d+", text):
        raise ScheduleError(f"failed to parse int from {text}: strconv.Atoi: parsing "
                            f'"{text}": invalid syntax')
    return int(text)


def _value(text: str, bounds: _Bounds) -> int:
    found = bounds.names.get(text.lower())
    return found if found is not None else _parse_int(text)


def _span(low_and_high: list[str], bounds: _Bounds, expr: str) -> tuple[int, int, int]:
    """The start, end and star bit of a range's ``a``, ``a-b`` or ``*``/``?`` part."""
    if low_and_high[0] in ("*", "?"):
        return bounds.low, bounds.high, STAR_BIT
    start = _value(low_and_high[0], bounds)
    if len(low_and_high) == 1:
        return start, start, 0
    if len(low_and_high) == 2:
        return start, _value(low_and_high[1], bounds), 0
    raise ScheduleError(f"too many hyphens: {expr}")


def _range(expr: str, bounds: _Bounds) -> int:
    """robfig's ``getRange``: ``*``/``?``, ``a``, ``a-b``, each with an optional ``/step``."""
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    single = len(low_and_high) == 1
    start, end, extra = _span(low_and_high, bounds, expr)
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _parse_int(range_and_step[1])
        if single:
            end = bounds.high
        if step > 1:
            extra = 0
    else:
        raise ScheduleError(f"too many slashes: {expr}")
    if start < bounds.low:
        raise ScheduleError(f"beginning of range ({start}) below minimum ({bounds.low}): {expr}")
    if end > bounds.high:
        raise ScheduleError(f"end of range ({end}) above maximum ({bounds.high}): {expr}")
    if start > end:
        raise ScheduleError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise ScheduleError(f"step of range should be a positive number: {expr}")
    bits = 0
    for value in range(start, end + 1, step):
        bits |= 1 << value
    return bits | extra


def _field(text: str, bounds: _Bounds) -> int:
    bits = 0
    for expr in text.split(","):
        bits |= _range(expr, bounds)
    return bits


_GO_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_go_duration(text: str) -> float:
    """``time.ParseDuration`` for the positive durations ``@every`` takes."""
    if text in ("0", ""):
        return 0.0
    pos, total = 0, 0.0
    while pos < len(text):
        match = _GO_DURATION.match(text, pos)
        if match is None:
            raise ScheduleError(f'failed to parse duration {text}: time: invalid duration '
                                f'"{text}"')
        total += float(match.group(1)) * _UNIT_S[match.group(2)]
        pos = match.end()
    return total


def load_zone(name: str) -> tzinfo:
    """An IANA zone (``time.LoadLocation``); ``Local`` is UTC here, as in kube's images."""
    if name in ("", "UTC", "Local"):
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as err:
        raise ScheduleError(f"provided bad location {name}: unknown time zone {name}") from err


_DESCRIPTORS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
                "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
                "@hourly": "0 * * * *"}


def parse_schedule(text: str, time_zone: str | None = None) -> Schedule:
    """``cron.ParseStandard`` (with kube's ``TZ=<timeZone> `` prefix when ``spec.timeZone``
    is set)."""
    spec = text.strip()
    if not spec:
        raise ScheduleError("empty spec string")
    zone = load_zone(time_zone) if time_zone is not None else UTC
    if spec.startswith(("TZ=", "CRON_TZ=")):
        head, _, spec = spec.partition(" ")
        zone = load_zone(head.split("=", 1)[1])
        spec = spec.strip()
    if spec.startswith("@"):
        if spec.startswith("@every "):
            delay = parse_go_duration(spec[len("@every "):].strip())
            return Schedule(zone=zone, every_s=max(1, int(delay)))
        found = _DESCRIPTORS.get(spec)
        if found is None:
            raise ScheduleError(f"unrecognized descriptor: {spec}")
        spec = found
    fields = spec.split()
    if len(fields) != 5:
        raise ScheduleError(f"expected exactly 5 fields, found {len(fields)}: {fields}")
    bits = [_field(f, b) for f, b in zip(fields, _FIELDS, strict=True)]
    return Schedule(bits[0], bits[1], bits[2], bits[3], bits[4], zone=zone)


def _day_matches(s: Schedule, day: datetime) -> bool:
    dom_match = (1 << day.day) & s.dom > 0
    dow_match = (1 << ((day.weekday() + 1) % 7)) & s.dow > 0
    if s.dom & STAR_BIT or s.dow & STAR_BIT:
        return dom_match and dow_match
    return dom_match or dow_match


def _next_spec(s: Schedule, after: float) -> float | None:
    """robfig's ``SpecSchedule.Next`` on wall-clock time in the schedule's zone: the next
    whole minute, then the first month, day, hour and minute that match."""
    wall = datetime.fromtimestamp(int(after), s.zone).replace(tzinfo=None, second=0)
    wall += timedelta(minutes=1)
    limit = wall.year + 5
    while wall.year <= limit:
        if not (1 << wall.month) & s.month:
            wall = (wall.replace(day=1, hour=0, minute=0) + timedelta(days=32)).replace(day=1)
            continue
        if not _day_matches(s, wall):
            wall = wall.replace(hour=0, minute=0) + timedelta(days=1)
            continue
        if not (1 << wall.hour) & s.hour:
            wall = wall.replace(minute=0) + timedelta(hours=1)
            continue
        if not (1 << wall.minute) & s.minute:
            wall += timedelta(minutes=1)
            continue
        return wall.replace(tzinfo=s.zone).timestamp()
    return None


@dataclass(frozen=True, slots=True)
class MostRecent:
    """``mostRecentScheduleTime``: the latest missed start time (None: none yet) and whether
    more than ``MANY_MISSED`` were missed."""

    time: float | None
    too_many: bool


def most_recent_schedule_time(schedule: Schedule, earliest: float, now: float,
                              starting_deadline_s: int | None) -> MostRecent:
    """The latest activation in (earliest, now], ``earliest`` being the last schedule time
    (or creation) moved up to ``now - startingDeadlineSeconds`` when later."""
    if starting_deadline_s is not None:
        earliest = max(earliest, now - starting_deadline_s)
    t1 = schedule.next(earliest)
    if t1 is None or now < t1:
        return MostRecent(None, too_many=False)
    t2 = schedule.next(t1)
    if t2 is None or now < t2:
        return MostRecent(t1, too_many=False)
    period = round(t2 - t1)
    if period < 1:
        raise ScheduleError("time difference between two schedules is less than 1 second")
    missed = int(now - t1) // period + 1
    # walk activation by activation; after MANY_MISSED of them jump by the first period
    # (kube counts missed start times by that period too) and walk the rest
    recent, ahead = _walk(schedule, t1, t2, now, MANY_MISSED)
    if ahead is not None and ahead <= now:
        # non-uniform schedules ("0 9 * * 1-5") may have no activation after the jump point:
        # step back a period at a time
        jump = t1 + (missed - 2) * period
        while jump > recent:
            found = schedule.next(jump)
            if found is not None and found <= now:
                break
            jump -= period
        recent, _ = _walk(schedule, recent, schedule.next(max(jump, recent)), now, None)
    return MostRecent(recent, too_many=missed > MANY_MISSED)


def _walk(schedule: Schedule, recent: float, probe: float | None, now: float,
          limit: int | None) -> tuple[float, float | None]:
    """Activations from ``probe`` up to ``now`` (at most ``limit`` of them): the last one
    reached and the next probe."""
    steps = 0
    while probe is not None and probe <= now and (limit is None or steps <= limit):
        recent, probe, steps = probe, schedule.next(probe), steps + 1
    return recent, probe
