"""``kubewire serve --workers N`` on the default SQLite store and on a real etcd, as a
subprocess on a real port.

Which worker serves a connection is read from the system: the server side of the client's
socket (``/proc/net/tcp``) belongs to exactly one worker process (``/proc/PID/fd``). With that,
a write through one worker must reach a watcher on the other, in order, with resourceVersions
either worker resumes from; a killed worker is restarted and its clients resume on a new
connection; SIGTERM (and ``kubewire stop``) stops every process, and a killed parent leaves no
worker behind. On SQLite the parent runs the writer hub: a killed hub stops everything, and
neither a killed hub nor a killed parent loses an acknowledged write. The in-memory store, which
workers cannot share, refuses ``--workers`` in one line.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubewire.server.daemon.background import alive
from tests.api_only import API_ONLY
from tests.etcd_cluster import ETCD, Cluster, etcd_cluster
from tests.integration import kubectl
from tests.integration.kubectl import needs_kubectl
from tests.integration.test_cli import KUBEWIRE, WAIT_S, one_line_error, run

CM_PATH = "/api/v1/namespaces/default/configmaps"
HUB_MODULE = "kubewire.storage.sqlite.writer_hub"


@pytest.fixture(scope="module", params=["sqlite", "etcd"])
def shared(request: pytest.FixtureRequest) -> Iterator[Cluster | None]:
    """The store the workers share: None for SQLite (the default), else a real etcd."""
    if request.param == "sqlite":
        yield None
        return
    if ETCD is None:
        pytest.skip("no etcd binary (tools/ensure-etcd)")
    with etcd_cluster(1) as cluster:
        yield cluster


def store_flags(shared: Cluster | None, prefix: str) -> list[str]:
    if shared is None:
        return []
    return ["--storage-backend", "etcd3", "--etcd-servers", shared.endpoints[0],
            "--etcd-prefix", f"/{prefix}"]


class Workers:
    """``kubewire serve --workers 2`` (HTTPS) in the foreground; its output collected."""

    def __init__(self, data_dir: Path, shared: Cluster | None, *extra: str) -> None:
        self.data_dir = data_dir
        self.kubeconfig = data_dir / "kubeconfig"
        self.proc = subprocess.Popen(
            [*KUBEWIRE, "serve", *API_ONLY, "--workers", "2", "--data-dir", str(data_dir),
             "--port", "0",
             *store_flags(shared, data_dir.name), *extra],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self.conns: list[http.client.HTTPSConnection] = []
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._ready.wait(WAIT_S):
            self.stop()
            pytest.fail("no ready line:\n" + "\n".join(self.lines))
        ready = next(line for line in self.lines if line.startswith("kubewire ready:"))
        self.url = ready.split()[2]
        self.port = int(self.url.rsplit(":", 1)[1])
        self.pids = [int(pid) for pid in ready.rpartition("pids=")[2].split(",")]

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.startswith("kubewire ready:"):
                self._ready.set()

    def children(self) -> list[int]:
        """The workers (not the SQLite writer hub)."""
        return [pid for pid in children_of(self.proc.pid) if not is_hub(pid)]

    def hub(self) -> int | None:
        return next((pid for pid in children_of(self.proc.pid) if is_hub(pid)), None)

    def tls(self) -> ssl.SSLContext:
        pki = self.data_dir / "pki"
        context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        context.load_cert_chain(pki / "admin.crt", pki / "admin.key")
        return context

    def connect(self) -> http.client.HTTPSConnection:
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.tls(),
                                           timeout=WAIT_S)
        self.conns.append(conn)
        conn.connect()
        return conn

    def connect_to(self, pid: int, tries: int = 64) -> http.client.HTTPSConnection:
        """A connection that worker ``pid`` serves (the kernel picks: try until it does)."""
        for _ in range(tries):
            conn = self.connect()
            if self.worker_of(conn) == pid:
                return conn
            conn.close()
        pytest.fail(f"no connection reached worker {pid} in {tries} tries")

    def worker_of(self, conn: http.client.HTTPConnection) -> int:
        assert conn.sock is not None
        return serving_pid(self.port, conn.sock.getsockname()[1], self.children())

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(WAIT_S)
        for conn in self.conns:
            conn.close()
        self._reader.join(WAIT_S)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return code


def children_of(parent: int) -> list[int]:
    """The pids whose parent is ``parent`` (``/proc/PID/stat``'s fourth field)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat.rpartition(")")[2].split()
            if int(fields[1]) == parent and fields[0] != "Z":
                out.append(int(entry))
    return sorted(out)


def is_hub(pid: int) -> bool:
    try:
        return HUB_MODULE.encode() in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False


def serving_pid(server_port: int, client_port: int, pids: list[int]) -> int:
    """The process holding the server's end of the connection from ``client_port``."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        inode = _server_socket_inode(server_port, client_port)
        for pid in pids:
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                continue
            for fd in fds:
                try:
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]":
                        return pid
                except OSError:
                    continue
        time.sleep(0.02)
    raise AssertionError(f"no worker of {pids} holds the connection from port {client_port}")


def _server_socket_inode(server_port: int, client_port: int) -> str | None:
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            cols = row.split()
            local_port = int(cols[1].rsplit(":", 1)[1], 16)
            remote_port = int(cols[2].rsplit(":", 1)[1], 16)
            if local_port == server_port and remote_port == client_port:
                return cols[9]
    return None


def call(conn: http.client.HTTPConnection, method: str, path: str,
         body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    text = response.read()
    assert response.status < 300, (response.status, text)
    result: dict[str, Any] = json.loads(text)
    return result


def create_cm(conn: http.client.HTTPConnection, name: str) -> str:
    made = call(conn, "POST", CM_PATH, {"metadata": {"name": name}, "data": {"k": name}})
    return str(made["metadata"]["resourceVersion"])


def watch(conn: http.client.HTTPConnection, rv: str) -> http.client.HTTPResponse:
    conn.request("GET", f"{CM_PATH}?watch=1&resourceVersion={rv}&allowWatchBookmarks=false")
    response = conn.getresponse()
    assert response.status == 200
    return response


def next_events(stream: http.client.HTTPResponse, n: int) -> list[tuple[str, str, str]]:
    """The next ``n`` events as (type, name, resourceVersion)."""
    out = []
    while len(out) < n:
        line = stream.readline()
        assert line, f"the watch ended after {out}"
        event = json.loads(line)
        meta = event["object"]["metadata"]
        out.append((event["type"], meta["name"], meta["resourceVersion"]))
    return out


@pytest.fixture(scope="module")
def workers(shared: Cluster | None,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workers]:
    server = Workers(tmp_path_factory.mktemp("shared"), shared)
    yield server
    server.stop()


def test_two_workers_share_the_port_and_requests_reach_both(workers: Workers) -> None:
    assert len(workers.pids) == 2
    assert workers.children() == sorted(workers.pids)
    seen = set()
    for _ in range(40):
        conn = workers.connect()
        seen.add(workers.worker_of(conn))
        call(conn, "GET", "/api/v1/namespaces/default")
        conn.close()
        if seen == set(workers.pids):
            break
    assert seen == set(workers.pids)
    # the logs say which worker served what
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        logged = {pid for pid in workers.pids for line in workers.lines
                  if f" pid {pid} kubewire.httplog:" in line}
        if logged == set(workers.pids):
            break
        time.sleep(0.05)
    assert logged == set(workers.pids)


def test_one_worker_at_a_time_runs_the_controllers(workers: Workers) -> None:
    deadline = time.monotonic() + 10
    while True:
        leaders = {pid for pid in workers.pids for line in workers.lines
                   if f" pid {pid} " in line and "successfully acquired lease "
                   "kube-system/kube-controller-manager" in line}
        if leaders or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert len(leaders) == 1, workers.lines


def test_a_write_through_one_worker_reaches_watchers_on_the_other_in_order(
        workers: Workers) -> None:
    first, second = workers.pids
    writer = workers.connect_to(first)
    reader = workers.connect_to(second)
    rv = call(reader, "GET", CM_PATH)["metadata"]["resourceVersion"]
    stream = watch(reader, rv)
    lister = workers.connect_to(second)
    written = []
    for i in range(5):
        written.append((f"order-{i}", create_cm(writer, f"order-{i}")))
        # a consistent read on the other worker sees the write the first acknowledged
        names = {item["metadata"]["name"] for item in call(lister, "GET", CM_PATH)["items"]}
        assert f"order-{i}" in names
    events = next_events(stream, 5)
    assert events == [("ADDED", name, rv) for name, rv in written]
    # the resourceVersions are the store's: the writer's worker resumes from the reader's
    resumed = watch(workers.connect_to(first), events[1][2])
    assert next_events(resumed, 3) == events[2:]
    # and a list at one worker's revision answers on the other
    listed = call(workers.connect_to(second), "GET",
                  f"{CM_PATH}?resourceVersion={written[-1][1]}&resourceVersionMatch=NotOlderThan")
    assert {"order-0", "order-4"} <= {item["metadata"]["name"] for item in listed["items"]}


def test_a_token_one_worker_issues_is_accepted_by_the_other(workers: Workers) -> None:
    first, second = workers.pids
    issued = call(workers.connect_to(first), "POST",
                  "/api/v1/namespaces/default/serviceaccounts/default/token",
                  {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                   "spec": {"expirationSeconds": 600}})
    token = issued["status"]["token"]

    def status_with(bearer: str) -> int:
        conn = http.client.HTTPSConnection("127.0.0.1", workers.port, timeout=WAIT_S,
                                           context=ssl.create_default_context(
                                               cafile=str(workers.data_dir / "pki" / "ca.crt")))
        workers.conns.append(conn)
        for _ in range(64):  # the other worker's connection, without a client certificate
            conn.connect()
            if workers.worker_of(conn) == second:
                break
            conn.close()
        conn.request("GET", "/api/v1/namespaces/default/serviceaccounts/default",
                     headers={"Authorization": f"Bearer {bearer}"})
        response = conn.getresponse()
        response.read()
        return response.status

    assert status_with(token) != 401
    assert status_with(token[:-4] + "AAAA") == 401


@needs_kubectl
def test_kubectl_works_across_workers(workers: Workers) -> None:
    done = kubectl.run(workers, "create", "configmap", "from-kubectl", "--from-literal=a=b")
    assert done.returncode == 0, done.stderr
    for _ in range(4):  # each run connects anew: the kernel spreads them over the workers
        done = kubectl.run(workers, "get", "configmap", "from-kubectl", "-o",
                           "jsonpath={.data.a}")
        assert (done.returncode, done.stdout) == (0, "b"), done.stderr
    done = kubectl.run(workers, "delete", "configmap", "from-kubectl")
    assert done.returncode == 0, done.stderr
    done = kubectl.run(workers, "get", "configmap", "from-kubectl")
    assert done.returncode != 0 and "NotFound" in done.stderr


def test_a_killed_worker_is_restarted_and_its_watchers_resume_elsewhere(
        shared: Cluster | None, tmp_path: Path) -> None:
    server = Workers(tmp_path / "killed", shared)
    try:
        victim, survivor = server.pids
        stream = watch(server.connect_to(victim),
                       call(server.connect(), "GET", CM_PATH)["metadata"]["resourceVersion"])
        create_cm(server.connect(), "before")
        (_, _, last_rv), = next_events(stream, 1)
        os.kill(victim, signal.SIGKILL)
        try:  # the connection ends with its worker (a timeout would fail the test)
            ended = stream.readline() == b""
        except (ConnectionError, ssl.SSLError, http.client.HTTPException):
            ended = True
        assert ended
        missed = create_cm(server.connect(), "while-down")  # the survivor serves meanwhile
        resumed = watch(server.connect(), last_rv)
        assert next_events(resumed, 1) == [("ADDED", "while-down", missed)]
        deadline = time.monotonic() + WAIT_S
        while len(server.children()) < 2 or victim in server.children():
            assert time.monotonic() < deadline, server.lines
            time.sleep(0.1)
        replacement = next(pid for pid in server.children() if pid != survivor)
        while not any(f"worker 0 (pid {replacement}) ready" in line for line in server.lines):
            assert time.monotonic() < deadline, server.lines
            time.sleep(0.1)
        assert any(f"(pid {victim}) exited with signal SIGKILL; restarting" in line
                   for line in server.lines)
        create_cm(server.connect_to(replacement), "after")
        assert next_events(resumed, 1)[0][1] == "after"
        workers_now = server.children()
        assert server.stop() == 0
        assert not any(alive(pid) for pid in workers_now)
        assert any("shutting down 2 workers" in line for line in server.lines)
    finally:
        server.stop(signal.SIGKILL)


class Writing:
    """Threads creating ConfigMaps (each on its own connection) until one fails: what was
    acknowledged, by name and resourceVersion."""

    def __init__(self, server: Workers, threads: int = 4) -> None:
        self.acknowledged: dict[str, str] = {}
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._write, args=(server.connect(), i),
                                          daemon=True) for i in range(threads)]
        for thread in self._threads:
            thread.start()

    def _write(self, conn: http.client.HTTPSConnection, index: int) -> None:
        # The connection is closed here as the thread ends: ``Workers.stop()`` may close it
        # between two writes, and the thread's next request then reopens it (http.client's
        # auto_open) to workers that have not exited yet; nothing else would close that
        # socket (the likely source of an unclosed-socket warning at a later collection).
        try:
            for n in range(100_000):
                name = f"w{index}-{n}"
                try:
                    rv = create_cm(conn, name)
                except (OSError, AssertionError, http.client.HTTPException, ssl.SSLError):
                    return
                with self._lock:
                    self.acknowledged[name] = rv
        finally:
            conn.close()

    def wait_for(self, count: int) -> None:
        deadline = time.monotonic() + WAIT_S
        while len(self.acknowledged) < count:
            assert time.monotonic() < deadline, f"only {len(self.acknowledged)} writes"
            time.sleep(0.02)

    def join(self) -> dict[str, str]:
        for thread in self._threads:
            thread.join(WAIT_S)
        return dict(self.acknowledged)


def assert_kept(data_dir: Path, shared: Cluster | None, written: dict[str, str]) -> None:
    """A server started again on ``data_dir`` holds every acknowledged write, as written."""
    server = Workers(data_dir, shared)
    try:
        items = call(server.connect(), "GET", CM_PATH)["items"]
        held = {item["metadata"]["name"]: item["metadata"]["resourceVersion"] for item in items}
        assert {name: held.get(name) for name in written} == written
    finally:
        assert server.stop() == 0


def test_a_killed_parent_leaves_no_worker_behind(shared: Cluster | None,
                                                 tmp_path: Path) -> None:
    server = Workers(tmp_path / "orphans", shared)
    pids = children_of(server.proc.pid)  # the workers, and the hub on SQLite
    assert len(pids) == 2 + (shared is None)
    writing = Writing(server)
    writing.wait_for(20)
    server.stop(signal.SIGKILL)  # with writes in flight
    deadline = time.monotonic() + WAIT_S
    while any(alive(pid) for pid in pids):
        assert time.monotonic() < deadline, f"workers {pids} outlived their parent"
        time.sleep(0.1)
    assert_kept(tmp_path / "orphans", shared, writing.join())


def test_a_killed_hub_stops_everything_and_loses_no_acknowledged_write(tmp_path: Path) -> None:
    server = Workers(tmp_path / "hub", None)
    try:
        hub = server.hub()
        assert hub is not None
        everyone = children_of(server.proc.pid)
        writing = Writing(server)
        writing.wait_for(20)
        os.kill(hub, signal.SIGKILL)  # with writes in flight
        assert server.proc.wait(WAIT_S) == 1
        assert not any(alive(pid) for pid in everyone)
        written = writing.join()
        assert any(f"writer hub (pid {hub}) exited with signal SIGKILL: stopping every worker"
                   in line for line in server.lines), server.lines
    finally:
        server.stop(signal.SIGKILL)
    assert_kept(tmp_path / "hub", None, written)


@needs_kubectl
def test_detach_and_stop_with_workers(shared: Cluster | None, tmp_path: Path) -> None:
    data = tmp_path / "detached"
    done = run("serve", *API_ONLY,
               "--detach", "--workers", "2", "--data-dir", str(data), "--port", "0",
               *store_flags(shared, "detached"))
    assert done.returncode == 0, done.stderr
    parent = int(done.stdout.split("(pid ")[1].split(")")[0])
    pids = children_of(parent)
    assert len(pids) == 2 + (shared is None)
    got = kubectl.run(data / "kubeconfig", "get", "namespaces", "-o", "name")
    assert got.returncode == 0 and "namespace/default" in got.stdout, got.stderr
    done = run("stop", "--data-dir", str(data))
    assert done.returncode == 0, done.stderr
    assert not any(alive(pid) for pid in [parent, *pids])


def test_the_memory_store_refuses_workers_in_one_line(tmp_path: Path) -> None:
    done = run("serve", *API_ONLY,
               "--workers", "2", "--data-dir", str(tmp_path / "d"), "--port", "0",
               "--storage", "memory")
    assert one_line_error(done) == (
        "kubewire: cannot start: --workers 2 needs a store its workers share: SQLite (the "
        "default) or --storage-backend etcd3 --etcd-servers URL (the in-memory store is one "
        "process's)")


def test_a_port_in_use_is_refused_before_any_worker_starts(shared: Cluster | None,
                                                           tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run("serve", *API_ONLY,
                   "--workers", "2", "--data-dir", str(tmp_path / "d"), "--port",
                   str(port), *store_flags(shared, "d"))
        assert one_line_error(done) == (f"kubewire: cannot start: 127.0.0.1:{port} is already "
                                        "in use (another server? pick another --port, or 0 "
                                        "for a free one)")


def test_a_worker_that_cannot_start_says_why_in_one_line(shared: Cluster | None,
                                                         tmp_path: Path) -> None:
    policy = tmp_path / "missing-policy.yaml"  # only a worker reads it
    done = run("serve", *API_ONLY,
               "--workers", "2", "--data-dir", str(tmp_path / "d"), "--port", "0",
               *store_flags(shared, "d"), "--audit-policy-file", str(policy),
               "--log-level", "WARNING")
    line = one_line_error(done)
    assert line.startswith("kubewire: cannot start: ") and str(policy) in line, line
    assert running_with(str(tmp_path / "d")) == []  # no worker is left
    assert running_with(str(tmp_path / "d" / "kubewire.db")) == []  # nor the SQLite hub


def running_with(arg: str) -> list[int]:
    """The live processes with ``arg`` on their command line."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if arg.encode() in argv and alive(int(entry)):
                found.append(int(entry))
    return found


def test_a_store_that_lost_revisions_is_refused_before_any_worker_starts(tmp_path: Path) -> None:
    from kubewire.storage.sqlite.revision_record import encode_revision

    data = tmp_path / "d"
    data.mkdir()
    (data / "kubewire.db-revision").write_bytes(encode_revision(5))  # committed, not in a file
    done = run("serve", *API_ONLY, "--workers", "2", "--data-dir", str(data), "--port", "0")
    line = one_line_error(done)
    assert line.startswith(f"kubewire: cannot start: {data / 'kubewire.db'} holds revisions up "
                           "to 0, but revision 5 was committed"), line
    assert line.endswith(f"run: kubewire repair --data-dir {data} --accept-data-loss"), line
    assert running_with(str(data / "kubewire.db")) == []
    assert not (data / "kubewire-writer.sock").exists()


def test_a_server_whose_hub_drops_it_exits(tmp_path: Path) -> None:
    """What lets the parent restart a worker the hub dropped: the server exits (status 1)."""
    from kubewire.storage.base import Retention
    from kubewire.storage.sqlite.writer_hub import HubProcess

    data = tmp_path / "d"
    data.mkdir()
    hub = HubProcess(data / "kubewire.db", "full", Retention(), 0)
    hub.start()
    try:
        proc = subprocess.Popen(
            [*KUBEWIRE, "serve", *API_ONLY,
             "--data-dir", str(data), "--port", "0", "--insecure-http",
             "--sqlite-hub", hub.socket_path], stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("kubewire ready:"):
                break
        else:
            pytest.fail("no ready line")
        assert hub.process is not None
        os.kill(hub.process.pid, signal.SIGKILL)
        assert proc.wait(WAIT_S) == 1
        assert "the SQLite writer hub dropped this worker's store: exiting" in proc.stdout.read()
        proc.stdout.close()
    finally:
        hub.stop()
