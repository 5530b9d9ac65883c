"""The string formats a custom resource's schema enforces (kube-openapi's ``strfmt.Default``).

``check(name, value)`` answers whether ``value`` is valid for a format name (normalized as
strfmt does: without ``-``, so ``date-time`` is ``datetime``). Sources:
``KO:pkg/validation/strfmt/default.go`` (the registry: hostname and UUID patterns, ``IsEmail``,
``isIPv4``, ``isCIDR``), ``date.go``, ``time.go`` (``IsDateTime``), ``duration.go``
(``ParseDuration``: Go's syntax, else the Scala-like ``<n> <unit>`` words), ``bson.go``; the
govalidator functions it registers (``IsRequestURI``, ``IsIPv6``, ``IsMAC``, ``IsISBN``,
``IsCreditCard``, ``IsSSN``, ``IsHexcolor``, ``IsRGBcolor``, ``IsBase64``) are re-written from
their definitions. ``email`` and ``uri`` approximate Go's ``net/mail.ParseAddress`` and
``net/url.ParseRequestURI`` (the common shapes, not every corner of those parsers).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from datetime import date

from kubewire.go_text import parse_go_duration
from kubewire.server.apiextensions.schemas.regexes import compile_pattern

_HOSTNAME = (r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}]"
             r"(([a-zA-Z0-9-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}])"
             r"{2,63})$")
_UUID = {
    "uuid": r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$",
    "uuid3": r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$",
    "uuid4": r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$",
    "uuid5": r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$",
}
_DATETIME = re.compile(r"([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))\Z")
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})\Z", re.ASCII)
_DURATION_WORDS = re.compile(r"(\d+)\s*([A-Za-zµ]+)", re.ASCII)
_TIME_UNITS = (("ns", "nano"), ("us", "µs", "micro"), ("ms", "milli"), ("s", "sec"),
               ("m", "min"), ("h", "hr", "hour"), ("d", "day"), ("w", "wk", "week"))
_IPV4_SLOPPY = re.compile(r"(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\Z", re.ASCII)
_MAC = re.compile(r"(?:[0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2}){5}|[0-9A-Fa-f]{2}(?:-[0-9A-Fa-f]{2}){5}"
                  r"|[0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2}){7}|[0-9A-Fa-f]{2}(?:-[0-9A-Fa-f]{2}){7}"
                  r"|[0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2}){19}|[0-9A-Fa-f]{2}(?:-[0-9A-Fa-f]{2}){19}"
                  r"|[0-9A-Fa-f]{4}(?:\.[0-9A-Fa-f]{4}){2}|[0-9A-Fa-f]{4}(?:\.[0-9A-Fa-f]{4}){3}"
                  r"|[0-9A-Fa-f]{4}(?:\.[0-9A-Fa-f]{4}){9})\Z")
_ISBN10 = re.compile(r"(?:[0-9]{9}X|[0-9]{10})\Z", re.ASCII)
_ISBN13 = re.compile(r"(?:[0-9]{13})\Z", re.ASCII)
_SPACE_MINUS = re.compile(r"[\s-]+", re.ASCII)
_NOT_DIGIT = re.compile(r"[^0-9]+")
_CREDIT_CARD = re.compile(r"(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])"
                          r"[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|"
                          r"(?:2131|1800|35\d{3})\d{11})\Z", re.ASCII)
_SSN = re.compile(r"\d{3}[- ]?\d{2}[- ]?\d{4}\Z", re.ASCII)
_HEXCOLOR = re.compile(r"#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})\Z")
_BYTE = r"(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])"
_RGBCOLOR = re.compile(rf"rgb\(\s*{_BYTE}\s*,\s*{_BYTE}\s*,\s*{_BYTE}\s*\)\Z", re.ASCII)
_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|"
                     r"[A-Za-z0-9+/]{4})\Z")
_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_LOCAL = rf'(?:{_ATOM}(?:\.{_ATOM})*|"(?:[^"\\\r\n]|\\.)*")'
_EMAIL_ADDR = rf"{_LOCAL}@(?:{_ATOM}(?:\.{_ATOM})*|\[[^\]\\]*\])"
_EMAIL = re.compile(rf"\s*(?:{_EMAIL_ADDR}|(?:[^<>]*)<{_EMAIL_ADDR}>)\s*\Z")
_URI_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def _rx(pattern: str) -> Callable[[str], bool]:
    """A matcher for ``pattern``, compiled at its first use: compiling the hostname and UUID
    patterns (RE2, Unicode classes) was most of this module's import, which every process
    running a server pays, though few schemas use these formats."""
    compiled: list[Callable[[str], object]] = []

    def matches(value: str) -> bool:
        if not compiled:
            search = compile_pattern(pattern)[0]
            assert search is not None
            compiled.append(search)  # two threads may both compile: either result serves
        return compiled[0](value) is not None

    return matches


_HOSTNAME_MATCHES = _rx(_HOSTNAME)


def _hostname(value: str) -> bool:
    return (_HOSTNAME_MATCHES(value) and len(value) <= 255
            and all(len(p) <= 63 for p in value.split(".")))


def _date(value: str) -> bool:
    found = _DATE.match(value)
    if found is None:
        return False
    try:
        date(*(int(g) for g in found.groups()))
    except ValueError:
        return False
    return True


def _datetime(value: str) -> bool:
    """``IsDateTime``: a date, ``t`` (any case), then ``hh:mm:ss[.frac](z|±hh:mm)``."""
    if len(value) < 4:
        return False
    parts = value.lower().split("t")
    if len(parts) < 2 or not _date(parts[0]):
        return False
    found = _DATETIME.match(parts[1])
    return found is not None and (found[1] <= "23" and found[2] <= "59" and found[3] <= "59")


def _duration(value: str) -> bool:
    try:
        parse_go_duration(value)
        return True
    except ValueError:
        pass
    for number, unit in _DURATION_WORDS.findall(value):
        if len(number) > 18:  # strconv.Atoi overflow fails the parse
            return False
        unit = unit.strip().lower()
        for variants in _TIME_UNITS:
            if unit.startswith(variants[-1]) or any(v.lower() == unit for v in variants):
                return True
    return False


def _sloppy_ipv4(value: str) -> bool:
    found = _IPV4_SLOPPY.match(value)
    return found is not None and all(int(g) <= 255 for g in found.groups())


def _parse_ip(value: str) -> bool:
    """``netutils.ParseIPSloppy`` (IPv4 parts may carry leading zeros)."""
    if _sloppy_ipv4(value):
        return True
    if "%" in value or ":" not in value:
        return False
    head, _, tail = value.rpartition(":")
    if "." in tail:
        if not _sloppy_ipv4(tail):
            return False
        value = head + ":" + ".".join(str(int(p)) for p in tail.split("."))
    try:
        ipaddress.IPv6Address(value)
    except ValueError:
        return False
    return True


def _cidr(value: str) -> bool:
    address, slash, prefix = value.partition("/")
    if not slash or not prefix.isdigit() or not prefix.isascii() or not _parse_ip(address):
        return False
    bits = 32 if _sloppy_ipv4(address) else 128
    return len(prefix) <= 3 and int(prefix) <= bits


def _isbn(value: str, version: int) -> bool:
    text = _SPACE_MINUS.sub("", value)
    if version == 10:
        if _ISBN10.match(text) is None:
            return False
        checksum = sum((i + 1) * int(text[i]) for i in range(9))
        checksum += 100 if text[9] == "X" else 10 * int(text[9])
        return checksum % 11 == 0
    if _ISBN13.match(text) is None:
        return False
    checksum = sum((1, 3)[i % 2] * int(text[i]) for i in range(12))
    return int(text[12]) - (10 - checksum % 10) % 10 == 0


def _credit_card(value: str) -> bool:
    digits = _NOT_DIGIT.sub("", value)
    if _CREDIT_CARD.match(digits) is None:
        return False
    total, double = 0, False
    for ch in reversed(digits):
        n = int(ch)
        if double:
            n *= 2
            n = n - 9 if n > 9 else n
        total += n
        double = not double
    return total % 10 == 0


def _uri(value: str) -> bool:
    """``url.ParseRequestURI``: an absolute URI or an absolute path, no control characters."""
    if not value or any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return False
    if value.startswith("/"):
        return True
    if _URI_SCHEME.match(value) is None:
        return False
    rest = value[value.index(":") + 1:]
    if rest.startswith("//"):
        host = rest[2:].split("/", 1)[0].split("?", 1)[0].split("#", 1)[0].rpartition("@")[2]
        return " " not in host
    return True


_CHECKS: dict[str, Callable[[str], bool]] = {
    "bsonobjectid": lambda v: len(v) == 24 and all(c in "0123456789abcdefABCDEF" for c in v),
    "uri": _uri,
    "email": lambda v: _EMAIL.match(v) is not None,
    "hostname": _hostname,
    "ipv4": lambda v: _parse_ip(v) and "." in v,
    "ipv6": lambda v: _parse_ip(v) and ":" in v,
    "cidr": _cidr,
    "mac": lambda v: _MAC.match(v) is not None,
    **{name: _rx(pattern) for name, pattern in _UUID.items()},
    "isbn": lambda v: _isbn(v, 10) or _isbn(v, 13),
    "isbn10": lambda v: _isbn(v, 10),
    "isbn13": lambda v: _isbn(v, 13),
    "creditcard": _credit_card,
    "ssn": lambda v: len(v) == 11 and _SSN.match(v) is not None,
    "hexcolor": lambda v: _HEXCOLOR.match(v) is not None,
    "rgbcolor": lambda v: _RGBCOLOR.match(v) is not None,
    "byte": lambda v: _BASE64.match(v) is not None,
    "password": lambda v: True,
    "date": _date,
    "duration": _duration,
    "datetime": _datetime,
}
KNOWN = frozenset(_CHECKS)


def known(name: str) -> bool:
    """``strfmt.Default.ContainsName``."""
    return name.replace("-", "") in _CHECKS


def check(name: str, value: str) -> bool:
    """``strfmt.Default.Validates(name, value)`` (False for an unknown name)."""
    fn = _CHECKS.get(name.replace("-", ""))
    return fn is not None and fn(value)


__all__ = ["KNOWN", "check", "known"]
