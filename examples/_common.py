"""What every example shares: its bounds (``--max-events``, ``--timeout``), the changes it makes
for itself to watch (``--watch-only`` turns them off) and how it names objects
(``namespace/name``). Not an example itself.

Every example stops by itself after ``--max-events`` events or ``--timeout`` seconds,
whichever comes first; ``EXAMPLES_MAX_EVENTS`` and ``EXAMPLES_TIMEOUT`` change the defaults.
On a fresh server nothing changes by itself (there are no kubelets or controllers), so each
example makes a few changes of its own beside its watch, to objects named ``example-...``
that it deletes again: it shows something wherever it runs. Against a busy cluster,
``--watch-only`` watches what others do.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import sys
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import Any, Protocol

from kubewire.client import Api, NotFound, PatchType
from kubewire.models import ObjectMeta, Pod
from kubewire.models.core_v1 import Container, PodSpec


def options(doc: str | None, *, max_events: int | None, timeout: float,
            watch_only: bool = True) -> argparse.ArgumentParser:
    """An argument parser with the bounds every example takes (add your own flags to it);
    ``max_events=None`` for an example that stops when its story is told, ``watch_only=False``
    for one whose own changes are the story (no ``--watch-only``)."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    if max_events is not None:
        parser.add_argument("--max-events", type=int,
                            default=int(os.environ.get("EXAMPLES_MAX_EVENTS", max_events)),
                            help="stop after this many events (default %(default)s)")
    parser.add_argument("--timeout", type=float,
                        default=float(os.environ.get("EXAMPLES_TIMEOUT", timeout)),
                        help="stop after this many seconds (default %(default)s)")
    if watch_only:
        parser.add_argument("--watch-only", action="store_true",
                            help="make no changes of its own, only watch (default: make a "
                                 "few, to objects named example-..., so that a quiet cluster "
                                 "shows something)")
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # shows through a pipe
    return parser


@asynccontextmanager
async def changes_beside(args: argparse.Namespace,
                         changes: Coroutine[Any, Any, None]) -> AsyncIterator[None]:
    """Run ``changes`` (the example's own) beside the block, unless ``--watch-only``; they stop
    when the block ends. What they do is said on stderr, so stdout holds only what is watched."""
    if args.watch_only:
        changes.close()
        yield
        return
    print("making changes of its own to watch (--watch-only: none)", file=sys.stderr)

    async def guarded() -> None:
        try:
            await changes
        except Exception as exc:  # a cluster that refuses: say so, and watch on
            print(f"own changes stopped: {type(exc).__name__}: {exc}", file=sys.stderr)

    task = asyncio.create_task(guarded())
    try:
        yield
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task


def example_pod(name: str, labels: dict[str, str] | None = None) -> Pod:
    return Pod(metadata=ObjectMeta(name=name, labels=labels),
               spec=PodSpec(containers=[Container(name="app", image="nginx")]))


@dataclass(frozen=True)
class PodChurn:
    """Every ``every`` seconds a Pod ``example-<prefix>-<n>`` is created (with ``labels``), given
    ``relabel``'s labels and its ``phase`` (as a kubelet would report it) if asked, and deleted;
    until cancelled. Leaves nothing behind, not even a Pod a controller's finalizer holds."""

    prefix: str
    labels: dict[str, str] | None = None
    relabel: dict[str, str] | None = None
    phase: str | None = None
    every: float = 1.0

    async def run(self, api: Api[Pod]) -> None:
        alive: set[str] = set()
        try:
            for n in itertools.count(1):
                name = f"example-{self.prefix}-{n}"
                alive.add(name)  # first: a cancelled create may have happened all the same
                await api.create(example_pod(name, self.labels))
                if self.phase is not None:
                    await api.patch_status(name, {"status": {"phase": self.phase}})
                await asyncio.sleep(self.every / 2)
                if self.relabel is not None:
                    await api.patch(name, {"metadata": {"labels": self.relabel}})
                await api.delete(name)
                alive.discard(name)
                await asyncio.sleep(self.every / 2)
        finally:
            for name in alive:
                with suppress(NotFound):
                    await api.patch(name, {"metadata": {"finalizers": None}},
                                    type=PatchType.MERGE)
                    await api.delete(name)


def equality_labels(selector: str) -> dict[str, str]:
    """The ``key=value`` terms of a label selector (what a Pod needs to match them)."""
    terms = [term.partition("=") for term in selector.split(",") if "!=" not in term]
    return {key.strip(): value.lstrip("=").strip() for key, eq, value in terms if eq}


class HasMetadata(Protocol):
    @property
    def metadata(self) -> ObjectMeta | None: ...


def ref(obj: HasMetadata) -> str:
    """``namespace/name`` (or ``name`` for cluster-scoped objects), as kubectl writes it."""
    meta = obj.metadata or ObjectMeta()
    return f"{meta.namespace}/{meta.name}" if meta.namespace else f"{meta.name}"
