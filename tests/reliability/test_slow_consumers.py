"""Slow and stuck consumers, short form: 50 reading watchers and 10 that never read
(tests/reliability/stuck.py; ``make reliability`` runs 180 + 20)."""

from __future__ import annotations

from pathlib import Path

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


def test_stuck_watchers_replaying_the_log_hold_bounded_memory(tmp_path: Path) -> None:
    """A stuck watcher resuming from before the ring used to hold a whole 500-change page of
    the log (decoded, encoded and framed) in the server: ~60 MB each here."""
    config = ReplayConfig(**replay_args(False, tmp_path / "data"))
    report = run_stuck_replay(config)
    assert report.problems == [], report.line()
    assert report.complete == config.stuck
