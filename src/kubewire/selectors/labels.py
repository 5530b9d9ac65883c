"""Label selectors: parsing, matching and canonical form (apimachinery pkg/labels/selector.go).

The parser follows kube-apiserver v1.32 byte for byte, error texts included, because clients
match on them (watch-protocol.md §9.1). Selectors are immutable values; ``matches`` runs per event
per watcher. Every parse or construction failure raises ``SelectorError`` with kube's exact text.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from enum import StrEnum
from itertools import filterfalse, repeat
from operator import attrgetter
from typing import NamedTuple

from kubewire.go_text import go_quote, int64_or_none
from kubewire.json_types import JSON
from kubewire.names import LABEL_VALUE_MAX_CHARS, is_qualified_name, is_valid_label_value
from kubewire.selectors.errors import SelectorError


class Operator(StrEnum):
    """``selection.Operator`` values."""

    IN = "in"
    NOT_IN = "notin"
    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


_SYMBOL = {Operator.EQUALS: "=", Operator.DOUBLE_EQUALS: "==", Operator.NOT_EQUALS: "!=",
           Operator.IN: " in ", Operator.NOT_IN: " notin ", Operator.GREATER_THAN: ">",
           Operator.LESS_THAN: "<"}


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ANDed term of a label selector.

    ``value_set`` is what matching reads (a set: a selector may hold tens of thousands of
    values, and ``matches`` runs per object and per watch event); ``values``, the sorted list
    kube's ``NewRequirement`` keeps (``sets.String.List()``), is made on first use, because
    sorting a large set costs more than parsing it and most requests never print it.
    """

    key: str
    operator: Operator
    value_set: frozenset[str] = frozenset()
    _sorted: tuple[str, ...] | None = field(default=None, init=False, repr=False, compare=False,
                                            hash=False)

    @property
    def values(self) -> tuple[str, ...]:
        """The values, sorted and de-duplicated (``Requirement.Values`` order)."""
        values = self._sorted
        if values is None:
            values = tuple(sorted(self.value_set))
            object.__setattr__(self, "_sorted", values)
        return values

    def matches(self, labels: Mapping[str, str]) -> bool:
        """kube's ``Requirement.Matches``: ``!=``/``notin`` also match a missing key."""
        op = self.operator
        value = labels.get(self.key)
        if op is Operator.EXISTS or op is Operator.DOES_NOT_EXIST:
            return (value is not None) is (op is Operator.EXISTS)
        if op is Operator.NOT_EQUALS or op is Operator.NOT_IN:
            return value is None or value not in self.value_set
        if value is None:
            return False
        if op is Operator.GREATER_THAN or op is Operator.LESS_THAN:
            have, want = int64_or_none(value), int64_or_none(self.values[0])
            if have is None or want is None:
                return False
            return have > want if op is Operator.GREATER_THAN else have < want
        return value in self.value_set

    def __str__(self) -> str:
        if self.operator is Operator.EXISTS:
            return self.key
        if self.operator is Operator.DOES_NOT_EXIST:
            return "!" + self.key
        values = ",".join(self.values)
        if self.operator in (Operator.IN, Operator.NOT_IN):
            values = f"({values})"
        return self.key + _SYMBOL[self.operator] + values


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """An immutable label selector: requirements sorted by key, all ANDed."""

    requirements: tuple[Requirement, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        """True when every requirement holds; the empty selector matches everything."""
        return all(req.matches(labels) for req in self.requirements)

    def __str__(self) -> str:
        """Canonical form, as ``Selector.String()``: ``app=web,tier in (a,b)``."""
        return ",".join(str(req) for req in self.requirements)


# A valid non-empty label value (IsValidLabelValue's regex and its 63-character limit), as a
# pattern to run first: only a value it rejects needs ``is_valid_label_value`` for kube's text.
_VALID_VALUE = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")


def new_requirement(key: str, op: Operator, values: Iterable[str], *, key_path: str = "key"
                    ) -> Requirement:
    """``labels.NewRequirement`` with a nil field path; raises SelectorError with kube's text."""
    return _new_requirement(key, op, frozenset(values), None, key_path)


def _new_requirement(key: str, op: Operator, value_set: frozenset[str],
                     suspects: Iterable[str] | None, key_path: str | None) -> Requirement:
    """``new_requirement``, told which values may be invalid (all when None): every other
    one is known to be empty or a valid label value. ``key_path`` names the key in its error,
    None when the key is known valid (the parser checks it first, and ``is_qualified_name``'s
    cache holds 4096 keys while a selector may hold 20k)."""
    errs: list[str] = []
    key_errs = [] if key_path is None else is_qualified_name(key)
    if key_errs:
        errs.append(f"{key_path}: Invalid value: {go_quote(key)}: {'; '.join(key_errs)}")
    if op in (Operator.IN, Operator.NOT_IN) and not value_set:
        errs.append("values: Invalid value: []string{}: for 'in', 'notin' operators, "
                    "values set can't be empty")
    if op in (Operator.EXISTS, Operator.DOES_NOT_EXIST) and value_set:
        shown = ", ".join(go_quote(v) for v in sorted(value_set))
        errs.append(f"values: Invalid value: []string{{{shown}}}: values set must be empty for "
                    "exists and does not exist")
    if op in (Operator.GREATER_THAN, Operator.LESS_THAN):
        errs.extend(f"values[{i}]: Invalid value: {go_quote(v)}: for 'Gt', 'Lt' operators, the "
                    "value must be an integer" for i, v in enumerate(sorted(value_set))
                    if int64_or_none(v) is None)
    errs.extend(_value_errors(key, value_set, suspects))
    if errs:
        unique = list(dict.fromkeys(errs))
        raise SelectorError(unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]")
    return Requirement(key, op, value_set)  # sorts its values on first use, not here


def _value_errors(key: str, value_set: frozenset[str], suspects: Iterable[str] | None
                  ) -> list[str]:
    """kube's ``values[i][key]`` messages for the invalid values, in the order of ``i``: the
    index in the sorted list, which ``NewRequirement`` validates (``sets.List``).

    Only the values ``_VALID_VALUE`` rejects are looked at one by one (a selector may hold tens
    of thousands, and one bad one among them must not cost a sort and a Python loop over all):
    a value's index is how many values sort before it.
    """
    known = suspects is not None
    suspected = set(filterfalse(_VALID_VALUE.fullmatch, value_set) if suspects is None
                    else suspects)  # "" passes is_valid_label_value below
    problems = {v: errs for v in suspected if (errs := is_valid_label_value(v))}
    if not problems:
        return []
    bad = sorted(problems)
    if len(bad) > _COUNTED_INDEXES:
        everything = sorted(value_set)
        indexes = [bisect_left(everything, v) for v in bad]
    else:
        indexes = [_index(v, value_set, suspected) if known else
                   len(list(filter(v.__gt__, value_set))) for v in bad]
    return [f"values[{i}][{key}]: Invalid value: {go_quote(v)}: " + "; ".join(problems[v])
            for i, v in zip(indexes, bad, strict=True)]


def _index(bad: str, value_set: frozenset[str], suspected: set[str]) -> int:
    """How many values sort before ``bad`` (its index in the sorted list), where every value
    not ``suspected`` is empty or a valid label value, so starts with [0-9A-Za-z]: a bad value
    that starts below "0" ("-x", ".x") follows at most the empty one, one above "z" follows
    all of them, and neither needs a pass over the set."""
    below = sum(1 for v in suspected if v < bad)
    others = len(value_set) - len(suspected)
    if bad[0] < "0":
        return below + ("" in value_set and "" not in suspected)
    if bad[0] > "z":
        return below + others
    return len(list(filter(bad.__gt__, value_set)))


# Up to this many bad values, each one's index is counted (a pass over the set in C); beyond
# it one sort of the set is cheaper.
_COUNTED_INDEXES = 8


_SPECIAL = frozenset("=!(),<>")
_SYMBOLS = frozenset({"=", "==", "!=", "!", "(", ")", ",", "<", ">"})
_KEYWORDS = frozenset({"in", "notin"})
_EOS, _ID = "end", "id"
# Tokens are found by ``re`` rather than char by char (a selector can be as long as a request
# head, 1 MiB, and the loop must not stall on it): all at once by ``_PLAIN`` when there is no
# symbol whose Go scanning rules need ``_scan_symbol``, else whitespace and a one-character
# symbol or an identifier at a time by ``_SIMPLE_TOKEN``.
_NEEDS_SCAN = re.compile(r"[=!<>\0]")
_PLAIN = re.compile(r"[(),]|[^(), \t\r\n]+")
_ONE_CHAR = frozenset("(),")
_BATCH_ENDS = frozenset("(,")
_BATCH_END = re.compile("[(,]")
_SIMPLE_TOKEN = re.compile(r"[ \t\r\n]*(?:([(),])|([^=!(),<> \t\r\n\0]+))?")
_OPERATOR_TOKENS = {"in": Operator.IN, "notin": Operator.NOT_IN, "=": Operator.EQUALS,
                    "==": Operator.DOUBLE_EQUALS, "!=": Operator.NOT_EQUALS,
                    ">": Operator.GREATER_THAN, "<": Operator.LESS_THAN}
Token = tuple[str, str]  # (kind, literal); kind is a symbol, a keyword, _ID or _EOS


def _scan_symbol(text: str, pos: int) -> tuple[Token, int]:
    # Lexer.scanSpecialSymbol: extend greedily while the buffer is still a known operator.
    buf, last = "", ""
    while pos < len(text):
        ch = text[pos]
        pos += 1
        if ch == "\0":
            break
        if ch not in _SPECIAL:
            pos -= 1
            break
        buf += ch
        if buf in _SYMBOLS:
            last = buf
        elif last:
            pos -= 1
            break
    if not last:
        return ("error", f"error expected: keyword found '{buf}'"), pos
    return (last, last), pos


def _lex(text: str, pos: int) -> tuple[list[Token], int]:
    """``labels.Lexer`` from ``pos`` through the next "(" (a value list may follow it, which
    the parser may read in bulk), the next "," (requirements may follow it, which the parser
    may read in bulk) or the end: the tokens, and where the next ones start.

    Go reads a NUL byte like the end of input, and its parser scans no further than the end:
    after it the position is ``len(text)``, so every later token is the end too; except that
    the NUL right after an identifier or a symbol ends that token and is swallowed with it.
    """
    found = _BATCH_END.search(text, pos)
    stop = found.end() if found else len(text)
    if not _NEEDS_SCAN.search(text, pos, stop):  # no "=", "!", "<", ">" or NUL: one findall
        tokens = [(part, part) if part in _ONE_CHAR else
                  (part if part in _KEYWORDS else _ID, part)
                  for part in _PLAIN.findall(text, pos, stop)]
        if not tokens or tokens[-1][0] not in _BATCH_ENDS:
            tokens.append((_EOS, ""))
            return tokens, stop
        return tokens, stop + text.startswith("\0", stop)  # swallowed by the "(" or ","
    tokens = []
    end = len(text)
    simple = _SIMPLE_TOKEN.match
    while True:
        found = simple(text, pos)  # never None: every part of the pattern may be empty
        assert found is not None
        pos = found.end()
        symbol, literal = found.group(1, 2)
        if symbol:  # "(", ")" or ",": never the start of a longer symbol
            pos += text.startswith("\0", pos)  # scanSpecialSymbol swallows a NUL after these too
            tokens.append((symbol, symbol))
            if symbol in _BATCH_ENDS:
                return tokens, pos
            continue
        if literal:
            pos += text.startswith("\0", pos)  # scanIDOrKeyword swallows the NUL that ends it
            tokens.append((literal if literal in _KEYWORDS else _ID, literal))
            continue
        if pos >= end or text[pos] == "\0":
            tokens.append((_EOS, ""))
            return tokens, end
        token, pos = _scan_symbol(text, pos)  # "=", "!=", "<"...: Go's longest-symbol rules
        tokens.append(token)


# The values of ``in``/``notin`` read in bulk, from after "(" through ")": a selector may hold
# tens of thousands, and token by token they cost ~2 µs each on the event loop. For a list of
# entries split at commas, each empty or an identifier, whitespace around, Go's parseValues
# and parseIdentifiersList give the set of the trimmed entries (an empty entry anywhere adds
# "", "()" is {""}), except that an even run of two or more commas before ")" is an error
# ("(a,,)", "(,,)": a comma that follows a comma is consumed with it, and the loop then meets
# ")" where it wants a value). Any other list (an operator, "(", a NUL, no ")") is read token
# by token, which has kube's messages. The entries that are not valid label values are found
# by ``_suspect_entries``, a search over the whole list.
_WS = "[ \t\r\n]*+"
_IDENTIFIER = "[^ \t\r\n=!(),<>\0]++"  # scanIDOrKeyword's characters
# A list without whitespace is any run of identifier characters and commas: one character-class
# scan; with whitespace, identifiers between commas, whitespace around them.
_LISTED = (f"(?:[^ \t\r\n=!()<>\0]*+(?=\\))"
           f"|{_WS}(?:{_IDENTIFIER}{_WS})?+(?:,{_WS}(?:{_IDENTIFIER}{_WS})?+)*+)")
_IDENTIFIER_LIST = re.compile(f"(?:{_LISTED})\\)")


def _bulk_values(text: str, pos: int) -> tuple[list[str], list[str], int] | None:
    """The entries of the value list that starts at ``pos`` (after "("), those that are not
    empty or a valid label value, and the position after its ")"; None for any list that is
    not commas between identifiers (read it token by token). Raises SelectorError for Go's
    even run of commas before ")"."""
    found = _IDENTIFIER_LIST.match(text, pos)
    if found is None:
        return None
    end = found.end()
    return *_list_entries(text[pos:end - 1]), end + text.startswith("\0", end)  # ")\0"


def _list_entries(listed: str, *, check: bool = True) -> tuple[list[str], list[str]]:
    """The entries of a list ``_IDENTIFIER_LIST`` matched (without its ")"), and those that are
    not empty or a valid label value (not looked for unless ``check``). Raises SelectorError
    for Go's even run of commas before ")"."""
    trailing_commas = listed.count(",", len(listed.rstrip(", \t\r\n")))
    if trailing_commas >= 2 and trailing_commas % 2 == 0:  # parseIdentifiersList's message
        raise SelectorError("found ')', expected: ',', or identifier")
    entries = listed.split(",")
    # Go's isWhitespace, not str.strip's (four memchr calls: no generator, no regex call)
    spaced = " " in listed or "\t" in listed or "\n" in listed or "\r" in listed
    if spaced:
        entries = [entry.strip(" \t\r\n") for entry in entries]
    if not check:
        return entries, []
    return entries, _suspect_entries(",".join(entries) if spaced else listed)


# The entries of a comma-separated list (a comma added at its end) that IsValidLabelValue's
# pattern and length allow, up to the first that it does not by its characters or length: one
# character-class run per bad entry. "-", "_" or "." first or last is looked for with
# ``str.find`` (a regex that stops at every comma is several times slower): the pairs, with
# the offset of the entry's character in each.
_PLAIN_ENTRIES = re.compile(f"(?:[-A-Za-z0-9_.]{{0,{LABEL_VALUE_MAX_CHARS}}}+,)*+")
_ODD_EDGES = tuple((edge, pair, offset) for edge in "-_." for pair, offset in
                   (("," + edge, 1), (edge + ",", 0)))


def _suspect_entries(joined: str) -> list[str]:
    """The entries of ``joined`` (commas between them, no whitespace) that are not empty or
    a valid label value, found by a few scans of the whole list: one bad value among tens of
    thousands must not cost a regex call per value."""
    padded = f",{joined},"
    found = set()
    at, end = 1, len(padded)
    while (at := _PLAIN_ENTRIES.match(padded, at).end()) < end:  # type: ignore[union-attr]
        after = padded.find(",", at)  # ``at`` starts an entry with a bad character, or long
        found.add(padded[at:after])
        at = after + 1
    for edge, pair, offset in _ODD_EDGES:
        if edge not in padded:  # one memchr, and most lists have no "_" or "."
            continue
        at = padded.find(pair)
        while at >= 0:  # the entry that holds ``at + offset``, which commas delimit
            inside = at + offset
            found.add(padded[padded.rfind(",", 0, inside) + 1:padded.find(",", inside)])
            at = padded.find(pair, at + 1)
    return list(found)


class _LabelParser:
    """``labels.Parser``: recursive descent over the scanned tokens, kube's messages.

    Go scans every token first; this scans up to each "(" or "," when it gets there (the
    same tokens), so that a value list after "(" can be read in bulk (``_bulk_values``), and
    requirements after ",", or at the start (``_bulk_requirements``), unless ``bulk`` is False
    (the tests' reference).
    """

    def __init__(self, text: str, *, bulk: bool = True) -> None:
        self.text = text
        self.tokens: list[Token] = []  # scanned on the first peek
        self.end = 0  # where the tokens after ``tokens`` start
        self.pos = 0  # the next token's index in ``tokens``
        self.bulk = bulk
        self.patterns = _PREFIXED if "/" in text else _UNPREFIXED  # for _bulk_requirements

    def peek(self, values: bool = True) -> Token:
        if self.pos == len(self.tokens):
            self.tokens, self.end = _lex(self.text, self.end)
            self.pos = 0
        kind, literal = self.tokens[self.pos]
        # In value context "in"/"notin" are plain identifiers (`x in (in)` is legal).
        return (_ID if values and kind in _KEYWORDS else kind), literal

    def take(self, values: bool = True) -> Token:
        token = self.peek(values)
        self.pos += 1
        return token

    def requirement(self) -> Requirement:
        key, op = self.key_and_operator()
        if op is None:
            token = self.take(values=False)
            op = _OPERATOR_TOKENS.get(token[0])
            if op is None:
                raise SelectorError(f"found '{token[1]}', expected: in, notin, =, ==, !=, gt, lt")
            if op in (Operator.IN, Operator.NOT_IN):
                values, suspects = self.set_values()
                return _new_requirement(key, op, frozenset(values), suspects, None)
            else:
                values = self.exact_value()
        else:
            values = []
        return _new_requirement(key, op, frozenset(values), None, None)

    def key_and_operator(self) -> tuple[str, Operator | None]:
        kind, literal = self.take()
        op = None
        if kind == "!":
            op = Operator.DOES_NOT_EXIST
            kind, literal = self.take()
        if kind != _ID:
            raise SelectorError(f"found '{literal}', expected: identifier")
        errs = is_qualified_name(literal)
        if errs:  # validated with the parser's nil field path, hence kube's literal "<nil>"
            raise SelectorError(f"<nil>: Invalid value: {go_quote(literal)}: {'; '.join(errs)}")
        if op is None and self.peek()[0] in (_EOS, ","):
            op = Operator.EXISTS
        return literal, op

    def set_values(self) -> tuple[list[str], list[str] | None]:
        """``parseValues``: the values, and those that may be invalid (None: any of them)."""
        kind, literal = self.take()
        if kind != "(":
            raise SelectorError(f"found '{literal}' expected: '('")
        if self.bulk:  # "(" ended the tokens scanned: the list starts at ``end``
            found = _bulk_values(self.text, self.end)
            if found is not None:
                values, suspects, self.end = found
                return values, suspects
        kind, literal = self.peek()
        if kind == ")":
            self.take()
            return [""], []
        if kind not in (_ID, ","):
            raise SelectorError(f"found '{literal}', expected: ',', ')' or identifier")
        values = self.identifiers()
        if self.take()[0] != ")":
            raise SelectorError(f"found '{literal}', expected: ')'")
        return values, None

    def identifiers(self) -> list[str]:
        """``parseIdentifiersList``, Go's loop; leaves the closing ")" to be taken."""
        values: list[str] = []
        while True:
            kind, literal = self.take()
            if kind == _ID:
                values.append(literal)
                after, after_literal = self.peek()
                if after == ")":
                    return values
                if after != ",":
                    raise SelectorError(f"found '{after_literal}', expected: ',' or ')'")
            elif kind == ",":
                # Empty entries ("(,a)", "(a,)", "(a,,b)") stand for the empty value.
                after = self.peek()[0]
                if not values or after in (")", ","):
                    values.append("")
                if after == ")":
                    return values
                if after == ",":
                    self.take()
            else:
                raise SelectorError(f"found '{literal}', expected: ',', or identifier")

    def exact_value(self) -> list[str]:
        if self.peek()[0] in (_EOS, ","):
            return [""]
        kind, literal = self.take()
        if kind != _ID:
            raise SelectorError(f"found '{literal}', expected: identifier")
        return [literal]


def parse_label_selector(text: str) -> LabelSelector:
    """Parse a ``labelSelector`` query value (watch-protocol.md §9.1, ``labels.Parse``).

    Guarantees: the result is sorted by key (stable), ``""`` gives the empty selector, and
    ``parse_label_selector(str(sel)) == sel``. Raises SelectorError with kube's exact message.
    """
    return _parse(_LabelParser(text))


def _parse(parser: _LabelParser) -> LabelSelector:
    """``Parser.parse``: requirements separated by commas, then ``sort.Sort(ByKey(...))``.

    At the start and after each comma the requirements that ``_bulk_requirements`` reads
    are taken in bulk; at the first it does not read (an error, or a form it leaves to the
    parser) the parser reads one requirement and its comma, then the bulk reader goes on.
    """
    requirements: list[Requirement] = []
    while True:
        if _read_to_end_in_bulk(parser, requirements):
            break
        kind, literal = parser.peek()
        if not requirements:  # Go's check before the first requirement
            if kind == _EOS:
                break
            if kind not in (_ID, "!"):
                raise SelectorError(
                    f"found '{literal}', expected: !, identifier, or 'end of string'")
        elif kind not in (_ID, "!"):  # ... and after each ","
            raise SelectorError(f"found '{literal}', expected: identifier after ','")
        try:
            requirements.append(parser.requirement())
        except SelectorError as exc:
            raise SelectorError(f"unable to parse requirement: {exc.message}") from None
        kind, literal = parser.take()
        if kind == _EOS:
            break
        if kind != ",":
            raise SelectorError(f"found '{literal}', expected: ',' or 'end of string'")
    requirements.sort(key=_BY_KEY)  # stable, as the tuple order kube's sort gives here
    return LabelSelector(tuple(requirements))


_BY_KEY = attrgetter("key")


def _read_to_end_in_bulk(parser: _LabelParser, out: list[Requirement]) -> bool:
    """At the start or after a comma (no token scanned and left), read the requirements
    ``_bulk_requirements`` takes into ``out`` and move the parser past them; True when they
    ran to the end of the selector."""
    if not parser.bulk or parser.pos != len(parser.tokens):
        return False
    end = _bulk_requirements(parser.text, parser.end, out, parser.patterns)
    if end is None:
        return True
    parser.end = end
    return False


# --- requirements in bulk ----------------------------------------------------------------------
# A selector of many requirements ("k0=v,k1=v,...", 20k of them in 200 KiB) read token by token
# and validated one by one cost ~30 µs each. ``requirement`` (``_BulkPatterns``) matches one
# requirement of a simple form and its comma (or the end): ``key``, ``!key``, ``key=value``,
# ``key==value``, ``key!=value`` (value empty or a valid label value), ``key<value``,
# ``key>value`` (the same), ``key in (...)``, ``key notin (...)`` (entries empty or
# identifiers), with Go's whitespace between tokens. Its key is IsQualifiedName's: a name of at
# most 63 characters, after an optional DNS-1123 subdomain prefix of at most 253 and "/". So
# only a "<"/">" value (not an int64) or a list can be wrong, and ``_value_set`` checks those as
# the parser does, with its message. Every selector it reads, the parser reads the same way;
# anything else (an invalid key or "=" value, a NUL the lexer does not swallow...) is left to
# the parser, which has kube's messages.
_NAME_OR_VALUE = "[A-Za-z0-9][-A-Za-z0-9_.]{0,62}+(?<=[A-Za-z0-9])"  # ~2x the speed of "(...)?"
_DNS_LABEL = "[a-z0-9][-a-z0-9]*+(?<=[a-z0-9])"
_PREFIXED_KEY = f"(?:(?=[-a-z0-9.]{{1,253}}/){_DNS_LABEL}(?:\\.{_DNS_LABEL})*+/)?+{_NAME_OR_VALUE}"
# The lexer (``_lex``) consumes a NUL that directly follows an identifier, a keyword or a
# symbol ("!", "=", "==", "!=", "<", ">", "(", ")", ","), as Go's scanIDOrKeyword and
# scanSpecialSymbol do; one anywhere else is the end of the input, which is the parser's
# business. Hence ``_SWALLOWED`` after exactly those (a list's "(" is followed by one only
# where ``_LISTED`` does not match: the parser reads that list).
_SWALLOWED = "\\0?"


class _BulkPatterns(NamedTuple):
    """The bulk reader's patterns for one key pattern (a selector without "/" needs no
    prefix, and matching the prefix costs a third of the time)."""

    requirement: re.Pattern[str]  # one requirement and its comma or the end; groups: the
    # key after "!", or the key, "=" or another symbol, its value, "in" or "notin", the list
    requirements: re.Pattern[str]  # as many as follow
    equalities: re.Pattern[str]  # "key=value," as many as follow, no whitespace...
    last_equality: re.Pattern[str]  # ... and "key=value" at the end


def _bulk_patterns(key: str) -> _BulkPatterns:
    # Two key groups, not a conditional on "!": a group keeps its capture from an earlier
    # repetition of ``requirements``, so a conditional would stop the run after each "!key".
    requirement = (
        f"{_WS}(?:!{_SWALLOWED}{_WS}({key}){_SWALLOWED}"
        f"|({key}){_SWALLOWED}"
        f"(?:{_WS}(==|!=|=|<|>){_SWALLOWED}{_WS}(?:({_NAME_OR_VALUE}){_SWALLOWED})?+"
        f"|[ \t\r\n]++(in|notin){_SWALLOWED}{_WS}\\(({_LISTED})\\){_SWALLOWED})?)"
        f"{_WS}(?:,{_SWALLOWED}|\\Z)")
    equality = f"{key}=(?:{_NAME_OR_VALUE})?+"
    return _BulkPatterns(re.compile(requirement), re.compile(f"(?:{requirement})*+"),
                         re.compile(f"(?:{equality},)*+"), re.compile(f"{equality}\\Z"))


_PREFIXED, _UNPREFIXED = _bulk_patterns(_PREFIXED_KEY), _bulk_patterns(_NAME_OR_VALUE)
# (after "!", operator, set operator) -> the Operator
_FORMS = {(True, "", ""): Operator.DOES_NOT_EXIST, (False, "", ""): Operator.EXISTS,
          **{(False, symbol, ""): _OPERATOR_TOKENS[symbol]
             for symbol in ("=", "==", "!=", "<", ">")},
          **{(False, "", word): _OPERATOR_TOKENS[word] for word in ("in", "notin")}}
_NO_VALUES: frozenset[str] = frozenset()
_SHORT_LIST = 1024
_VALID_VALUES = re.compile(  # each entry empty or a valid label value
    f"{_WS}(?:{_NAME_OR_VALUE}{_WS})?+(?:,{_WS}(?:{_NAME_OR_VALUE}{_WS})?+)*+")


def _bulk_requirements(text: str, pos: int, out: list[Requirement],
                       patterns: _BulkPatterns) -> int | None:
    """Read the requirements ``patterns`` match from ``pos`` (the start, or after a comma)
    into ``out``; None when they run to the end of the text, else where the first one they do
    not match starts (``pos`` if none). A few scans of the text in C, whatever the number of
    requirements, and no per-requirement validation. Raises SelectorError, as the parser
    would, for a "<"/">" value or list value it rejects: the first error, as the requirements
    before it are valid."""
    end = patterns.equalities.match(text, pos).end()  # type: ignore[union-attr]  # "*"
    if patterns.last_equality.match(text, end):  # "k0=v0,k1=v1,...": str.split, no regex groups
        equalities, end = text[pos:], len(text)
    else:
        equalities = text[pos:end - 1]  # without the comma after the last
    if end > pos:
        end += text.startswith("\0", end)  # swallowed by the comma before it
        keys_and_values = equalities.replace(",", "=").split("=")
        out.extend(_requirements(keys_and_values[0::2], repeat(Operator.EQUALS),
                                 _one_value_sets(keys_and_values[1::2])))
        if _ran_to_end(text, end):
            return None
    return _bulk_general(text, end, out, patterns)


def _ran_to_end(text: str, end: int) -> bool:
    """Whether requirements read up to ``end`` are the whole selector: its end, and not after
    a comma (the parser says what a trailing one is)."""
    return end == len(text) and not text.endswith((",", ",\0"))


def _bulk_general(text: str, pos: int, out: list[Requirement], patterns: _BulkPatterns
                  ) -> int | None:
    """``_bulk_requirements`` for every form: ``requirement``'s groups by ``findall``."""
    first = patterns.requirement.match(text, pos)
    if first is None:
        return pos
    end = first.end()
    if end == len(text):  # one requirement (a 20k-value list, say): no second scan
        found = [first.groups("")]
    else:
        end = patterns.requirements.match(text, end).end()  # type: ignore[union-attr]  # "*"
        found = patterns.requirement.findall(text, pos, end)  # the same, one after another
    negated, others, symbols, values, words, lists = zip(*found, strict=True)
    keys = list(map(str.__add__, negated, others))  # one of the two is empty
    operators = map(_FORMS.__getitem__, zip(map(bool, negated), symbols, words, strict=True))
    if all(symbols) and "<" not in symbols and ">" not in symbols:  # valid single values
        value_sets = _one_value_sets(values)
    else:
        value_sets = list(map(_value_set, keys, symbols, values, words, lists))
    out.extend(_requirements(keys, operators, value_sets))
    return None if _ran_to_end(text, end) else end


def _one_value_sets(values: Sequence[str]) -> Iterable[frozenset[str]]:
    """``frozenset((value,))`` for each, one per distinct value when values repeat (a set is
    immutable, so requirements may share it)."""
    distinct = set(values)
    if len(distinct) * 2 > len(values):
        return map(frozenset, zip(values))
    sets = {value: frozenset((value,)) for value in distinct}
    return map(sets.__getitem__, values)


def _value_set(key: str, symbol: str, value: str, word: str, listed: str) -> frozenset[str]:
    """The values of a requirement ``_BulkPatterns.requirement`` matched (its groups); raises
    SelectorError with the parser's message where the parser would: a list entry that is not a
    valid label value, Go's even run of commas before ")", a "<"/">" value not an int64."""
    if word:
        # A short list is checked by one regex call: the search for bad entries costs more.
        check = len(listed) > _SHORT_LIST or not _VALID_VALUES.fullmatch(listed)
        try:
            entries, suspects = _list_entries(listed, check=check)
        except SelectorError as exc:  # Go's even run of commas
            raise SelectorError(f"unable to parse requirement: {exc.message}") from None
        return _checked(key, _OPERATOR_TOKENS[word], frozenset(entries), suspects)
    if not symbol:
        return _NO_VALUES
    values = frozenset((value,))
    if symbol in "<>" and int64_or_none(value) is None:  # NewRequirement's int64 check
        return _checked(key, _OPERATOR_TOKENS[symbol], values, None)  # raises its message
    return values


def _checked(key: str, op: Operator, value_set: frozenset[str], suspects: list[str] | None
             ) -> frozenset[str]:
    """``value_set`` once ``_new_requirement`` has found nothing wrong (when anything can be):
    the parser's message if it does."""
    if suspects == [] and op in (Operator.IN, Operator.NOT_IN):
        return value_set  # a valid key, a non-empty set of valid values
    try:
        _new_requirement(key, op, value_set, suspects, None)
    except SelectorError as exc:
        raise SelectorError(f"unable to parse requirement: {exc.message}") from None
    return value_set


_NEW = object.__new__
_SLOT_SETTERS = tuple(getattr(Requirement, name).__set__
                      for name in ("key", "operator", "value_set", "_sorted"))
if tuple(f.name for f in fields(Requirement)) != ("key", "operator", "value_set", "_sorted"):
    raise AssertionError("_requirements sets Requirement's fields by name: update it")


def _requirements(keys: Sequence[str], operators: Iterable[Operator],
                  value_sets: Iterable[frozenset[str]]) -> list[Requirement]:
    """``Requirement(key, operator, value_set)`` for each, built in C-level loops: the frozen
    dataclass's ``__init__`` (an ``object.__setattr__`` call per field) costs more than
    everything else a bulk-read requirement needs. Equal, hashed and printed the same."""
    made = list(map(_NEW, repeat(Requirement, len(keys))))
    set_key, set_operator, set_values, set_sorted = _SLOT_SETTERS
    deque(map(set_key, made, keys), 0)
    deque(map(set_operator, made, operators), 0)
    deque(map(set_values, made, value_sets), 0)
    deque(map(set_sorted, made, repeat(None)), 0)
    return made
_MATCH_OPERATORS = {"In": Operator.IN, "NotIn": Operator.NOT_IN, "Exists": Operator.EXISTS,
                    "DoesNotExist": Operator.DOES_NOT_EXIST}


def label_selector_from_match(sel: Mapping[str, JSON]) -> LabelSelector:
    """A ``metav1.LabelSelector`` dict as a selector (``metav1.LabelSelectorAsSelector``).

    ``{}`` selects everything. Raises SelectorError with kube's text for invalid keys, values or
    operators, and for fields of the wrong JSON type.
    """
    labels = sel.get("matchLabels") or {}
    expressions = sel.get("matchExpressions") or []
    if not isinstance(labels, Mapping) or not isinstance(expressions, list):
        raise SelectorError("matchLabels must be an object and matchExpressions a list")
    requirements = []
    for key, value in sorted(labels.items()):
        if not isinstance(value, str):
            raise SelectorError(f"matchLabels[{key}] must be a string")
        requirements.append(new_requirement(key, Operator.EQUALS, (value,)))
    for expr in expressions:
        expr = expr if isinstance(expr, Mapping) else {}
        key, name, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
        op = _MATCH_OPERATORS.get(name) if isinstance(name, str) else None
        if op is None:
            raise SelectorError(f"{go_quote(str(name))} is not a valid label selector operator")
        if not isinstance(key, str) or not isinstance(values, list) \
                or not all(isinstance(v, str) for v in values):
            raise SelectorError("matchExpressions entries need a string key and string values")
        requirements.append(new_requirement(key, op, values))
    requirements.sort(key=lambda req: req.key)
    return LabelSelector(tuple(requirements))


def format_label_selector(sel: Mapping[str, JSON]) -> str:
    """The query-string form of a ``metav1.LabelSelector`` dict, e.g. ``app=web``.

    Unlike ``metav1.FormatLabelSelector`` an empty selector gives ``""`` (not ``<none>``) and an
    invalid one raises SelectorError (not ``<error>``): this feeds ``labelSelector=`` and
    Scale ``status.selector``, which kube fills from ``selector.String()``.
    """
    return str(label_selector_from_match(sel))
