"""The soak's CI form: 60 seconds of churn and resuming watchers against a server subprocess.

The long form is ``python -m tests.reliability.soak --minutes N`` (same checks, same figures).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.soak import Churn, SoakConfig, WatcherLog, _judge, run_soak


def test_soak_60_seconds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_soak(SoakConfig(seconds=60.0), tmp_path)
    with capsys.disabled():
        print("\n" + result.report())
    assert result.ok, result.report()


def test_the_judge_sees_gaps_duplicates_and_lost_writes() -> None:
    """The checks are not vacuous: a missing event, a repeated one, a write not in the log."""
    cfg = SoakConfig(seconds=10.0)
    expected = [(11, "ADDED", "a/x"), (12, "MODIFIED", "a/x"), (13, "DELETED", "a/x")]
    gap = WatcherLog("gap", "a", 10, events=[expected[0], expected[2]])
    dup = WatcherLog("dup", "", 10, events=[expected[0], expected[1], expected[1], expected[2]])
    churn = Churn(acknowledged={11: "a/x", 12: "a/x", 14: "a/y"})
    result = _judge(cfg, [gap, dup], {"gap": expected, "dup": expected}, expected, churn, [],
                    0.0, 0, 0)
    failed = {c.name: c.figures for c in result.checks if not c.ok}
    assert "found 2/3" in failed["writes"]
    assert "gaps 1, duplicates 1, out of order 1" in failed["watch history"]
    assert "too few samples" in failed["flat resources"]
