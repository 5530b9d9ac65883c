"""``/metrics`` in the Prometheus text format (0.0.4), with kube-apiserver's metric names.

A handful of counters, gauges and histograms keyed by label tuples: enough for what kubewire
reports, with no dependency. Values that already live elsewhere (watchers per kind, objects per
kind) are read when scraped, through collector callbacks, rather than kept twice.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

LabelValues = tuple[str, ...]
Sample = tuple[LabelValues, float]

# kube-apiserver's apiserver_request_duration_seconds buckets
REQUEST_BUCKETS = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0,
                   5.0, 6.0, 8.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0)
COMMIT_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
SIZE_BUCKETS = (1024.0, 2048.0, 4096.0, 8192.0, 16384.0, 32768.0, 65536.0, 131072.0,
                262144.0, 524288.0, 1048576.0)


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


@dataclass(slots=True)
class Histogram:
    name: str
    help: str
    label_names: tuple[str, ...] = ()
    buckets: tuple[float, ...] = REQUEST_BUCKETS
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
        for labels, counts in sorted(self.counts.items()):
            running = 0
            for bound, count in zip((*self.buckets, math.inf), counts, strict=True):
                running += count
                le = f'le="{_number(bound)}"'
                yield f"{self.name}_bucket{_labels(self.label_names, labels, le)} {running}"
            yield f"{self.name}_sum{_labels(self.label_names, labels)} {self.sums[labels]!r}"
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
        for metric in (self.requests, self.latency, self.watch_events, self.terminated_watchers,
                       self.commit_latency):
            add(metric)
        add(Gauge("apiserver_registered_watchers",
                  "Number of currently registered watchers for a given resources",
                  ("group", "version", "kind"), live.watchers))
        add(Gauge("apiserver_storage_objects",
                  "Number of stored objects at the time of last check split by kind.",
                  ("resource",), live.objects))
        add(Gauge("apiserver_current_inflight_requests",
                  "Maximal number of currently used inflight request limit of this apiserver per "
                  "request kind in last second.", ("request_kind",), live.inflight))

    def render(self) -> bytes:
        return self.registry.render()
