"""Server processes under test: ``kubewire serve`` and the benchmark's reference servers.

Each runs as its own OS process so its CPU time and RSS can be read from ``/proc``. Servers
print one line when they listen; we read the port from it.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
from functools import cache
from pathlib import Path

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
REPO_ROOT = Path(__file__).resolve().parents[1]  # so ``-m bench.<server>`` imports from any cwd
_PORT = re.compile(rb"(?:127\.0\.0\.1:|ready )(\d+)")


def kubewire_command() -> list[str]:
    """The ``kubewire`` console script next to this interpreter (what users run)."""
    script = Path(sys.executable).parent / "kubewire"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "kubewire.cli"]


def without_components(*keep: str) -> list[str]:
    """``kubewire serve`` flags that turn off the cluster's components (controllers, scheduler,
    simulated nodes) but ``keep``: a benchmark's own load is all the server sees."""
    from kubewire.server.controllers.selection import CLUSTER_COMPONENTS

    off = [f"-{name}" for name in CLUSTER_COMPONENTS if name not in keep]
    return ["--controllers", ",".join(["*", *off]), "--nodes", "0"]


@cache
def tree_without_components(src: str) -> tuple[str, ...]:
    """``without_components()`` for the checkout whose package directory is ``src`` (an A/B
    tree): its own component names, read by that tree's interpreter; none for a tree from before
    the cluster's components (its ``kubewire serve`` runs none, and knows neither flag)."""
    code = ("from kubewire.server.controllers.selection import CLUSTER_COMPONENTS as c; "
            "print(','.join(c))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": src}, check=False, timeout=60)
    if done.returncode != 0:
        return ()
    off = [f"-{name}" for name in done.stdout.strip().split(",") if name]
    return ("--controllers", ",".join(["*", *off]), "--nodes", "0")


def kubewire_serve_argv(data_dir: Path, *, durability: str = "full", port: int = 0) -> list[str]:
    """Plain HTTP (``--insecure-http``): the benchmarks measure the server, not TLS; and none
    of the cluster's components (``without_components``; a benchmark that wants some appends
    its own ``--controllers``, which the last one given decides)."""
    return [*kubewire_command(), "serve", "--data-dir", str(data_dir), "--port", str(port),
            "--insecure-http", "--durability", durability, "--log-level", "WARNING",
            *without_components()]


def reference_argv(module: str, port: int = 0) -> list[str]:
    return [sys.executable, "-m", module, "--port", str(port)]


class ServerProcess:
    """A started server; ``port`` is known once ``wait_ready`` returned."""

    def __init__(self, name: str, argv: list[str]) -> None:
        self.name = name
        self.argv = argv
        self.started_at = time.monotonic()
        # stderr goes to a file: a pipe nobody reads could fill and stall the server
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self._stderr,
                                        stdin=subprocess.DEVNULL, cwd=REPO_ROOT)
        self.pid = self.process.pid
        self.port = 0

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> ServerProcess:
        """Block until the server printed its listening line (bounded by ``timeout_s``)."""
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout_s
        buffered = b""
        fd = self.process.stdout.fileno()
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                data = os.read(fd, 4096)
                if not data:
                    break
                buffered += data
                match = _PORT.search(buffered)
                if match and buffered.endswith(b"\n"):
                    self.port = int(match.group(1))
                    return self
        err = self.stop()
        raise RuntimeError(f"{self.name} did not become ready: {buffered!r} {err[-2000:]}")

    def cpu_seconds(self) -> float:
        return process_cpu_seconds(self.pid)

    def rss_bytes(self) -> int:
        return process_rss_bytes(self.pid)

    def stop(self) -> str:
        """SIGTERM, then SIGKILL after ``STOP_TIMEOUT_S``; returns the stderr text."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.communicate(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.communicate(timeout=STOP_TIMEOUT_S)
        if self._stderr.closed:
            return ""
        self._stderr.seek(0)
        err = self._stderr.read().decode(errors="replace")
        self._stderr.close()
        return err

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` (all its threads) from ``/proc/<pid>/stat``."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS  # utime, stime


def process_rss_bytes(pid: int) -> int:
    """Resident set size of ``pid`` from ``/proc/<pid>/statm``."""
    with open(f"/proc/{pid}/statm", "rb") as f:
        return int(f.read().split()[1]) * _PAGE_BYTES


def reset_peak_rss(pid: int) -> None:
    """Start ``VmHWM`` (peak RSS) over from the current RSS (Linux ``clear_refs`` 5)."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


def peak_rss_bytes(pid: int) -> int:
    """``VmHWM``: the highest RSS since start or the last ``reset_peak_rss``."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/<pid>/status")
