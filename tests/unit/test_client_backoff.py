"""Backoff delays grow, stay bounded and jittered, and reset."""

from __future__ import annotations

import random

from kubewire.client.backoff import Backoff


def test_delays_double_up_to_the_cap_within_jitter_bounds() -> None:
    backoff = Backoff(initial_s=1.0, max_s=8.0, rng=random.Random(7))
    delays = [backoff.next_delay() for _ in range(6)]
    ceilings = [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    for delay, ceiling in zip(delays, ceilings, strict=True):
        assert ceiling / 2 <= delay <= ceiling
    assert backoff.attempts == 6


def test_jitter_spreads_clients_and_reset_starts_over() -> None:
    a, b = Backoff(rng=random.Random(1)), Backoff(rng=random.Random(2))
    assert a.next_delay() != b.next_delay()
    a.next_delay()
    a.reset()
    assert a.next_delay() <= Backoff().initial_s
