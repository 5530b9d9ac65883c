"""Fault specs and the decisions about them: what a JSON spec means (or the 400 it gets), which
request or watch a fault matches, whether a rate draw fires, the Status an injected error
answers. Pure: no loop, no sockets; ``faults.py`` acts on what these decide.

A spec is one JSON object (``POST /kubewire/faults``, ``Faults.add``); ``type`` says which:

- ``dropWatches`` (at once, not kept): matching watch streams end now;
- ``expireHistory``: a watch resuming from a revision older than the one current now gets
  kube's 410 ``too old resource version``, from the ring as from the durable log;
- ``stall``: matching watch streams stay open and get nothing (held, not lost) until the fault
  is cleared or ``seconds`` pass;
- ``bookmarks``: ``mode`` ``suppress`` (no periodic bookmark; with ``initialEventsEnd`` the
  ``k8s.io/initial-events-end`` one of a watch-list is left out too, so a client waiting for
  it times out) or ``delay`` (each periodic bookmark ``seconds`` late; the initial-events-end
  one is never delayed: it must come before the events after the snapshot);
- ``error``: matching requests answer ``code`` (429 with ``Retry-After``, 500, 503, 504) as
  kube's Status for it;
- ``reset``: matching requests get no answer; their TCP connection is aborted;
- ``latency``: matching requests wait ``seconds`` first;
- ``storeFailure``: writes answer 500 as when etcd is unreachable, and the ``etcd`` health
  checks fail, until cleared.

Matching fields (all optional; absent matches all): ``verb`` (kube's: get, list, watch, create,
update, patch, delete, deletecollection), ``resource`` (the plural), ``group`` ("" is the core
group), ``namespace``, and for watches ``labelSelector`` (the selector the watch asked with, as
kube prints it). ``rate`` (0..1, default 1) is drawn with the server's rng per matching
request; ``count`` (optional) ends the fault after that many injections.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubewire.selectors.errors import SelectorError
from kubewire.selectors.labels import parse_label_selector
from kubewire.server.request.timeout import deadline_exceeded
from kubewire.status import (
    BadRequest,
    ServiceUnavailable,
    StatusError,
    TooManyRequests,
    internal_error,
)

MAX_FAULTS = 64  # active faults at once: an admin's loop cannot grow the server's memory
MAX_SECONDS = 86400.0  # latency, stall and delay durations
MAX_TEXT = 253  # a resource, group, namespace or selector longer than this matches nothing real
VERBS = frozenset({"get", "list", "watch", "create", "update", "patch", "delete",
                   "deletecollection"})
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
ERROR_CODES = (429, 500, 503, 504)
TYPES = ("dropWatches", "expireHistory", "stall", "bookmarks", "error", "reset", "latency",
         "storeFailure")
REQUEST_TYPES = frozenset({"error", "reset", "latency"})
WATCH_TYPES = frozenset({"dropWatches", "stall", "bookmarks"})
# the Status message of a write while the store is failed: what etcd's client says when the
# cluster does not answer, passed through as kube's ErrorToAPIStatus does (500, no reason)
STORE_FAILURE_MESSAGE = "etcdserver: request timed out"

_MATCH_FIELDS = ("verb", "resource", "group", "namespace")
_ALLOWED: dict[str, frozenset[str]] = {
    "dropWatches": frozenset({"resource", "group", "namespace", "labelSelector"}),
    "expireHistory": frozenset(),
    "stall": frozenset({"resource", "group", "namespace", "labelSelector", "seconds"}),
    "bookmarks": frozenset({"resource", "group", "namespace", "labelSelector", "mode",
                            "seconds", "initialEventsEnd"}),
    "error": frozenset({*_MATCH_FIELDS, "code", "rate", "count", "retryAfterSeconds"}),
    "reset": frozenset({*_MATCH_FIELDS, "rate", "count"}),
    "latency": frozenset({*_MATCH_FIELDS, "seconds", "rate", "count"}),
    "storeFailure": frozenset(),
}


@dataclass(frozen=True, slots=True)
class Match:
    """What a fault applies to; None matches anything."""

    verb: str | None = None
    resource: str | None = None
    group: str | None = None
    namespace: str | None = None
    label_selector: str | None = None  # watches: the selector as kube prints it

    def request(self, verb: str, resource: str, group: str, namespace: str) -> bool:
        return ((self.verb is None or self.verb == verb)
                and (self.resource is None or self.resource == resource)
                and (self.group is None or self.group == group)
                and (self.namespace is None or self.namespace == namespace))

    def watch(self, resource: str, group: str, namespace: str, label_selector: str) -> bool:
        """A watch stream of ``resource`` in ``namespace`` ("" for all) selecting with
        ``label_selector`` (its printed form, "" for none)."""
        return (self.request("watch", resource, group, namespace)
                and (self.label_selector is None or self.label_selector == label_selector))

    def to_json(self) -> dict[str, str]:
        found = {"verb": self.verb, "resource": self.resource, "group": self.group,
                 "namespace": self.namespace, "labelSelector": self.label_selector}
        return {k: v for k, v in found.items() if v is not None}


@dataclass(slots=True)
class Fault:
    """One fault as parsed; ``id`` is given when it is kept (``FaultSet.add``)."""

    type: str
    match: Match = field(default_factory=Match)
    code: int = 0
    rate: float = 1.0
    count: int | None = None  # injections left; None: no limit
    seconds: float = 0.0  # latency, stall duration (0: until cleared), bookmark delay
    mode: str = ""  # bookmarks: "suppress" or "delay"
    initial_events_end: bool = False
    retry_after_s: int = 1
    revision: int = 0  # expireHistory: resumes from below this get 410
    id: str = ""
    injected: int = 0

    @property
    def label(self) -> str:
        """Its name in metrics and logs: ``error-503``, ``reset``, ``stall``..."""
        if self.type == "error":
            return f"error-{self.code}"
        if self.type == "bookmarks":
            return f"bookmarks-{self.mode}"
        return self.type

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "type": self.type, **self.match.to_json()}
        if self.type == "error":
            out["code"] = self.code
            if self.code == 429:
                out["retryAfterSeconds"] = self.retry_after_s
        if self.type in REQUEST_TYPES:
            out["rate"] = self.rate
            if self.count is not None:
                out["count"] = self.count
        if self.type in ("latency", "stall", "bookmarks") and (self.seconds or
                                                               self.type == "latency"):
            out["seconds"] = self.seconds
        if self.type == "bookmarks":
            out["mode"] = self.mode
            out["initialEventsEnd"] = self.initial_events_end
        if self.type == "expireHistory":
            out["revision"] = self.revision
        out["injected"] = self.injected
        return out


def parse_fault(spec: object) -> Fault:
    """The fault ``spec`` describes, or kube's 400 saying what is wrong with it."""
    if not isinstance(spec, dict):
        raise _bad("a fault is a JSON object")
    kind = spec.get("type")
    if kind not in _ALLOWED:
        raise _bad(f"type must be one of {', '.join(TYPES)}, not {kind!r}")
    unknown = sorted(set(spec) - _ALLOWED[kind] - {"type"})
    if unknown:
        raise _bad(f"unknown field(s) for a {kind} fault: {', '.join(unknown)}")
    fault = Fault(kind, _match(spec))
    parse = _PARSERS.get(kind)
    if parse is not None:
        parse(spec, fault)
    return fault


def _parse_error(spec: dict[str, Any], fault: Fault) -> None:
    code = spec.get("code")
    if code not in ERROR_CODES or isinstance(code, bool):
        raise _bad(f"code must be one of {', '.join(map(str, ERROR_CODES))}, not {code!r}")
    fault.code = code
    fault.retry_after_s = _int(spec, "retryAfterSeconds", 1, 1, 3600)
    _parse_rate(spec, fault)


def _parse_rate(spec: dict[str, Any], fault: Fault) -> None:
    fault.rate = _number(spec, "rate", 1.0, 0.0, 1.0)
    if "count" in spec:
        fault.count = _int(spec, "count", 1, 1, 1_000_000_000)


def _parse_latency(spec: dict[str, Any], fault: Fault) -> None:
    if "seconds" not in spec:
        raise _bad("a latency fault needs seconds")
    fault.seconds = _number(spec, "seconds", 0.0, 0.0, MAX_SECONDS)
    _parse_rate(spec, fault)


def _parse_stall(spec: dict[str, Any], fault: Fault) -> None:
    fault.seconds = _number(spec, "seconds", 0.0, 0.0, MAX_SECONDS)


def _parse_bookmarks(spec: dict[str, Any], fault: Fault) -> None:
    mode = spec.get("mode", "suppress")
    if mode not in ("suppress", "delay"):
        raise _bad(f"mode must be suppress or delay, not {mode!r}")
    fault.mode = mode
    fault.seconds = _number(spec, "seconds", 0.0, 0.0, MAX_SECONDS)
    if mode == "delay" and fault.seconds <= 0:
        raise _bad("a delay of bookmarks needs seconds > 0")
    if mode == "suppress" and fault.seconds:
        raise _bad("seconds goes with mode delay (suppressed bookmarks stay so until the "
                   "fault is cleared)")
    end = spec.get("initialEventsEnd", False)
    if not isinstance(end, bool):
        raise _bad("initialEventsEnd must be true or false")
    if end and mode != "suppress":
        raise _bad("initialEventsEnd goes with mode suppress (that bookmark is never "
                   "delayed: events follow it)")
    fault.initial_events_end = end


_PARSERS: dict[str, Callable[[dict[str, Any], Fault], None]] = {
    "error": _parse_error, "reset": _parse_rate, "latency": _parse_latency,
    "stall": _parse_stall, "bookmarks": _parse_bookmarks}


def _match(spec: dict[str, Any]) -> Match:
    values: dict[str, str | None] = {}
    for key in (*_MATCH_FIELDS, "labelSelector"):
        value = spec.get(key)
        if value is not None and (not isinstance(value, str) or len(value) > MAX_TEXT):
            raise _bad(f"{key} must be a string of at most {MAX_TEXT} characters")
        values[key] = value
    verb = values["verb"]
    if verb is not None and verb not in VERBS:
        raise _bad(f"verb must be one of {', '.join(sorted(VERBS))}, not {verb!r}")
    selector = values["labelSelector"]
    if selector is not None:
        try:
            selector = str(parse_label_selector(selector))
        except SelectorError as err:
            raise _bad(f"labelSelector: {err}") from err
    return Match(verb, values["resource"], values["group"], values["namespace"], selector)


def _number(spec: dict[str, Any], key: str, default: float, low: float, high: float) -> float:
    value = spec.get(key, default)
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or not math.isfinite(value) or not low <= value <= high):
        raise _bad(f"{key} must be a number in [{low:g}, {high:g}], not {value!r}")
    return float(value)


def _int(spec: dict[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = spec.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _bad(f"{key} must be an integer in [{low}, {high}], not {value!r}")
    return value


def _bad(text: str) -> BadRequest:
    return BadRequest(f"invalid fault: {text}", {})


def fires(fault: Fault, rng: random.Random) -> bool:
    """Whether ``fault`` acts on one matching request (a draw only when its rate is below 1)."""
    return fault.rate >= 1.0 or (fault.rate > 0.0 and rng.random() < fault.rate)


def error_status(fault: Fault) -> StatusError:
    """The Status kube answers with ``fault.code`` (apimachinery's errors.NewTooManyRequests,
    NewInternalError, NewServiceUnavailable, and the request-deadline Timeout)."""
    code = fault.code
    if code == 429:
        return TooManyRequests("Too many requests, please try again later.",
                               {"retryAfterSeconds": fault.retry_after_s})
    if code == 500:
        return internal_error("injected by kubewire (fault " + fault.id + ")")
    if code == 503:
        return ServiceUnavailable("the server is currently unable to handle the request",
                                  {})
    return deadline_exceeded()


def store_failure_status() -> StatusError:
    """A write while etcd is unreachable: 500, the client's error text, no reason."""
    return StatusError(STORE_FAILURE_MESSAGE)


class FaultSet:
    """The active faults, in the order added; at most ``limit`` of them."""

    def __init__(self, limit: int = MAX_FAULTS) -> None:
        self.limit = limit
        self.faults: dict[str, Fault] = {}
        self._next = 1

    def add(self, fault: Fault) -> Fault:
        if len(self.faults) >= self.limit:
            raise _bad(f"{self.limit} faults are active already: clear some first")
        fault.id = f"f{self._next}"
        self._next += 1
        self.faults[fault.id] = fault
        return fault

    def remove(self, fault_id: str) -> Fault | None:
        return self.faults.pop(fault_id, None)

    def of_type(self, *types: str) -> list[Fault]:
        return [f for f in self.faults.values() if f.type in types]

    def pick_for_request(self, verb: str, resource: str, group: str, namespace: str,
                         rng: random.Random) -> tuple[Fault | None, Fault | None]:
        """The latency fault and the answering fault (storeFailure, error or reset) that act
        on one request, each the first of its kind that matches and fires; each counted, and
        removed when its count is spent."""
        delay: Fault | None = None
        answer: Fault | None = None
        for fault in list(self.faults.values()):
            if fault.type == "storeFailure":
                if answer is None and verb in WRITE_VERBS:
                    answer = self._count(fault)
                continue
            if fault.type not in REQUEST_TYPES:
                continue
            if (delay is not None if fault.type == "latency" else answer is not None):
                continue
            if not fault.match.request(verb, resource, group, namespace) or not fires(fault,
                                                                                        rng):
                continue
            if fault.type == "latency":
                delay = self._count(fault)
            else:
                answer = self._count(fault)
        return delay, answer

    def _count(self, fault: Fault) -> Fault:
        fault.injected += 1
        if fault.count is not None:
            fault.count -= 1
            if fault.count <= 0:
                self.faults.pop(fault.id, None)
        return fault
