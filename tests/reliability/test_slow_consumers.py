"""Slow and stuck consumers, short form: 50 reading watchers and 10 that never read
(tests/reliability/stuck.py; ``make reliability`` runs 180 + 20)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.stuck import (
    ReplayConfig,
    StuckConfig,
    main_args,
    replay_args,
    run_stuck,
    run_stuck_replay,
)


def test_stuck_watchers_are_closed_and_the_others_get_everything(tmp_path: Path) -> None:
    config = StuckConfig(**main_args(False, tmp_path / "data"))
    report = run_stuck(config)
    assert report.problems == [], report.line()
    assert report.events_seen == report.events_expected > 0
    assert (report.gaps, report.duplicates, report.out_of_order) == (0, 0, 0)
    assert report.stuck_closed == config.stuck
    assert report.resumed_complete == config.stuck
    # Bounded: far below what buffering every stuck watcher's stream would take.
    assert report.rss_peak_mb - report.rss_base_mb < config.stuck * report.stream_mb


@pytest.mark.parametrize("start", ["log", "ring", "initial"])
def test_stuck_watchers_catching_up_hold_bounded_memory(tmp_path: Path, start: str) -> None:
    """A stuck watcher that must catch up used to hold a whole page of it in the server: 500
    changes from the log, 256 events from the ring or the initial snapshot (~20-60 MB each
    here, 10 of them over the 100 MB bound)."""
    config = ReplayConfig(**replay_args(False, tmp_path / "data", start))
    report = run_stuck_replay(config)
    assert report.problems == [], report.line()
    assert report.complete == config.stuck
