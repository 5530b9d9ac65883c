"""Replicas on etcd under a write storm with SIGKILLs (tests/reliability/replica_crash.py): eight
writers over three replicas, watchers on every replica, one replica killed and restarted twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.etcd_cluster import ETCD, etcd_cluster
from tests.reliability.replica_crash import ReplicaCrashConfig, run_replica_crash

pytestmark = pytest.mark.skipif(ETCD is None, reason="no etcd binary (tools/ensure-etcd)")


def test_no_acknowledged_write_or_watch_event_is_lost_when_a_replica_is_killed(
        tmp_path: Path) -> None:
    with etcd_cluster(1) as etcd:
        report = run_replica_crash(ReplicaCrashConfig(tmp_path, etcd.endpoints), print)
    print(report.line())
    assert report.kills == 2
    assert report.acked > 0 and report.events_seen > 0
    assert report.problems == [], (report.line(), report.problems[:10])
    assert report.acked_found == report.acked
    assert (report.gaps, report.duplicates, report.failed_found, report.server_errors) == (
        0, 0, 0, 0)
    assert report.events_seen == report.events_expected
