"""A histogram of sizes kept where the sizes are seen (watch events in the watch cache), read
by ``/metrics`` when scraped: bucket counts and a sum, nothing per observation but an index."""

from __future__ import annotations

import bisect
from collections.abc import Iterable

# kube's apiserver_watch_events_sizes buckets: ExponentialBuckets(1024, 2.0, 8), 1 KiB .. 128 KiB
WATCH_EVENT_SIZE_BUCKETS = tuple(1024.0 * 2.0 ** i for i in range(8))


class SizeTally:
    """Counts per bucket (``counts[i]``: sizes <= ``bounds[i]`` and above the bound before;
    the last, above every bound) and the sum of the sizes."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...] = WATCH_EVENT_SIZE_BUCKETS) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def add(self, items: Iterable[bytes], times: int = 1) -> None:
        """Count the size of each of ``items``, ``times`` over (one payload, many receivers)."""
        bounds, counts = self.bounds, self.counts
        for item in items:
            size = len(item)
            counts[bisect.bisect_left(bounds, size)] += times
            self.total += size * times
