"""Concurrency, short form: 8 clients race updates of one object with its resourceVersion as
the precondition (tests/reliability/race.py)."""

from __future__ import annotations

from pathlib import Path

from tests.reliability.race import RaceConfig, main_args, run_race


def test_exactly_one_winner_per_revision_and_409_for_the_rest(tmp_path: Path) -> None:
    report = run_race(RaceConfig(**main_args(False, tmp_path / "data")))
    assert report.problems == [], report.line()
    assert report.winners + report.conflicts == report.attempts
    assert report.winners > 1 and report.conflicts > 0  # the race really happened
    assert report.create_winners == report.create_rounds == 10
