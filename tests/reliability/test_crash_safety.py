"""Crash safety, short form: three SIGKILLs under a write storm with six resuming watchers
(tests/reliability/crash.py; the long form runs in ``make reliability``)."""

from __future__ import annotations

from pathlib import Path

from tests.reliability.crash import CrashConfig, main_args, run_crash


def test_acknowledged_writes_and_watch_history_survive_sigkill(tmp_path: Path) -> None:
    report = run_crash(CrashConfig(**main_args(False, tmp_path / "data")))
    assert report.kills == 3
    assert report.acked > 0 and report.events_seen > 0
    assert report.problems == [], report.line()
    assert report.acked_found == report.acked
    assert (report.gaps, report.duplicates, report.failed_found) == (0, 0, 0)
    assert report.events_seen == report.events_expected


def test_normal_durability_survives_sigkill_too(tmp_path: Path) -> None:
    """``normal`` skips the fsync per commit, which only matters on power loss."""
    args = {**main_args(False, tmp_path / "data"), "kills": 2, "durability": "normal",
            "watchers": 3}
    report = run_crash(CrashConfig(**args))
    assert report.problems == [], report.line()
    assert report.acked_found == report.acked > 0
