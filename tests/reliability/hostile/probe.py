"""The well-behaved client: GETs at a steady rate on one keep-alive TLS connection, each timed.

``python -m tests.reliability.hostile.probe PORT CA_FILE TOKEN PATH RATE OUT_FILE``

A process of its own, so that the attackers' threads and event loop (and their GIL) never delay
its clock: what it measures is the server. It prints ``ready`` after its first answer, sends a
request every ``1/RATE`` seconds (the next one at once if one took longer: no bursts to catch
up) until its stdin closes, then writes ``[[sent_at, seconds, status], ...]`` as JSON to
OUT_FILE; ``sent_at`` is ``time.monotonic()``, which every process on the machine shares.
``status`` is the HTTP status, or the error's text when there was no answer (the connection is
then made again). Standard library only.
"""

from __future__ import annotations

import http.client
import json
import ssl
import sys
import threading
import time
from collections.abc import Sequence

REQUEST_TIMEOUT_S = 10.0

Sample = tuple[float, float, int | str]


class Prober:
    def __init__(self, port: int, ca_file: str, token: str, path: str) -> None:
        self.port, self.path = port, path
        self.context = ssl.create_default_context(cafile=ca_file)
        self.headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self.conn: http.client.HTTPSConnection | None = None

    def get(self) -> Sample:
        started = time.monotonic()
        try:
            if self.conn is None:
                self.conn = http.client.HTTPSConnection("127.0.0.1", self.port,
                                                        timeout=REQUEST_TIMEOUT_S,
                                                        context=self.context)
            self.conn.request("GET", self.path, headers=self.headers)
            resp = self.conn.getresponse()
            resp.read()
            status: int | str = resp.status
            if resp.will_close:
                self.close()
        except (OSError, http.client.HTTPException) as exc:
            status = f"{type(exc).__name__}: {exc}"
            self.close()
        return started, time.monotonic() - started, status

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def run(prober: Prober, rate: float, stop: threading.Event) -> list[Sample]:
    samples: list[Sample] = []
    interval = 1.0 / rate
    while True:  # the first answer may need a few tries while the server warms up
        sample = prober.get()
        if sample[2] == 200:
            break
        if stop.wait(0.1):
            return samples
    print("ready", flush=True)
    next_at = time.monotonic()
    while not stop.is_set():
        samples.append(prober.get())
        next_at = max(next_at + interval, time.monotonic())
        stop.wait(next_at - time.monotonic())
    prober.close()
    return samples


def main(argv: Sequence[str]) -> int:
    port, ca_file, token, path, rate, out = argv
    stop = threading.Event()

    def wait_for_eof() -> None:
        sys.stdin.buffer.read()
        stop.set()

    threading.Thread(target=wait_for_eof, daemon=True).start()
    samples = run(Prober(int(port), ca_file, token, path), float(rate), stop)
    with open(out, "w") as file:
        json.dump(samples, file)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
