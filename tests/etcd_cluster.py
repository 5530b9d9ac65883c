"""Real etcd processes for tests: one member, or a three-member cluster, on free loopback ports.

Each member runs Debian's ``etcd`` (3.4.23; ``tools/ensure-etcd`` installs it) in a temporary
data directory (on ``/dev/shm`` when there is one: etcd 3.4 cannot skip fsync) and is stopped by
its own pid when the cluster is closed, so no process outlives the test that started it. Tests
that use these skip only where no ``etcd`` binary exists; ``make test`` and CI install it first.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ETCD = shutil.which("etcd") or ("/usr/bin/etcd" if os.path.exists("/usr/bin/etcd") else None)
START_TIMEOUT = 20.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Member:
    """One etcd member: its name, URLs, data directory, extra flags and (when running) process."""

    name: str
    client_port: int
    peer_port: int
    data_dir: Path
    extra: Sequence[str] = ()
    process: subprocess.Popen[bytes] | None = None
    log: Path | None = None

    @property
    def client_url(self) -> str:
        scheme = "https" if "--cert-file" in self.extra else "http"
        return f"{scheme}://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    def start(self, initial_cluster: str, state: str = "new") -> None:
        assert ETCD is not None and self.process is None
        self.log = self.data_dir.with_suffix(".log")
        args = [ETCD, "--name", self.name, "--data-dir", str(self.data_dir),
                "--listen-client-urls", self.client_url,
                "--advertise-client-urls", self.client_url,
                "--listen-peer-urls", self.peer_url,
                "--initial-advertise-peer-urls", self.peer_url,
                "--initial-cluster", initial_cluster,
                "--initial-cluster-state", state,
                "--initial-cluster-token", "kubewire-test",
                "--heartbeat-interval", "50", "--election-timeout", "500",
                "--logger", "zap", "--log-outputs", "stderr", *self.extra]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(args, stdout=log, stderr=log,
                                            start_new_session=True)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop this member (SIGTERM, then SIGKILL after 10 s) and reap it."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(sig)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)

    def healthy(self) -> bool:
        if "--cert-file" in self.extra:  # the TLS member's /health needs a client cert; ask gRPC
            return self.process is not None and _port_open(self.client_port)
        try:
            with urllib.request.urlopen(f"{self.client_url}/health", timeout=1) as response:
                return b'"true"' in response.read()
        except OSError:
            return False


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@dataclass
class Cluster:
    """Members started together; ``endpoints`` is the comma list kubewire's flag takes."""

    members: list[Member] = field(default_factory=list)

    @property
    def endpoints(self) -> list[str]:
        return [m.client_url for m in self.members]

    @property
    def initial_cluster(self) -> str:
        return ",".join(f"{m.name}={m.peer_url}" for m in self.members)

    def start(self) -> None:
        for member in self.members:
            member.start(self.initial_cluster)
        self.wait_healthy(self.members)

    def wait_healthy(self, members: Sequence[Member], timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not all(m.healthy() for m in members):
            for m in members:
                if m.process is not None and m.process.poll() is not None:
                    log = m.log.read_text()[-2000:] if m.log else ""
                    raise RuntimeError(f"etcd {m.name} exited: {log}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"etcd not healthy within {timeout}s")
            time.sleep(0.05)

    def restart(self, member: Member) -> None:
        """Start a stopped member again on its data directory (it rejoins the cluster)."""
        member.start(self.initial_cluster, state="existing")
        self.wait_healthy([member])

    def stop(self) -> None:
        for member in self.members:
            member.stop()


@contextmanager
def etcd_cluster(size: int = 1, extra: Sequence[str] = ()) -> Iterator[Cluster]:
    """Start ``size`` members on free loopback ports; stop them and remove their data after."""
    if ETCD is None:
        raise RuntimeError("no etcd binary: run tools/ensure-etcd")
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="kubewire-etcd-", dir=base) as tmp:
        cluster = Cluster([Member(f"m{i}", free_port(), free_port(), Path(tmp) / f"m{i}", extra)
                           for i in range(1, size + 1)])
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.stop()
