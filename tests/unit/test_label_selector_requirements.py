"""The label selector parser's bulk reading of requirements agrees with reading them one by one.

``_bulk_requirements`` reads runs of simple requirements (``k=v``, ``!k``, ``k in (...)``...)
with a few regex scans; at anything else the parser (Go's ``Parser.parse`` loop, token by
token) takes over for one requirement and hands back after its comma. ``bulk=False`` is the
parser alone, the reference: every selector must give the same requirements (order after the
sort by key, operators, values) or the same kube message either way. Also here: the bad values
of a huge list are found without a sort, with kube's indexes, and the requirements built
without ``__init__`` are the same values.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubewire.names import is_valid_label_value
from kubewire.selectors.errors import SelectorError
from kubewire.selectors.labels import (
    _PREFIXED,
    _UNPREFIXED,
    LabelSelector,
    Operator,
    Requirement,
    _bulk_requirements,
    _LabelParser,
    _parse,
    _requirements,
    _suspect_entries,
    new_requirement,
    parse_label_selector,
)
from tests.unit.test_label_selector_lexer import assert_bulk_is_exact

VALUE_REGEX = ("(e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
               "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
VALUE_PART = ("a valid label must be an empty string or consist of alphanumeric characters, '-', "
              "'_' or '.', and must start and end with an alphanumeric character " + VALUE_REGEX)
N63, N64 = "n" * 63, "n" * 64
P253 = ".".join(["p" * 63] * 4)[:253]  # a DNS subdomain of exactly 253 characters
P254 = P253 + "p"


def read_in_bulk(text: str) -> tuple[int | None, list[Requirement]]:
    """Where the bulk reader stops from the start (None: the end), and what it read."""
    out: list[Requirement] = []
    patterns = _PREFIXED if "/" in text else _UNPREFIXED
    return _bulk_requirements(text, 0, out, patterns), out


# --- a table -------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    # the forms, alone and together
    "a", "!a", "a=b", "a==b", "a!=b", "a<5", "a>5", "a in (x)", "a notin (x,y)",
    "a=b,!c,d!=e,f==g,h>1,i<2,j in (k),l notin (m,n),o",
    # whitespace (Go's four characters; \v and \f are not whitespace to Go)
    " a = b , c ", "\ta\n!=\rb", "! a", "!\ta", "a in(x)", "a\tin\n(x , y)", "a notin ( x )",
    "a\x0b=b", "a=\x0bb", "a=b\x0c",
    # empty values
    "a=", "a==", "a!=", "a=,b=", "a= ,b", "a in ()", "a in ( )", "a in (,)", "a in (x,)",
    "a in (,x)", "a in (x,,y)", "a in (x,,)", "a in (,,)", "a in (x, ,)", "a in (,,,)",
    # keys: prefixes, lengths, characters
    "example.com/a=b", "a.b-c/d_e.F=1", f"{N63}=v", f"{N64}=v", f"p/{N63}", f"p/{N64}",
    f"{P253}/n=v", f"{P254}/n=v", "/a=b", "p/=b", "a/b/c=d", "A.com/b=c", "-p/a=b", "p-/a=b",
    "p..q/a", "p.-q/a", "1/2=3", "-a=b", "a-=b", "_a", "a_", ".a", "é=b", "a%b=c", "in=x",
    "notin", "!in", "in in (in)", "notin notin (notin)",
    # values: lengths, characters, keywords
    f"a={N63}", f"a={N64}", "a=-b", "a=b-", "a=_b", "a=b.", "a=é", "a=b/c", "a=in",
    "a in (-b)", f"a in (x,{N64})", "a in (é,b)", "a in (b_,c.,-d)", "a in (in,notin)",
    # numeric operators
    "a>0", "a<007", "a>" + "9" * 18, "a>" + "9" * 19, "a>9223372036854775807",
    "a>9223372036854775808", "a>-5", "a>+5", "a>", "a<x", "a>1.5", "a>=5", "a<=5", "a> 5",
    # duplicate keys, and the order after the sort
    "b=1,a=2,b=3,a=4", "z,y,x,!z,y=1", "a in (x),a notin (x),a",
    # separators, trailing and leading commas, stray symbols
    "a=b,", "a=b, ", "a=b,,c", ",a", " ,a", "a,", "a b", "a=b c", "a=b=c", "a===b", "a!==b",
    "a=!b", "a!b", "a=>b", "a=(b)", "a=b)", "(a)", ")", "=", "!", "!=a", "!!a", "!a=b",
    "a in x", "a in (x", "a in (x)y", "a in (x) y", "a in (x))", "a in ((x))", "a in (x=y)",
    "a in (x)=b", "a In (x)", "ain (x)", "a inx (y)", "a notinx (y)",
    # NULs: swallowed after an identifier or an operator, else the end of the input
    "a\0", "a\0=b", "a=\0b", "a=b\0", "a=b\0,c", "a=b\0c", "a\0\0=b", "!\0a", "\0a", "a,\0b",
    "a=\0", "a= \0b", "a>\05", "a in\0(x)", "a\0in (x)", "a in (x\0)", "a in (\0x)", "a=b,\0",
    "a=b\0 ,c", "a\0 in (x)", "a>\0" "5", "a in (x\0,y)",
    # empty selectors
    "", " ", "\t\n", "\0", "\0a=b",
])
def test_bulk_and_one_by_one_agree(text: str) -> None:
    assert_bulk_is_exact(text)


@pytest.mark.parametrize(("text", "expected"), [
    ("b=1,a=2,b=3,a=4", ["a=2", "a=4", "b=1", "b=3"]),  # stable sort by key
    ("a=,b!=,c==", ["a=", "b!=", "c=="]),
    ("x in (b, a , ,b),!y,z", ["x in (,a,b)", "!y", "z"]),
    ("a\0=b\0,c>\0" "5", ["a=b", "c>5"]),
    ("a=b,\0c=d", ["a=b", "c=d"]),  # swallowed after ",": Go's scanSpecialSymbol reads it
    ("a in (\0x),\0b", ["a in (x)", "b"]),
    (f"{P253}/n in (v)", [f"{P253}/n in (v)"]),
])
def test_bulk_results(text: str, expected: list[str]) -> None:
    assert [str(r) for r in parse_label_selector(text).requirements] == expected
    assert assert_bulk_is_exact(text) != "error"


@pytest.mark.parametrize(("text", "message"), [
    ("a=b,c in (x,,)", "unable to parse requirement: found ')', expected: ',', or identifier"),
    ("a=b,c in (x,-y)", f'unable to parse requirement: values[0][c]: Invalid value: "-y": '
                        f"{VALUE_PART}"),
    ("a=b,c>x", 'unable to parse requirement: values[0]: Invalid value: "x": for \'Gt\', '
                "'Lt' operators, the value must be an integer"),
    ("a=b,", "found '', expected: identifier after ','"),
    ("a=b, \0c=d", "found '', expected: identifier after ','"),  # a NUL after a space: the end
    ("a=b,-c", "unable to parse requirement: <nil>: Invalid value: \"-c\": name part must "
               "consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
               "an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
               "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
    # the first error wins: a bad list value before a bad key
    ("a in (-x),-b", f'unable to parse requirement: values[0][a]: Invalid value: "-x": '
                     f"{VALUE_PART}"),
])
def test_errors_after_requirements_read_in_bulk(text: str, message: str) -> None:
    assert assert_bulk_is_exact(text) == f"error {message}"


# --- the bulk reader is the one taken -------------------------------------------------------------

def test_the_bulk_reader_reads_the_simple_forms_and_stops_at_the_rest() -> None:
    simple = "a=b,!c,d!=e,f==g,h>1,i<2,j in (k, ),l notin (m,n),o,p/q=r"
    end, read = read_in_bulk(simple)
    assert end is None and [r.key for r in read] == [*"acdfhijlo", "p/q"]
    assert read_in_bulk("k0=v,k1=v")[0] is None  # the str.split path
    assert read_in_bulk("a in (x),!b,c=d,!e,f")[0] is None  # no stop after a "!key"
    assert read_in_bulk("x in (a)\0,\0b=c,\0d")[0] is None  # NULs the lexer swallows
    # it stops where the parser must take over: after the comma before that requirement
    for text, stop in [("a=b,c=d,-e=f,g", 8), ("a=b,c=d,e=f,", 12), ("a=b, c d,e", 4),
                       ("x in (a), \0b", 9), ("-a,b", 0), ("", 0)]:
        assert read_in_bulk(text)[0] == stop, text


def test_the_parser_hands_back_to_the_bulk_reader() -> None:
    """After a requirement only the parser reads (a NUL in a value list: the list is read
    token by token), the requirements after its comma are read in bulk again: the parser is
    asked for that one requirement only."""
    asked = []

    class Counting(_LabelParser):
        def requirement(self) -> Requirement:
            asked.append(self.end)
            return super().requirement()

    text = "a=b,c in (x\0),d=e," + ",".join(f"!k{i}" if i % 3 else f"k{i} in (v)"
                                            for i in range(100))
    sel = _parse(Counting(text))
    assert len(sel.requirements) == 103 and len(asked) == 1


# --- generated selectors --------------------------------------------------------------------------

KEYS = st.sampled_from(["a", "b", "k0", "in", "notin", "A.b-c_d", N63, N64, "-a", "a-",
                        "example.com/n", "Ex.com/n", "a/b/c", "/n", "p/", "1/2", f"{P253}/n",
                        f"{P254}/n", "é", "a%b"])
VALUES = st.sampled_from(["", "v", "V-1_b.c", N63, N64, "-v", "v-", "_v", "5", "007",
                          "9" * 18, "9" * 19, "-5", "in", "é", "a/b", "x~"])
SPACE = st.sampled_from(["", "", "", " ", "\t", "\n", "\r\n", "\x0b"])
OPERATORS = st.sampled_from(["=", "==", "!=", "<", ">", "===", "=!", ">=", "!"])


@st.composite
def requirement_texts(draw: st.DrawFn) -> str:
    space = draw(SPACE)
    key = draw(KEYS)
    form = draw(st.integers(0, 4))
    if form == 0:
        return space + key + draw(SPACE)
    if form == 1:
        return space + "!" + draw(SPACE) + key + draw(SPACE)
    if form == 2:
        return (space + key + draw(SPACE) + draw(OPERATORS) + draw(SPACE) + draw(VALUES)
                + draw(SPACE))
    entries = draw(st.lists(st.one_of(VALUES, SPACE), max_size=5))
    listed = draw(st.sampled_from([",", ", ", " ,"])).join(entries)
    word = draw(st.sampled_from([" in ", " notin ", "\tin", " in", "in "]))
    return space + key + word + draw(SPACE) + "(" + listed + ")" + draw(SPACE)


@st.composite
def selectors(draw: st.DrawFn) -> str:
    parts = draw(st.lists(requirement_texts(), max_size=8))
    text = draw(st.sampled_from([",", ",", ", "])).join(parts)
    for _ in range(draw(st.integers(0, 2))):  # a NUL or a stray character somewhere
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(["\0", ",", " ", "(", ")", "="])) + text[at:]
    return text


@settings(max_examples=1500, deadline=None)
@given(selectors())
def test_generated_selectors_parse_the_same_in_bulk(text: str) -> None:
    assert_bulk_is_exact(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from("ab0=!<>(), \t\0-_./é"), max_size=24).map("".join))
def test_character_soup_parses_the_same_in_bulk(text: str) -> None:
    assert_bulk_is_exact(text)


# --- many requirements ----------------------------------------------------------------------------

def test_twenty_thousand_requirements_parse_to_their_sorted_list() -> None:
    count = 20_000
    text = ",".join(f"k{i}=v{i % 7}" for i in range(count))
    sel = parse_label_selector(text)
    assert [r.key for r in sel.requirements] == sorted(f"k{i}" for i in range(count))
    assert {r.key: r.values for r in sel.requirements}["k19998"] == ("v6",)
    assert all(r.operator is Operator.EQUALS for r in sel.requirements)
    assert sel.matches({f"k{i}": f"v{i % 7}" for i in range(count)})
    assert not sel.matches({f"k{i}": f"v{i % 7}" for i in range(count - 1)})
    assert parse_label_selector(str(sel)) == sel


def test_many_mixed_requirements_parse_the_same_in_bulk() -> None:
    forms = ["=v", "!=", " in (a, b,)", "", ">5", "==w", " notin (c)"]
    text = ",".join(("!" if i % 11 == 0 else "") + f"p{i % 3}.io/k{i}"
                    + ("" if i % 11 == 0 else forms[i % len(forms)]) for i in range(2000))
    assert_bulk_is_exact(text)
    assert_bulk_is_exact(text + ",z in (x,,)")  # ... and the error after them
    assert_bulk_is_exact(text.replace("k1000", "-k1000"))


# --- bad values among many ------------------------------------------------------------------------

def reference_value_errors(key: str, values: set[str]) -> list[str]:
    """NewRequirement's loop over the sorted values, as the module did before."""
    return [f"values[{i}][{key}]: Invalid value: \"{v}\": " + "; ".join(errs)
            for i, v in enumerate(sorted(values)) if (errs := is_valid_label_value(v))]


@pytest.mark.parametrize("bad", [
    ["-bad-"], ["~bad"], ["_bad"], ["bad."], ["Mid-é"], ["0-"], ["-a", "zz-", "m_"],
    [f"-{i}" for i in range(12)],  # more than are counted one by one: a sort
])
@pytest.mark.parametrize("with_empty", [False, True])
def test_bad_values_among_many_are_named_with_kube_indexes(bad: list[str],
                                                           with_empty: bool) -> None:
    good = [f"v{i}" for i in range(3000)] + ["A", "Z0", "a", "0"] + ([""] if with_empty else [])
    values = [*good, *bad]
    listed = ",".join(values)
    expected = reference_value_errors("k", set(values))
    message = expected[0] if len(expected) == 1 else "[" + ", ".join(expected) + "]"
    for text in (f"k in ({listed})", f"k notin ({listed.replace(',', ' , ')})"):
        assert assert_bulk_is_exact(text) == f"error unable to parse requirement: {message}"
    with pytest.raises(SelectorError) as info:
        new_requirement("k", Operator.IN, values)
    assert info.value.message == message


@given(st.lists(st.sampled_from(["", "a", "b1", "A.b", "-a", "a-", "_", ".", "a_", "x" * 63,
                                 "x" * 64, "é", "a~b", "a/b", "0", "-", "a.-b"]), min_size=1,
                max_size=12))
def test_suspect_entries_are_exactly_the_invalid_ones(entries: list[str]) -> None:
    assert set(_suspect_entries(",".join(entries))) == {
        e for e in entries if is_valid_label_value(e)}


# --- requirements built without __init__ ----------------------------------------------------------

def test_requirements_built_in_bulk_are_the_same_values() -> None:
    keys = ["b", "a", "c"]
    operators = [Operator.EQUALS, Operator.IN, Operator.EXISTS]
    value_sets = [frozenset({"x"}), frozenset({"z", "y"}), frozenset()]
    built = _requirements(keys, iter(operators), iter(value_sets))
    made = [Requirement(*fields) for fields in zip(keys, operators, value_sets, strict=True)]
    assert built == made
    assert [hash(r) for r in built] == [hash(r) for r in made]
    assert [repr(r) for r in built] == [repr(r) for r in made]
    assert [str(r) for r in built] == ["b=x", "a in (y,z)", "c"]
    assert built[1].values == ("y", "z")
    assert LabelSelector(tuple(built)).matches({"b": "x", "a": "z", "c": ""})
    with pytest.raises(AttributeError):
        built[0].key = "d"  # type: ignore[misc]  # still frozen


def test_parse_agrees_with_itertools_of_forms() -> None:
    """Every pair of forms, each separator: the parser's hand-overs at every boundary."""
    forms = ["a", "!a", "a=b", "a=", "a>1", "a>x", "a in (b)", "a in ()", "a in (b,,)", "-a",
             "a\0", "a=b\0", "a b", ""]
    for first, second in itertools.product(forms, repeat=2):
        for sep in (",", " , ", ",,"):
            assert_bulk_is_exact(first + sep + second)
