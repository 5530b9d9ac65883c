"""What one httplog line costs: CPU per request of ``server/observe/httplog.py``'s enabled path.

``python -m bench.httplog_cost`` logs the line of a typical merge PATCH ``N`` times with the
handler ``kubewire serve`` configures (``logging.basicConfig``, its format, to a file as the
benchmarks' servers do) and prints µs per line, best and median of 7 runs. To compare trees, run
it with each tree first on ``PYTHONPATH``.
"""

from __future__ import annotations

import logging
import statistics
import tempfile
import time
from typing import Any

from kubewire.server.observe import httplog

N = 20_000
RUNS = 7


class _Request:
    """What ``log_request`` reads of a request (duck-typed: no connection behind it)."""

    path = "/api/v1/namespaces/bench/pods/writer-1"
    raw_query = ""
    answer_headers = (("Audit-Id", "7a0c6f0e-9a0d-4c8a-b7c4-2b6a1f6b1d2e"),)
    stream = None

    def header(self, name: str, default: str = "") -> str:
        return "kubewire-patcher/1.0" if name == "user-agent" else default

    def extra(self, name: str) -> Any:
        return ("127.0.0.1", 53124)


class _Response:
    status = 200


def main() -> None:
    with tempfile.TemporaryFile("w") as out:
        handler = logging.StreamHandler(out)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root = logging.getLogger()
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        request: Any = _Request()
        response: Any = _Response()
        per_line = []
        for _ in range(RUNS):
            t0 = time.process_time()
            for _ in range(N):
                if httplog.enabled():
                    httplog.log_request(request, "PATCH", response, 200, time.perf_counter())
            per_line.append((time.process_time() - t0) / N * 1e6)
        root.removeHandler(handler)
    print(f"httplog line: best {min(per_line):.1f} µs, median {statistics.median(per_line):.1f} "
          f"µs CPU (of {RUNS} runs of {N})")


if __name__ == "__main__":
    main()
