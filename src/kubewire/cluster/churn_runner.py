"""``kubewire simulate``'s loop: sends the ``ChurnPlan``'s operations to any server at the
plan's pace, counts the answers, prints a live line and a final table, and cleans up.

Operations go out as separate tasks (at most ``MAX_IN_FLIGHT`` at once), so a slow answer does
not lower the rate until that many are waiting. ``stop`` (an event: Ctrl-C sets it) ends the
run after the operations in flight have answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from kubewire.client import Api, Client
from kubewire.client.errors import ClientError, StatusError
from kubewire.cluster.churn import API_VERSIONS, KINDS, MANAGED_BY, MANAGER, ChurnPlan, Op, selector

MAX_IN_FLIGHT = 64
SUMMARY_EVERY_S = 1.0


@dataclass(slots=True)
class ChurnStats:
    """Answers by (op, kind) and errors by code (a ``StatusError``'s HTTP code, or the
    client error's class name when no answer came)."""

    ok: Counter[tuple[str, str]] = field(default_factory=Counter)
    failed: Counter[tuple[str, str]] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    skipped: int = 0
    started: float = 0.0
    ended: float = 0.0

    @property
    def done(self) -> int:
        return sum(self.ok.values()) + sum(self.failed.values())

    def line(self, now: float) -> str:
        """The live summary line."""
        elapsed = max(now - self.started, 1e-9)
        errs = " ".join(f"{k}={v}" for k, v in sorted(self.errors.items())) or "none"
        return (f"{elapsed:6.1f}s  ops {self.done} ({self.done / elapsed:.1f}/s)  "
                f"ok {sum(self.ok.values())}  errors: {errs}")

    def table(self) -> str:
        """The final table: one row per (operation, kind), then totals."""
        rows = [("OPERATION", "KIND", "OK", "FAILED")]
        for key in sorted(set(self.ok) | set(self.failed)):
            rows.append((key[0], key[1], str(self.ok[key]), str(self.failed[key])))
        rows.append(("total", "", str(sum(self.ok.values())), str(sum(self.failed.values()))))
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        out = ["   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
               for r in rows]
        elapsed = max(self.ended - self.started, 1e-9)
        out.append(f"{self.done} operations in {elapsed:.1f}s ({self.done / elapsed:.1f}/s)"
                   + (f", {self.skipped} slots skipped (nothing possible)" if self.skipped
                      else ""))
        if self.errors:
            out.append("errors: " + ", ".join(f"{k}: {v}" for k, v in
                                              sorted(self.errors.items())))
        return "\n".join(out)


class ChurnRunner:
    """Runs one plan against ``client``."""

    def __init__(self, client: Client, plan: ChurnPlan, *, out: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.plan = plan
        self.out = out
        self.clock = clock
        self.stats = ChurnStats()
        self._apis: dict[str, Api[dict[str, Any]]] = {
            k: Api(dict, client=client, namespace=None, api_version=API_VERSIONS[k], kind=k)
            for k in KINDS}

    async def ensure_namespaces(self) -> list[str]:
        """Create the plan's namespaces that do not exist (labelled as ours); returns them."""
        api: Api[dict[str, Any]] = Api(dict, client=self.client, namespace=None,
                                       api_version="v1", kind="Namespace")
        made = []
        for ns in self.plan.options.namespaces:
            try:
                await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {
                    "name": ns, "labels": {MANAGED_BY: MANAGER}}})
                made.append(ns)
            except StatusError as err:
                if err.code != 409:
                    raise
        return made

    async def _send(self, op: Op) -> None:
        api = self._apis[op.kind]
        ok, gone = False, False
        try:
            if op.op == "create":
                assert op.body is not None
                await api.create(op.body, namespace=op.namespace)
            elif op.op == "delete":
                await api.delete(op.name, namespace=op.namespace)
            else:
                assert op.body is not None
                await api.patch(op.name, op.body, namespace=op.namespace)
            ok = True
        except StatusError as err:
            gone = err.code == 404
            self.stats.errors[str(err.code)] += 1
        except ClientError as err:
            self.stats.errors[type(err).__name__] += 1
        finally:
            (self.stats.ok if ok else self.stats.failed)[(op.op, op.kind)] += 1
            self.plan.settle(op, ok, gone)

    async def run(self, stop: asyncio.Event | None = None) -> ChurnStats:
        """Send operations until the plan is done or ``stop`` is set; returns the counts."""
        stop = stop or asyncio.Event()
        slots = asyncio.Semaphore(MAX_IN_FLIGHT)
        tasks: set[asyncio.Task[None]] = set()
        start = self.stats.started = self.clock()
        next_line = start + SUMMARY_EVERY_S
        index = 0

        async def send(op: Op) -> None:
            try:
                await self._send(op)
            finally:
                slots.release()

        while not stop.is_set() and not self.plan.done(self.plan.due(index)):
            due = start + self.plan.due(index)
            now = self.clock()
            if now >= next_line:  # also when behind the pace (no waiting between slots)
                if self.out is not None:
                    print(self.stats.line(now), file=self.out, flush=True)
                next_line += SUMMARY_EVERY_S
            if due > now:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), min(due, next_line) - now)
                continue
            index += 1
            await slots.acquire()
            op = self.plan.next()
            if op is None:
                slots.release()
                self.stats.skipped += 1
                continue
            task = asyncio.create_task(send(op))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self.stats.ended = self.clock()
        return self.stats

    async def cleanup(self, namespaces_made: list[str], run_id: str | None = None) -> int:
        """Delete every object of ours (of ``run_id`` if given) in the plan's namespaces, then
        the namespaces this run created; returns how many objects it deleted."""
        deleted = 0
        for ns in self.plan.options.namespaces:
            for kind in KINDS:
                api = self._apis[kind]
                items = await api.list(namespace=ns, label_selector=selector(run_id))
                for item in items.items:
                    with contextlib.suppress(StatusError):
                        await api.delete(item["metadata"]["name"], namespace=ns)
                        deleted += 1
        ns_api: Api[dict[str, Any]] = Api(dict, client=self.client, namespace=None,
                                          api_version="v1", kind="Namespace")
        for ns in namespaces_made:
            with contextlib.suppress(StatusError):
                await ns_api.delete(ns)
        return deleted
