"""The process and Python runtime metrics, read when ``/metrics`` is scraped.

The same names, labels and sources as ``prometheus_client``'s ``ProcessCollector``,
``GCCollector`` and ``PlatformCollector`` (what Prometheus users of Python services look for,
as kube's Go binaries export ``process_*`` and ``go_*``): on Linux ``/proc/self/stat`` for CPU
time, memory and start time, ``/proc/self/fd`` for open descriptors and ``RLIMIT_NOFILE``'s
soft limit for the maximum; ``gc.get_stats()`` per generation; ``platform`` for
``python_info``. Written here rather than taken from that library so the server needs no
dependency for it (``metrics.py`` says why its exposition is ours); the tests compare both.
"""

from __future__ import annotations

import gc
import os
import platform
import resource
import time
from collections.abc import Iterable
from dataclasses import dataclass

from kubewire.server.observe.metrics import Counter, Gauge, Metric, Sample

_PROC_STAT = "/proc/self/stat"


@dataclass(frozen=True, slots=True)
class ProcessStats:
    cpu_seconds: float
    virtual_bytes: float | None = None
    resident_bytes: float | None = None
    start_time: float | None = None


def _boot_time() -> float | None:
    try:
        with open("/proc/stat", "rb") as stat:
            for line in stat:
                if line.startswith(b"btime "):
                    return float(line.split()[1])
    except OSError:
        pass
    return None


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = resource.getpagesize()
_BOOT = _boot_time()


def process_stats() -> ProcessStats:
    """CPU seconds, memory and start time: ``/proc/self/stat`` where there is one."""
    try:
        with open(_PROC_STAT, "rb") as stat:
            text = stat.read()
    except OSError:
        times = os.times()
        return ProcessStats(times.user + times.system)
    fields = text[text.rindex(b")") + 2:].split()  # after "pid (comm) ": field 3 onwards
    utime, stime = float(fields[11]), float(fields[12])
    start = None if _BOOT is None else _BOOT + float(fields[19]) / _TICKS
    return ProcessStats((utime + stime) / _TICKS, float(fields[20]), float(fields[21]) * _PAGE,
                        start)


def open_fds() -> float | None:
    try:
        return float(len(os.listdir("/proc/self/fd")))
    except OSError:
        return None


class _Process:
    """One read of ``/proc/self/stat`` serves the four metrics that come from it."""

    def __init__(self) -> None:
        self._read_at = -1.0
        self._stats = ProcessStats(0.0)

    def stats(self) -> ProcessStats:
        now = time.monotonic()
        if now - self._read_at > 0.1:  # a scrape reads it once
            self._stats = process_stats()
            self._read_at = now
        return self._stats


def _one(value: float | None) -> Iterable[Sample]:
    return [] if value is None else [((), value)]


def runtime_metrics() -> list[Metric]:
    """The ``process_*`` and ``python_*`` metrics, each read from the system when scraped."""
    proc = _Process()
    generations = ("generation",)

    def gc_samples(key: str) -> Iterable[Sample]:
        return [((str(i),), float(stats[key])) for i, stats in enumerate(gc.get_stats())]

    version = platform.python_version_tuple()
    info = (platform.python_implementation(), version[0], version[1], version[2],
            platform.python_version())
    return [
        Gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.",
              collect=lambda: _one(proc.stats().virtual_bytes)),
        Gauge("process_resident_memory_bytes", "Resident memory size in bytes.",
              collect=lambda: _one(proc.stats().resident_bytes)),
        Gauge("process_start_time_seconds",
              "Start time of the process since unix epoch in seconds.",
              collect=lambda: _one(proc.stats().start_time)),
        Counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
                collect=lambda: _one(proc.stats().cpu_seconds)),
        Gauge("process_open_fds", "Number of open file descriptors.",
              collect=lambda: _one(open_fds())),
        Gauge("process_max_fds", "Maximum number of open file descriptors.",
              collect=lambda: _one(float(resource.getrlimit(resource.RLIMIT_NOFILE)[0]))),
        Counter("python_gc_objects_collected_total", "Objects collected during gc",
                generations, collect=lambda: gc_samples("collected")),
        Counter("python_gc_objects_uncollectable_total", "Uncollectable objects found during GC",
                generations, collect=lambda: gc_samples("uncollectable")),
        Counter("python_gc_collections_total", "Number of times this generation was collected",
                generations, collect=lambda: gc_samples("collections")),
        Gauge("python_info", "Python platform information",
              ("implementation", "major", "minor", "patchlevel", "version"),
              collect=lambda: [(info, 1.0)]),
    ]
