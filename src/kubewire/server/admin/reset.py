"""Reset: the server back to the state it had right after start, for the next test.

``Baseline`` is every stored key with the revision it was last written at once the server is
ready (read then on the memory store, from the history at that revision by the first reset on
SQLite). ``reset_to_baseline`` then compares the store with it, key by key: a key
the baseline lacks is deleted (watchers see DELETED; finalizers and grace periods are not
waited for: this is a reset, not a delete request), and a baseline key that is gone or was
written since is put back with its baseline content. Every write takes a new revision, so
resourceVersions keep growing and are never reused. The baseline learns the revisions of what
it put back, so the next reset skips what no test touched since.

Order: the deleted keys' namespaces go first (so the namespace controller does not make a
``default`` ServiceAccount again in a namespace about to go), CustomResourceDefinitions last
(their custom resources' watchers get DELETED for each before the kind stops being served);
restored namespaces and CRDs come before the rest.

The controllers take part: pending namespace and pod deletions are dropped before the store
changes and taken on again from what it holds after, and the reset waits for the controllers to
be idle (a deleted CRD's kinds unserved, a restored one served again), then compares again; what
a controller wrote meanwhile is undone in another round. Requests running during a reset may
leave their writes behind: reset between tests, not during one.
"""

from __future__ import annotations

import asyncio
import builtins
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import msgspec

from kubewire.server.wire.http_messages import Request, Response, json_response
from kubewire.status import Conflict, MethodNotAllowed, NotFound, internal_error
from kubewire.storage.base import (
    CompactedError,
    Create,
    Delete,
    KeyExistsError,
    KeyNotFoundError,
    Record,
    Store,
    Update,
)

_decode = msgspec.json.Decoder(dict[str, Any]).decode

NAMESPACE_PREFIX = "core/namespaces/"
CRD_PREFIX = "apiextensions.k8s.io/customresourcedefinitions/"
# Compare-and-repair rounds before a reset gives up (controllers writing back what it removed).
MAX_ROUNDS = 5


class ControllerWork(Protocol):
    """What a reset needs of the in-server controllers (``ControllerManager``)."""

    async def settled(self) -> None: ...

    async def drop_pending(self) -> None: ...

    def resume_pending(self) -> None: ...


@runtime_checkable
class Resettable(Protocol):
    """A server the admin endpoint can reset (``APIServer``)."""

    async def reset(self) -> ResetReport: ...


@dataclass(slots=True)
class ResetReport:
    """What one reset did: keys deleted and put back, the store's revision after, rounds."""

    deleted: int = 0
    restored: int = 0
    revision: int = 0
    rounds: int = 0

    def as_json(self) -> dict[str, int]:
        return {"deleted": self.deleted, "restored": self.restored,
                "revision": self.revision, "rounds": self.rounds}


@dataclass(slots=True)
class Baseline:
    """The store's state right after start: key -> its record then (or since put back).

    ``capture`` either reads it at once (``eager``: for the memory store, whose records share
    the bytes it holds, so this costs a dict) or only notes the revision, and the first reset
    reads the state at that revision from the store's history (a SQLite server that never
    resets holds no copy of its database); that fails once the history since the start is
    compacted (``--history-max-changes``, ``--history-max-age``).
    """

    revision: int
    records: dict[str, Record] | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @classmethod
    async def capture(cls, store: Store, *, eager: bool) -> Baseline:
        if not eager:
            return cls(store.current_revision)
        records, revision = await store.list("")
        return cls(revision, {record.key: record for record in records})

    async def read(self, store: Store) -> dict[str, Record]:
        """The baseline's records, read from the store's history the first time."""
        if self.records is None:
            try:
                records, _ = await store.list("", revision=self.revision)
            except CompactedError as err:
                raise Conflict(
                    f"the store's history since the start (revision {self.revision}) is "
                    f"compacted (now after revision {err.compacted}): the state to go back to "
                    "is gone; keep more history, or use the memory store", {}) from err
            self.records = {record.key: record for record in records}
        return self.records

    @staticmethod
    def differences(records: dict[str, Record], current: builtins.list[Record],
                    ) -> tuple[builtins.list[str], builtins.list[str]]:
        """(keys to delete, keys to put back), each in the order to write them."""
        seen: set[str] = set()
        extra: builtins.list[str] = []
        changed: builtins.list[str] = []
        for record in current:
            key = record.key
            wanted = records.get(key)
            if wanted is None:
                extra.append(key)
                continue
            seen.add(key)
            if wanted.revision != record.revision:
                changed.append(key)
        changed += [key for key in records if key not in seen]
        return (sorted(extra, key=_delete_rank),
                sorted(changed, key=_restore_rank))


def _delete_rank(key: str) -> tuple[int, str]:
    if key.startswith(NAMESPACE_PREFIX):
        return (0, key)
    return (2 if key.startswith(CRD_PREFIX) else 1, key)


def _restore_rank(key: str) -> tuple[int, str]:
    if key.startswith(NAMESPACE_PREFIX):
        return (0, key)
    return (1 if key.startswith(CRD_PREFIX) else 2, key)


async def reset_to_baseline(store: Store, baseline: Baseline,
                            controllers: ControllerWork) -> ResetReport:
    """Bring ``store`` back to ``baseline`` (see the module docstring)."""
    async with baseline.lock:
        report = ResetReport()
        records = await baseline.read(store)
        await controllers.drop_pending()
        try:
            while True:
                current, _ = await store.list("")
                extra, changed = baseline.differences(records, current)
                if not extra and not changed:
                    break
                if report.rounds == MAX_ROUNDS:
                    raise internal_error(
                        f"reset did not settle after {MAX_ROUNDS} rounds: {len(extra)} objects "
                        f"to delete and {len(changed)} to put back remain (a controller keeps "
                        "writing them)")
                report.rounds += 1
                by_key = {record.key: record for record in current}
                for key in extra:
                    report.deleted += await _delete(store, key)
                for key in changed:
                    await _restore(store, baseline, key, by_key.get(key))
                    report.restored += 1
                await controllers.settled()
        finally:
            controllers.resume_pending()
        report.revision = store.current_revision
        return report


async def _delete(store: Store, key: str) -> int:
    try:
        await store.write(Delete(key))
    except KeyNotFoundError:
        return 0  # gone meanwhile (a controller finished it)
    return 1


async def _restore(store: Store, baseline: Baseline, key: str, current: Record | None) -> None:
    """Write the baseline content of ``key`` again and remember the revision it got."""
    records = await baseline.read(store)
    obj = _decode(records[key].value)
    if current is None:
        try:
            change = await store.write(Create(key, obj))
        except KeyExistsError:  # made again meanwhile (a controller): replace it
            change = await store.write(Update(key, obj))
    else:
        try:
            change = await store.write(Update(key, obj))
        except KeyNotFoundError:
            change = await store.write(Create(key, obj))
    records[key] = Record(key, change.revision, change.value)


async def serve(target: object, request: Request) -> Response:
    """``POST /kubewire/reset``: reset the server; answers the ``ResetReport`` as JSON.

    ``target`` is the endpoints' ``AdminTarget`` (not named here: ``endpoints`` imports this
    module); it is reset when it is ``Resettable``."""
    if request.method != "POST":
        raise MethodNotAllowed(f"{request.method} is not allowed on /kubewire/reset: POST it", {})
    if not isinstance(target, Resettable):
        raise NotFound("this server cannot be reset", {})
    report = await target.reset()
    return json_response(report.as_json())
