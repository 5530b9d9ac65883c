"""The label selector lexer's two paths agree: ``_PLAIN``'s findall (no symbol needing Go's
scanning rules) and the token-at-a-time scan (forced here by a trailing NUL, which Go reads as
the end of input), and a selector of tens of thousands of values parses as a short one does."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubewire.label_selectors import _lex, parse_label_selector
from kubewire.selector_error import SelectorError

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
