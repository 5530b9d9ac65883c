"""kubewire.selectors: kube-exact parsing, matching and selectable fields (watch-protocol.md §9)."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubewire.resources import REGISTRY, Resource
from kubewire.selectors import (
    FieldSelector,
    LabelSelector,
    Operator,
    SelectorError,
    convert_field_selector,
    field_set,
    format_label_selector,
    go_quote,
    label_selector_from_match,
    parse_field_selector,
    parse_label_selector,
)

QNAME_REGEX = ("(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
               "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
VALUE_REGEX = ("(e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
               "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
NAME_PART = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
             "and end with an alphanumeric character " + QNAME_REGEX)
VALUE_PART = ("a valid label must be an empty string or consist of alphanumeric characters, '-', "
              "'_' or '.', and must start and end with an alphanumeric character " + VALUE_REGEX)


def resource(plural: str) -> Resource:
    found = next((r for r in REGISTRY if r.plural == plural), None)
    assert found is not None
    return found


def label_error(text: str) -> str:
    with pytest.raises(SelectorError) as info:
        parse_label_selector(text)
    return info.value.message


def field_error(text: str) -> str:
    with pytest.raises(SelectorError) as info:
        parse_field_selector(text)
    return info.value.message


# --- label selector messages (§9.1 table, plus the rest of labels.Parser) ---------------------

@pytest.mark.parametrize(("text", "message"), [
    ("env in prod", "unable to parse requirement: found 'prod' expected: '('"),
    ("a=b c=d", "found 'c', expected: ',' or 'end of string'"),
    ("a=b,", "found '', expected: identifier after ','"),
    (",a", "found ',', expected: !, identifier, or 'end of string'"),
    ("a in (b c)", "unable to parse requirement: found 'c', expected: ',' or ')'"),
    ("-a=b", 'unable to parse requirement: <nil>: Invalid value: "-a": ' + NAME_PART),
    ("app=-x", 'unable to parse requirement: values[0][app]: Invalid value: "-x": ' + VALUE_PART),
    ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
    ("!a=b", "found '=', expected: ',' or 'end of string'"),
    ("a in (", "unable to parse requirement: found '', expected: ',', ')' or identifier"),
    ("a in (a,", "unable to parse requirement: found '', expected: ',', or identifier"),
    ("a in (,,)", "unable to parse requirement: found ')', expected: ',', or identifier"),
    ("a=(", "unable to parse requirement: found '(', expected: identifier"),
    ("!", "unable to parse requirement: found '', expected: identifier"),
    ("a>abc", "unable to parse requirement: values[0]: Invalid value: \"abc\": for 'Gt', 'Lt' "
              "operators, the value must be an integer"),
    ("a>-x", "unable to parse requirement: [values[0]: Invalid value: \"-x\": for 'Gt', 'Lt' "
             'operators, the value must be an integer, values[0][a]: Invalid value: "-x": '
             + VALUE_PART + "]"),
    ("a/b/c", 'unable to parse requirement: <nil>: Invalid value: "a/b/c": a qualified name '
              "must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
              "with an alphanumeric character " + QNAME_REGEX
              + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"),
    ("/a", 'unable to parse requirement: <nil>: Invalid value: "/a": prefix part must be '
           "non-empty"),
    ("Ex.com/a", 'unable to parse requirement: <nil>: Invalid value: "Ex.com/a": prefix part a '
                 "lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                 "characters, '-' or '.', and must start and end with an alphanumeric character "
                 "(e.g. 'example.com', regex used for validation is "
                 "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
    ("a" * 64, f'unable to parse requirement: <nil>: Invalid value: "{"a" * 64}": name part '
               "must be no more than 63 characters"),
    ("a=" + "b" * 64, f'unable to parse requirement: values[0][a]: Invalid value: "{"b" * 64}": '
                      "must be no more than 63 characters"),
])
def test_label_selector_messages_are_kube_exact(text: str, message: str) -> None:
    assert label_error(text) == message


@pytest.mark.parametrize(("text", "canonical"), [
    ("", ""),
    ("  ", ""),
    ("env in (prod, qa)", "env in (prod,qa)"),
    ("env in (qa,prod,qa)", "env in (prod,qa)"),
    ("x in (in)", "x in (in)"),
    ("b=1,a==2,!c,d,e!=3,f notin (),g>5,h<7", "a==2,b=1,!c,d,e!=3,f notin (),g>5,h<7"),
    ("k in (,a)", "k in (,a)"),
    ("k in (a,)", "k in (,a)"),
    ("k=", "k="),
    ("example.com/app=web", "example.com/app=web"),
    ("a\tin\n(b)", "a in (b)"),
    ("a=b \x00 c d e", "a=b"),  # a NUL reads as end of input in Go's lexer
])
def test_label_selector_canonical_string(text: str, canonical: str) -> None:
    assert str(parse_label_selector(text)) == canonical


@pytest.mark.parametrize(("selector", "labels", "expected"), [
    ("", {}, True),
    ("a=b", {"a": "b"}, True),
    ("a=b", {}, False),
    ("a==b", {"a": "c"}, False),
    ("a!=b", {}, True),
    ("a!=b", {"a": "b"}, False),
    ("a in (b,c)", {"a": "c"}, True),
    ("a in (b,c)", {}, False),
    ("a notin (b,c)", {}, True),
    ("a notin (b,c)", {"a": "b"}, False),
    ("a", {"a": ""}, True),
    ("a", {}, False),
    ("!a", {}, True),
    ("!a", {"a": "x"}, False),
    ("a>5", {"a": "6"}, True),
    ("a>5", {"a": "5"}, False),
    ("a<5", {"a": "-7"}, True),
    ("a>5", {"a": "x"}, False),
    ("a>5", {}, False),
    ("a=", {"a": ""}, True),
    ("a=b,c=d", {"a": "b", "c": "d"}, True),
    ("a=b,c=d", {"a": "b"}, False),
])
def test_label_selector_matching(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_label_selector(selector).matches(labels) is expected


def test_label_selector_value_and_requirements() -> None:
    sel = parse_label_selector("b in (y,x),a")
    assert [r.key for r in sel.requirements] == ["a", "b"]
    assert sel.requirements[1].operator is Operator.IN
    assert sel.requirements[1].values == ("x", "y")
    assert not sel.is_empty and LabelSelector().is_empty
    assert sel == parse_label_selector("a,b in (x,y)")


# --- metav1.LabelSelector dicts ---------------------------------------------------------------

def test_label_selector_from_match() -> None:
    sel = label_selector_from_match({
        "matchLabels": {"app": "web", "tier": "fe"},
        "matchExpressions": [{"key": "env", "operator": "In", "values": ["qa", "prod"]},
                             {"key": "x", "operator": "DoesNotExist"},
                             {"key": "y", "operator": "Exists"},
                             {"key": "z", "operator": "NotIn", "values": ["1"]}]})
    assert str(sel) == "app=web,env in (prod,qa),tier=fe,!x,y,z notin (1)"
    assert format_label_selector({"matchLabels": {"app": "web"}}) == "app=web"
    assert format_label_selector({}) == ""
    assert label_selector_from_match({}).matches({"any": "thing"})


@pytest.mark.parametrize(("sel", "message"), [
    ({"matchExpressions": [{"key": "a", "operator": "Foo"}]},
     '"Foo" is not a valid label selector operator'),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
     "values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty"),
    ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["b"]}]},
     'values: Invalid value: []string{"b"}: values set must be empty for exists and does not '
     "exist"),
    ({"matchLabels": {"-a": "b"}}, 'key: Invalid value: "-a": ' + NAME_PART),
    ({"matchLabels": {"a": "-b"}}, 'values[0][a]: Invalid value: "-b": ' + VALUE_PART),
])
def test_label_selector_from_match_errors(sel: dict[str, Any], message: str) -> None:
    with pytest.raises(SelectorError) as info:
        label_selector_from_match(sel)
    assert info.value.message == message


# --- field selectors (§9.2) -------------------------------------------------------------------

@pytest.mark.parametrize(("text", "message"), [
    ("a=b=c", "invalid field selector: unescaped character in value: 61"),
    ("a=\\x", "invalid field selector: invalid escape sequence: \\x"),
    ("a=b\\", "invalid field selector: invalid escape sequence: \\"),
    ("a", "invalid selector: 'a'; can't understand 'a'"),
    ("x=1,a", "invalid selector: 'x=1,a'; can't understand 'a'"),
])
def test_field_selector_messages_are_kube_exact(text: str, message: str) -> None:
    assert field_error(text) == message


def test_field_selector_parsing() -> None:
    sel = parse_field_selector("b==1,a!=2,,c=x\\,y\\=z\\\\,")
    assert [(t.field, t.operator, t.value) for t in sel.terms] == [
        ("a", "!=", "2"), ("b", "=", "1"), ("c", "=", "x,y=z\\")]
    assert str(sel) == "a!=2,b=1,c=x\\,y\\=z\\\\"
    assert parse_field_selector("a = b").terms[0].field == "a "  # no trimming
    assert parse_field_selector("").is_empty and parse_field_selector(",").is_empty


def test_field_selector_matching_and_exact() -> None:
    sel = parse_field_selector("metadata.name=web,status.phase!=Failed")
    assert sel.matches({"metadata.name": "web", "status.phase": "Running"})
    assert sel.matches({"metadata.name": "web"})  # absent reads as ""
    assert not sel.matches({"metadata.name": "web", "status.phase": "Failed"})
    assert parse_field_selector("a=").matches({})
    assert not parse_field_selector("a!=").matches({})
    assert sel.exact("metadata.name") == "web"
    assert sel.exact("status.phase") is None
    assert FieldSelector().exact("metadata.name") is None


# --- field-label conversion per kind (§9.3) ---------------------------------------------------

ACCEPTED = {
    "pods": ["metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy",
             "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork", "status.phase",
             "status.podIP", "status.podIPs", "status.nominatedNodeName", "spec.host"],
    "services": ["metadata.name", "metadata.namespace", "spec.clusterIP", "spec.type"],
    "nodes": ["metadata.name", "spec.unschedulable"],
    "namespaces": ["metadata.name", "status.phase"],
    "events": ["metadata.name", "metadata.namespace", "reason", "type", "reportingController",
               "source", "regarding.kind", "regarding.namespace", "regarding.name",
               "regarding.uid", "regarding.apiVersion", "regarding.resourceVersion",
               "regarding.fieldPath"],
    "deployments": ["metadata.name", "metadata.namespace"],
    "ingresses": ["metadata.name", "metadata.namespace"],
    "networkpolicies": ["metadata.name", "metadata.namespace"],
    "endpointslices": ["metadata.name", "metadata.namespace"],
    "gateways": ["metadata.name", "metadata.namespace"],
    "httproutes": ["metadata.name", "metadata.namespace"],
    "configmaps": ["metadata.name", "metadata.namespace"],
    "secrets": ["metadata.name", "metadata.namespace", "type"],
    "serviceaccounts": ["metadata.name", "metadata.namespace"],
    "leases": ["metadata.name", "metadata.namespace"],
}
REJECTED = {"pods": "spec.foo", "services": "spec.ports", "nodes": "metadata.namespace",
            "namespaces": "name", "events": "involvedObject.name", "deployments": "spec.replicas",
            "ingresses": "spec.rules", "networkpolicies": "spec.podSelector",
            "endpointslices": "addressType", "gateways": "spec.gatewayClassName",
            "httproutes": "spec.hostnames", "configmaps": "data", "secrets": "data",
            "serviceaccounts": "secrets", "leases": "spec.holderIdentity"}


def test_every_registry_kind_is_covered() -> None:
    assert {r.plural for r in REGISTRY} == set(ACCEPTED) == set(REJECTED)


@pytest.mark.parametrize("plural", sorted(ACCEPTED))
def test_convert_accepts_the_kinds_labels(plural: str) -> None:
    for label in ACCEPTED[plural]:
        converted = convert_field_selector(resource(plural), parse_field_selector(f"{label}=v"))
        expected = "spec.nodeName" if label == "spec.host" else label
        assert converted.terms[0].field == expected


@pytest.mark.parametrize("plural", sorted(REJECTED))
def test_convert_rejects_with_the_kinds_message(plural: str) -> None:
    res, label = resource(plural), REJECTED[plural]
    with pytest.raises(SelectorError) as info:
        convert_field_selector(res, parse_field_selector(f"{label}=v"))
    if res.field_label_style == "default":
        expected = (f'"{label}" is not a known field selector: only "metadata.name", '
                    '"metadata.namespace"')
    else:
        expected = f"field label not supported: {label}"
    assert info.value.message == expected


def test_default_style_kinds_and_message_quoting() -> None:
    assert {r.plural for r in REGISTRY if r.field_label_style == "default"} == {
        "deployments", "ingresses", "networkpolicies", "endpointslices", "configmaps",
        "serviceaccounts", "leases"}
    with pytest.raises(SelectorError) as info:
        convert_field_selector(resource("deployments"), parse_field_selector('a"b=1'))
    assert info.value.message.startswith('"a\\"b" is not a known field selector')


# --- selectable field values ------------------------------------------------------------------

POD = {"metadata": {"name": "web-0", "namespace": "demo"},
       "spec": {"nodeName": "n1", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                "serviceAccountName": "sa", "hostNetwork": True},
       "status": {"phase": "Running", "podIP": "10.0.0.9",
                  "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}],
                  "nominatedNodeName": "n2"}}


def test_pod_field_set() -> None:
    assert field_set(resource("pods"), POD) == {
        "metadata.name": "web-0", "metadata.namespace": "demo", "spec.nodeName": "n1",
        "spec.restartPolicy": "Always", "spec.schedulerName": "default-scheduler",
        "spec.serviceAccountName": "sa", "spec.hostNetwork": "true", "status.phase": "Running",
        "status.podIP": "10.0.0.1", "status.podIPs": "", "status.nominatedNodeName": "n2"}


def test_pod_field_set_defaults_and_fallbacks() -> None:
    fields = field_set(resource("pods"), {"metadata": {"name": "p"},
                                          "status": {"podIP": "10.1.1.1"}})
    assert fields["spec.hostNetwork"] == "false"
    assert fields["status.podIP"] == "10.1.1.1"
    assert fields["spec.nodeName"] == "" and fields["metadata.namespace"] == ""
    assert field_set(resource("pods"), {"metadata": "odd", "spec": [1]})["spec.nodeName"] == ""


def test_pod_ips_never_match_and_host_alias_matches() -> None:
    pods = resource("pods")
    fields = field_set(pods, POD)
    ips = convert_field_selector(pods, parse_field_selector("status.podIPs=10.0.0.1"))
    assert not ips.matches(fields)
    host = convert_field_selector(pods, parse_field_selector("spec.host=n1"))
    assert host.matches(fields) and host.exact("spec.nodeName") == "n1"
    net = convert_field_selector(pods, parse_field_selector("spec.hostNetwork=true"))
    assert net.matches(fields)


def test_cluster_scoped_field_sets() -> None:
    node = field_set(resource("nodes"), {"metadata": {"name": "n1", "namespace": "x"},
                                         "spec": {"unschedulable": True}})
    assert node == {"metadata.name": "n1", "spec.unschedulable": "true"}
    assert field_set(resource("nodes"), {"metadata": {"name": "n2"}})["spec.unschedulable"] \
        == "false"
    ns = field_set(resource("namespaces"), {"metadata": {"name": "a"},
                                            "status": {"phase": "Terminating"}})
    assert ns == {"metadata.name": "a", "status.phase": "Terminating"}


def test_event_field_set() -> None:
    event = {"metadata": {"name": "e", "namespace": "d"}, "reason": "Started", "type": "Normal",
             "reportingController": "kubelet",
             "regarding": {"kind": "Pod", "namespace": "d", "name": "web", "uid": "u1",
                           "apiVersion": "v1", "resourceVersion": "7", "fieldPath": "spec"}}
    fields = field_set(resource("events"), event)
    assert fields["source"] == "kubelet"
    assert fields["regarding.name"] == "web" and fields["regarding.resourceVersion"] == "7"
    event["deprecatedSource"] = {"component": "old"}
    assert field_set(resource("events"), event)["source"] == "old"


def test_service_and_default_kinds() -> None:
    svc = field_set(resource("services"), {"metadata": {"name": "s", "namespace": "d"},
                                           "spec": {"clusterIP": "10.96.0.1", "type": "NodePort"}})
    assert svc["spec.clusterIP"] == "10.96.0.1" and svc["spec.type"] == "NodePort"
    for plural in ("deployments", "ingresses", "networkpolicies", "endpointslices", "gateways",
                   "httproutes"):
        assert field_set(resource(plural), {"metadata": {"name": "x", "namespace": "y"}}) == {
            "metadata.name": "x", "metadata.namespace": "y"}


def test_go_rendering_of_non_strings() -> None:
    res = Resource("", "v1", "Thing", "things", "thing", namespaced=False,
                   field_labels={"spec.n": "spec.n", "spec.f": "spec.f", "spec.b": "spec.b",
                                 "spec.o": "spec.o", "x": "first_ip:spec.l"})
    fields = field_set(res, {"spec": {"n": 3, "f": 2.0, "b": False, "o": {"a": 1}, "l": []}})
    assert fields == {"metadata.name": "", "spec.n": "3", "spec.f": "2", "spec.b": "false",
                      "spec.o": "", "x": ""}


def test_go_quote() -> None:
    assert go_quote('a"b\\c\n\x07é\u200b') == '"a\\"b\\\\c\\n\\aé\\u200b"'


# --- properties -------------------------------------------------------------------------------

@given(st.text())
def test_label_parser_only_raises_selector_error(text: str) -> None:
    try:
        sel = parse_label_selector(text)
    except SelectorError:
        return
    assert parse_label_selector(str(sel)) == sel


@given(st.text())
def test_field_parser_only_raises_selector_error(text: str) -> None:
    with contextlib.suppress(SelectorError):
        parse_field_selector(text)


_KEY = st.from_regex(r"\A([a-z0-9]{1,5}\.)?[a-z0-9]{1,5}/?[A-Za-z0-9]([-A-Za-z0-9_.]{0,8}"
                     r"[A-Za-z0-9])?\Z").filter(lambda k: not k.endswith("/"))
_VALUE = st.from_regex(r"\A(([A-Za-z0-9][-A-Za-z0-9_.]{0,8})?[A-Za-z0-9])?\Z")


@given(st.dictionaries(_KEY, _VALUE, max_size=4), st.dictionaries(_KEY, _VALUE, max_size=4))
def test_match_labels_selector_semantics(wanted: dict[str, str], labels: dict[str, str]) -> None:
    sel = label_selector_from_match({"matchLabels": wanted})
    assert sel.matches(labels) == all(labels.get(k) == v for k, v in wanted.items())
    assert parse_label_selector(str(sel)) == sel


@given(st.lists(st.tuples(st.from_regex(r"\A[a-zA-Z.]{1,8}\Z"), st.sampled_from(["=", "!="]),
                          st.text()), max_size=4))
def test_field_selector_round_trip(terms: list[tuple[str, str, str]]) -> None:
    escaped = [f + op + v.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")
               for f, op, v in terms]
    sel = parse_field_selector(",".join(escaped))
    assert parse_field_selector(str(sel)) == sel
    assert sorted((t.field, t.operator, t.value) for t in sel.terms) == sorted(terms)
