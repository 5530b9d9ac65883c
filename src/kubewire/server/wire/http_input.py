"""What the HTTP layer takes from a client, and how much of it it holds: http.py's pure parts.

- ``split_target``: a request target's path and raw query, whatever its length. Go takes a
  request line as long as its head limit allows (a long label selector is a long URL), while
  httptools' ``parse_url`` keeps offsets in 16 bits and refuses targets over 64 KiB.
- ``has_body``, ``expects_continue``: facts about a request's head that decide what is read next.
- ``BodyBudget``: request-body bytes the HTTP layer holds, server-wide: each body reserves its
  size before it is read, and a connection whose body does not fit waits (it stops reading;
  nothing fails).
- The fixed answers: Go's 431 for a head over its limit, and kube's 504 for a request whose body
  did not arrive within the request timeout.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from urllib.parse import parse_qs, unquote, unquote_to_bytes

import httptools

from kubewire.go_text import go_utf8, go_utf8_of_latin1

# Go's http.Server reads a head through a reader limited to MaxHeaderBytes + 4096
# (server.go ``initialReadLimitSize``); the request line counts toward it.
HEAD_SLACK_BYTES = 4096
# server.go ``conn.serve``, errTooLarge: written as is, and the connection closes.
HEAD_TOO_LARGE_ANSWER = (b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
                         b"Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
                         b"431 Request Header Fields Too Large")
# apiserver pkg/server/filters/timeout.go (v1.32): the handler was still reading the body when
# the request's deadline passed. ``json.Encoder`` writes ``err.ErrStatus`` bare (no kind or
# apiVersion, a trailing newline), and with no Content-Type set Go sniffs text/plain.
REQUEST_TIMEOUT_BODY = (b'{"metadata":{},"status":"Failure","message":"Timeout: request did not '
                        b'complete within the allotted timeout","reason":"Timeout",'
                        b'"details":{},"code":504}\n')
REQUEST_TIMEOUT_CONTENT_TYPE = "text/plain; charset=utf-8"


class InvalidTarget(ValueError):
    """A request target that is neither origin-form nor a URL httptools can split."""


def split_target(target: bytes) -> tuple[str, str]:
    """The percent-decoded path and the raw query of a request target.

    Origin-form (``/path?query``, all a kube client sends) is split here, at any length, as Go's
    ``url.ParseRequestURI`` does: at the first ``?``, with no fragment. Anything else (absolute
    form, ``*``) goes to httptools. Raises ``InvalidTarget``.
    """
    if target.startswith(b"/"):
        path, _, query = target.partition(b"?")
    else:
        try:
            parsed = httptools.parse_url(target)
        except httptools.HttpParserInvalidURLError as exc:
            raise InvalidTarget(str(exc)) from None
        path, query = parsed.path or b"", parsed.query or b""
    if path.isascii() and b"%" not in path:
        return path.decode("ascii"), query.decode("latin-1")
    return go_utf8(unquote_to_bytes(path)), query.decode("latin-1")


def parse_query(raw_query: str) -> dict[str, list[str]]:
    """Go's ``url.ParseQuery`` of a raw query (its bytes as latin-1 text): blank values and
    repeated keys kept, and the unescaped bytes read as Go reads a string's bytes (U+FFFD for
    each byte that is not UTF-8), not as Python's decoder does (one for several)."""
    if raw_query.isascii() and "%" not in raw_query:
        return parse_qs(raw_query, keep_blank_values=True)
    pairs = _parse_qs_latin1(raw_query)
    return {go_utf8_of_latin1(key): [go_utf8_of_latin1(value) for value in values]
            for key, values in pairs.items()}


def _parse_qs_latin1(raw_query: str) -> dict[str, list[str]]:
    """``parse_qs(raw_query, keep_blank_values=True, encoding="latin-1")``, the same pairs in
    the same order, with ``_unquote_latin1`` for ``unquote``: a long query (a label selector of
    thousands of values, each comma a ``%2C``) decodes in C, not an escape at a time."""
    pairs: dict[str, list[str]] = {}
    for pair in raw_query.split("&"):
        if pair:
            name, _, value = pair.partition("=")
            pairs.setdefault(_unquote_latin1(name.replace("+", " ")), []).append(
                _unquote_latin1(value.replace("+", " ")))
    return pairs


_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_HEX_DIGITS = frozenset("0123456789ABCDEFabcdef")
_DISTINCT_ESCAPES = 16  # more than a client's encoded selector holds (url.QueryEscape)


def _unquote_latin1(text: str) -> str:
    """``urllib.parse.unquote(text, encoding="latin-1")``: each ``%`` and two hex digits is the
    character of that byte, any other ``%`` stays.

    urllib splits at every ``%`` and decodes each escape in Python (~0.4 µs each: ~10 ms for a
    200 KiB label selector, a ``%2C`` per value). A query holds few distinct escapes, so each
    is replaced everywhere at once (``str.replace``, in C). That is the same decoding when no
    escape stands for ``%`` or a hex digit (so no replacement makes or breaks another escape:
    an escape's second and third characters are hex digits, never ``%``); otherwise, or past
    ``_DISTINCT_ESCAPES`` of them, urllib decodes it.
    """
    pos = 0
    for _ in range(_DISTINCT_ESCAPES):
        found = _ESCAPE.search(text, pos)
        if found is None:
            return text
        char = chr(int(found[1], 16))
        if char == "%" or char in _HEX_DIGITS:
            break
        # Every escape before ``pos`` is replaced already: the next is the leftmost left.
        text, pos = text.replace(found[0], char), found.start()
    return unquote(text, encoding="latin-1")


def has_body(headers: Mapping[str, str]) -> bool:
    """Whether a request head announces a body (a positive Content-Length, or any
    Transfer-Encoding: llhttp has refused a head whose framing it could not read)."""
    length = headers.get("content-length", "")
    return "transfer-encoding" in headers or (length.isdigit() and int(length) > 0)


def expects_continue(expect: str) -> bool:
    """Go's ``expectsContinue``: ``100-continue`` as a case-insensitive token of Expect."""
    return "100-continue" in (token.strip().lower() for token in expect.split(","))


Wake = Callable[[], None]


class BodyBudget:
    """Bytes of request bodies the HTTP layer may hold at once, over all connections.

    A body reserves what its head announces (its Content-Length, or the most a body may be)
    before it is read, and its bytes stay counted until its request is handed to a handler.
    A reservation that does not fit waits, first come first served, and its ``wake`` is called
    once granted. Whole bodies, not bytes as they come: a budget taken piece by piece can be
    spent by many half-read bodies of which none may finish. A body larger than the whole
    budget is granted once nothing else is held. ``limit`` 0: no limit.
    """

    __slots__ = ("_waiters", "held", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._waiters: dict[Wake, int] = {}  # in arrival order: wake -> bytes it waits for

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def reserve(self, n: int, wake: Wake) -> bool:
        """Take ``n`` bytes now (True), or queue for them: ``wake()`` once they are taken."""
        if not self._waiters and self._fits(n):
            self.held += n
            return True
        self._waiters[wake] = n
        return False

    def take(self, n: int) -> None:
        """Count ``n`` bytes that were read without a reservation (at most one parse slice)."""
        self.held += n

    def release(self, n: int) -> None:
        self.held -= n
        while self._waiters:
            wake, need = next(iter(self._waiters.items()))
            if not self._fits(need):
                return
            del self._waiters[wake]
            self.held += need
            wake()

    def cancel(self, wake: Wake) -> None:
        """Withdraw a reservation that is still waiting."""
        self._waiters.pop(wake, None)

    def _fits(self, n: int) -> bool:
        return not self.limit or not self.held or self.held + n <= self.limit
