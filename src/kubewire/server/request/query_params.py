"""Typed readers of request query parameters, decoded as kube's ``url.Values`` conversions do.

A query is ``{name: [values...]}`` with blank values kept. As in kube, a repeated parameter counts
by its first value and unknown parameters are ignored: the generated
``autoConvert_url_Values_To_v1_ListOptions`` (apimachinery pkg/apis/meta/v1) reads named keys only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kubewire.go_text import parse_int64
from kubewire.status import BadRequest

Query = Mapping[str, Sequence[str]]


def parse_bool(value: str) -> bool:
    """Go ``Convert_Slice_string_To_bool``: ``0`` or any-case ``false`` is False, all else True,
    the empty value included (``watch=``, ``watch=yes``).

    The one reading of a boolean parameter: list and watch options, write, delete and get
    options, and the request's verb (requestinfo.go reads ``watch`` the same way), so the watch
    limit counts exactly the requests that are served as watches. (``casefold`` matches Go's
    ``strings.EqualFold`` for these words, the long s (U+017F) folding to s in both.)
    """
    return not (value == "0" or value.casefold() == "false")


def first_value(query: Query, name: str) -> str | None:
    """The first value of parameter ``name``, or None when it is absent."""
    values = query.get(name)
    return values[0] if values else None


def optional_bool(query: Query, name: str) -> bool | None:
    """Parameter ``name`` read by ``parse_bool``, or None when it is absent."""
    value = first_value(query, name)
    return None if value is None else parse_bool(value)


def int64_param(text: str) -> int:
    """Go ``strconv.ParseInt(text, 10, 64)``; raises BadRequest with Go's error text, as
    ``ListResource`` answers a bad integer parameter."""
    try:
        return parse_int64(text)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
