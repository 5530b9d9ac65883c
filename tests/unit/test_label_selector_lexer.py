"""The label selector lexer's two paths agree: ``_PLAIN``'s findall (no symbol needing Go's
scanning rules) and the token-at-a-time scan (forced here by a trailing NUL, which Go reads as
the end of input), and a selector of tens of thousands of values parses as a short one does."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubewire.selectors.errors import SelectorError
from kubewire.selectors.labels import _LabelParser, _lex, parse_label_selector

PIECES = st.sampled_from(["a", "b", "in", "notin", "(", ")", ",", " ", "\t", "\n", "x-_.1", ""])


@given(st.lists(PIECES, max_size=30).map("".join))
def test_findall_and_scan_give_the_same_tokens(text: str) -> None:
    assert _lex(text) == _lex(text + "\0")


def test_a_long_value_set_parses_whole_and_checks_each_value() -> None:
    values = [f"v{i}" for i in range(20_000)]
    selector = parse_label_selector(f"app in ({','.join(values)})")
    assert selector.requirements[0].values == tuple(sorted(values))
    with pytest.raises(SelectorError, match='Invalid value: "-bad"'):
        parse_label_selector(f"app in ({','.join([*values, '-bad'])})")


VALUE_PIECES = st.sampled_from(["a", "b", "in", "notin", ",", " ", "(", ")", "-x", "", "c1"])


@given(st.lists(VALUE_PIECES, max_size=20).map("".join))
def test_plain_value_sets_parse_as_the_general_loop_does(values: str) -> None:
    """``plain_values`` (list operations) and ``identifiers`` (Go's loop) agree on every set."""
    text = f"k in ({values}),z"

    def outcome(parse: Callable[[str], object]) -> str:
        try:
            return f"ok {parse(text)}"
        except SelectorError as exc:
            return f"error {exc}"

    fast = outcome(parse_label_selector)
    original = _LabelParser.plain_values
    try:
        _LabelParser.plain_values = lambda self: None  # type: ignore[method-assign]
        slow = outcome(parse_label_selector)
    finally:
        _LabelParser.plain_values = original  # type: ignore[method-assign]
    assert fast == slow
