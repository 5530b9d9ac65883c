"""The hostile-client suite, short forms (tests/reliability/hostile/; ``make reliability`` runs
the long forms): each attack of issue 12 against a real TLS server while a well-behaved client
does 50 GETs a second. Each asserts what a hardened server answers, RSS growth (server and
writer) under 200 MB over idle, and the well-behaved client's GET p99 under 50 ms.

The controls prove that the measurements see what they claim: a calm run passes every bound, a
known allocation shows in RSS, a known stall shows in the latencies, and a connection the server
stopped reading is seen as paused.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.hostile.controls import CONTROLS, FROZEN_S, KNOWN_OBJECTS
from tests.reliability.hostile.harness import P99_BOUND_MS, RSS_BOUND_MB, run_attack
from tests.reliability.hostile.suite import ATTACKS


@pytest.mark.parametrize("name", list(ATTACKS))
def test_attack_gets_kubes_answer_within_memory_and_latency_bounds(tmp_path: Path,
                                                                   name: str) -> None:
    report = run_attack(ATTACKS[name], False, tmp_path)
    assert report.outcome.ok, report.line()
    assert not report.capped and report.growth_mb < RSS_BOUND_MB, report.line()
    assert report.latency.p99_ms < P99_BOUND_MS, report.line()
    assert report.latency.count > 0 and not report.latency.failures, report.line()
    assert report.problems == [], report.line()


def test_control_calm_server_passes_every_bound(tmp_path: Path) -> None:
    report = run_attack(CONTROLS["calm"], False, tmp_path)
    assert report.problems == [], report.line()
    assert report.growth_mb < 10, report.line()
    assert report.latency.count >= 100, report.line()  # 50/s over the 2.2 s window


def test_control_known_allocation_shows_in_rss(tmp_path: Path) -> None:
    report = run_attack(CONTROLS["known-memory"], False, tmp_path)
    assert report.outcome.ok, report.line()
    assert report.server.growth_mb >= 0.9 * KNOWN_OBJECTS, report.line()
    assert report.growth_mb < RSS_BOUND_MB, report.line()


def test_control_known_stall_shows_in_latency(tmp_path: Path) -> None:
    report = run_attack(CONTROLS["frozen-server"], False, tmp_path)
    assert report.latency.max_ms >= 0.8 * FROZEN_S * 1000, report.line()
    assert not report.latency.failures, report.line()
    assert report.growth_mb < 10, report.line()


def test_control_a_connection_the_server_stopped_reading_counts_as_paused(
        tmp_path: Path) -> None:
    """The pipelining verdict's other side: behind a watch, kubewire stops reading a connection
    after 64 KiB, so every flooding connection stalls while the server answers others."""
    report = run_attack(CONTROLS["watch-then-flood"], False, tmp_path)
    assert report.outcome.ok, report.line()
    assert report.problems == [], report.line()
