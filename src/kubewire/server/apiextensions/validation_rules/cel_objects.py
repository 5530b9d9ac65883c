"""kube's object-returning CEL libraries: ``url()``, ``ip()``, ``cidr()``, ``quantity()``.

After k8s.io/apiserver v0.32 ``pkg/cel/library`` (``urls.go``, ``ip.go``, ``cidr.go``,
``quantity.go``) and the types in ``pkg/cel`` (``url.go``, ``ip.go``, ``cidr.go``,
``quantity.go``).

kube's values are Go objects of CEL types ``kubernetes.URL``, ``net.IP``, ``net.CIDR`` and
``kubernetes.Quantity``. cel-expr-python cannot return an opaque Python value from a function
("Unimplemented type: 13"), and its abstract types check as ``dyn`` (``1.getHost()`` would
compile), so each type here is a protobuf message of the same full name, declared in a private
descriptor pool the environment is built with. The checker then knows four distinct types:
``url(s).getHost()`` checks, ``url(s) == 'a'`` and ``self.getHost()`` do not (as in kube),
``type(ip(s)) == net.IP`` holds, and a function's Python implementation receives and returns
message instances. Each message holds the value in a canonical form so that CEL's message
equality is kube's ``Equal``: an IP its canonical text (``netip.Addr ==``), a CIDR its
unmasked ``addr/bits`` (``netip.Prefix ==``), a quantity its exact value (``Cmp == 0``), a URL
the fields of Go's ``url.URL`` (``reflect.DeepEqual``). The difference left: the message fields
are visible to CEL (``url(s).host`` and ``net.IP{addr: '1.2.3.4'}`` compile here; kube's types
have no fields), which no rule written for kube uses; and ``string(cidr)`` does not compile
(cel-cpp's runtime registers overloads by argument kind, so ``string`` can take one message
type, and ``string(ip)`` has it).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from cel_expr_python import cel

from kubewire.go_text import go_quote
from kubewire.quantity import parse_quantity, quantity_error
from kubewire.server.apiextensions.validation_rules import go_url

if TYPE_CHECKING:
    from google.protobuf import descriptor_pool

URL_TYPE_NAME = "kubernetes.URL"
IP_TYPE_NAME = "net.IP"
CIDR_TYPE_NAME = "net.CIDR"
QUANTITY_TYPE_NAME = "kubernetes.Quantity"

_URL_FIELDS = ("scheme", "opaque", "user", "host", "path", "raw_path", "force_query",
               "raw_query", "fragment")


@dataclass(frozen=True)
class _Messages:
    """The descriptor pool and the four message classes made from it."""

    pool: descriptor_pool.DescriptorPool
    url: Any
    ip: Any
    cidr: Any
    quantity: Any


_BUILT: dict[None, _Messages] = {}  # the one built, under the key None


def _messages() -> _Messages:
    """Built at the first CEL environment or value that needs them, not at import: the protobuf
    runtime costs ~20 ms to import, and a server that never compiles a rule never needs it.
    One per process: servers in threads share it (an environment and the messages its functions
    return must come from one pool), so of two built at once the first stored is kept
    (``setdefault`` is atomic) and the other dropped."""
    found = _BUILT.get(None)
    return found if found is not None else _BUILT.setdefault(None, _build())


def _build() -> _Messages:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    string, boolean = (descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                       descriptor_pb2.FieldDescriptorProto.TYPE_BOOL)
    pool = descriptor_pool.DescriptorPool()
    files: dict[str, list[tuple[str, list[tuple[str, int]]]]] = {
        "kubernetes": [("URL", [(f, boolean if f == "force_query" else string)
                                for f in _URL_FIELDS]),
                       ("Quantity", [("value", string)])],
        "net": [("IP", [("addr", string)]), ("CIDR", [("prefix", string)])],
    }
    for package, messages in files.items():
        proto = descriptor_pb2.FileDescriptorProto(
            name=f"kubewire/cel/{package}.proto", package=package, syntax="proto3")
        for name, fields in messages:
            message = proto.message_type.add(name=name)
            for number, (field_name, field_type) in enumerate(fields, 1):
                message.field.add(name=field_name, number=number, type=field_type,
                                  label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
        pool.Add(proto)

    def made(name: str) -> Any:
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))

    return _Messages(pool, made(URL_TYPE_NAME), made(IP_TYPE_NAME), made(CIDR_TYPE_NAME),
                     made(QUANTITY_TYPE_NAME))


def pool() -> descriptor_pool.DescriptorPool:
    """The private descriptor pool declaring the four types (a CEL environment is built with
    it)."""
    return _messages().pool


# --- URL (urls.go) --------------------------------------------------------------------------

def _string_to_url(text: str) -> Any:
    try:
        go_url.parse_request_uri(text)
        parsed = go_url.parse(text)
    except go_url.URLError as err:
        raise ValueError(f"URL parse error during conversion from string: {err}") from None
    return _messages().url(**{name: getattr(parsed, name) for name in _URL_FIELDS})


def _go_url(message: Any) -> go_url.GoURL:
    return go_url.GoURL(**{name: getattr(message, name) for name in _URL_FIELDS})


def _get_query(message: Any) -> dict[str, list[str]]:
    return go_url.query(_go_url(message))


def is_url(text: str) -> bool:
    """``isURL``: Go's ``url.ParseRequestURI`` accepts ``text``."""
    try:
        go_url.parse_request_uri(text)
    except go_url.URLError:
        return False
    return True


# --- IP and CIDR (ip.go, cidr.go) -----------------------------------------------------------

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _parse_addr(text: str) -> Address:
    """``parseIPAddr``: ``netip.ParseAddr`` without zones or IPv4-mapped IPv6 addresses."""
    if "%" in text:
        try:
            ipaddress.ip_address(text)
        except ValueError:
            pass
        else:
            raise ValueError(f"IP address {_q(text)} with zone value is not allowed")
    try:
        addr = ipaddress.ip_address(text)
    except ValueError:
        raise ValueError(f"IP Address {_q(text)} parse error during conversion from string: "
                         f"ParseAddr({_q(text)}): unable to parse IP") from None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise ValueError(f"IPv4-mapped IPv6 address {_q(text)} is not allowed")
    return addr


def _q(text: str) -> str:
    return go_quote(text)


def _parse_prefix(text: str) -> tuple[Address, int]:
    """``parseCIDR``: ``netip.ParsePrefix`` (no zone, decimal bits without leading zeros)."""
    address, sep, bits_text = text.partition("/")
    reason = ""
    if not sep:
        reason = "no '/'"
    elif "%" in address:
        reason = "IPv6 zones cannot be present in a prefix"
    elif not bits_text.isascii() or not bits_text.isdigit() or (
            len(bits_text) > 1 and bits_text[0] == "0"):
        reason = "bad bits after slash: " + _q(bits_text)
    if not reason:
        try:
            addr = ipaddress.ip_address(address)
        except ValueError:
            reason = f"ParseAddr({_q(address)}): unable to parse IP"
        else:
            bits = int(bits_text)
            if bits > addr.max_prefixlen:
                reason = "prefix length out of range"
            elif isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
                raise ValueError("network address parse error during conversion from string: "
                                 f"IPv4-mapped IPv6 address {_q(text)} is not allowed")
            else:
                return addr, bits
    raise ValueError("network address parse error during conversion from string: network "
                     "address parse error during conversion from string: netip.ParsePrefix("
                     f"{_q(text)}): {reason}")


def _addr(message: Any) -> Address:
    return ipaddress.ip_address(message.addr)


def _prefix(message: Any) -> tuple[Address, int]:
    address, _, bits = message.prefix.partition("/")
    return ipaddress.ip_address(address), int(bits)


def _ip_message(addr: Address) -> Any:
    return _messages().ip(addr=str(addr))


def _cidr_message(addr: Address, bits: int) -> Any:
    return _messages().cidr(prefix=f"{addr}/{bits}")


def _masked(addr: Address, bits: int) -> Address:
    network = ipaddress.ip_network(f"{addr}/{bits}", strict=False)
    return network.network_address


def _contains(prefix: tuple[Address, int], addr: Address) -> bool:
    """``Prefix.Contains``: same family, and the first ``bits`` bits agree."""
    network, bits = prefix
    if network.version != addr.version:
        return False
    return _masked(network, bits) == _masked(addr, bits)


def _contains_cidr(prefix: tuple[Address, int], other: tuple[Address, int]) -> bool:
    """``cidrContainsCIDR``: ``p.Masked() == PrefixFrom(other.Addr(), p.Bits())`` and fewer bits.

    ``PrefixFrom`` does not mask, so (as in kube) the other prefix's address must itself be
    the network's address: ``cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16')`` is false.
    """
    network, bits = prefix
    other_addr, other_bits = other
    return (network.version == other_addr.version and _masked(network, bits) == other_addr
            and bits <= other_bits)


def _is_global_unicast(addr: Address) -> bool:
    """``netip.Addr.IsGlobalUnicast``: not unspecified, loopback, multicast, link-local or
    the IPv4 broadcast address (private addresses are global unicast to Go)."""
    if isinstance(addr, ipaddress.IPv4Address) and addr == ipaddress.IPv4Address(
            "255.255.255.255"):
        return False
    return not (addr.is_unspecified or addr.is_loopback or addr.is_multicast
                or addr.is_link_local)


def _is_link_local_multicast(addr: Address) -> bool:
    if isinstance(addr, ipaddress.IPv4Address):
        return addr in ipaddress.IPv4Network("224.0.0.0/24")
    return (int(addr) >> 112) & 0xFF0F == 0xFF02


def _is_link_local_unicast(addr: Address) -> bool:
    if isinstance(addr, ipaddress.IPv4Address):
        return addr in ipaddress.IPv4Network("169.254.0.0/16")
    return addr in ipaddress.IPv6Network("fe80::/10")


def _is_loopback(addr: Address) -> bool:
    if isinstance(addr, ipaddress.IPv4Address):
        return addr in ipaddress.IPv4Network("127.0.0.0/8")
    return addr == ipaddress.IPv6Address("::1")


def is_ip(text: str) -> bool:
    """``isIP``."""
    try:
        _parse_addr(text)
    except ValueError:
        return False
    return True


def is_cidr(text: str) -> bool:
    """``isCIDR``."""
    try:
        _parse_prefix(text)
    except ValueError:
        return False
    return True


def _string_to_cidr(text: str) -> Any:
    return _cidr_message(*_parse_prefix(text))


# --- Quantity (quantity.go) -----------------------------------------------------------------

_NANO = 10**9
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _round_nano(value: Fraction) -> Fraction:
    """``ParseQuantity`` keeps nano precision, rounding what is finer away from zero."""
    scaled = value * _NANO
    if scaled.denominator == 1:
        return value
    whole = -((-abs(scaled.numerator)) // scaled.denominator)  # ceil of |scaled|
    return Fraction(whole if value > 0 else -whole, _NANO)


def _quantity_message(value: Fraction) -> Any:
    return _messages().quantity(value=f"{value.numerator}/{value.denominator}")


def _quantity_value(message: Any) -> Fraction:
    return Fraction(message.value)


def _string_to_quantity(text: str) -> Any:
    error = quantity_error(text)
    value = parse_quantity(text) if error is None and text == text.strip() else None
    if value is None:
        raise ValueError(error or "quantities must match the regular expression "
                                  "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
    return _quantity_message(_round_nano(value))


def _as_integer(message: Any) -> int:
    value = _quantity_value(message)
    if value.denominator != 1 or not _INT64_MIN <= value.numerator <= _INT64_MAX:
        raise ValueError("cannot convert value to integer")
    return value.numerator


def _is_integer(message: Any) -> bool:
    value = _quantity_value(message)
    return value.denominator == 1 and _INT64_MIN <= value.numerator <= _INT64_MAX


def _approximate_float(message: Any) -> float:
    value = _quantity_value(message)
    try:
        return float(value)
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")


def _compare(left: Any, right: Any) -> int:
    a, b = _quantity_value(left), _quantity_value(right)
    return (a > b) - (a < b)


def _sign(message: Any) -> int:
    value = _quantity_value(message)
    return (value > 0) - (value < 0)


def _plus(left: Any, right: Any, sign: int) -> Any:
    other = Fraction(right) if isinstance(right, int) else _quantity_value(right)
    return _quantity_message(_quantity_value(left) + sign * other)


# --- declarations ---------------------------------------------------------------------------

URL = cel.Type(URL_TYPE_NAME)
IP = cel.Type(IP_TYPE_NAME)
CIDR = cel.Type(CIDR_TYPE_NAME)
QUANTITY = cel.Type(QUANTITY_TYPE_NAME)


def library() -> cel.CelExtension:
    """The declarations and implementations, with kube's overload ids."""
    t = cel.Type

    def fn(name: str, *overloads: tuple[str, cel.Type, Sequence[cel.Type], Callable[..., Any],
                                        bool]) -> cel.FunctionDecl:
        return cel.FunctionDecl(name, [cel.Overload(oid, ret, list(params), is_member=member,
                                                    impl=impl)
                                       for oid, ret, params, impl, member in overloads])

    def url_getter(name: str, oid: str, impl: Callable[[go_url.GoURL], str]) -> cel.FunctionDecl:
        return fn(name, (oid, t.STRING, [URL], lambda m: impl(_go_url(m)), True))

    def ip_test(name: str, oid: str, test: Callable[[Address], bool]) -> cel.FunctionDecl:
        return fn(name, (oid, t.BOOL, [IP], lambda m: test(_addr(m)), True))

    def quantity_op(name: str, oid: str, ret: cel.Type, impl: Callable[..., Any],
                    extra: Sequence[cel.Type] = ()) -> tuple[str, cel.Type, Sequence[cel.Type],
                                                             Callable[..., Any], bool]:
        return (oid, ret, [QUANTITY, *extra], impl, True)

    decls = [
        fn("url", ("string_to_url", URL, [t.STRING], _string_to_url, False)),
        url_getter("getScheme", "url_get_scheme", lambda u: u.scheme),
        url_getter("getHost", "url_get_host", lambda u: u.host),
        url_getter("getHostname", "url_get_hostname", go_url.hostname),
        url_getter("getPort", "url_get_port", go_url.port),
        url_getter("getEscapedPath", "url_get_escaped_path", go_url.escaped_path),
        fn("getQuery", ("url_get_query", t.Map(t.STRING, t.List(t.STRING)), [URL], _get_query,
                        True)),
        fn("ip", ("string_to_ip", IP, [t.STRING], lambda s: _ip_message(_parse_addr(s)), False),
           ("cidr_ip", IP, [CIDR], lambda m: _ip_message(_prefix(m)[0]), True)),
        fn("family", ("ip_family", t.INT, [IP], lambda m: _addr(m).version, True)),
        fn("ip.isCanonical", ("ip_is_canonical", t.BOOL, [t.STRING],
                              lambda s: str(_parse_addr(s)) == s, False)),
        ip_test("isUnspecified", "ip_is_unspecified", lambda a: a.is_unspecified),
        ip_test("isLoopback", "ip_is_loopback", _is_loopback),
        ip_test("isLinkLocalMulticast", "ip_is_link_local_multicast", _is_link_local_multicast),
        ip_test("isLinkLocalUnicast", "ip_is_link_local_unicast", _is_link_local_unicast),
        ip_test("isGlobalUnicast", "ip_is_global_unicast", _is_global_unicast),
        # cel-cpp's runtime tells overloads apart by argument kind, and IP and CIDR are both
        # messages: ``string`` can have one of kube's two overloads (see the module docstring)
        fn("string", ("ip_to_string", t.STRING, [IP], lambda m: m.addr, False)),
        fn("cidr", ("string_to_cidr", CIDR, [t.STRING], _string_to_cidr, False)),
        fn("containsIP",
           ("cidr_contains_ip_string", t.BOOL, [CIDR, t.STRING],
            lambda m, s: _contains(_prefix(m), _parse_addr(s)), True),
           ("cidr_contains_ip_ip", t.BOOL, [CIDR, IP],
            lambda m, ip: _contains(_prefix(m), _addr(ip)), True)),
        fn("containsCIDR",
           ("cidr_contains_cidr_string", t.BOOL, [CIDR, t.STRING],
            lambda m, s: _contains_cidr(_prefix(m), _parse_prefix(s)), True),
           ("cidr_contains_cidr", t.BOOL, [CIDR, CIDR],
            lambda m, o: _contains_cidr(_prefix(m), _prefix(o)), True)),
        fn("prefixLength", ("cidr_prefix_length", t.INT, [CIDR], lambda m: _prefix(m)[1], True)),
        fn("masked", ("cidr_masked", CIDR, [CIDR],
                      lambda m: _cidr_message(_masked(*_prefix(m)), _prefix(m)[1]), True)),
        fn("quantity", ("string_to_quantity", QUANTITY, [t.STRING], _string_to_quantity,
                        False)),
        # kube declares sign with cel.Overload (not MemberOverload): ``sign(q)``, not ``q.sign()``
        fn("sign", ("quantity_sign", t.INT, [QUANTITY], _sign, False)),
        fn("isGreaterThan", quantity_op("isGreaterThan", "quantity_is_greater_than", t.BOOL,
                                        lambda a, b: _compare(a, b) == 1, [QUANTITY])),
        fn("isLessThan", quantity_op("isLessThan", "quantity_is_less_than", t.BOOL,
                                     lambda a, b: _compare(a, b) == -1, [QUANTITY])),
        fn("compareTo", quantity_op("compareTo", "quantity_compare_to", t.INT, _compare,
                                    [QUANTITY])),
        fn("asApproximateFloat", quantity_op("asApproximateFloat", "quantity_get_float",
                                             t.DOUBLE, _approximate_float)),
        fn("asInteger", quantity_op("asInteger", "quantity_get_int", t.INT, _as_integer)),
        fn("isInteger", quantity_op("isInteger", "quantity_is_integer", t.BOOL, _is_integer)),
        fn("add", quantity_op("add", "quantity_add", QUANTITY, lambda a, b: _plus(a, b, 1),
                              [QUANTITY]),
           quantity_op("add", "quantity_add_int", QUANTITY, lambda a, b: _plus(a, b, 1),
                       [t.INT])),
        fn("sub", quantity_op("sub", "quantity_sub", QUANTITY, lambda a, b: _plus(a, b, -1),
                              [QUANTITY]),
           quantity_op("sub", "quantity_sub_int", QUANTITY, lambda a, b: _plus(a, b, -1),
                       [t.INT])),
    ]
    return cel.CelExtension("kubewire.k8s.objects", decls)


# Calls that return one of these types (the cost estimate sizes and compares them as kube does).
OBJECT_RESULTS = {"url": URL_TYPE_NAME, "cidr": CIDR_TYPE_NAME, "masked": CIDR_TYPE_NAME,
                  "quantity": QUANTITY_TYPE_NAME, "add": QUANTITY_TYPE_NAME,
                  "sub": QUANTITY_TYPE_NAME, "ip": IP_TYPE_NAME}

__all__ = ["CIDR_TYPE_NAME", "IP_TYPE_NAME", "OBJECT_RESULTS", "QUANTITY_TYPE_NAME",
           "URL_TYPE_NAME", "is_cidr", "is_ip", "is_url", "library", "pool"]
