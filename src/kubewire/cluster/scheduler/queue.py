"""kube-scheduler's ``PriorityQueue`` (``internal/queue/scheduling_queue.go``), pure.

Three places for a pending pod, as kube's: ``activeQ`` (a heap ordered by PrioritySort:
higher ``spec.priority`` first, then earlier enqueue), ``backoffQ`` (pods that failed, until
their backoff ends: 1 s doubling per attempt up to 10 s) and ``unschedulable`` (pods no node
fits, waiting for a cluster event that may help). ``move_all(event)`` is
``MoveAllToActiveOrBackoffQueue``: unschedulable pods whose rejecting plugins care about the
event move to the backoff queue (still backing off) or the active queue. (kube also sends a
pod to backoff when an event came while it was being scheduled; here a scheduling cycle runs
without yielding to the event loop, so no event can come meanwhile.) Pods left unschedulable
for 5 minutes are moved anyway (``podMaxInUnschedulablePodsDuration``). The clock is passed
in; nothing here waits.

kube decides per plugin with QueueingHints which events may help; kubewire uses the
coarser table ``EVENT_PLUGINS`` (which plugins' rejections an event can undo).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from kubewire.cluster.scheduler.plugins.infos import PodInfo

INITIAL_BACKOFF_S = 1.0
MAX_BACKOFF_S = 10.0
MAX_UNSCHEDULABLE_S = 300.0
LONG_FLUSH_PERIOD_S = 30.0  # flushUnschedulablePodsLeftover runs every 30 s

NODE_ADD, NODE_UPDATE, POD_ASSIGNED, POD_DELETED = ("NodeAdd", "NodeUpdate", "AssignedPodAdd",
                                                    "AssignedPodDelete")
NAMESPACE_CHANGE = "NamespaceChange"
ALL = frozenset({"NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity",
                 "NodePorts", "NodeResourcesFit", "PodTopologySpread", "InterPodAffinity",
                 "NoNodes"})
EVENT_PLUGINS: dict[str, frozenset[str]] = {
    NODE_ADD: ALL,
    NODE_UPDATE: ALL,
    POD_ASSIGNED: frozenset({"PodTopologySpread", "InterPodAffinity"}),
    POD_DELETED: frozenset({"NodePorts", "NodeResourcesFit", "PodTopologySpread",
                            "InterPodAffinity"}),
    NAMESPACE_CHANGE: frozenset({"InterPodAffinity"}),
}


@dataclass(slots=True)
class QueuedPod:
    """A pending pod and its scheduling history."""

    info: PodInfo
    timestamp: float  # when it (re)entered the queue: PrioritySort's tie-break
    attempts: int = 0
    backoff_until: float = 0.0
    rejectors: frozenset[str] = field(default_factory=frozenset)
    unschedulable_since: float = 0.0


class SchedulingQueue:
    """activeQ, backoffQ and the unschedulable pods."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._seq = itertools.count()
        self._active: list[tuple[int, float, int, str]] = []
        self._backoff: list[tuple[float, int, str]] = []
        self.pods: dict[str, QueuedPod] = {}  # every queued pod by key
        self.where: dict[str, str] = {}  # key -> "active" | "backoff" | "unschedulable"
        self.in_flight: set[str] = set()
        self._by_plugin: dict[str, set[str]] = {}  # unschedulable keys by rejecting plugin
        self._last_long_flush = clock()

    def __len__(self) -> int:
        return len(self.pods)

    def add(self, info: PodInfo, changed: bool = True) -> None:
        """A new pending pod, or an update of one (``changed``: more than its status changed,
        which may make an unschedulable pod fit): to activeQ unless already queued."""
        queued = self.pods.get(info.key)
        if queued is not None:
            queued.info = info
            if changed and self.where.get(info.key) == "unschedulable":
                self._requeue(queued)
            return
        if info.key in self.in_flight:
            return
        queued = QueuedPod(info, self.clock())
        self.pods[info.key] = queued
        self._push_active(queued)

    def delete(self, key: str) -> None:
        queued = self.pods.pop(key, None)
        if self.where.pop(key, None) == "unschedulable" and queued is not None:
            self._unfile(queued)
        # heap entries of a missing key are skipped when popped

    def _unfile(self, queued: QueuedPod) -> None:
        for plugin in queued.rejectors or ("",):
            keys = self._by_plugin.get(plugin)
            if keys is not None:
                keys.discard(queued.info.key)

    def _push_active(self, queued: QueuedPod) -> None:
        key = queued.info.key
        self.where[key] = "active"
        heapq.heappush(self._active, (-queued.info.priority, queued.timestamp,
                                      next(self._seq), key))

    def _push_backoff(self, queued: QueuedPod) -> None:
        key = queued.info.key
        self.where[key] = "backoff"
        heapq.heappush(self._backoff, (queued.backoff_until, next(self._seq), key))

    def _requeue(self, queued: QueuedPod) -> None:
        if self.where.get(queued.info.key) == "unschedulable":
            self._unfile(queued)
        if queued.backoff_until > self.clock():
            self._push_backoff(queued)
        else:
            self._push_active(queued)

    def pop(self) -> QueuedPod | None:
        """The next pod to schedule (highest priority, then oldest), or None."""
        self.flush()
        while self._active:
            _, _, _, key = heapq.heappop(self._active)
            if self.where.get(key) != "active":
                continue
            queued = self.pods.pop(key)
            del self.where[key]
            queued.attempts += 1
            self.in_flight.add(key)
            return queued
        return None

    def done(self, key: str) -> None:
        """Scheduling of ``key`` ended (bound, or handed back with ``unschedulable``)."""
        self.in_flight.discard(key)

    def unschedulable(self, queued: QueuedPod, rejectors: frozenset[str]) -> None:
        """No node fits: wait for an event that may help."""
        key = queued.info.key
        self.in_flight.discard(key)
        now = self.clock()
        queued.rejectors = rejectors
        queued.backoff_until = now + self.backoff_s(queued.attempts)
        queued.timestamp = now
        self.pods[key] = queued
        queued.unschedulable_since = now
        self.where[key] = "unschedulable"
        for plugin in rejectors or ("",):
            self._by_plugin.setdefault(plugin, set()).add(key)

    def error(self, queued: QueuedPod) -> None:
        """Scheduling failed for another reason (binding): retry after backoff."""
        key = queued.info.key
        self.in_flight.discard(key)
        queued.backoff_until = self.clock() + self.backoff_s(queued.attempts)
        self.pods[key] = queued
        self._push_backoff(queued)

    @staticmethod
    def backoff_s(attempts: int) -> float:
        return min(INITIAL_BACKOFF_S * float(2 ** max(attempts - 1, 0)), MAX_BACKOFF_S)

    def move_all(self, event: str) -> int:
        """An event that may make unschedulable pods fit: move those it may help."""
        keys: set[str] = set()
        for plugin in (*EVENT_PLUGINS[event], ""):
            keys |= self._by_plugin.get(plugin, set())
        for key in keys:
            if self.where.get(key) == "unschedulable":
                self._requeue(self.pods[key])
        return len(keys)

    def unschedulable_keys(self) -> list[str]:
        return [key for key, where in self.where.items() if where == "unschedulable"]

    def flush(self) -> None:
        """Backoff that ended → activeQ; unschedulable for 5 minutes → active or backoff."""
        now = self.clock()
        while self._backoff and self._backoff[0][0] <= now:
            _, _, key = heapq.heappop(self._backoff)
            if self.where.get(key) == "backoff":
                self._push_active(self.pods[key])
        if now - self._last_long_flush < LONG_FLUSH_PERIOD_S:
            return
        self._last_long_flush = now
        for key in self.unschedulable_keys():
            if now - self.pods[key].unschedulable_since >= MAX_UNSCHEDULABLE_S:
                self._requeue(self.pods[key])

    def next_wakeup(self) -> float | None:
        """Seconds until the earliest backoff ends (None: nothing backing off)."""
        while self._backoff and self.where.get(self._backoff[0][2]) != "backoff":
            heapq.heappop(self._backoff)
        if not self._backoff:
            return None
        return max(self._backoff[0][0] - self.clock(), 0.0)
