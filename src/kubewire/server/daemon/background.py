"""``kubewire serve --detach`` and ``kubewire stop``: a server in the background, as kind and
k3d give one, and a way to stop it.

Starting: the server is the same ``kubewire serve`` command in a new session (so a closed
terminal does not stop it), with ``--ready-fd N``, the write end of a pipe. It writes one line,
``URL KUBECONFIG``, there once it listens and has written its kubeconfig, then closes it; the
parent reads that line, checks ``/readyz`` itself and returns. A server that cannot start exits
without writing: the pipe's end-of-file tells the parent at once, and the last line of the log
(``DIR/kubewire.log``, where the server's output goes) says why. No polling of files that an
earlier run may have left behind (an old kubeconfig, an old log line).

Stopping: the data directory's lock names the server's pid (``lock``); ``stop`` sends it
SIGTERM (the server's own clean shutdown) and waits until the lock is free.
"""

from __future__ import annotations

import base64
import os
import select
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import yaml

from kubewire.server.daemon.lock import holder_of

LOG_NAME = "kubewire.log"
_READY_POLL_S = 0.1


class BackgroundError(Exception):
    """The background server did not start, or did not stop; one line saying why."""


@dataclass(frozen=True, slots=True)
class Started:
    pid: int
    url: str
    kubeconfig: Path
    log: Path


def ready_line(url: str, kubeconfig: Path) -> bytes:
    """What a server started with ``--ready-fd`` writes there once it is ready."""
    return f"{url} {kubeconfig}\n".encode()


def parse_ready_line(data: bytes) -> tuple[str, Path] | None:
    text = data.decode("utf-8", "replace").strip()
    url, _, path = text.partition(" ")
    return (url, Path(path)) if url and path else None


def start_detached(argv: list[str], data_dir: Path, timeout_s: float) -> Started:
    """Run ``kubewire <argv> --ready-fd N`` in the background; return once it is ready.

    ``argv`` is the ``serve`` command line (its ``--detach`` is ignored by a server that has a
    ready fd). Raises ``BackgroundError`` if it exits or is not ready within ``timeout_s``.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    log_path = data_dir / LOG_NAME
    read_fd, write_fd = os.pipe()
    try:
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "kubewire.cli", *argv, "--ready-fd", str(write_fd)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                pass_fds=(write_fd,), start_new_session=True)
    finally:
        os.close(write_fd)
    deadline = time.monotonic() + timeout_s
    try:
        line = _read_line(read_fd, deadline)
    finally:
        os.close(read_fd)
    ready = parse_ready_line(line)
    if ready is None:
        _give_up(proc, log_path, deadline)
    url, kubeconfig = ready
    wait_readyz(url, kubeconfig, deadline)
    return Started(proc.pid, url, kubeconfig, log_path)


def _read_line(fd: int, deadline: float) -> bytes:
    """What the server writes to the pipe until it closes it (or the deadline passes)."""
    data = b""
    while (left := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([fd], [], [], left)
        if not readable:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return data


def _give_up(proc: subprocess.Popen[bytes], log_path: Path, deadline: float) -> NoReturn:
    """Raise why the server did not get ready: its exit and last log line, or the time."""
    try:
        code = proc.wait(max(deadline - time.monotonic(), 0.5))
    except subprocess.TimeoutExpired:
        proc.terminate()
        raise BackgroundError(f"the server (pid {proc.pid}) was not ready in time and was "
                              f"stopped; see {log_path}") from None
    reason = last_line(log_path) or f"it exited with status {code}"
    raise BackgroundError(f"{reason.removeprefix('kubewire: ')} (log: {log_path})")


def last_line(path: Path, size: int = 8192) -> str:
    """The last non-empty line of a file, read from its end."""
    with open(path, "rb") as file:
        file.seek(max(file.seek(0, os.SEEK_END) - size, 0))
        lines = [line for line in file.read().decode("utf-8", "replace").splitlines()
                 if line.strip()]
    return lines[-1] if lines else ""


def wait_readyz(url: str, kubeconfig: Path, deadline: float) -> None:
    """Until ``GET /readyz`` answers 200 (it needs no credentials, as in kube)."""
    context = _tls_context(kubeconfig) if url.startswith("https:") else None
    problem = "no answer"
    while True:
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=2.0, context=context) as rsp:
                if rsp.status == 200:
                    return
        except urllib.error.HTTPError as err:
            problem = f"/readyz answered {err.code}"
        except (OSError, ValueError) as err:
            problem = str(err)
        if time.monotonic() >= deadline:
            raise BackgroundError(f"the server at {url} did not get ready: {problem}")
        time.sleep(_READY_POLL_S)


def _tls_context(kubeconfig: Path) -> ssl.SSLContext:
    """Trust the CA the kubeconfig's cluster names (kubewire writes it embedded)."""
    doc = yaml.safe_load(kubeconfig.read_text())
    cluster = doc["clusters"][0]["cluster"]
    context = ssl.create_default_context()
    if data := cluster.get("certificate-authority-data"):
        context.load_verify_locations(cadata=base64.b64decode(data).decode("ascii"))
    return context


def stop_server(data_dir: Path, timeout_s: float) -> int:
    """SIGTERM the server holding ``data_dir`` and wait until it let go; its pid."""
    holder = holder_of(data_dir)
    if holder is None:
        raise BackgroundError(f"no kubewire server is running on {data_dir}")
    if holder.role != "serve" or holder.pid <= 0:
        raise BackgroundError(f"{data_dir} is held by kubewire {holder.role} (pid "
                              f"{holder.pid}), not a server")
    try:
        os.kill(holder.pid, signal.SIGTERM)
    except ProcessLookupError:
        return holder.pid  # it ended between the two looks
    deadline = time.monotonic() + timeout_s
    while holder_of(data_dir) is not None or alive(holder.pid):
        if time.monotonic() >= deadline:
            raise BackgroundError(f"kubewire serve (pid {holder.pid}) did not stop within "
                                  f"{timeout_s:g}s")
        time.sleep(_READY_POLL_S)
    return holder.pid


def alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie waiting for its parent to reap it has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: the kernel's word, zombies included
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rpartition(")")[2].split()[0] != "Z"  # the state, after the command's name
