"""The ``kubewire`` command as a user meets it: run as a subprocess on real ports.

One server per data directory (the second start and ``repair`` are refused, naming the holder's
pid); every mistake is one line on stderr and a non-zero exit, never a traceback; ``serve
--detach`` returns only once kubectl can use the server, and ``stop`` stops it.
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from kubewire.server.daemon.background import alive
from tests.api_only import API_ONLY
from tests.integration import kubectl
from tests.integration.kubectl import needs_kubectl

KUBEWIRE = (sys.executable, "-m", "kubewire.cli")
WAIT_S = 60.0


def run(*args: str, env: dict[str, str] | None = None,
        timeout: float = WAIT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*KUBEWIRE, *args], capture_output=True, text=True, timeout=timeout,
                          env=env, check=False)


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    """The single line a failed command printed on stderr (asserting that is all it did)."""
    assert done.returncode != 0, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


class Server:
    """``kubewire serve`` in the foreground, plain HTTP on a free port unless told otherwise."""

    def __init__(self, data_dir: Path, *args: str,
                 open_files: tuple[int, int] | None = None) -> None:
        def limit() -> None:  # in the child, before it executes kubewire
            if open_files is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, open_files)

        self.proc = subprocess.Popen(
            [*KUBEWIRE, "serve", *API_ONLY, "--data-dir", str(data_dir), "--log-level", "WARNING",
             *(args or ("--port", "0", "--insecure-http"))],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=limit)
        self.ready = self._ready_line()

    def _ready_line(self) -> str:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            readable, _, _ = select.select([self.proc.stdout], [], [], 0.5)
            if readable:
                line = self.proc.stdout.readline()
                if line.startswith("kubewire ready:"):
                    return line.strip()
                if not line:
                    break
        self.stop()
        assert self.proc.stderr is not None
        pytest.fail(f"no ready line; stderr: {self.proc.stderr.read()}")

    @property
    def url(self) -> str:
        return self.ready.split()[2]

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        self.proc.wait(WAIT_S)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for server in started:
        server.stop()


# --- one server per data directory -----------------------------------------------------------

def test_a_second_server_on_the_same_data_dir_is_refused_naming_the_first(
        tmp_path: Path, servers: list[Server]) -> None:
    data = tmp_path / "data"
    first = Server(data)
    servers.append(first)
    kubeconfig = (data / "kubeconfig").read_text()
    second = run("serve", *API_ONLY, "--data-dir", str(data), "--port", "0", "--insecure-http")
    assert one_line_error(second) == (
        f"kubewire: cannot start: {data} is in use by kubewire serve (pid {first.proc.pid})")
    assert (data / "kubeconfig").read_text() == kubeconfig  # not overwritten
    assert (data / "kubewire.lock").read_text() == f"{first.proc.pid} serve\n"


def test_repair_is_refused_beside_a_server_and_works_without_one(
        tmp_path: Path, servers: list[Server]) -> None:
    data = tmp_path / "data"
    server = Server(data)
    servers.append(server)
    refused = run("repair", "--data-dir", str(data), "--accept-data-loss")
    assert one_line_error(refused) == (f"kubewire: cannot repair: {data} is in use by kubewire "
                                       f"serve (pid {server.proc.pid}) (stop it first)")
    server.stop()
    repaired = run("repair", "--data-dir", str(data), "--accept-data-loss")
    assert repaired.returncode == 0, repaired.stderr
    assert repaired.stdout.startswith(f"repaired {data}/kubewire.db")
    servers.append(Server(data))  # and the repaired store serves again


def test_a_killed_server_leaves_no_lock_behind(tmp_path: Path, servers: list[Server]) -> None:
    data = tmp_path / "data"
    first = Server(data)
    first.stop(signal.SIGKILL)
    again = Server(data)
    servers.append(again)
    assert (data / "kubewire.lock").read_text() == f"{again.proc.pid} serve\n"


# --- mistakes are one line -------------------------------------------------------------------

def test_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run("serve", *API_ONLY, "--data-dir", str(tmp_path / "d"), "--port", str(port))
    assert one_line_error(done) == (
        f"kubewire: cannot start: 127.0.0.1:{port} is already in use (another server? pick "
        "another --port, or 0 for a free one)")


@pytest.mark.parametrize(("args", "expected"), [
    (("--port", "99999"), "kubewire serve: error: argument --port: 99999 is not a port: use "
                          "0-65535 (0 picks a free one)"),
    (("--port", "-1"), "kubewire serve: error: argument --port: -1 is not a port: use 0-65535 "
                       "(0 picks a free one)"),
    (("--log-level", "loud"), "kubewire serve: error: argument --log-level: unknown level "
                              "'loud': use one of DEBUG, INFO, WARNING, ERROR, CRITICAL"),
    (("--request-timeout", "7d"), "kubewire serve: error: argument --request-timeout: time: "
                                  "unknown unit \"d\" in duration \"7d\""),
    (("--merge-kubeconfig",), "kubewire: error: --merge-kubeconfig goes with --detach"),
    (("--workers", "0"), "kubewire serve: error: argument --workers: must be at least 1: 0"),
    (("--workers", "two"), "kubewire serve: error: argument --workers: not a whole number: "
                           "'two'"),
])
def test_bad_flags_are_one_line(tmp_path: Path, args: tuple[str, ...], expected: str) -> None:
    done = run("serve", *API_ONLY, "--data-dir", str(tmp_path / "d"), *args, timeout=20)
    assert one_line_error(done) == expected
    assert done.returncode == 2
    assert not (tmp_path / "d").exists()


def test_bad_data_dirs_and_hosts_are_one_line(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("")
    assert one_line_error(run("serve", *API_ONLY, "--data-dir", str(a_file))) == (
        f"kubewire: cannot start: --data-dir {a_file}: not a directory")
    # sysfs: no new directories, no new files, even for root
    assert re.fullmatch(r"kubewire: cannot start: --data-dir /sys/kubewire-test: cannot be made "
                        r"\((Operation not permitted|Permission denied)\)",
                        one_line_error(run("serve", *API_ONLY, "--data-dir", "/sys/kubewire-test")))
    assert re.fullmatch(r"kubewire: cannot start: --data-dir /sys: not writable"
                        r"( \(Permission denied: /sys/kubewire\.lock\))?",  # root: on opening
                        one_line_error(run("serve", *API_ONLY, "--data-dir", "/sys")))
    assert re.fullmatch(
        r"kubewire: cannot start: --host no-such-host\.invalid: .+",
        one_line_error(run("serve", *API_ONLY, "--data-dir", str(tmp_path / "d"), "--host",
                           "no-such-host.invalid")))


def test_user_before_the_first_serve_is_one_line(tmp_path: Path) -> None:
    line = one_line_error(run("user", "alice", "--data-dir", str(tmp_path / "new")))
    assert line == (f"kubewire: cannot issue credentials: no CA in {tmp_path}/new/pki: start "
                    "`kubewire serve` once first")


def test_version_and_bare_help() -> None:
    version = run("--version")
    assert version.returncode == 0
    assert re.fullmatch(r"kubewire \d+\.\d+\.\d+\S*\n", version.stdout)
    bare = run()
    assert bare.returncode == 0, bare.stderr
    assert bare.stdout.startswith("usage: kubewire")
    for command in ("serve", "stop", "user", "repair"):
        assert re.search(rf"^\s+{command}\s", bare.stdout, re.M), bare.stdout


def test_the_ready_line_names_the_address_actually_bound(
        tmp_path: Path, servers: list[Server]) -> None:
    server = Server(tmp_path / "data", "--host", "0.0.0.0", "--port", "0", "--insecure-http")
    servers.append(server)
    found = re.fullmatch(r"kubewire ready: http://127\.0\.0\.1:(\d+) kubeconfig=\S+ "
                         r"listening on 0\.0\.0\.0:(\d+)", server.ready)
    assert found, server.ready
    assert found[1] == found[2] != "0"


def test_serve_raises_its_open_file_limit_as_go_does(tmp_path: Path,
                                                     servers: list[Server]) -> None:
    """Go programs (kube-apiserver among them) raise the soft RLIMIT_NOFILE to the hard limit
    as they start; so does ``serve``, and it then holds more connections than it was given."""
    soft, hard = 200, resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard < 1000:
        pytest.skip(f"the hard open-file limit here is {hard}")
    server = Server(tmp_path / "d", open_files=(soft, hard))
    servers.append(server)
    limits = Path(f"/proc/{server.proc.pid}/limits").read_text()
    open_files = next(line for line in limits.splitlines() if line.startswith("Max open files"))
    assert open_files.split()[3:5] == [str(hard), str(hard)]
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    connections = [socket.create_connection((host, int(port)), timeout=20)
                   for _ in range(soft + 100)]
    try:
        for conn in connections:
            conn.sendall(b"GET /readyz HTTP/1.1\r\nHost: kubewire\r\n\r\n")
        answers = [conn.recv(64) for conn in connections]
    finally:
        for conn in connections:
            conn.close()
    assert all(a.startswith(b"HTTP/1.1 200 ") for a in answers), {a[:20] for a in answers}


# --- serve --detach, stop --------------------------------------------------------------------

@pytest.fixture
def detached(tmp_path: Path) -> Iterator[Path]:
    """A data directory whose background server (if any) is stopped at the end."""
    data = tmp_path / "data"
    yield data
    lock = data / "kubewire.lock"
    text = lock.read_text().split() if lock.exists() else []
    if text:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(text[0]), signal.SIGKILL)


def home_env(home: Path, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "KUBECONFIG"}
    return {**env, "HOME": str(home), **extra}


@needs_kubectl
def test_detach_returns_once_kubectl_can_use_it_and_stop_stops_it(
        tmp_path: Path, detached: Path) -> None:
    started = run("serve", *API_ONLY, "--detach", "--data-dir", str(detached), "--port", "0",
                  env=home_env(tmp_path))
    assert started.returncode == 0, started.stderr
    kubeconfig = detached.absolute() / "kubeconfig"
    found = re.fullmatch(
        r"kubewire is running in the background \(pid (\d+)\) on (https://127\.0\.0\.1:\d+)\n"
        rf"  export KUBECONFIG={re.escape(str(kubeconfig))}\n"
        r"  kubectl get namespaces\n"
        rf"logs: {re.escape(str(detached / 'kubewire.log'))}\n"
        rf"stop: kubewire stop --data-dir {re.escape(str(detached))}\n", started.stdout)
    assert found, started.stdout
    pid = int(found[1])
    # no wait, no retry: the server is ready when the command returns
    names = kubectl.ok(kubeconfig, "get", "namespaces", "-o", "name").split()
    assert "namespace/default" in names
    assert f"kubewire ready: {found[2]}" in (detached / "kubewire.log").read_text()

    again = run("serve", *API_ONLY, "--detach", "--data-dir", str(detached), "--port", "0")
    assert one_line_error(again) == (
        f"kubewire: cannot start: {detached} is in use by kubewire serve (pid {pid}) "
        f"(log: {detached / 'kubewire.log'})")

    stopped = run("stop", "--data-dir", str(detached))
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout == f"kubewire serve (pid {pid}) on {detached} stopped\n"
    assert not alive(pid)
    assert one_line_error(run("stop", "--data-dir", str(detached))) == (
        f"kubewire: cannot stop: no kubewire server is running on {detached}")


def test_detach_says_why_a_server_did_not_start(tmp_path: Path, detached: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run("serve", *API_ONLY, "--detach", "--data-dir", str(detached), "--port", str(port))
    assert one_line_error(done) == (
        f"kubewire: cannot start: 127.0.0.1:{port} is already in use (another server? pick "
        f"another --port, or 0 for a free one) (log: {detached / 'kubewire.log'})")


@needs_kubectl
def test_merge_kubeconfig_adds_a_current_context_and_keeps_the_rest(
        tmp_path: Path, detached: Path) -> None:
    other = {"apiVersion": "v1", "kind": "Config", "current-context": "other",
             "clusters": [{"name": "other", "cluster": {"server": "https://192.0.2.1:6443"}}],
             "users": [{"name": "other", "user": {"token": "t"}}],
             "contexts": [{"name": "other", "context": {"cluster": "other", "user": "other"}}]}
    first, second = tmp_path / "first.yaml", tmp_path / "second.yaml"
    second.write_text(yaml.safe_dump(other))  # KUBECONFIG=first:second: kubectl writes second,
    env = home_env(tmp_path, KUBECONFIG=f"{first}{os.pathsep}{second}")  # the one that exists
    started = run("serve", *API_ONLY, "--detach", "--merge-kubeconfig", "--data-dir", str(detached),
                  "--port", "0", env=env)
    assert started.returncode == 0, started.stderr
    assert f"kubectl --context kubewire get namespaces   # context kubewire in {second}" in (
        started.stdout)
    assert not first.exists()
    merged = yaml.safe_load(second.read_text())
    assert merged["current-context"] == "kubewire"
    assert [c["name"] for c in merged["contexts"]] == ["other", "kubewire"]
    assert [u["name"] for u in merged["users"]] == ["other", "kubewire-admin"]
    assert second.stat().st_mode & 0o777 == 0o644
    done = subprocess.run([str(kubectl.KUBECTL), "get", "namespaces", "-o", "name"], env=env,
                          capture_output=True, text=True, timeout=WAIT_S, check=False)
    assert done.returncode == 0, done.stderr
    assert "namespace/default" in done.stdout.split()
    assert run("stop", "--data-dir", str(detached)).returncode == 0


@needs_kubectl
def test_kubectl_deletes_a_pod_on_the_command_lines_server(
        tmp_path: Path, servers: list[Server]) -> None:
    """The CLI's server runs on uvloop, where the deletion controller removed an unscheduled
    pod (marked with grace 0) before the DELETE itself did: the DELETE then answered 404."""
    data = tmp_path / "data"
    servers.append(Server(data))
    kubeconfig = data / "kubeconfig"
    for name in ("a", "b", "c"):
        kubectl.ok(kubeconfig, "run", name, "--image", "nginx")
        assert kubectl.ok(kubeconfig, "delete", "pod", name) == f'pod "{name}" deleted\n'
    assert kubectl.run(kubeconfig, "get", "pods", "-o", "name").stdout == ""
