"""A controller's work queue: keys marked dirty, worked one at a time by one task; and
``FeedController``, the start/stop of an in-server controller fed by the store's changes.

client-go's workqueue in small: a key marked twice before it is worked is worked once, a key
marked while it is being worked is worked again after, and a failing key is logged and retried
after ``RETRY_S`` (controllers must not die on one bad object).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from kubewire.status import StatusError
from kubewire.storage.base import Change, StorageError

if TYPE_CHECKING:
    from kubewire.server.context import ServerContext

log = logging.getLogger(__name__)

RETRY_S = 1.0


class WorkQueue:
    """``mark(key)`` from the loop (feed callbacks included); ``start()``; ``await stop()``."""

    def __init__(self, name: str, work: Callable[[str], Awaitable[None]]) -> None:
        self.name = name
        self._work = work
        self._dirty: dict[str, None] = {}  # insertion-ordered set
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._retries: set[asyncio.TimerHandle] = set()
        # called each time the queue runs dry (``ControllerManager.settled`` waits on it)
        self.on_idle: Callable[[], None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    def mark(self, key: str) -> None:
        self._dirty[key] = None
        self._wake.set()

    @property
    def idle(self) -> bool:
        """Nothing marked and nothing being worked (tests wait for it)."""
        return not self._dirty and not self._busy

    _busy = False

    async def stop(self) -> None:
        """Stop working and forget what was marked (a controller started again marks what it
        finds)."""
        self._dirty.clear()
        for handle in self._retries:
            handle.cancel()
        self._retries.clear()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._dirty:
                key = next(iter(self._dirty))
                del self._dirty[key]
                self._busy = True
                try:
                    await self._work(key)
                except asyncio.CancelledError:
                    raise
                except (StatusError, StorageError) as err:  # refused or not stored: say so
                    log.warning("%s: reconciling %s failed, retrying: %s", self.name, key, err)
                    self._retry(key)
                except Exception:
                    log.exception("%s: reconciling %s failed; retrying", self.name, key)
                    self._retry(key)
                finally:
                    self._busy = False
            if self.on_idle is not None:
                self.on_idle()

    def _retry(self, key: str) -> None:
        loop = asyncio.get_running_loop()

        def again() -> None:
            self._retries.discard(handle)
            self.mark(key)

        handle = loop.call_later(RETRY_S, again)
        self._retries.add(handle)


class FeedController:
    """An in-server controller whose informer is the store's change feed.

    A subclass sets ``ctx`` and ``queue`` in its ``__init__`` and writes ``changed`` (what a
    batch of committed changes marks) and ``mark_initial`` (what to look at on start). Stores
    keep their listeners, so the feed is subscribed once; between ``stop()`` and the next
    ``start()`` (leadership lost, then won again) changes are ignored."""

    ctx: ServerContext
    queue: WorkQueue
    running = False
    _subscribed = False

    def start(self) -> None:
        if not self._subscribed:
            self.ctx.store.subscribe(self._on_changes)
            self._subscribed = True
        self.running = True
        self.queue.start()
        self.mark_initial()

    async def stop(self) -> None:
        self.running = False
        await self.queue.stop()

    def mark_initial(self) -> None:
        """Mark what a start must look at (everything the controller keeps)."""

    def changed(self, changes: Sequence[Change]) -> None:
        """Mark what ``changes`` call for."""
        raise NotImplementedError

    def _on_changes(self, changes: Sequence[Change]) -> None:
        if self.running:
            self.changed(changes)
