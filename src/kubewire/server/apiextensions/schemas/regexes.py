"""Schema ``pattern``s compiled as Go's ``regexp`` compiles them, with Go's error texts.

kube checks a pattern at CRD time with ``regexp.Compile`` (``AE:pkg/apiserver/schema/
validation.go`` ``validateValueValidation``: ``must be a valid regular expression, but isn't:
<err>``) and matches values with it at request time (``KO:pkg/validation/validate/values.go``
``Pattern``). Go's ``regexp`` is RE2: the patterns are compiled with google-re2 (the same
syntax and linear-time matching), and RE2's error texts are mapped to Go's ``regexp/syntax``
ones (``error parsing regexp: missing closing ): `(abc```). Without google-re2 installed,
Python's ``re`` stands in (some syntax differs, and its error texts are its own).

Compiled patterns are cached by text, so every node sharing a pattern shares one object.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

try:
    import re2 as _re2  # type: ignore[import-untyped]
except ImportError:  # pragma: no cover - google-re2 is in the server's dependencies
    _re2 = None

Matcher = Callable[[str], Any]

# RE2 (C++) error text -> Go regexp/syntax ErrorCode text.
_GO_CODES = {
    "missing )": "missing closing )",
    "missing ]": "missing closing ]",
    "unexpected )": "unexpected )",
    "bad repetition operator": "invalid nested repetition operator",
    "invalid repetition size": "invalid repeat count",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "no argument for repetition operator": "missing argument to repetition operator",
    "missing argument to repetition operator": "missing argument to repetition operator",
    "invalid named capture group": "invalid named capture",
    "invalid escape sequence": "invalid escape sequence",
    "invalid character class": "invalid character class",
    "invalid character class range": "invalid character class range",
    "invalid UTF-8": "invalid UTF-8",
}


def _options() -> Any:
    options = _re2.Options()
    options.log_errors = False
    return options


def _go_error(text: str) -> str:
    """``error parsing regexp: <code>: `<expr>``` from RE2's ``<text>: <expr>``."""
    if text.startswith("trailing \\"):
        return "error parsing regexp: trailing backslash at end of expression: ``"
    code, _, expr = text.partition(": ")
    return f"error parsing regexp: {_GO_CODES.get(code, code)}: `{expr}`"


@lru_cache(maxsize=4096)
def compile_pattern(pattern: str) -> tuple[Matcher | None, str]:
    """(a search function, "") for a pattern Go compiles, else (None, Go's error text)."""
    if _re2 is not None:
        try:
            return _re2.compile(pattern, _OPTIONS).search, ""
        except _re2.error as exc:
            message = exc.args[0] if exc.args else str(exc)
            if isinstance(message, bytes):
                message = message.decode("utf-8", "replace")
            return None, _go_error(str(message))
    try:
        return re.compile(pattern).search, ""
    except re.error as exc:
        return None, f"error parsing regexp: {exc}"


_OPTIONS = _options() if _re2 is not None else None


def pattern_error(pattern: str) -> str:
    """Go's compile error for ``pattern``, or "" when it compiles."""
    return compile_pattern(pattern)[1]


__all__ = ["Matcher", "compile_pattern", "pattern_error"]
