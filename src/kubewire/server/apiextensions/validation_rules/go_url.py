"""Go's ``net/url`` parsing, as kube's CEL URL library (``url()``, ``isURL``) sees a URL.

Written by hand after Go's ``net/url/url.go`` (``parse``, ``getScheme``, ``parseAuthority``,
``parseHost``, ``setPath``, ``EscapedPath``, ``Hostname``, ``Port``, ``ParseQuery``) because
Python's ``urllib.parse`` splits differently and never fails: kube's ``url('x')`` fails with Go's
error (``invalid URI for request``), ``getEscapedPath`` keeps the path as the client escaped it
when Go would, and ``getQuery`` drops the pairs Go drops (bad escapes, ``;``).
"""

from __future__ import annotations

from dataclasses import dataclass

from kubewire.go_text import go_quote

_PATH, _HOST, _QUERY_COMPONENT, _FRAGMENT, _USER = "path", "host", "query", "fragment", "user"
_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_HEX = frozenset("0123456789abcdefABCDEF")


class URLError(ValueError):
    """Go's ``*url.Error``: ``parse "<url>": <reason>``."""


@dataclass(frozen=True)
class GoURL:
    """The fields of Go's ``url.URL`` that the CEL library reads (and compares)."""

    scheme: str = ""
    opaque: str = ""
    user: str = ""
    host: str = ""
    path: str = ""
    raw_path: str = ""
    force_query: bool = False
    raw_query: str = ""
    fragment: str = ""


def _should_escape(c: str, mode: str) -> bool:
    """``shouldEscape`` for one byte (as a character below 0x80, or any other)."""
    if c in _ALNUM:
        return False
    if mode == _HOST and c in "!$&'()*+,;=:[]<>\"":
        return False
    if c in "-_.~":
        return False
    if c in "$&+,/:;=?@":
        if mode == _PATH:
            return c == "?"
        if mode == _USER:
            return c in "@/?:"
        if mode == _QUERY_COMPONENT:
            return True
        if mode == _FRAGMENT:
            return False
    return not (mode == _FRAGMENT and c in "!()*")


def _unescape(text: str, mode: str) -> str:
    """``unescape``: %XX decoded (``+`` as a space in a query component); Go's errors."""
    raw = text.encode("utf-8", "surrogateescape")
    i = 0
    while i < len(text):
        c = text[i]
        if c == "%":
            piece = text[i:i + 3]
            if len(piece) < 3 or piece[1] not in _HEX or piece[2] not in _HEX:
                raise ValueError(f"invalid URL escape {go_quote(piece)}")
            if mode == _HOST and int(piece[1], 16) < 8 and piece != "%25":
                raise ValueError(f"invalid character {go_quote(piece)} in host name")
            i += 3
            continue
        if mode == _HOST and ord(c) < 0x80 and _should_escape(c, mode):
            raise ValueError(f"invalid character {go_quote(c)} in host name")
        i += 1
    out = bytearray()
    i = 0
    while i < len(raw):
        b = raw[i]
        if b == 0x25:  # %
            out.append(int(raw[i + 1:i + 3], 16))
            i += 3
            continue
        out.append(0x20 if b == 0x2B and mode == _QUERY_COMPONENT else b)
        i += 1
    return out.decode("utf-8", "replace")


def _escape(text: str, mode: str) -> str:
    """``escape``: every byte ``shouldEscape`` names as %XX (upper-case hex)."""
    out: list[str] = []
    for b in text.encode("utf-8", "surrogateescape"):
        c = chr(b)
        if b < 0x80 and not _should_escape(c, mode):
            out.append(c)
        elif c == " " and mode == _QUERY_COMPONENT:
            out.append("+")
        else:
            out.append(f"%{b:02X}")
    return "".join(out)


def _valid_encoded(text: str) -> bool:
    """``validEncoded`` in path mode."""
    return all(c in "!$&'()*+,;=:@[]%" or (ord(c) < 0x80 and not _should_escape(c, _PATH))
               for c in text)


def _valid_optional_port(port: str) -> bool:
    if not port:
        return True
    return port[0] == ":" and all(c in "0123456789" for c in port[1:])


def _scheme(raw: str) -> tuple[str, str]:
    for i, c in enumerate(raw):
        if c.isascii() and c.isalpha():
            continue
        if c.isascii() and (c.isdigit() or c in "+-."):
            if i == 0:
                return "", raw
            continue
        if c == ":":
            if i == 0:
                raise ValueError("missing protocol scheme")
            return raw[:i], raw[i + 1:]
        return "", raw
    return "", raw


def _host(host: str) -> str:
    if host.startswith("["):
        end = host.rfind("]")
        if end < 0:
            raise ValueError("missing ']' in host")
        port = host[end + 1:]
        if not _valid_optional_port(port):
            raise ValueError(f"invalid port {go_quote(port)} after host")
        zone = host.find("%25", 0, end)
        if zone >= 0:  # the zone may hold any escaped character
            return (_unescape(host[:zone], _HOST) + _unescape(host[zone:end], _FRAGMENT)
                    + _unescape(host[end:], _HOST))
    else:
        colon = host.rfind(":")
        if colon >= 0 and not _valid_optional_port(host[colon:]):
            raise ValueError(f"invalid port {go_quote(host[colon:])} after host")
    return _unescape(host, _HOST)


def _authority(authority: str) -> tuple[str, str]:
    at = authority.rfind("@")
    host = _host(authority[at + 1:] if at >= 0 else authority)
    if at < 0:
        return "", host
    userinfo = authority[:at]
    if not all(c in "-._:~!$&'()*+,;=%@" or c in _ALNUM for c in userinfo):
        raise ValueError("net/url: invalid userinfo")
    name, _, password = userinfo.partition(":")
    _unescape(name, _USER)
    _unescape(password, _USER)
    return userinfo, host


def _parse(raw: str, via_request: bool) -> GoURL:
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in raw):
        raise ValueError("net/url: invalid control character in URL")
    if raw == "" and via_request:
        raise ValueError("empty url")
    if raw == "*":
        return GoURL(path="*")
    scheme, rest = _scheme(raw)
    scheme = scheme.lower()
    force_query, raw_query = False, ""
    if rest.endswith("?") and rest.count("?") == 1:
        force_query, rest = True, rest[:-1]
    else:
        rest, _, raw_query = rest.partition("?")
    if not rest.startswith("/"):
        if scheme:
            return GoURL(scheme=scheme, opaque=rest, force_query=force_query,
                         raw_query=raw_query)
        if via_request:
            raise ValueError("invalid URI for request")
        if ":" in rest.partition("/")[0]:
            raise ValueError("first path segment in URL cannot contain colon")
    user = host = ""
    if (scheme or (not via_request and not rest.startswith("///"))) and rest.startswith("//"):
        authority, slash, tail = rest[2:].partition("/")
        rest = slash + tail
        user, host = _authority(authority)
    path = _unescape(rest, _PATH)
    raw_path = "" if _escape(path, _PATH) == rest else rest
    return GoURL(scheme=scheme, user=user, host=host, path=path, raw_path=raw_path,
                 force_query=force_query, raw_query=raw_query)


def parse_request_uri(raw: str) -> GoURL:
    """``url.ParseRequestURI``: an absolute URI or an absolute path (no fragment split)."""
    try:
        return _parse(raw, True)
    except ValueError as err:
        raise URLError(f"parse {go_quote(raw)}: {err}") from None


def parse(raw: str) -> GoURL:
    """``url.Parse``: any URL reference; the fragment is split off first."""
    head, sep, fragment = raw.partition("#")
    try:
        url = _parse(head, False)
    except ValueError as err:
        raise URLError(f"parse {go_quote(head)}: {err}") from None
    if not sep:
        return url
    try:
        decoded = _unescape(fragment, _FRAGMENT)
    except ValueError as err:
        raise URLError(f"parse {go_quote(raw)}: {err}") from None
    return GoURL(url.scheme, url.opaque, url.user, url.host, url.path, url.raw_path,
                 url.force_query, url.raw_query, decoded)


def _split_host_port(host_port: str) -> tuple[str, str]:
    host, port = host_port, ""
    colon = host.rfind(":")
    if colon >= 0 and _valid_optional_port(host[colon:]):
        host, port = host[:colon], host[colon + 1:]
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, port


def hostname(url: GoURL) -> str:
    """``URL.Hostname``: the host without port or IPv6 brackets."""
    return _split_host_port(url.host)[0]


def port(url: GoURL) -> str:
    """``URL.Port``: the port digits, or empty."""
    return _split_host_port(url.host)[1]


def escaped_path(url: GoURL) -> str:
    """``URL.EscapedPath``: the path as the client escaped it when that is a valid escaping."""
    if url.raw_path and _valid_encoded(url.raw_path):
        try:
            if _unescape(url.raw_path, _PATH) == url.path:
                return url.raw_path
        except ValueError:
            pass
    if url.path == "*":
        return "*"
    return _escape(url.path, _PATH)


def query(url: GoURL) -> dict[str, list[str]]:
    """``URL.Query`` (``ParseQuery`` with its errors dropped, as Go's ``Query`` drops them)."""
    values: dict[str, list[str]] = {}
    for pair in url.raw_query.split("&"):
        if not pair or ";" in pair:
            continue
        key, _, value = pair.partition("=")
        try:
            key, value = _unescape(key, _QUERY_COMPONENT), _unescape(value, _QUERY_COMPONENT)
        except ValueError:
            continue
        values.setdefault(key, []).append(value)
    return values


__all__ = ["GoURL", "URLError", "escaped_path", "hostname", "parse", "parse_request_uri", "port",
           "query"]
