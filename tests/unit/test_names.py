"""kubewire.names: name, key and label-value rules with kube's exact messages."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubewire.names import (
    dns1123_label_ok,
    dns1123_subdomain_ok,
    is_dns1035_label,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_path_segment_name,
    is_qualified_name,
    is_valid_label_value,
    max_len_error,
    regex_error,
)

QNAME_REGEX = ("(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
               "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
NAME_PART = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
             "and end with an alphanumeric character " + QNAME_REGEX)
SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
             "'-' or '.', and must start and end with an alphanumeric character (e.g. "
             "'example.com', regex used for validation is "
             "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


def test_regex_error_spacing() -> None:
    assert regex_error("m", "f") == "m (regex used for validation is 'f')"
    assert regex_error("m", "f", "a") == "m (e.g. 'a', regex used for validation is 'f')"
    assert regex_error("m", "f", "a", "b") == (
        "m (e.g. 'a',  or 'b', regex used for validation is 'f')")
    assert max_len_error(63) == "must be no more than 63 characters"


@pytest.mark.parametrize(("key", "errors"), [
    ("app", []),
    ("example.com/App_1.x", []),
    ("/a", ["prefix part must be non-empty"]),
    ("a/", ["name part must be non-empty", NAME_PART]),
    ("Ex.com/a", ["prefix part " + SUBDOMAIN]),
    ("a" * 64, ["name part must be no more than 63 characters"]),
    ("é" * 32, ["name part must be no more than 63 characters", NAME_PART]),  # Go counts bytes
    ("x" * 254 + "/a", ["prefix part must be no more than 253 characters"]),
])
def test_qualified_name(key: str, errors: list[str]) -> None:
    assert is_qualified_name(key) == errors


def test_label_value() -> None:
    assert is_valid_label_value("") == []
    assert is_valid_label_value("my_value.1") == []
    assert is_valid_label_value("v" * 64) == ["must be no more than 63 characters"]
    assert is_valid_label_value("-v")[0].startswith("a valid label must be an empty string")


def test_dns_names() -> None:
    assert is_dns1123_label("a-1") == is_dns1123_subdomain("a.b") == is_dns1035_label("a-1") == []
    assert is_dns1123_label("a.b") == ["must not contain dots"]
    assert is_dns1123_subdomain("A") == [SUBDOMAIN]
    assert is_dns1035_label("1a")[0].startswith("a DNS-1035 label must")
    assert is_dns1123_label("a" * 64) == ["must be no more than 63 characters"]


def test_path_segment_name() -> None:
    assert is_path_segment_name("..") == ["may not be '..'"]
    assert is_path_segment_name("..", prefix=True) == []
    assert is_path_segment_name("a/b%") == ["may not contain '/'", "may not contain '%'"]


@given(st.text(max_size=80))
def test_checks_never_raise(value: str) -> None:
    for check in (is_qualified_name, is_valid_label_value, is_dns1123_label,
                  is_dns1123_subdomain, is_dns1035_label, is_path_segment_name):
        assert all(isinstance(m, str) for m in check(value))


_DNS_EDGES = ["", "a", "a-", "-a", "a.b", "A", "é", "a\u00e9", "a" * 63, "a" * 64, "a" * 253,
              ".".join(["a" * 63] * 4), "a" * 254, "1", "a_b", "a..b", "a\n"]


@pytest.mark.parametrize("value", _DNS_EDGES)
def test_dns_ok_predicates_agree_with_the_checks_on_edges(value: str) -> None:
    """The predicates every write's names take stand for "the check finds no problem"."""
    assert dns1123_label_ok(value) == (is_dns1123_label(value) == [])
    assert dns1123_subdomain_ok(value) == (is_dns1123_subdomain(value) == [])


@given(st.text(alphabet="ab9-.Aé_", max_size=300))
def test_dns_ok_predicates_agree_with_the_checks(value: str) -> None:
    assert dns1123_label_ok(value) == (is_dns1123_label(value) == [])
    assert dns1123_subdomain_ok(value) == (is_dns1123_subdomain(value) == [])
