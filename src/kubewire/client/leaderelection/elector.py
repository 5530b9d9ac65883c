"""``LeaderElector``: client-go's leader election loops (``leaderelection.go``) on asyncio.

    elector = LeaderElector(
        LeaderElectionConfig(name="my-operator", namespace="default", identity=new_identity()),
        LeaderCallbacks(on_started_leading=work, on_stopped_leading=cleanup),
        ClientLeases(client))
    await elector.run()  # returns when leadership is lost; cancel the task to stop

- ``run`` acquires (``tryAcquireOrRenew`` every ``retry_period``, jittered up to
  ``retry_period * 2.2``, the first try at once), then runs ``on_started_leading()`` as a task
  and renews: each round polls every ``retry_period`` for at most ``renew_deadline`` (a read or
  write still running then is cancelled); a round that does not renew ends the leadership.
- When leadership ends (lost, or ``run`` cancelled) the leading task is cancelled and awaited
  first (client-go only cancels its context), then, with ``release_on_cancel``, the lease is
  given up (a read, then an update that a 409 retries, within ``renew_deadline``, as client-go
  since v1.33 does), then ``on_stopped_leading()`` runs: always, even when it never led.
- ``on_new_leader(identity)`` is called after a try that saw another holder than the one last
  reported (the first one included).
- With ``events`` (an ``EventRecorder``, ``events.py``), ``<identity> became leader`` and
  ``<identity> stopped leading`` are recorded about the Lease, as client-go's lock does.
- Reads and writes go through ``Leases`` (``lock.py``); the decisions are in ``decision.py``.
  Times written come from the clock's wall time; validity is measured on its monotonic time.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from kubewire.client.leaderelection.decision import (
    JITTER_FACTOR,
    Attempt,
    LeaderElectionConfig,
    Observed,
    after_get,
    check_error,
    config_errors,
    fast_path,
    initial_record,
    is_leader,
    jittered,
    release_record,
    written,
)
from kubewire.client.leaderelection.events import EventRecorder
from kubewire.client.leaderelection.lock import LeaseLock, Leases
from kubewire.status import StatusError

log = logging.getLogger(__name__)


def new_identity() -> str:
    """``<hostname>_<uuid>``, the identity kube-controller-manager and kube-scheduler take (a
    uniquifier so two processes on one host never both lead)."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


class ElectionClock(Protocol):
    """What the elector reads and waits on."""

    def monotonic(self) -> float: ...

    def now(self) -> datetime: ...

    async def sleep(self, seconds: float) -> None: ...


class RealElectionClock:
    """``time.monotonic``, UTC wall time and ``asyncio.sleep``."""

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(seconds, 0.0))


@dataclass(frozen=True, slots=True)
class LeaderCallbacks:
    """``on_started_leading()`` runs as a task while this candidate leads (cancelled when it
    stops); ``on_stopped_leading()`` (plain or async) runs when ``run`` ends;
    ``on_new_leader(identity)`` when another leader is seen."""

    on_started_leading: Callable[[], Coroutine[Any, Any, None]] | None
    on_stopped_leading: Callable[[], Awaitable[None] | None] | None
    on_new_leader: Callable[[str], None] | None = None


class LeaderElector:
    """One candidate; ``await run()``. Raises ``ValueError`` with client-go's texts for a bad
    configuration."""

    def __init__(self, config: LeaderElectionConfig,  # noqa: PLR0913 (keyword-only options)
                 callbacks: LeaderCallbacks, leases: Leases, *, clock: ElectionClock | None = None,
                 rng: random.Random | None = None,
                 events: EventRecorder | None = None) -> None:
        errors = config_errors(config)
        if not errors and callbacks.on_started_leading is None:
            errors.append("OnStartedLeading callback must not be nil")
        if not errors and callbacks.on_stopped_leading is None:
            errors.append("OnStoppedLeading callback must not be nil")
        if errors:
            raise ValueError(errors[0])
        self.config, self.callbacks = config, callbacks
        self.lock = LeaseLock(leases, config.namespace, config.name, config.identity, events)
        self.clock: ElectionClock = clock if clock is not None else RealElectionClock()
        self._rng = rng if rng is not None else random.Random()
        self.observed = Observed()
        self._reported = ""  # the leader last given to on_new_leader
        self._leading = False
        self.attempts = 0  # tryAcquireOrRenew calls finished

    # -- what it knows -------------------------------------------------------------------------
    @property
    def identity(self) -> str:
        return self.config.identity

    def get_leader(self) -> str:
        """The holder last seen ("" before anything was seen)."""
        return self.observed.record.holder_identity

    def is_leader(self) -> bool:
        """The last record seen names this candidate (client-go's ``IsLeader``)."""
        return is_leader(self.observed, self.identity)

    @property
    def leading(self) -> bool:
        """Between a successful acquire and the end of renewing."""
        return self._leading

    def check(self, max_tolerable_expired: float) -> str | None:
        """The healthz watchdog's check: an error text when this leader has not renewed for
        longer than the lease duration plus ``max_tolerable_expired`` seconds."""
        return check_error(self.observed, self.identity, self.config, max_tolerable_expired,
                           self.clock.monotonic())

    # -- the loops -----------------------------------------------------------------------------
    async def run(self) -> None:
        """Acquire, lead while renewing, then stop leading; returns when leadership is lost.
        Cancel the task running it to stop (the lease is released first if configured)."""
        try:
            await self._acquire()
            self._leading = True
            assert self.callbacks.on_started_leading is not None
            leading = asyncio.get_running_loop().create_task(
                self.callbacks.on_started_leading(), name=f"leading {self.lock.describe()}")
            try:
                await self._renew()
            finally:
                self._leading = False
                leading.cancel()
                await _ended(leading)
                if self.config.release_on_cancel:
                    await self._release()
                self.lock.record_event("stopped leading")
        finally:
            assert self.callbacks.on_stopped_leading is not None
            stopped = self.callbacks.on_stopped_leading()
            if inspect.isawaitable(stopped):
                await stopped

    async def _acquire(self) -> None:
        """``acquire``: try at once, then every jittered retry period, until it succeeds."""
        log.info("attempting to acquire leader lease %s...", self.lock.describe())
        while True:
            succeeded = await self.try_acquire_or_renew()
            self._maybe_report_transition()
            if succeeded:
                self.lock.record_event("became leader")
                log.info("successfully acquired lease %s", self.lock.describe())
                return
            await self.clock.sleep(jittered(self.config.retry_period, self._rng.random(),
                                            JITTER_FACTOR))

    async def _renew(self) -> None:
        """``renew``: rounds of polling until one fails to renew within the deadline."""
        while True:
            renewed = await self._renew_round()
            self._maybe_report_transition()
            if not renewed:
                log.info("failed to renew lease %s: timed out waiting for the condition",
                         self.lock.describe())
                return
            await self.clock.sleep(self.config.retry_period)

    async def _renew_round(self) -> bool:
        """``PollUntilContextTimeout(retryPeriod, renewDeadline, immediate)``."""
        try:
            async with asyncio.timeout(self.config.renew_deadline):
                while True:
                    started = self.clock.monotonic()
                    if await self.try_acquire_or_renew():
                        return True
                    await self.clock.sleep(
                        self.config.retry_period - (self.clock.monotonic() - started))
        except TimeoutError:
            return False

    async def try_acquire_or_renew(self) -> bool:
        """One ``tryAcquireOrRenew``: True when this candidate holds the lease after it."""
        try:
            return await self._try_acquire_or_renew()
        finally:
            self.attempts += 1

    async def _try_acquire_or_renew(self) -> bool:
        attempt = Attempt(self.identity, self.config.lease_duration_seconds,
                          self.clock.monotonic(), self.clock.now())
        record = fast_path(self.observed, attempt)
        if record is not None and await self._write(self.lock.update(record),
                                                    "update lease optimistically"):
            self.observed = written(self.observed, record, self.clock.monotonic())
            return True
        try:
            got, raw = await self.lock.get()
        except StatusError as err:
            if err.code != 404:
                log.error("error retrieving lease lock %s: %s", self.lock.describe(), err)
                return False
            record = initial_record(attempt)
            if not await self._write(self.lock.create(record), "initially create lease lock"):
                return False
            self.observed = written(self.observed, record, self.clock.monotonic())
            return True
        except Exception as err:  # a transport failure is one failed try, as any Get error
            log.error("error retrieving lease lock %s: %s", self.lock.describe(), err)
            return False
        self.observed, record = after_get(self.observed, got, raw, attempt,
                                          self.clock.monotonic())
        if record is None:
            log.debug("lease %s is held by %s and has not yet expired", self.lock.describe(),
                      got.holder_identity)
            return False
        if not await self._write(self.lock.update(record), "update lease"):
            return False
        self.observed = written(self.observed, record, self.clock.monotonic())
        return True

    async def _write(self, write: Awaitable[None], what: str) -> bool:
        try:
            await write
        except Exception as err:  # refused (409 ...) or not sent: this try failed
            log.info("failed to %s %s: %s", what, self.lock.describe(), err)
            return False
        return True

    async def _release(self) -> bool:
        """``release``: give the lease up if the record last seen is mine, within the renew
        deadline, reading it again after a conflict."""
        try:
            async with asyncio.timeout(self.config.renew_deadline):
                return await self._try_release()
        except TimeoutError:
            log.error("failed to release lease %s: timed out", self.lock.describe())
            return False

    async def _try_release(self) -> bool:
        while True:
            try:
                current, _ = await self.lock.get()
            except Exception as err:
                log.error("error retrieving lease lock %s: %s", self.lock.describe(), err)
                return False
            if not self.is_leader():
                return True
            record = release_record(current, self.clock.now())
            try:
                await self.lock.update(record)
            except StatusError as err:
                if err.code == 409:
                    continue  # a renewal in flight when we were cancelled committed meanwhile
                log.error("failed to release lease %s: %s", self.lock.describe(), err)
                return False
            except Exception as err:
                log.error("failed to release lease %s: %s", self.lock.describe(), err)
                return False
            self.observed = written(self.observed, record, self.clock.monotonic())
            return True

    def _maybe_report_transition(self) -> None:
        holder = self.observed.record.holder_identity
        if holder == self._reported:
            return
        self._reported = holder
        if self.callbacks.on_new_leader is not None:
            try:
                self.callbacks.on_new_leader(holder)
            except Exception:
                log.exception("on_new_leader failed")


async def _ended(task: asyncio.Task[None]) -> None:
    """Wait for ``task``; its failure is logged, not raised (the leading work is the user's)."""
    try:
        await task
    except asyncio.CancelledError:
        if not task.cancelled():
            raise  # we were cancelled ourselves while waiting
    except Exception:
        log.exception("on_started_leading failed")


__all__ = ["ElectionClock", "LeaderCallbacks", "LeaderElector", "RealElectionClock",
           "new_identity"]
