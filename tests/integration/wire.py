"""Raw HTTP on the standard library, so tests can assert exact bytes, headers and Status objects.

- ``call(server, method, path, body, headers)`` sends one request on a fresh connection and
  returns a ``Reply`` (status, lower-cased headers, body bytes, decoded JSON).
- ``Session`` keeps one keep-alive connection for many requests (bulk writes).
- ``WatchStream`` opens a watch and reads its chunked body line by line on a background thread
  into a queue; tests wait on events with a bound, never with fixed sleeps. ``close()`` (or the
  ``with`` block) always releases the socket, so no ResourceWarning escapes.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import queue
import select
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlencode

JSON = Any
Event = dict[str, Any]
DEFAULT_TIMEOUT_S = 10.0  # socket timeout for plain requests; a hung server fails the test


class HasURL(Protocol):
    @property
    def url(self) -> str: ...


@dataclass(frozen=True)
class Reply:
    """One HTTP response, read to the end."""

    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> JSON:
        return json.loads(self.body) if self.body else None

    def status_object(self) -> dict[str, Any]:
        """The body as a Status; asserts it is one (kind, apiVersion, status Failure)."""
        obj = self.json
        assert isinstance(obj, dict), self.body
        assert obj.get("kind") == "Status", obj
        assert obj.get("apiVersion") == "v1", obj
        return obj


def host_port(server: HasURL) -> tuple[str, int]:
    hostport = server.url.removeprefix("http://")
    host, _, port = hostport.rpartition(":")
    return host, int(port)


def with_query(path: str, params: Mapping[str, Any] | None = None) -> str:
    """``path`` with ``params`` url-encoded (``True`` → ``true``; ``None`` values dropped)."""
    if not params:
        return path
    items = {k: ("true" if v is True else "false" if v is False else v)
             for k, v in params.items() if v is not None}
    return path + ("&" if "?" in path else "?") + urlencode(items)


def encode_body(body: Any, headers: dict[str, str]) -> bytes | None:
    if body is None:
        return None
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    headers.setdefault("Content-Type", "application/json")
    return json.dumps(body).encode()


def _content_type_for(method: str, body: Any) -> dict[str, str]:
    if method == "PATCH" and isinstance(body, list):
        return {"Content-Type": "application/json-patch+json"}
    if method == "PATCH" and isinstance(body, dict):
        return {"Content-Type": "application/merge-patch+json"}
    return {}


def _request(conn: http.client.HTTPConnection, method: str, path: str, body: Any,
             headers: Mapping[str, str] | None) -> Reply:
    hdrs = {"Accept": "application/json"} | _content_type_for(method, body) | dict(headers or {})
    payload = encode_body(body, hdrs)
    conn.request(method, path, body=payload, headers=hdrs)
    resp = conn.getresponse()
    data = resp.read()
    return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)


def call(server: HasURL, method: str, path: str, body: Any = None,
         headers: Mapping[str, str] | None = None, *,
         params: Mapping[str, Any] | None = None) -> Reply:
    """One request on a fresh connection. dict/list bodies are sent as JSON (PATCH: a list is
    a JSON patch, a dict a merge patch, unless ``headers`` says otherwise)."""
    host, port = host_port(server)
    conn = http.client.HTTPConnection(host, port, timeout=DEFAULT_TIMEOUT_S)
    try:
        return _request(conn, method, with_query(path, params), body, headers)
    finally:
        conn.close()


class Session:
    """A keep-alive connection for many requests in a row (``with Session(server) as s:``)."""

    def __init__(self, server: HasURL) -> None:
        host, port = host_port(server)
        self._conn = http.client.HTTPConnection(host, port, timeout=DEFAULT_TIMEOUT_S)

    def call(self, method: str, path: str, body: Any = None,
             headers: Mapping[str, str] | None = None, *,
             params: Mapping[str, Any] | None = None) -> Reply:
        return _request(self._conn, method, with_query(path, params), body, headers)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def send_oversized(server: HasURL, method: str, path: str, size: int) -> Reply:
    """Announce a JSON body of ``size`` bytes and send it only if the server waits for it.

    A server that rejects on Content-Length answers at once and closes; sending the body into
    a closed socket would make the kernel reset the connection and could drop the answer.
    """
    host, port = host_port(server)
    head = (f"{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: application/json\r\n"
            f"Content-Type: application/json\r\nContent-Length: {size}\r\n\r\n").encode()
    with socket.create_connection((host, port), timeout=DEFAULT_TIMEOUT_S) as sock:
        sock.sendall(head)
        if not select.select([sock], [], [], 2.0)[0]:  # no early answer: send the body
            body = b'{"a":"' + b"x" * (size - 8) + b'"}'
            with contextlib.suppress(OSError):  # the server may stop reading at its limit
                sock.sendall(body)
        resp = http.client.HTTPResponse(sock, method=method)
        try:
            resp.begin()
            data = resp.read()
            return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
        finally:
            resp.close()


# --- convenience wrappers that assert success ---------------------------------------------------

def ok(reply: Reply, *codes: int) -> JSON:
    """The decoded body, after asserting the status is one of ``codes`` (default 200/201)."""
    assert reply.status in (codes or (200, 201)), (reply.status, reply.body[:2000])
    return reply.json


def create(server: HasURL, collection: str, obj: JSON) -> JSON:
    return ok(call(server, "POST", collection, obj), 201)


def get(server: HasURL, path: str, **params: Any) -> JSON:
    return ok(call(server, "GET", path, params=params), 200)


def list_rv(server: HasURL, collection: str) -> str:
    """The resourceVersion of a list of ``collection`` (the current revision)."""
    rv = get(server, collection)["metadata"]["resourceVersion"]
    assert isinstance(rv, str)
    return rv


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """Poll ``predicate`` until it returns something truthy; bounded by ``timeout``."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


# --- watch --------------------------------------------------------------------------------------

class _End:
    """Queue marker: the body ended (``clean`` when the terminating chunk arrived)."""

    def __init__(self, clean: bool, error: BaseException | None) -> None:
        self.clean = clean
        self.error = error


@dataclass
class WatchStream:
    """A watch request whose events are read on a background thread.

    ``status`` and ``headers`` are recorded before any event; a non-200 answer is read whole
    into ``body`` and the stream counts as ended. ``lines`` keeps every raw line (with its
    ``\\n``) in arrival order.
    """

    server: HasURL
    path: str
    params: Mapping[str, Any] | None = None
    headers: Mapping[str, str] | None = None
    status: int = 0
    response_headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    lines: list[bytes] = field(default_factory=list)
    received: list[Event] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._queue: queue.Queue[Event | _End] = queue.Queue()
        self._done = threading.Event()
        self._closing = False
        self._end: _End | None = None
        host, port = host_port(self.server)
        self._conn = http.client.HTTPConnection(host, port, timeout=DEFAULT_TIMEOUT_S)
        params = dict(self.params or {})
        if "watch" not in params and "/watch/" not in self.path:
            params["watch"] = "true"
        self.url = with_query(self.path, params)
        try:
            self._conn.request("GET", self.url, headers={"Accept": "application/json",
                                                         **dict(self.headers or {})})
            self._resp = self._conn.getresponse()
        except BaseException:
            self._conn.close()
            raise
        self.status = self._resp.status
        self.response_headers = {k.lower(): v for k, v in self._resp.getheaders()}
        if self.status != 200:
            self.body = self._resp.read()
            self._finish(_End(True, None))
            self._thread: threading.Thread | None = None
            return
        # Events may be far apart (a watch waiting on a future revision): no read timeout.
        assert self._conn.sock is not None
        self._conn.sock.settimeout(None)
        self._thread = threading.Thread(target=self._read, name=f"watch {self.url}", daemon=True)
        self._thread.start()

    def _finish(self, end: _End) -> None:
        self._end = end
        self._queue.put(end)
        self._done.set()

    def _read(self) -> None:
        clean, error = False, None
        try:
            while True:
                line = self._resp.readline()
                if not line:
                    clean = True
                    break
                self.lines.append(line)
                self._queue.put(json.loads(line))
        except BaseException as exc:  # connection dropped, or closed by close()
            error = None if self._closing else exc
        self._finish(_End(clean, error))

    # --- reading ---

    def next_event(self, timeout: float = 5.0) -> Event:
        """The next event; fails if none arrives within ``timeout`` or the stream ended."""
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no watch event within {timeout}s on {self.url}") from None
        if isinstance(item, _End):
            self._queue.put(item)
            raise AssertionError(f"watch {self.url} ended (clean={item.clean}, "
                                 f"error={item.error!r}); got {len(self.received)} events")
        self.received.append(item)
        return item

    def events(self, count: int, timeout: float = 5.0) -> list[Event]:
        """The next ``count`` events, each within ``timeout``."""
        return [self.next_event(timeout) for _ in range(count)]

    def events_until(self, predicate: Callable[[Event], bool],
                     timeout: float = 5.0) -> list[Event]:
        """Events up to and including the first one matching ``predicate``."""
        deadline = time.monotonic() + timeout
        out: list[Event] = []
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"predicate not met within {timeout}s; got "
                                     f"{[summary(e) for e in out]}")
            event = self.next_event(remaining)
            out.append(event)
            if predicate(event):
                return out

    def expect_no_event(self, within: float = 0.5) -> None:
        """Assert that nothing arrives for ``within`` seconds (only for asserting absence)."""
        try:
            item = self._queue.get(timeout=within)
        except queue.Empty:
            return
        if isinstance(item, _End):
            self._queue.put(item)
            return
        self.received.append(item)
        raise AssertionError(f"unexpected watch event: {summary(item)}")

    def ended(self, timeout: float = 5.0) -> bool:
        """Whether the server closed the stream within ``timeout`` (events may remain queued)."""
        return self._done.wait(timeout)

    @property
    def ended_cleanly(self) -> bool:
        """True when the body ended with the terminating chunk (not a dropped connection)."""
        return self._end is not None and self._end.clean and self._end.error is None

    def remaining(self) -> list[Event]:
        """Every event still queued, once the stream has ended."""
        assert self._done.is_set(), "stream still open"
        out: list[Event] = []
        while True:
            item = self._queue.get_nowait()
            if isinstance(item, _End):
                self._queue.put(item)
                return out
            self.received.append(item)
            out.append(item)

    # --- lifecycle ---

    def close(self) -> None:
        self._closing = True
        sock = self._conn.sock
        if sock is not None and not self._done.is_set():
            with contextlib.suppress(OSError):  # already closed by the server
                sock.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(10)
        self._resp.close()
        self._conn.close()

    def __enter__(self) -> WatchStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def watch(server: HasURL, path: str, headers: Mapping[str, str] | None = None,
          **params: Any) -> WatchStream:
    """Open a watch on ``path`` (``watch=true`` added unless the path is a legacy /watch/ one)."""
    return WatchStream(server, path, params, headers)


# --- event helpers ------------------------------------------------------------------------------

def rv_of(event_or_obj: JSON) -> int:
    obj = event_or_obj.get("object", event_or_obj)
    return int(obj["metadata"]["resourceVersion"])


def name_of(event: Event) -> str:
    return str(event["object"]["metadata"].get("name", ""))


def summary(event: Event) -> tuple[str, str, str]:
    """(type, name, resourceVersion): compact form for assertion messages and comparisons."""
    meta = event.get("object", {}).get("metadata", {})
    return event.get("type", "?"), meta.get("name", ""), meta.get("resourceVersion", "")


def types_and_names(events: list[Event]) -> list[tuple[str, str]]:
    return [(e["type"], name_of(e)) for e in events]


def is_bookmark(event: Event) -> bool:
    return event["type"] == "BOOKMARK"


def is_initial_end(event: Event) -> bool:
    annotations = event["object"]["metadata"].get("annotations") or {}
    return event["type"] == "BOOKMARK" and annotations.get("k8s.io/initial-events-end") == "true"
