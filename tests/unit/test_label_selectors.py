"""kubewire.selectors.labels: kube-exact parsing, matching and metav1.LabelSelector (§9.1)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubewire.selectors.errors import SelectorError
from kubewire.selectors.labels import (
    LabelSelector,
    Operator,
    format_label_selector,
    label_selector_from_match,
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


def label_error(text: str) -> str:
    with pytest.raises(SelectorError) as info:
        parse_label_selector(text)
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


# --- properties -------------------------------------------------------------------------------

@given(st.text())
def test_label_parser_only_raises_selector_error(text: str) -> None:
    try:
        sel = parse_label_selector(text)
    except SelectorError:
        return
    assert parse_label_selector(str(sel)) == sel


_KEY = st.from_regex(r"\A([a-z0-9]{1,5}\.)?[a-z0-9]{1,5}/?[A-Za-z0-9]([-A-Za-z0-9_.]{0,8}"
                     r"[A-Za-z0-9])?\Z").filter(lambda k: not k.endswith("/"))
_VALUE = st.from_regex(r"\A(([A-Za-z0-9][-A-Za-z0-9_.]{0,8})?[A-Za-z0-9])?\Z")


@given(st.dictionaries(_KEY, _VALUE, max_size=4), st.dictionaries(_KEY, _VALUE, max_size=4))
def test_match_labels_selector_semantics(wanted: dict[str, str], labels: dict[str, str]) -> None:
    sel = label_selector_from_match({"matchLabels": wanted})
    assert sel.matches(labels) == all(labels.get(k) == v for k, v in wanted.items())
    assert parse_label_selector(str(sel)) == sel
