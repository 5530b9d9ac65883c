"""The pure fault decisions (server/faults/rules.py) and the manual clock (kubewire/clock.py)."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta

import pytest

from kubewire.clock import ManualClock
from kubewire.server.faults.rules import FaultSet, Match, error_status, parse_fault
from kubewire.status import BadRequest


def test_a_spec_parses_into_its_fault_and_back() -> None:
    fault = parse_fault({"type": "error", "code": 429, "verb": "patch", "resource": "pods",
                         "group": "", "namespace": "a", "rate": 0.25, "count": 3,
                         "retryAfterSeconds": 7})
    assert fault.match == Match("patch", "pods", "", "a")
    assert (fault.code, fault.rate, fault.count, fault.retry_after_s) == (429, 0.25, 3, 7)
    assert fault.label == "error-429"
    status = error_status(fault)
    assert (status.code, status.reason, status.retry_after_seconds) == (429, "TooManyRequests",
                                                                         7)


def test_label_selectors_compare_in_kubes_printed_form() -> None:
    fault = parse_fault({"type": "stall", "labelSelector": "tier in (b,a),app=web"})
    assert fault.match.label_selector == "app=web,tier in (a,b)"
    assert fault.match.watch("pods", "", "", "app=web,tier in (a,b)")
    assert not fault.match.watch("pods", "", "", "app=web")


@pytest.mark.parametrize(("spec", "why"), [
    ({"type": "error", "code": True}, "code must be one of"),
    ({"type": "error", "code": 503, "rate": float("nan")}, "rate must be a number"),
    ({"type": "reset", "count": 1.5}, "count must be an integer"),
    ({"type": "latency", "seconds": 1e9}, "seconds must be a number"),
    ({"type": "stall", "verb": "get"}, "unknown field(s) for a stall fault: verb"),
    ({"type": "bookmarks", "mode": "suppress", "seconds": 1}, "seconds goes with mode delay"),
    ({"type": "bookmarks", "mode": "delay"}, "needs seconds > 0"),
    ({"type": "dropWatches", "namespace": 3}, "namespace must be a string"),
    ({"type": "dropWatches", "resource": "x" * 254}, "at most 253"),
])
def test_bad_specs_say_why(spec: dict[str, object], why: str) -> None:
    with pytest.raises(BadRequest) as err:
        parse_fault(spec)
    assert why in err.value.message


def test_rates_draw_with_the_given_rng_and_counts_end_faults() -> None:
    faults = FaultSet()
    half = faults.add(parse_fault({"type": "error", "code": 503, "rate": 0.5}))
    hits = sum(faults.pick_for_request("get", "pods", "", "a", random.Random(i))[1] is half
               for i in range(200))
    assert 60 < hits < 140
    faults.remove(half.id)
    twice = faults.add(parse_fault({"type": "reset", "verb": "create", "count": 2}))
    slow = faults.add(parse_fault({"type": "latency", "seconds": 1}))
    rng = random.Random(0)
    assert faults.pick_for_request("get", "pods", "", "a", rng) == (slow, None)
    assert faults.pick_for_request("create", "pods", "", "a", rng) == (slow, twice)
    assert faults.pick_for_request("create", "pods", "", "a", rng) == (slow, twice)
    assert faults.pick_for_request("create", "pods", "", "a", rng) == (slow, None)
    assert list(faults.faults) == [slow.id]
    assert twice.injected == 2


def test_a_store_failure_answers_writes_only() -> None:
    faults = FaultSet()
    failed = faults.add(parse_fault({"type": "storeFailure"}))
    rng = random.Random(0)
    assert faults.pick_for_request("list", "pods", "", "", rng) == (None, None)
    for verb in ("create", "update", "patch", "delete", "deletecollection"):
        assert faults.pick_for_request(verb, "pods", "", "", rng) == (None, failed)


def test_the_set_is_bounded() -> None:
    faults = FaultSet(limit=2)
    for _ in range(2):
        faults.add(parse_fault({"type": "expireHistory"}))
    with pytest.raises(BadRequest):
        faults.add(parse_fault({"type": "expireHistory"}))
    assert len(faults.faults) == 2


def test_the_manual_clock_fires_due_timers_in_order_at_their_time() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    clock = ManualClock(start)
    seen: list[tuple[str, datetime]] = []
    clock.call_later(5, lambda: seen.append(("b", clock.now())))
    clock.call_later(2, lambda: seen.append(("a", clock.now())))
    cancelled = clock.call_later(3, lambda: seen.append(("x", clock.now())))
    clock.call_later(5, lambda: clock.call_later(1, lambda: seen.append(("c", clock.now()))))
    cancelled.cancel()
    assert clock.advance(1.5) == 0 and seen == []
    assert clock.advance(5) == 4  # a, b, the timer setting c, and c (due within the step)
    assert seen == [("a", start + timedelta(seconds=2)), ("b", start + timedelta(seconds=5)),
                    ("c", start + timedelta(seconds=6))]
    assert clock.now() == start + timedelta(seconds=6.5)
    assert clock.pending == 0
    with pytest.raises(ValueError):
        clock.advance(-1)


async def test_sleep_on_the_manual_clock_wakes_when_advanced() -> None:
    clock = ManualClock()
    sleeper = asyncio.ensure_future(clock.sleep(10))
    await asyncio.sleep(0)
    clock.advance(9)
    await asyncio.sleep(0)
    assert not sleeper.done()
    clock.advance(1)
    await asyncio.wait_for(sleeper, 1)
