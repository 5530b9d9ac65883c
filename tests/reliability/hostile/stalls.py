"""A stalled store: the writer child stopped (SIGSTOP), as a hung disk or a frozen etcd would.

Writes wait on commits that do not come. kube-apiserver's timeout filter answers such a write
504 after the request timeout, and its ``/healthz`` reports the store failed ("[-]etcd failed")
while etcd does not answer; both recover by themselves once it answers again. Reads are served
from the watch cache all along (the probe keeps reading).
"""

from __future__ import annotations

import asyncio
import signal
import time

from tests.reliability.hostile.floods import SLACK_S, TIMEOUT_MESSAGE, request_timeout_s
from tests.reliability.hostile.harness import Outcome
from tests.reliability.hostile.server import ATTACKER, HostileServer
from tests.reliability.hostile.wire import CONFIGMAPS, Answer, ask, exchanges, request_head, summary

POLL_S = 0.2
HEALTH_SLACK_S = 10.0  # /healthz may judge the store by a bound of its own, not the request's


def _create(server: HostileServer, name: str) -> bytes:
    body = (b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"%s-"}}'
            % name.encode())
    return request_head("POST", CONFIGMAPS, {**server.auth(ATTACKER), "Content-Length":
                                             str(len(body)), "Content-Type":
                                             "application/json"}) + body


async def _health_until(server: HostileServer, status: int, within_s: float) -> float | None:
    """Seconds until ``/healthz`` answered ``status`` (polled), or None if it never did."""
    began = time.monotonic()
    while time.monotonic() - began < within_s:
        try:
            answer = await ask(server, request_head("GET", "/healthz"), 5.0)
        except (OSError, TimeoutError):
            answer = None
        if answer is not None and answer.status == status:
            return time.monotonic() - began
        await asyncio.sleep(POLL_S)
    return None


def _timed_out(answer: object) -> bool:
    return (isinstance(answer, Answer) and answer.status == 504
            and str(answer.json().get("message")).startswith(TIMEOUT_MESSAGE))


def _after(seconds: float | None) -> str:
    return "never" if seconds is None else f"after {seconds:.1f} s"


async def stalled_writer(server: HostileServer, long: bool) -> Outcome:
    writes = 20 if long else 4
    timeout_s = request_timeout_s(long)
    began = time.monotonic()
    server.signal_writer(signal.SIGSTOP)
    try:
        posts = asyncio.ensure_future(exchanges(server, writes, [_create(server, "stalled")],
                                                answer_timeout=timeout_s + SLACK_S))
        failing = await _health_until(server, 500, timeout_s + HEALTH_SLACK_S)
        stalled, _ = await posts
    finally:
        server.signal_writer(signal.SIGCONT)
    stalled_s = time.monotonic() - began
    recovered = await _health_until(server, 200, timeout_s + HEALTH_SLACK_S)
    after, _ = await exchanges(server, 1, [_create(server, "after")],
                               answer_timeout=timeout_s + SLACK_S)
    ok = (all(_timed_out(a) for a in stalled) and failing is not None and recovered is not None
          and all(isinstance(a, Answer) and a.status == 201 for a in after))
    text = (f"writes while stopped: {summary(stalled)}; /healthz 500 {_after(failing)}; after "
            f"SIGCONT: /healthz 200 {_after(recovered)}, a write: {summary(after)}")
    return Outcome(ok, text, stalled_s, writes)
