"""``/healthz``, ``/livez`` and ``/readyz`` as kube-apiserver answers them (k8s.io/apiserver
``pkg/server/healthz/healthz.go``, v0.32): the checks are data, the answers pure functions of
their results.

- Each endpoint runs its checks in kube's order (``ENDPOINT_CHECKS``): ``ping``, ``log``,
  ``etcd`` (kubewire's store: its writer answers a ping), then readyz's ``etcd-readiness`` and
  ``informer-sync`` (the watch caches are filled), the post-start hooks kubewire has
  (``poststarthook/crd-informer-synced``: the established CRDs, the pre-installed ones
  included, are served; ``poststarthook/start-system-namespaces-controller``: the initial
  namespaces exist), and
  readyz's ``shutdown`` (fails once the server is stopping).
- ``?exclude=NAME`` (repeatable) skips a check (``[+]NAME excluded: ok``); names that match no
  check are reported in a ``warn:`` line, sorted and quoted as Go's ``%q``.
- 200 ``ok`` (``?verbose``: one line per check and ``NAME check passed``); any failure is a 500
  listing every check, the failed ones ``[-]NAME failed: reason withheld`` (the endpoints are
  public), then ``NAME check failed``, written by Go's ``http.Error`` (a final newline).
- ``/ENDPOINT/CHECK`` runs one check: ``ok``, or 500 ``internal server error: REASON`` (these
  paths need authorization, so the reason is shown); an unknown check is the mux's 404.

Headers as kube writes them: ``text/plain; charset=utf-8``, with ``X-Content-Type-Options:
nosniff`` on the root answers and on every error (``http.Error`` sets it); a single check's
``ok`` has only the content type Go sniffs.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from kubewire.go_text import go_quote

log = logging.getLogger(__name__)

HEALTHZ, LIVEZ, READYZ = "healthz", "livez", "readyz"
ENDPOINTS = (HEALTHZ, LIVEZ, READYZ)
TEXT = "text/plain; charset=utf-8"
NOSNIFF = ("X-Content-Type-Options", "nosniff")
NOT_FOUND_TEXT = b"404 page not found\n"

PING, LOG, ETCD, ETCD_READINESS = "ping", "log", "etcd", "etcd-readiness"
INFORMER_SYNC, SHUTDOWN = "informer-sync", "shutdown"
NAMESPACES_HOOK = "poststarthook/start-system-namespaces-controller"
# apiextensions-apiserver's hook: every established CRD is served (kubewire: also its
# pre-installed CRDs, which the server writes at start)
CRDS_HOOK = "poststarthook/crd-informer-synced"

_LIVE = (PING, LOG, ETCD, CRDS_HOOK, NAMESPACES_HOOK)
ENDPOINT_CHECKS: Mapping[str, tuple[str, ...]] = {
    HEALTHZ: _LIVE,
    LIVEZ: _LIVE,
    READYZ: (PING, LOG, ETCD, ETCD_READINESS, INFORMER_SYNC, CRDS_HOOK, NAMESPACES_HOOK,
             SHUTDOWN),
}

# A check's outcome: None when it passed, else why it failed.
Outcome = str | None
Check = Callable[[], Awaitable[Outcome]]


@dataclass(frozen=True, slots=True)
class HealthAnswer:
    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str = TEXT


def health_path(path: str) -> tuple[str, str] | None:
    """``(endpoint, check)`` for ``/ENDPOINT`` (check ``""``) or ``/ENDPOINT/CHECK`` (checks are
    named with slashes: ``poststarthook/...``); None for any other path."""
    endpoint, _, check = path[1:].partition("/")
    if not path.startswith("/") or endpoint not in ENDPOINT_CHECKS:
        return None
    if check == "" and path.endswith("/"):
        return endpoint, "/"  # "/healthz/": no such handler, as in kube's mux
    return endpoint, check


def to_run(endpoint: str, check: str, query: Mapping[str, Sequence[str]]) -> tuple[str, ...]:
    """The checks to run for this request: the one asked for, or the endpoint's not excluded
    (none for an unknown check)."""
    names = ENDPOINT_CHECKS[endpoint]
    if check:
        return (check,) if check in names else ()
    excluded = set(query.get("exclude", ()))
    return tuple(name for name in names if name not in excluded)


def root_answer(endpoint: str, outcomes: Mapping[str, Outcome],
                query: Mapping[str, Sequence[str]]) -> HealthAnswer:
    """``handleRootHealth``: the answer to ``/ENDPOINT`` given each run check's outcome."""
    excluded = set(query.get("exclude", ()))
    lines: list[str] = []
    failed = False
    for name in ENDPOINT_CHECKS[endpoint]:
        if name in excluded:
            excluded.discard(name)
            lines.append(f"[+]{name} excluded: ok\n")
            continue
        reason = outcomes.get(name)
        if reason is None:
            lines.append(f"[+]{name} ok\n")
        else:
            failed = True
            lines.append(f"[-]{name} failed: reason withheld\n")
    if excluded:
        quoted = ",".join(go_quote(name) for name in sorted(excluded))
        lines.append(f"warn: some health checks cannot be excluded: no matches for {quoted}\n")
    if failed:
        text = "".join(lines) + f"{endpoint} check failed\n"
        return HealthAnswer(500, text.encode(), (NOSNIFF,))
    if "verbose" not in query:
        return HealthAnswer(200, b"ok", (NOSNIFF,))
    return HealthAnswer(200, ("".join(lines) + f"{endpoint} check passed\n").encode(), (NOSNIFF,))


def check_answer(outcome: Outcome) -> HealthAnswer:
    """``adaptCheckToHandler``: one check's answer."""
    if outcome is None:
        return HealthAnswer(200, b"ok")
    return HealthAnswer(500, f"internal server error: {outcome}\n".encode(), (NOSNIFF,))


def failed_reasons(outcomes: Mapping[str, Outcome]) -> str:
    """kube's log line for a failed root check: ``[-]NAME failed: REASON`` per failure."""
    return "".join(f"[-]{name} failed: {reason}\n" for name, reason in outcomes.items()
                   if reason is not None)


async def run_checks(names: Sequence[str], checks: Mapping[str, Check]) -> dict[str, Outcome]:
    """Each named check's outcome, in turn (as kube runs them)."""
    return {name: await checks[name]() for name in names}


async def answer(path: str, query: Mapping[str, Sequence[str]],
                 checks: Mapping[str, Check]) -> HealthAnswer | None:
    """The answer to a health path (None: not one): runs only the checks it needs."""
    found = health_path(path)
    if found is None:
        return None
    endpoint, check = found
    names = to_run(endpoint, check, query)
    if check and not names:
        return HealthAnswer(404, NOT_FOUND_TEXT, (NOSNIFF,))
    outcomes = await run_checks(names, checks)
    if check:
        return check_answer(outcomes[check])
    found_answer = root_answer(endpoint, outcomes, query)
    if found_answer.status != 200:  # kube logs the reasons it withholds from the answer
        log.info("%s check failed:\n%s", endpoint, failed_reasons(outcomes))
    return found_answer


# How long a health check waits for the store's writer: kube's --etcd-healthcheck-timeout (2s).
STORE_HEALTH_TIMEOUT_S = 2.0


async def _passes() -> Outcome:
    return None


class Pingable(Protocol):
    """The store as the health checks see it (``SQLiteStore.ping``)."""

    async def ping(self, timeout_s: float) -> bool: ...


class ServerHealth:
    """The checks of one server, over the state the app reports as it starts and stops.

    ``log`` always passes: kube's checks that klog's flush is not blocked; Python's logging
    writes synchronously in the caller, so there is no flusher to get stuck.
    """

    def __init__(self, store: Pingable, timeout_s: float = STORE_HEALTH_TIMEOUT_S) -> None:
        self.store = store
        self.timeout_s = timeout_s
        self.caches_synced = False
        self.namespaces_made = False
        self.crds_served = False
        self.stopping = False
        self.store_fault: str | None = None  # set while a store failure is injected (faults)
        self.checks: dict[str, Check] = {
            PING: _passes, LOG: _passes, ETCD: self._store, ETCD_READINESS: self._store,
            INFORMER_SYNC: self._informers, CRDS_HOOK: self._crds,
            NAMESPACES_HOOK: self._namespaces,
            SHUTDOWN: self._shutdown}

    async def answer(self, path: str, query: Mapping[str, Sequence[str]]) -> HealthAnswer | None:
        return await answer(path, query, self.checks)

    async def _store(self) -> Outcome:
        if self.store_fault is not None:
            return self.store_fault
        if await self.store.ping(self.timeout_s):
            return None
        # etcd's store says why (kube's texts: "error getting data from etcd: ...")
        reason = getattr(self.store, "last_error", None)
        return reason or f"the store's writer did not answer within {self.timeout_s:g}s"

    async def _informers(self) -> Outcome:
        return None if self.caches_synced else "the watch caches are not filled yet"

    async def _crds(self) -> Outcome:
        return None if self.crds_served else "not finished"

    async def _namespaces(self) -> Outcome:
        return None if self.namespaces_made else "not finished"

    async def _shutdown(self) -> Outcome:
        return "process is shutting down" if self.stopping else None
