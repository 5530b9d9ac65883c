"""``/metrics`` in the Prometheus text format (0.0.4), with kube-apiserver's metric names.

A handful of counters, gauges and histograms keyed by label tuples, and their exposition. Values
that already live elsewhere (watchers and objects per kind, watch events and their sizes, the
database's size, the process) are read when scraped, through collector callbacks, rather than
kept twice.

**Why not ``prometheus_client``.** Measured with ``python -m bench.metrics_cost`` (CPython
3.11, prometheus_client 0.26, best of 5, on the shared 2-core machine; three runs): what a
request costs here, one counter increment and one histogram observation with kube's 8 and 7
labels, is 0.47-0.98 us with these classes; prometheus_client takes 3.3-7.9 us through
``labels(...)`` (a lock and a dict lookup per call) and 1.0-2.1 us with the children cached by
the caller, so 2-8x more on every request. A scrape of 200 label sets of both (~5,000 lines,
~850 KB) renders in 11-18 ms here and 58-103 ms with ``generate_latest``. Its process, GC and
platform collectors cost 0.1 ms a scrape; ``runtime_metrics.py`` reads the same sources under
the same names (0.04 ms) without the dependency. So the exposition stays ours (~100 lines), the
run time needs no new package, and the tests parse ``/metrics`` with prometheus_client's parser
(a test dependency) so that the format is checked by a real one.

**Names.** kube-apiserver v1.32's, labels and buckets included: ``apiserver_request_total``,
``apiserver_request_duration_seconds``, ``apiserver_response_sizes`` (GET and LIST answers),
``apiserver_longrunning_requests`` (open watches), ``apiserver_watch_events_total`` and
``apiserver_watch_events_sizes`` (the size of each event line as sent, envelope included;
kube measures the object), ``apiserver_registered_watchers``,
``apiserver_terminated_watchers_total``, ``apiserver_current_inflight_requests``,
``apiserver_storage_objects``, ``apiserver_storage_size_bytes`` (the SQLite database and its
WAL; ``storage_cluster_id`` is a digest of the database's path, as there is no etcd cluster),
``etcd_request_duration_seconds`` (the store's writes, gets and lists by ``operation`` and
``type``, the resource as ``pods`` or ``deployments.apps``).
``kubewire_storage_commit_duration_seconds`` is kubewire's own: one group commit's
transaction, which no kube metric measures.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from kubewire.storage.size_tally import WATCH_EVENT_SIZE_BUCKETS

LabelValues = tuple[str, ...]
Sample = tuple[LabelValues, float]

# kube-apiserver's apiserver_request_duration_seconds buckets
REQUEST_BUCKETS = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0,
                   5.0, 6.0, 8.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0)
COMMIT_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
# kube's apiserver_response_sizes: ExponentialBuckets(1000, 10.0, 7), 1 KB .. 1 GB
RESPONSE_SIZE_BUCKETS = tuple(1000.0 * 10.0 ** i for i in range(7))
ETCD_BUCKETS = REQUEST_BUCKETS  # etcd_request_duration_seconds: the same list in kube


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(names: Sequence[str], values: LabelValues, extra: str = "") -> str:
    parts = [f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if value != int(value) else str(int(value))


@dataclass(slots=True)
class _Samples:
    """Samples kept here and/or read from ``collect`` at scrape time (live state elsewhere)."""

    name: str
    help: str
    label_names: tuple[str, ...] = ()
    collect: Callable[[], Iterable[Sample]] | None = None
    values: dict[LabelValues, float] = field(default_factory=dict)

    def render(self) -> Iterable[str]:
        samples = dict(self.values)
        if self.collect is not None:
            samples.update(self.collect())
        for labels, value in sorted(samples.items()):
            yield f"{self.name}{_labels(self.label_names, labels)} {_number(value)}"


class Counter(_Samples):
    kind = "counter"

    def inc(self, labels: LabelValues = (), amount: float = 1.0) -> None:
        self.values[labels] = self.values.get(labels, 0.0) + amount


class Gauge(_Samples):
    kind = "gauge"

    def set(self, labels: LabelValues, value: float) -> None:
        self.values[labels] = value


# A histogram's samples read at scrape time: labels, per-bucket counts (not cumulative, one
# more than the bounds: the last is above every bound), sum.
HistogramSample = tuple[LabelValues, list[int], float]


@dataclass(slots=True)
class Histogram:
    name: str
    help: str
    label_names: tuple[str, ...] = ()
    buckets: tuple[float, ...] = REQUEST_BUCKETS
    collect: Callable[[], Iterable[HistogramSample]] | None = None
    counts: dict[LabelValues, list[int]] = field(default_factory=dict)
    sums: dict[LabelValues, float] = field(default_factory=dict)
    kind = "histogram"

    def observe(self, labels: LabelValues, value: float) -> None:
        counts = self.counts.get(labels)
        if counts is None:
            counts = self.counts[labels] = [0] * (len(self.buckets) + 1)
        counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sums[labels] = self.sums.get(labels, 0.0) + value

    def render(self) -> Iterable[str]:
        samples = [(labels, counts, self.sums[labels]) for labels, counts in self.counts.items()]
        if self.collect is not None:
            samples.extend(self.collect())
        bounds = [f'le="{_number(bound)}"' for bound in (*self.buckets, math.inf)]
        for labels, counts, total in sorted(samples):
            running = 0
            for le, count in zip(bounds, counts, strict=True):
                running += count
                yield f"{self.name}_bucket{_labels(self.label_names, labels, le)} {running}"
            yield f"{self.name}_sum{_labels(self.label_names, labels)} {float(total)!r}"
            yield f"{self.name}_count{_labels(self.label_names, labels)} {running}"


Metric = Counter | Gauge | Histogram
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Registry:
    def __init__(self) -> None:
        self.metrics: list[Metric] = []

    def add(self, metric: Metric) -> Metric:
        self.metrics.append(metric)
        return metric

    def render(self) -> bytes:
        lines: list[str] = []
        for metric in self.metrics:
            lines.append(f"# HELP {metric.name} {metric.help}")
            lines.append(f"# TYPE {metric.name} {metric.kind}")
            lines.extend(metric.render())
        return ("\n".join(lines) + "\n").encode()


REQUEST_LABELS = ("verb", "group", "version", "resource", "subresource", "scope", "component",
                  "code")


Collect = Callable[[], Iterable[Sample]]


@dataclass(frozen=True, slots=True)
class LiveSources:
    """Where the samples of live state come from at scrape time."""

    watchers: Collect  # (group, version, kind) -> registered watchers
    objects: Collect  # (resource,) -> stored objects
    inflight: Collect  # (request_kind,) -> requests in flight
    events_sent: Collect  # (group, version, kind) -> watch events written
    terminated: Collect  # (resource,) -> watchers closed for falling behind
    event_sizes: Callable[[], Iterable[HistogramSample]]  # (group, version, kind) -> sizes
    longrunning: Collect  # REQUEST_LABELS[:-1] -> open watches
    storage_size: Collect  # (storage_cluster_id,) -> bytes on disk
    # (endpoint,) -> each etcd member's database size (-1: its last poll failed); none else
    storage_db_sizes: Collect = lambda: ()


class ServerMetrics:
    """The metrics the server keeps; callbacks fill the ones that mirror live state."""

    def __init__(self, live: LiveSources) -> None:
        self.registry = Registry()
        add = self.registry.add
        self.requests = Counter(
            "apiserver_request_total",
            "Counter of apiserver requests broken out for each verb, group, version, resource, "
            "scope, component, and HTTP response code.", REQUEST_LABELS)
        self.latency = Histogram(
            "apiserver_request_duration_seconds",
            "Response latency distribution in seconds for each verb, group, version, resource, "
            "subresource, scope and component.", REQUEST_LABELS[:-1])
        self.watch_events = Counter(
            "apiserver_watch_events_total",
            "Number of events sent in watch clients", ("group", "version", "kind"),
            live.events_sent)
        self.terminated_watchers = Counter(
            "apiserver_terminated_watchers_total",
            "Counter of watchers closed due to unresponsiveness broken by resource type.",
            ("resource",), live.terminated)
        self.commit_latency = Histogram(
            "kubewire_storage_commit_duration_seconds",
            "Time from a write's submission to its durable commit, in seconds.", (),
            COMMIT_BUCKETS)
        self.response_sizes = Histogram(
            "apiserver_response_sizes",
            "Response size distribution in bytes for each group, version, verb, resource, "
            "subresource, scope and component.", REQUEST_LABELS[:-1], RESPONSE_SIZE_BUCKETS)
        self.etcd_latency = Histogram(
            "etcd_request_duration_seconds",
            "Etcd request latency in seconds for each operation and object type.",
            ("operation", "type"), ETCD_BUCKETS)
        for metric in (self.requests, self.latency, self.response_sizes, self.watch_events,
                       self.terminated_watchers, self.etcd_latency, self.commit_latency):
            add(metric)
        add(Gauge("apiserver_longrunning_requests",
                  "Gauge of all active long-running apiserver requests broken out by verb, group, "
                  "version, resource, scope and component. Not all requests are tracked this "
                  "way.", REQUEST_LABELS[:-1], live.longrunning))
        add(Histogram("apiserver_watch_events_sizes", "Watch event size distribution in bytes",
                      ("group", "version", "kind"), WATCH_EVENT_SIZE_BUCKETS, live.event_sizes))
        add(Gauge("apiserver_storage_size_bytes",
                  "Size of the storage database file physically allocated in bytes.",
                  ("storage_cluster_id",), live.storage_size))
        add(Gauge("apiserver_storage_db_total_size_in_bytes",
                  "Total size of the storage database file physically allocated in bytes.",
                  ("endpoint",), live.storage_db_sizes))
        add(Gauge("apiserver_registered_watchers",
                  "Number of currently registered watchers for a given resources",
                  ("group", "version", "kind"), live.watchers))
        add(Gauge("apiserver_storage_objects",
                  "Number of stored objects at the time of last check split by kind. In case of "
                  "a fetching error, the value will be -1.",
                  ("resource",), live.objects))
        add(Gauge("apiserver_current_inflight_requests",
                  "Maximal number of currently used inflight request limit of this apiserver per "
                  "request kind in last second.", ("request_kind",), live.inflight))

    def render(self) -> bytes:
        return self.registry.render()
