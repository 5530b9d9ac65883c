"""A `kubewire serve` subprocess and the small blocking HTTP clients the reliability runs use.

``ServerProcess`` starts the real CLI on a loopback port (plain HTTP, or HTTPS with ``tls=True``),
can SIGKILL it and start it again on the same data dir and port, and reads its RSS from
``/proc``; ``writer_pid`` finds its writer process. ``run_cli`` runs one ``kubewire`` command to
its end. ``request`` is one JSON request on a caller-owned ``http.client`` connection.
``WatchReader`` follows one watch on a thread and resumes from its last revision whenever the
stream ends (server killed, closed).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.api_only import API_ONLY

JSON = dict[str, Any]
HOST = "127.0.0.1"
START_TIMEOUT_S = 60.0
REQUEST_TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def unverified_tls() -> ssl.SSLContext:
    """A client context that takes the server's own certificate (tests only)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


class ServerProcess:
    """``kubewire serve --insecure-http`` in a subprocess (``tls``: its default HTTPS, access
    checked); ``start`` waits for ``/readyz``."""

    def __init__(self, data_dir: Path, *args: str, port: int = 0, tls: bool = False) -> None:
        self.data_dir = data_dir
        self.args = list(args)
        self.tls = tls
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.kills = 0
        self.peak_rss_kb = 0
        self._log = data_dir.parent / f"{data_dir.name}.log"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> ServerProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "kubewire.cli", "serve", *API_ONLY, "--data-dir",
               str(self.data_dir),
               "--host", HOST, "--port", str(self.port), "--log-level", "WARNING",
               *([] if self.tls else ["--insecure-http"]), *self.args]
        with open(self._log, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        self.starts += 1
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                conn = self.connection(timeout=2)
                try:
                    conn.request("GET", "/readyz")
                    if conn.getresponse().status == 200:
                        return self
                finally:
                    conn.close()
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise TimeoutError(f"server did not become ready: {self.log_tail()}")

    def connection(self, timeout: float = REQUEST_TIMEOUT_S) -> http.client.HTTPConnection:
        """A client connection to this server (HTTPS without verification when ``tls``)."""
        if self.tls:
            return http.client.HTTPSConnection(HOST, self.port, timeout=timeout,
                                               context=unverified_tls())
        return http.client.HTTPConnection(HOST, self.port, timeout=timeout)

    def log_tail(self) -> str:
        try:
            return self._log.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def rss_kb(self) -> int:
        """Current RSS in KiB (and the peak seen so far in ``peak_rss_kb``, from VmHWM)."""
        try:
            status = Path(f"/proc/{self.pid}/status").read_text()
        except OSError:
            return 0
        values = {line.split(":")[0]: line.split()[1] for line in status.splitlines()
                  if line.startswith(("VmRSS", "VmHWM"))}
        self.peak_rss_kb = max(self.peak_rss_kb, int(values.get("VmHWM", 0)))
        return int(values.get("VmRSS", 0))

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, as in a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)
            self.kills += 1
        self.proc = None

    def stop(self) -> None:
        """SIGTERM and wait (SIGKILL after 30 s)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        self.proc = None

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def writer_pid(data_dir: Path) -> int:
    """The writer process of the server on ``data_dir`` (its argv names the database)."""
    database = str(data_dir / "kubewire.db")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"kubewire.storage.sqlite.writer_child" in argv and database.encode() in argv:
            return int(entry)
    raise AssertionError(f"no writer process for {database}")


def run_cli(*args: str, timeout: float = START_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """``kubewire ARGS`` to its end, output captured (a server that starts is a TimeoutError)."""
    return subprocess.run([sys.executable, "-m", "kubewire.cli", *args], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False)


@dataclass
class Reply:
    status: int
    body: JSON


def request(conn: http.client.HTTPConnection, method: str, path: str,
            body: JSON | None = None, content_type: str = "application/json") -> Reply:
    """One request; raises ``OSError``/``http.client.HTTPException`` if there is no answer."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Accept": "application/json"}
    if data is not None:
        headers["Content-Type"] = content_type
    conn.request(method, path, body=data, headers=headers)
    resp = conn.getresponse()
    raw = resp.read()
    try:
        parsed = json.loads(raw) if raw else {}
    except ValueError:
        parsed = {"raw": raw.decode(errors="replace")}
    return Reply(resp.status, parsed if isinstance(parsed, dict) else {"value": parsed})


def call(port: int, method: str, path: str, body: JSON | None = None,
         content_type: str = "application/json") -> Reply:
    conn = http.client.HTTPConnection(HOST, port, timeout=REQUEST_TIMEOUT_S)
    try:
        return request(conn, method, path, body, content_type)
    finally:
        conn.close()


def list_revision(port: int, collection: str) -> int:
    reply = call(port, "GET", collection + "?limit=1")
    assert reply.status == 200, reply
    return int(reply.body["metadata"]["resourceVersion"])


@dataclass(frozen=True)
class Seen:
    """One watch event as a comparable fact."""

    revision: int
    type: str
    key: str  # namespace/name
    marker: str | None  # the writer's annotation, if any


MARKER = "reliability.kubewire.io/w"


def seen_of(event: JSON) -> Seen:
    meta = event["object"]["metadata"]
    key = f"{meta.get('namespace', '')}/{meta['name']}"
    marker = (meta.get("annotations") or {}).get(MARKER)
    return Seen(int(meta["resourceVersion"]), event["type"], key, marker)


@dataclass
class WatchReader:
    """Follow ``collection`` from ``start`` on a thread, resuming after every end of stream.

    Stops when ``until`` says so for the last event, or when ``stop()`` is called. Every event
    goes to ``events``; ERROR events and non-200 answers go to ``errors`` (and end the reader).
    """

    port: Callable[[], int]
    collection: str
    start: int
    until: Callable[[list[Seen]], bool] = lambda _: False
    events: list[Seen] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    connects: int = 0
    done: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._stopping = False
        self._conn: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"watch {self.collection}",
                                        daemon=True)
        self._thread.start()

    @property
    def last(self) -> int:
        return self.events[-1].revision if self.events else self.start

    def _run(self) -> None:
        try:
            while not self._stopping and not self.done.is_set():
                self._follow_once()
                if not self.done.is_set() and not self._stopping:
                    time.sleep(0.05)
        finally:
            self.done.set()

    def _follow_once(self) -> None:
        conn = http.client.HTTPConnection(HOST, self.port(), timeout=REQUEST_TIMEOUT_S)
        with self._lock:
            self._conn = conn
        try:
            conn.request("GET", f"{self.collection}?watch=1&resourceVersion={self.last}",
                         headers={"Accept": "application/json"})
            resp = conn.getresponse()
            self.connects += 1
            if resp.status != 200:
                self.errors.append(f"watch answered {resp.status}: {resp.read()[:300]!r}")
                self.done.set()
                return
            assert conn.sock is not None
            conn.sock.settimeout(None)
            while line := resp.readline():
                event = json.loads(line)
                if event["type"] == "ERROR":
                    self.errors.append(f"ERROR event: {event['object']}")
                    self.done.set()
                    return
                if event["type"] == "BOOKMARK":
                    continue
                self.events.append(seen_of(event))
                if self.until(self.events):
                    self.done.set()
                    return
        except (OSError, http.client.HTTPException, ValueError):
            pass  # server gone or stream cut: resume from the last revision
        finally:
            with self._lock:
                self._conn = None
            conn.close()

    def stop(self) -> None:
        self._stopping = True
        with self._lock:
            if self._conn is not None and self._conn.sock is not None:
                with contextlib.suppress(OSError):
                    self._conn.sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(30)

    def wait(self, timeout: float) -> bool:
        return self.done.wait(timeout)


def count_gaps_and_duplicates(got: list[int], expected: list[int]) -> tuple[int, int]:
    """Revisions expected but never seen, and revisions seen more than once (or unexpected)."""
    seen: dict[int, int] = {}
    for revision in got:
        seen[revision] = seen.get(revision, 0) + 1
    gaps = sum(1 for revision in expected if revision not in seen)
    wanted = set(expected)
    duplicates = sum(n - 1 for n in seen.values()) + sum(1 for r in seen if r not in wanted)
    return gaps, duplicates
