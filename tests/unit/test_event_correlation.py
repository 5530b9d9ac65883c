"""client-go's event correlator (tools/record/events_cache.go): the aggregation threshold and
interval, the spam filter's burst and refill, the LRU bounds."""

from __future__ import annotations

from kubewire.cluster import event_correlation as ec


def test_the_tenth_distinct_message_of_a_group_is_combined_until_ten_minutes_of_quiet() -> None:
    c = ec.EventCorrelator()
    combined = [c.aggregate("g", f"m{i}", float(i)) for i in range(12)]
    assert combined == [False] * 9 + [True] * 3
    assert c.aggregate("g", "m99", 11.0 + ec.AGGREGATE_INTERVAL_S)  # within the interval
    assert not c.aggregate("g", "new", 11.0 + 2 * ec.AGGREGATE_INTERVAL_S + 1)  # fresh record
    assert not c.aggregate("other", "m0", 0.0)


def test_the_spam_filter_allows_a_burst_then_one_per_five_minutes() -> None:
    c = ec.EventCorrelator()
    allowed = [c.allow("src/obj", 0.0) for _ in range(30)]
    assert allowed == [True] * ec.SPAM_BURST + [False] * 5
    assert c.filtered == 5
    assert not c.allow("src/obj", 299.0)
    assert c.allow("src/obj", 301.0)
    assert c.allow("src/other", 301.0)


def test_the_caches_are_bounded() -> None:
    c = ec.EventCorrelator()
    for i in range(ec.CACHE_ENTRIES + 50):
        c.aggregate(i, "m", 0.0)
        c.allow(i, 0.0)
    assert len(c._groups) == len(c._buckets) == ec.CACHE_ENTRIES
