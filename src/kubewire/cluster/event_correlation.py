"""client-go's ``EventCorrelator`` (``tools/record/events_cache.go``) for core/v1 Events: which
events a recorder sends, as kube's components send them. Pure: times come from the caller.

- Aggregation (``EventAggregator`` with ``EventAggregatorByReasonFunc``): events that differ
  only in their message (same source, object, type and reason) are counted per
  ``AGGREGATE_INTERVAL_S``; from the ``AGGREGATE_MAX_EVENTS``-th distinct message on, each
  becomes one event ``(combined from similar events): <message>`` under the group's key, which
  the recorder then counts up by PATCH instead of creating another (a ReplicaSet creating 100
  pods records nine ``Created pod`` events and one combined one, not a hundred).
- The spam filter (``EventSourceObjectSpamFilter``, ``getSpamKey``): a token bucket per source
  and object, ``SPAM_BURST`` events then one per ``1 / SPAM_QPS`` seconds; what exceeds it is
  not sent at all.

Both keep at most ``CACHE_ENTRIES`` keys, least recently used first out, as client-go's LRUs.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

CACHE_ENTRIES = 4096  # maxLruCacheEntries
AGGREGATE_MAX_EVENTS = 10  # defaultAggregateMaxEvents
AGGREGATE_INTERVAL_S = 600.0  # defaultAggregateIntervalInSeconds
SPAM_BURST = 25  # defaultSpamBurst
SPAM_QPS = 1.0 / 300.0  # defaultSpamQPS
COMBINED_PREFIX = "(combined from similar events): "  # EventAggregatorByReasonMessageFunc


@dataclass(slots=True)
class _Group:
    messages: set[str] = field(default_factory=set)
    last: float = 0.0


@dataclass(slots=True)
class _Bucket:
    tokens: float
    stamp: float


class EventCorrelator:
    """Aggregation and the spam filter of one recorder (one ``EventBroadcaster``)."""

    def __init__(self) -> None:
        self._groups: OrderedDict[Hashable, _Group] = OrderedDict()
        self._buckets: OrderedDict[Hashable, _Bucket] = OrderedDict()
        self.filtered = 0

    def aggregate(self, group: Hashable, message: str, now: float) -> bool:
        """``EventAggregate``: True when the event is to be recorded as the group's combined
        event (its message prefixed, its cache key the group's), False to record it as is."""
        found = self._groups.get(group)
        if found is None or now - found.last > AGGREGATE_INTERVAL_S:
            found = _Group()
        found.messages.add(message)
        found.last = now
        _put(self._groups, group, found)
        if len(found.messages) < AGGREGATE_MAX_EVENTS:
            return False
        found.messages.pop()  # the set never grows past the threshold (PopAny)
        return True

    def allow(self, source_object: Hashable, now: float) -> bool:
        """``EventSourceObjectSpamFilter.Filter`` negated: may this source send one more event
        about this object now? (A refused one is counted in ``filtered``.)"""
        bucket = self._buckets.get(source_object)
        if bucket is None:
            bucket = _Bucket(float(SPAM_BURST), now)
        else:
            bucket.tokens = min(float(SPAM_BURST),
                                bucket.tokens + max(0.0, now - bucket.stamp) * SPAM_QPS)
            bucket.stamp = now
        _put(self._buckets, source_object, bucket)
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return True
        self.filtered += 1
        return False


def _put(cache: OrderedDict[Hashable, Any], key: Hashable, value: Any) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > CACHE_ENTRIES:
        cache.popitem(last=False)
