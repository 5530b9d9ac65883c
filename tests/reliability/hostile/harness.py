"""One attack run: a fresh server, idle RSS, the attack beside the probe, and its report.

``run_attack`` starts a ``HostileServer`` (the attack's flags and limits), seeds it, starts the
probe (the well-behaved client, 50 GETs a second), measures idle RSS of the server and of its
writer child, then runs the attack while ``RssWatch`` samples RSS. The window it judges lasts
from the attack's start until it ends, and at least ``MIN_WINDOW_S``: a server still working off
an attack after the attacker left is measured too, and the p99 of 100 or more GETs is not just
the slowest one.

A report is a failure (``problems``) when the attack's expected outcome was not seen, when the
server and writer grew more than ``RSS_BOUND_MB`` over idle, when the probe's p99 was
``P99_BOUND_MS`` or more or any of its requests failed, or when the server died. Issue 12's
"done when" is these bounds under every attack. Past ``RSS_CAP_MB`` the server is killed at
once: an unbounded server must not take the machine down with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.reliability.hostile.measure import (
    Latency,
    Peak,
    ProbeProcess,
    RssWatch,
    latency_of,
    wall_clock,
)
from tests.reliability.hostile.server import HostileServer

RSS_BOUND_MB = 200.0  # server + writer growth over idle while attacked (issue 12)
P99_BOUND_MS = 50.0  # the well-behaved client's GET p99 while attacked (issue 12)
RSS_CAP_MB = 1536.0  # past this the server is SIGKILLed: the machine comes first
SETTLE_S = 0.3  # after the probe's first answer, before idle RSS is read
MIN_WINDOW_S = {False: 2.2, True: 5.0}  # short and long forms


@dataclass
class Outcome:
    """What the attack saw, and whether that is what a hardened server does."""

    ok: bool
    text: str
    seconds: float = 0.0  # from the attack's start to its outcome (the last connection's)
    connections: int = 0  # 0: unknown (the attack was cut short) or none


Attack = Callable[[HostileServer, bool], Coroutine[Any, Any, Outcome]]


def no_args(long: bool) -> Sequence[str]:
    return ()


def no_limits(long: bool) -> Mapping[str, float]:
    return {}


@dataclass(frozen=True)
class AttackSpec:
    """An attack and the server it runs against; ``attack(server, long)`` picks its size."""

    name: str
    attack: Attack
    expect: str  # the hardened server's answer, for reports
    args: Callable[[bool], Sequence[str]] = no_args  # ``kubewire serve`` flags
    limits: Callable[[bool], Mapping[str, float]] = no_limits  # ``Limits`` fields, by flag
    seed_configmaps: int = 1
    seed_bytes: int = 64
    timeout_s: float = 60.0  # the whole attack, short form (long forms get 10x)


@dataclass
class HostileReport:
    name: str
    expect: str
    outcome: Outcome
    server: Peak
    writer: Peak
    latency: Latency
    capped: bool = False
    problems: list[str] = field(default_factory=list)

    @property
    def growth_mb(self) -> float:
        return self.server.growth_mb + self.writer.growth_mb

    def line(self) -> str:
        connections = self.outcome.connections
        per = (f"{self.growth_mb / connections:.2f} MB/connection" if connections
               else "connections unknown")
        capped = " (KILLED at the RSS cap)" if self.capped else ""
        return (f"hostile {self.name}: {self.outcome.text} after {self.outcome.seconds:.2f} s, "
                f"{self.outcome.connections} connection(s); RSS idle "
                f"{self.server.idle_mb:.0f} MB + writer {self.writer.idle_mb:.0f} MB, peak "
                f"+{self.server.growth_mb:.1f} MB + writer +{self.writer.growth_mb:.1f} MB "
                f"({per}){capped}; {self.latency.text()}; "
                f"problems={len(self.problems)}")

    def judge(self, alive: bool, answering: bool) -> None:
        if not self.outcome.ok:
            self.problems.append(f"expected {self.expect}; saw {self.outcome.text}")
        if self.capped:
            self.problems.append(f"server RSS passed {RSS_CAP_MB:.0f} MB: killed")
        elif not alive:
            self.problems.append("the server died")
        elif not answering:
            self.problems.append("the server does not answer /readyz after the attack")
        if self.growth_mb >= RSS_BOUND_MB:
            self.problems.append(f"RSS grew {self.growth_mb:.0f} MB over idle "
                                 f"(bound {RSS_BOUND_MB:.0f} MB)")
        if self.latency.p99_ms >= P99_BOUND_MS:
            self.problems.append(f"good client's GET p99 {self.latency.p99_ms:.0f} ms "
                                 f"(bound {P99_BOUND_MS:.0f} ms)")
        if self.latency.failures:
            self.problems.append(f"good client: {len(self.latency.failures)} GETs failed, "
                                 f"first: {self.latency.failures[0][:200]}")
        if self.latency.count == 0:
            self.problems.append("good client: no GET in the window")


async def _attack_until(attack: Awaitable[Outcome], capped: threading.Event,
                        timeout_s: float) -> Outcome:
    """The attack's outcome, unless the server was killed at the cap or time ran out."""
    task = asyncio.ensure_future(attack)
    deadline = time.monotonic() + timeout_s
    began = time.monotonic()
    while not task.done():
        await asyncio.wait([task], timeout=0.05)
        if capped.is_set() or time.monotonic() > deadline:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            why = "server killed at the RSS cap" if capped.is_set() else "attack timed out"
            return Outcome(False, f"{why} (no outcome)", time.monotonic() - began)
    try:
        return task.result()
    except Exception as exc:  # the attack itself broke (e.g. no connection): a failed outcome
        return Outcome(False, f"attack failed: {type(exc).__name__}: {exc}",
                       time.monotonic() - began)


def _quiet(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """Attackers' connections die messily by design (resets, aborted TLS): not worth a log."""


async def _run(attack: Awaitable[Outcome], capped: threading.Event,
               timeout_s: float) -> Outcome:
    asyncio.get_running_loop().set_exception_handler(_quiet)
    return await _attack_until(attack, capped, timeout_s)


def run_attack(spec: AttackSpec, long: bool, root: Path,
               log: Callable[[str], None] = lambda _: None) -> HostileReport:
    """Run ``spec`` (its long form if ``long``) against a fresh server under ``root``."""
    server = HostileServer(root / spec.name, spec.args(long), spec.limits(long))
    watch: RssWatch | None = None
    try:
        server.start()
        server.seed(spec.seed_configmaps, spec.seed_bytes)
        probe = ProbeProcess(server, root / f"{spec.name}.probe.json")
        try:
            probe.wait_ready()
            time.sleep(SETTLE_S)
            watch = RssWatch(server, RSS_CAP_MB).begin()
            start = wall_clock()
            try:
                timeout = spec.timeout_s * (10 if long else 1)
                outcome = asyncio.run(_run(spec.attack(server, long), watch.capped_event,
                                           timeout))
                log(f"  {spec.name}: {outcome.text}")
                watch.capped_event.wait(max(0.0, start + MIN_WINDOW_S[long] - wall_clock()))
            finally:
                end = wall_clock()
                watch.end_window()
        finally:
            samples = probe.stop()
        report = HostileReport(spec.name, spec.expect, outcome, watch.server, watch.writer,
                               latency_of(samples, start, end), capped=watch.capped)
        report.judge(server.alive, server.alive and _answers(server))
    finally:
        server.stop()
        if watch is not None:
            watch.stop()
    if watch.capped and not report.capped:  # it grew on after the window
        report.capped = True
        report.problems.append(f"server RSS passed {RSS_CAP_MB:.0f} MB after the window: "
                               "killed")
    return report


def _answers(server: HostileServer) -> bool:
    try:
        return server.call("GET", "/readyz", timeout=5).status == 200
    except OSError:
        return False
