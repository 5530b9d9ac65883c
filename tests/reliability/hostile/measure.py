"""What an attack costs: RSS of the server and of its writer child, and the probe's latencies.

``RssWatch`` samples ``VmRSS`` of both processes on a thread every few milliseconds and, past
``cap_mb``, SIGKILLs the server so that an unbounded server cannot take the machine down (the
report then says so). Peaks are recorded until ``end_window()``; the cap holds until ``stop()``,
as a server may go on growing after the window, while it is checked and stopped. The peak also
takes ``VmHWM`` into account when it rose during the window, so a spike between two samples is
not missed. ``ProbeProcess`` runs ``probe`` beside an attack
and hands back its samples; ``latency_of`` summarises those of one time window.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.reliability.hostile.server import GOOD, NAMESPACE, ROOT, HostileServer

SAMPLE_INTERVAL_S = 0.02
PROBE_READY_TIMEOUT_S = 30.0
PROBE_RATE_PER_S = 50.0  # 110+ GETs in a short window: p99 is not merely the worst one
PROBE_PATH = f"/api/v1/namespaces/{NAMESPACE}/configmaps/cm-0"


def memory_kb(pid: int | None) -> tuple[int, int]:
    """``(VmRSS, VmHWM)`` of ``pid`` in KiB; zeros when it is gone."""
    if pid is None:
        return 0, 0
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0, 0
    values = {line.split(":")[0]: int(line.split()[1]) for line in status.splitlines()
              if line.startswith(("VmRSS:", "VmHWM:"))}
    return values.get("VmRSS", 0), values.get("VmHWM", 0)


@dataclass
class Peak:
    """One process's RSS: at idle, and the highest seen while the watch ran (MB)."""

    pid: int | None
    idle_mb: float = 0.0
    peak_mb: float = 0.0
    _hwm_start_kb: int = 0

    def begin(self) -> None:
        rss, self._hwm_start_kb = memory_kb(self.pid)
        self.idle_mb = self.peak_mb = rss / 1024

    def sample(self, record: bool = True) -> float:
        rss, _ = memory_kb(self.pid)
        if record:
            self.peak_mb = max(self.peak_mb, rss / 1024)
        return rss / 1024

    def end(self) -> None:
        _, hwm = memory_kb(self.pid)
        if hwm > self._hwm_start_kb:  # the high-water mark moved during the attack: exact peak
            self.peak_mb = max(self.peak_mb, hwm / 1024)

    @property
    def growth_mb(self) -> float:
        return max(0.0, self.peak_mb - self.idle_mb)


class RssWatch(threading.Thread):
    """Samples the server's and the writer's RSS until ``stop()``; kills the server past the cap.
    """

    def __init__(self, server: HostileServer, cap_mb: float) -> None:
        super().__init__(name="rss watch", daemon=True)
        self.server_pid = server.pid
        self.server = Peak(server.pid)
        self.writer = Peak(server.writer_pid())
        self.cap_mb = cap_mb
        self.capped = False
        self.capped_event = threading.Event()
        self._recording = True
        self._stopping = threading.Event()

    def begin(self) -> RssWatch:
        self.server.begin()
        self.writer.begin()
        self.start()
        return self

    def run(self) -> None:
        while not self._stopping.wait(SAMPLE_INTERVAL_S):
            recording = self._recording
            self.writer.sample(recording)
            if self.server.sample(recording) > self.cap_mb:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.server_pid, signal.SIGKILL)
                self.capped = True
                self.capped_event.set()
                return

    def end_window(self) -> None:
        """Freeze the peaks (the cap still holds)."""
        self._recording = False
        if not self.capped:
            self.server.end()
            self.writer.end()

    def stop(self) -> None:
        self._stopping.set()
        self.join(10)


Sample = tuple[float, float, int | str]  # sent at (monotonic), seconds, status or error


@dataclass
class Latency:
    """The probe's GETs in one window: count, percentiles (ms) and what failed."""

    count: int = 0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    max_ms: float = 0.0
    failures: list[str] = field(default_factory=list)

    def text(self) -> str:
        failed = f", {len(self.failures)} failed" if self.failures else ""
        return (f"good GET p50/p99/max={self.p50_ms:.1f}/{self.p99_ms:.1f}/{self.max_ms:.0f} ms "
                f"(n={self.count}{failed})")


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of sorted ``values`` (0 when there are none)."""
    if not values:
        return 0.0
    rank = max(1, -(-len(values) * fraction // 1))
    return values[int(rank) - 1]


def latency_of(samples: Sequence[Sample], start: float, end: float) -> Latency:
    """The samples sent within ``[start, end]``; a failure counts with the time it took."""
    chosen = [s for s in samples if start <= s[0] <= end]
    seconds = sorted(s[1] for s in chosen)
    return Latency(count=len(chosen), p50_ms=1000 * percentile(seconds, 0.5),
                   p99_ms=1000 * percentile(seconds, 0.99),
                   max_ms=1000 * (seconds[-1] if seconds else 0.0),
                   failures=[str(s[2]) for s in chosen if s[2] != 200])


class ProbeProcess:
    """``probe`` as the user ``good``, reading ConfigMap ``cm-0``; ``stop()`` gives its samples.
    """

    def __init__(self, server: HostileServer, out: Path, rate: float = PROBE_RATE_PER_S) -> None:
        self.out = out
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.reliability.hostile.probe", str(server.port),
             str(server.ca_file), server.tokens[GOOD.name], PROBE_PATH, str(rate), str(out)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT, env=env)

    def wait_ready(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        ready: list[bytes] = []
        reader = threading.Thread(target=lambda: ready.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(PROBE_READY_TIMEOUT_S)
        if not ready or ready[0].strip() != b"ready":
            self.stop()
            raise TimeoutError("the probe got no answer from the server")

    def stop(self) -> list[Sample]:
        """Close its stdin (it stops), wait, and read what it measured."""
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
            try:
                self.proc.wait(2 * 10.0 + 5)  # at most one request in flight (10 s timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        try:
            raw = json.loads(self.out.read_text())
        except (OSError, ValueError):
            return []
        return [(float(t), float(s), status) for t, s, status in raw]


def wall_clock() -> float:
    """The clock the probe stamps its samples with (shared by every process)."""
    return time.monotonic()
