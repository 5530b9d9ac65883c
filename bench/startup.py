"""Start-up: time from starting ``kubewire serve`` to a ready ``/readyz``.

Measured from just before the process is spawned to the first ``200`` answer on
``GET /readyz`` (polled every ``POLL_S`` on a fresh connection), with a fresh data directory
each time. The reference is the floor for any Python server: the same interpreter starting
``bench.empty_server`` (kubewire's HTTP stack with an empty handler) on uvloop. Interleaved.

    python -m bench.startup [--smoke] [--repeats 5]
"""

from __future__ import annotations

import contextlib
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import report
from bench.servers import ServerProcess, kubewire_serve_argv, reference_argv
from bench.stats import row, summary

NAME = "startup"
TARGET_S = 0.5  # issue 6: start-up to ready
POLL_S = 0.002
READY_TIMEOUT_S = 60.0
READYZ = b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"


@dataclass
class StartupOptions:
    repeats: int = 7


default_options = StartupOptions
SMOKE = StartupOptions(repeats=1)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def is_ready(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
            sock.sendall(READYZ)
            return sock.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def time_to_ready(argv: list[str], port: int) -> float:
    with ServerProcess("startup", argv) as server:
        deadline = server.started_at + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if is_ready(port):
                return time.monotonic() - server.started_at
            if server.process.poll() is not None:
                break
            time.sleep(POLL_S)
        raise RuntimeError(f"not ready: {server.stop()[-2000:]}")


def run(opts: StartupOptions) -> dict[str, Any]:
    ours: list[float] = []
    ref: list[float] = []
    with contextlib.ExitStack() as stack:
        for rep in range(opts.repeats):
            order = ("kubewire", "empty") if rep % 2 == 0 else ("empty", "kubewire")
            for side in order:
                port = free_port()
                if side == "kubewire":
                    data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(
                        prefix="kw-start-")))
                    ours.append(time_to_ready(kubewire_serve_argv(data_dir, port=port), port))
                else:
                    ref.append(time_to_ready(reference_argv("bench.empty_server", port), port))
    return {"name": NAME, "title": "Start-up (item 6)",
            "reference": "the same Python starting bench.empty_server (HTTPServer, uvloop)",
            "command": "python -m bench.startup", "repeats": opts.repeats,
            "rows": [row("kubewire serve, fresh data dir, to /readyz 200", "s", ours, ref,
                         target=f"<= {TARGET_S:g} s",
                         met=summary(ours)["median"] <= TARGET_S)],
            "notes": ["Timed from just before spawning the process; includes interpreter "
                      "start and imports. The target applies to kubewire's absolute value."]}


def main() -> None:
    report.main(__doc__, SMOKE, default_options, run)


if __name__ == "__main__":
    main()
