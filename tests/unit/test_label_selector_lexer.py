"""The label selector parser's two ways of reading an ``in``/``notin`` value list agree: in
bulk (``_bulk_values``: one regex over the list, then ``str.split``) and token by token (Go's
``parseIdentifiersList`` loop, the reference). Every selector gives the same requirements or
the same kube message either way, and a selector of tens of thousands of values parses whole."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubewire.selectors.errors import SelectorError
from kubewire.selectors.labels import (
    Operator,
    Token,
    _bulk_values,
    _LabelParser,
    _lex,
    _parse,
    parse_label_selector,
)

VALUE_REGEX = ("(e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
               "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
VALUE_PART = ("a valid label must be an empty string or consist of alphanumeric characters, '-', "
              "'_' or '.', and must start and end with an alphanumeric character " + VALUE_REGEX)


def tokens(text: str) -> list[Token]:
    """Every token up to and including the end, as the parser scans them (to each "(")."""
    found: list[Token] = []
    pos = 0
    while not found or found[-1][0] != "end":
        more, pos = _lex(text, pos)
        found += more
    return found


def outcome(text: str, *, bulk: bool) -> object:
    """What parsing gives: the canonical form and each requirement's key, operator and values
    (in the order after the sort), or the message."""
    try:
        sel = _parse(_LabelParser(text, bulk=bulk))
    except SelectorError as exc:
        return f"error {exc.message}"
    return str(sel), [(r.key, r.operator, r.value_set, r.values) for r in sel.requirements]


def assert_bulk_is_exact(text: str) -> object:
    found = outcome(text, bulk=True)
    assert found == outcome(text, bulk=False), repr(text)
    return found


PIECES = st.sampled_from(["a", "b", "in", "notin", "(", ")", ",", " ", "\t", "\n", "x-_.1", ""])


@given(st.lists(PIECES, max_size=30).map("".join))
def test_findall_and_scan_give_the_same_tokens(text: str) -> None:
    """``_PLAIN``'s findall (no symbol needing Go's scanning rules) and the token-at-a-time
    scan (forced by a trailing NUL, which Go reads as the end of input) agree."""
    assert tokens(text) == tokens(text + "\0")


# --- bulk and token by token give the same answers --------------------------------------------

LONGEST, TOO_LONG = "v" * 63, "v" * 64


@pytest.mark.parametrize(("values", "expected"), [
    ("a,b,c", {"a", "b", "c"}),
    ("b,a,b,a", {"a", "b"}),  # duplicates
    ("", {""}),  # "in ()"
    (" ", {""}),
    (",", {""}),
    (",,,", {""}),
    (",a", {"", "a"}),
    (",,a", {"", "a"}),
    ("a,", {"", "a"}),  # a trailing comma
    ("a,,,", {"", "a"}),
    ("a,,b", {"", "a", "b"}),
    ("a,,,b", {"", "a", "b"}),
    (" a , b\t,\nc\r", {"a", "b", "c"}),  # Go's whitespace around values
    ("a, ,b", {"", "a", "b"}),
    ("a,b\0", {"a", "b"}),  # ... but the one that ends an identifier is swallowed
    ("in,notin", {"in", "notin"}),  # keywords are identifiers among values
    (LONGEST, {LONGEST}),
    ("A-1_b.c,0,Z", {"A-1_b.c", "0", "Z"}),
    ("a,,", "found ')', expected: ',', or identifier"),  # Go's even run of commas before ")"
    (",,", "found ')', expected: ',', or identifier"),
    ("a, ,", "found ')', expected: ',', or identifier"),
    ("a,,,,", "found ')', expected: ',', or identifier"),
    (TOO_LONG, f'values[0][k]: Invalid value: "{TOO_LONG}": must be no more than 63 '
               "characters"),
    ("a,-b", f'values[0][k]: Invalid value: "-b": {VALUE_PART}'),
    ("z,b-", f'values[0][k]: Invalid value: "b-": {VALUE_PART}'),
    ("a,b_,c.", f'[values[1][k]: Invalid value: "b_": {VALUE_PART}, '
                f'values[2][k]: Invalid value: "c.": {VALUE_PART}]'),
    ("a,é", f'values[1][k]: Invalid value: "é": {VALUE_PART}'),
    ("a,b\x0bc", f'values[1][k]: Invalid value: "b\\vc": {VALUE_PART}'),  # \v: no Go space
    ("a,b/c", f'values[1][k]: Invalid value: "b/c": {VALUE_PART}'),
    ("a b", "found 'b', expected: ',' or ')'"),
    ("a,=", "found '=', expected: ',', or identifier"),
    ("a,(", "found '(', expected: ',', or identifier"),
    ("=", "found '=', expected: ',', ')' or identifier"),
    ("a,\0b", {"a", "b"}),  # the lexer swallows a NUL right after a symbol, "," too
    ("a\0,b", {"a", "b"}),  # ... and after an identifier
    ("a, \0b", "found '', expected: ',', or identifier"),  # else a NUL ends the input...
])
def test_value_lists_parse_the_same_in_bulk(values: str, expected: set[str] | str) -> None:
    for op in ("in", "notin"):
        found = assert_bulk_is_exact(f"k {op} ({values})")
        if isinstance(expected, str):
            assert found == f"error unable to parse requirement: {expected}"
        else:
            (requirement,) = found[1]  # type: ignore[index]
            assert requirement[1] is Operator(op) and requirement[2] == expected


@pytest.mark.parametrize("text", [
    "a in (x,y)", "a in (x, y), b notin (z)", "a in (x,y),!b", "a in (x,y) ,b", "a in (x,y)b",
    "a in (x,y)),b", "a in (x,y", "a in (x,y,", "a in x,y)", "a in (x)=b", "a in (x)\0,b=c",
])
def test_what_follows_a_list_is_read_as_before(text: str) -> None:
    assert_bulk_is_exact(text)


VALUE_PIECES = st.sampled_from(["a", "b", "in", "notin", ",", ",", ",", " ", "\t", "(", ")",
                                "-x", "y_", "c1", "A.b", LONGEST, TOO_LONG, "é", "=", "!", "\0",
                                "\x0b"])


@given(st.lists(VALUE_PIECES, max_size=20).map("".join), st.sampled_from(["in", "notin"]))
def test_any_value_list_parses_the_same_in_bulk(values: str, op: str) -> None:
    assert_bulk_is_exact(f"k {op} ({values}),z")


# --- a huge set ----------------------------------------------------------------------------------

def test_bulk_reads_lists_with_and_without_whitespace() -> None:
    """The bulk path is the one taken (the tests above would pass without it)."""
    assert _bulk_values("(a,b)", 1) == (["a", "b"], [], 5)
    assert _bulk_values("( a ,\tb )", 1) == (["a", "b"], [], 9)
    assert _bulk_values("(a,-b)", 1) == (["a", "-b"], ["-b"], 6)
    with pytest.raises(SelectorError, match="found '\\)', expected: ',', or identifier"):
        _bulk_values("(a, ,)", 1)
    assert _bulk_values("(a,=)", 1) is None


def test_twenty_thousand_values_parse_to_their_set() -> None:
    values = [f"v{i}" for i in range(20_000)]
    text = f"app in (web,{','.join(reversed(values))},web),tier notin (x)"
    pos = text.index("(") + 1
    assert _bulk_values(text, pos) is not None
    app, tier = parse_label_selector(text).requirements
    assert app.key == "app" and app.operator is Operator.IN
    assert app.value_set == frozenset([*values, "web"])
    assert app.values == tuple(sorted([*values, "web"]))
    assert app.matches({"app": "v19999"}) and not app.matches({"app": "v20000"})
    assert (tier.key, tier.operator, tier.values) == ("tier", Operator.NOT_IN, ("x",))


def test_one_bad_value_among_twenty_thousand_is_named() -> None:
    values = ",".join(f"v{i}" for i in range(20_000))
    with pytest.raises(SelectorError) as info:
        parse_label_selector(f"app in ({values},-bad)")
    assert info.value.message == ('unable to parse requirement: values[0][app]: Invalid value: '
                                  f'"-bad": {VALUE_PART}')
