"""What request metrics cost: kubewire's hand-written metrics against ``prometheus_client``.

``python -m bench.metrics_cost`` prints, best of 5 ``timeit`` runs: one request's observation
(a counter increment with kube's 8 labels and a histogram observation with 7) with each, and
the scrape of 200 label sets of both. The figures decide ``server/observe/metrics.py``'s
approach (its docstring quotes them). Needs prometheus_client (a test dependency).
"""

from __future__ import annotations

import timeit

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client import Counter as PCounter
from prometheus_client import Histogram as PHistogram

from kubewire.server.observe.metrics import REQUEST_BUCKETS, REQUEST_LABELS, Counter, Histogram
from kubewire.server.observe.metrics import Registry as OurRegistry

LABELS = ("GET", "", "v1", "pods", "", "namespace", "apiserver")
N = 200_000


def main() -> None:
    ours_c = Counter("apiserver_request_total", "c", REQUEST_LABELS)
    ours_h = Histogram("apiserver_request_duration_seconds", "h", REQUEST_LABELS[:-1])
    registry = CollectorRegistry()
    their_c = PCounter("apiserver_request", "c", list(REQUEST_LABELS), registry=registry)
    their_h = PHistogram("apiserver_request_duration_seconds", "h", list(REQUEST_LABELS[:-1]),
                         buckets=REQUEST_BUCKETS, registry=registry)
    child_c, child_h = their_c.labels(*LABELS, "200"), their_h.labels(*LABELS)

    def ours() -> None:
        ours_c.inc((*LABELS, "200"))
        ours_h.observe(LABELS, 0.0012)

    def theirs() -> None:
        their_c.labels(*LABELS, "200").inc()
        their_h.labels(*LABELS).observe(0.0012)

    def theirs_cached() -> None:
        child_c.inc()
        child_h.observe(0.0012)

    for name, fn in (("kubewire", ours), ("prometheus_client labels()", theirs),
                     ("prometheus_client, children cached", theirs_cached)):
        seconds = min(timeit.repeat(fn, number=N, repeat=5)) / N
        print(f"observe one request, {name}: {seconds * 1e6:.2f} us")
    ours_reg = OurRegistry()
    ours_reg.add(ours_c)
    ours_reg.add(ours_h)
    for i in range(200):
        labels = ("GET", "", "v1", f"r{i}", "", "namespace", "apiserver")
        ours_h.observe(labels, 0.01)
        ours_c.inc((*labels, "200"))
        their_h.labels(*labels).observe(0.01)
        their_c.labels(*labels, "200").inc()
    for name, render in (("kubewire", ours_reg.render),
                         ("prometheus_client", lambda: generate_latest(registry))):
        seconds = min(timeit.repeat(render, number=20, repeat=3)) / 20
        print(f"scrape 200 label sets, {name}: {seconds * 1e3:.1f} ms, {len(render())} bytes")


if __name__ == "__main__":
    main()
