"""kube's object-returning CEL libraries (``url``, ``ip``, ``cidr``, ``quantity``): the cases of
k8s.io/apiserver v0.32 ``pkg/cel/library/{ip,cidr,quantity}_test.go`` and Go's ``net/url``
behaviour, type checking as cel-go checks them, and the static cost of ``library/cost.go``."""

from __future__ import annotations

from typing import Any

import pytest

from kubewire.server.apiextensions.validation_rules import cel_env, cel_rules

SELF = cel_env.schema_decl_type({"type": "object", "properties": {
    "s": {"type": "string", "maxLength": 64}}}, False)
assert SELF is not None


def run(expression: str, s: str = "") -> Any:
    program = cel_env.rule_env(SELF).compile(expression)
    return program.eval(data={"self": {"s": s}, "oldSelf": {"s": s}}).value()


def eval_error(expression: str, s: str = "") -> str:
    program = cel_env.rule_env(SELF).compile(expression)
    result = program.eval(data={"self": {"s": s}, "oldSelf": {"s": s}}).value()
    assert "OUT_OF_RANGE" in str(result), result
    return str(result)


def compile_error(expression: str) -> str:
    with pytest.raises(RuntimeError) as caught:
        cel_env.rule_env(SELF).compile(expression)
    return str(caught.value)


@pytest.mark.parametrize(("expression", "value"), [
    ("url(self.s).getScheme()", "https"),
    ("url(self.s).getHost()", "[::1]:80"),
    ("url(self.s).getHostname()", "::1"),
    ("url(self.s).getPort()", "80"),
    # the client's escaping is kept only when valid (here a space makes it invalid: Go escapes
    # the decoded path again)
    ("url(self.s).getEscapedPath()", "/a/b/c%20d"),
    ("url('https://h/a%2Fb').getEscapedPath()", "/a%2Fb"),
    ("url(self.s).getQuery() == {'x': ['1', '2'], 'y': ['a b']}", True),
    ("url('/path?q=1').getHost()", ""),
    ("url('/a b').getEscapedPath()", "/a%20b"),
    ("url('HTTPS://Example.com').getScheme()", "https"),
    ("url('https://example.com/x') == url('https://example.com/x')", True),
    ("isURL('https://example.com')", True),
    ("isURL('example.com')", False),
    ("isURL('http://a b')", False),
    ("isURL('http://a:port')", False),
])
def test_url_library(expression: str, value: Any) -> None:
    assert run(expression, "https://user@[::1]:80/a%2Fb/c d?x=1&y=a+b&x=2&bad=%zz#frag") == value


def test_url_of_what_go_cannot_parse_is_an_evaluation_error() -> None:
    assert ('URL parse error during conversion from string: parse "example.com": invalid URI '
            "for request") in eval_error("url(self.s).getScheme() == 'http'", "example.com")


@pytest.mark.parametrize(("expression", "value"), [
    ("ip('192.168.0.1').family()", 4),
    ("ip('2001:db8::68').family()", 6),
    ("string(ip('2001:db8:0:0:0:0:0:68'))", "2001:db8::68"),
    ("type(ip('192.168.0.1')) == net.IP", True),
    ("ip('192.168.0.1') == ip('192.168.0.1')", True),
    ("ip('2001:db8::68') == ip('2001:DB8::68')", True),
    ("ip('192.168.0.1') == ip('192.168.0.2')", False),
    ("ip.isCanonical('2001:db8::68')", True),
    ("ip.isCanonical('2001:DB8::68')", False),
    ("ip.isCanonical('2001:db8:0:0:0:0:0:68')", False),
    ("ip('0.0.0.0').isUnspecified()", True),
    ("ip('::').isUnspecified()", True),
    ("ip('127.0.0.2').isLoopback()", True),
    ("ip('::1').isLoopback()", True),
    ("ip('224.0.0.1').isLinkLocalMulticast()", True),
    ("ip('224.0.1.1').isLinkLocalMulticast()", False),
    ("ip('ff02::1').isLinkLocalMulticast()", True),
    ("ip('ff05::1').isLinkLocalMulticast()", False),
    ("ip('169.254.169.254').isLinkLocalUnicast()", True),
    ("ip('fe80::1').isLinkLocalUnicast()", True),
    ("ip('192.168.0.1').isGlobalUnicast()", True),  # private is global unicast to Go
    ("ip('255.255.255.255').isGlobalUnicast()", False),
    ("ip('2001:db8::68').isGlobalUnicast()", True),
    ("ip('ff00::1').isGlobalUnicast()", False),
    ("isIP('1.2.3.4')", True),
    ("isIP('::ffff:1.2.3.4')", False),
    ("isIP('fe80::1%eth0')", False),
    ("isIP('010.0.0.1')", False),
])
def test_ip_library(expression: str, value: Any) -> None:
    assert run(expression) == value


@pytest.mark.parametrize(("text", "detail"), [
    ("::ffff:1.2.3.4", 'IPv4-mapped IPv6 address "::ffff:1.2.3.4" is not allowed'),
    ("fe80::1%eth0", 'IP address "fe80::1%eth0" with zone value is not allowed'),
    ("1.2.3", 'IP Address "1.2.3" parse error during conversion from string'),
])
def test_ip_of_a_bad_address_is_an_evaluation_error(text: str, detail: str) -> None:
    assert detail in eval_error("ip(self.s).family() == 4", text)


@pytest.mark.parametrize(("expression", "value"), [
    ("cidr('192.168.0.0/24').containsIP(ip('192.168.0.1'))", True),
    ("cidr('192.168.0.0/24').containsIP('192.168.1.1')", False),
    ("cidr('192.168.0.0/24').containsIP('::1')", False),
    ("cidr('192.168.0.0/24').containsCIDR(cidr('192.168.0.0/25'))", True),
    ("cidr('192.168.0.0/24').containsCIDR(cidr('192.168.0.0/23'))", False),
    ("cidr('192.168.0.0/24').containsCIDR('192.168.0.0/25')", True),
    ("cidr('2001:db8::/32').containsCIDR(cidr('2001:db8::/33'))", True),
    ("cidr('2001:db8::/32').containsCIDR(cidr('2001:db8::/31'))", False),
    # kube compares the other prefix's unmasked address with the network (PrefixFrom)
    ("cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16')", False),
    ("cidr('192.168.0.1/24').prefixLength()", 24),
    ("cidr('192.168.0.1/24').masked() == cidr('192.168.0.0/24')", True),
    ("cidr('192.168.0.1/24') == cidr('192.168.0.0/24')", False),
    ("cidr('192.168.0.1/24').ip() == ip('192.168.0.1')", True),
    ("string(cidr('2001:db8::1/64').ip())", "2001:db8::1"),
    ("type(cidr('192.168.0.0/24')) == net.CIDR", True),
    ("isCIDR('192.168.0.0/24')", True),
    ("isCIDR('192.168.0.0/33')", False),
    ("isCIDR('192.168.0.0/024')", False),
    ("isCIDR('192.168.0.0')", False),
])
def test_cidr_library(expression: str, value: Any) -> None:
    assert run(expression) == value


@pytest.mark.parametrize(("expression", "value"), [
    ("quantity('200M') == quantity('200M')", True),
    ("quantity('200M') == quantity('0.2G') && quantity('0.2G') == quantity('200M')", True),
    ("quantity('2M') == quantity('0.002G') && quantity('2000k') == quantity('2M')", True),
    ("quantity('200M') == quantity('0.3G')", False),
    ("quantity('50M').isLessThan(quantity('50Mi'))", True),
    ("quantity('100M').isLessThan(quantity('50M'))", False),
    ("quantity('50Mi').isGreaterThan(quantity('50M'))", True),
    ("quantity('200M').compareTo(quantity('0.2G'))", 0),
    ("quantity('50M').compareTo(quantity('50Mi'))", -1),
    ("quantity('50Mi').compareTo(quantity('50M'))", 1),
    ("quantity('50k').add(quantity('20')) == quantity('50.02k')", True),
    ("quantity('50k').add(20).isLessThan(quantity('50020'))", False),
    ("quantity('50k').sub(quantity('20')) == quantity('49.98k')", True),
    ("quantity('50k').sub(20) == quantity('49980')", True),
    ("quantity('50k').add(20).sub(quantity('100k')).asInteger()", -49980),
    ("quantity('50k').add(20).sub(quantity('100k')).sub(-50000).asInteger()", 20),
    ("quantity('50k').asInteger()", 50000),
    ("quantity('9999999999999999999999999999999999999G').isInteger()", False),
    ("quantity('50').isInteger()", True),
    ("quantity('1.5').isInteger()", False),
    ("quantity('50.703k').asApproximateFloat()", 50703.0),
    ("sign(quantity('-1m'))", -1),
    ("sign(quantity('0'))", 0),
    ("quantity('0.0000000001') == quantity('1n')", True),  # finer than nano rounds up
    ("isQuantity('20Mi')", True),
    ("isQuantity('20Mo')", False),
])
def test_quantity_library(expression: str, value: Any) -> None:
    assert run(expression) == value


def test_quantity_errors() -> None:
    assert "cannot convert value to integer" in eval_error(
        "quantity('9999999999999999999999999999999999999G').asInteger() == 1")
    assert "quantities must match the regular expression" in eval_error(
        "quantity(self.s).isInteger()", "10Mo")


@pytest.mark.parametrize(("expression", "detail"), [
    ("url(self.s) == 'a'", "found no matching overload for '_==_' applied to "
                           "'(kubernetes.URL, string)'"),
    ("self.getHost() == ''", "found no matching overload for 'getHost'"),
    ("ip('1.2.3.4') == cidr('1.2.3.4/32')", "'(net.IP, net.CIDR)'"),
    ("quantity('1').sign() == 1", "undeclared reference to 'sign'"),  # kube: a global overload
    ("ip('1.2.3.4').getHost() == ''", "found no matching overload for 'getHost'"),
    ("cidr('1.2.3.4/8').containsIP(1)", "found no matching overload for 'containsIP'"),
    ("quantity('1').add('1') == quantity('2')", "found no matching overload for 'add'"),
])
def test_object_types_are_checked_as_kube_checks_them(expression: str, detail: str) -> None:
    assert detail in compile_error(expression)


ROOT = "spec.versions[0].schema.openAPIV3Schema"


def crd_errors(rule: str, max_length: int | None = None) -> list[str]:
    field: dict[str, Any] = {"type": "string"}
    if max_length is not None:
        field["maxLength"] = max_length
    spec = {"type": "object", "properties": {"s": field},
            "x-kubernetes-validations": [{"rule": rule}]}
    _, errs = cel_rules.compile_rules({"type": "object", "properties": {"spec": spec}}, ROOT)
    return [str(e) for e in errs]


@pytest.mark.parametrize("rule", [
    # Istio's WasmPlugin/TrafficExtension rule over an unbounded string, verbatim
    'isURL(self.s) ? (url(self.s).getScheme() in ["", "http", "https", "file", "oci"]) : '
    '(isURL("http://" + self.s) && url("http://" + self.s).getScheme() in '
    '["", "http", "https", "file", "oci"])',
    "ip(self.s) == ip('1.2.3.4') && cidr(self.s) == cidr('1.2.3.4/32')",
    "cidr('10.0.0.0/8').containsIP(self.s) && cidr('10.0.0.0/8').containsCIDR(self.s)",
    "quantity(self.s) == quantity('1') && quantity(self.s).add(1).isLessThan(quantity('2'))",
])
def test_library_calls_are_costed_as_kube_costs_them(rule: str) -> None:
    assert crd_errors(rule) == []


def test_url_of_an_unbounded_string_in_a_list_exceeds_the_budget() -> None:
    """url() costs a tenth of its argument's size: 3 MiB strings in a large list add up."""
    spec = {"type": "object", "properties": {"urls": {
        "type": "array", "items": {"type": "string"}}},
        "x-kubernetes-validations": [
            {"rule": "self.urls.all(u, url(u).getScheme() == 'https')"}]}
    _, errs = cel_rules.compile_rules({"type": "object", "properties": {"spec": spec}}, ROOT)
    assert errs and "estimated rule cost exceeds budget" in str(errs[0])
