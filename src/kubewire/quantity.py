"""``resource.Quantity``: Go's parse errors and the exact value, in one place.

- ``quantity_error``: ``resource.ParseQuantity``'s error text (apimachinery
  ``pkg/api/resource/quantity.go``), run by ``Quantity.UnmarshalJSON`` on the JSON text with its
  quotes stripped; the decoder calls it on every quantity a client sends.
- ``parse_quantity``: a quantity's value as an exact ``Fraction`` (``100m``, ``1Gi``, ``1e3``,
  ``0.5``), for the rules that compare amounts (requests within limits, the pod's QoS class).

Core module: pure functions of their input, none raises; imports nothing of kubewire.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

QUANTITY_FORMAT_WRONG = ("quantities must match the regular expression "
                         "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
QUANTITY_SUFFIX_WRONG = "unable to parse quantity's suffix"
_QUANTITY_SUFFIXES = frozenset({"", "n", "u", "m", "k", "M", "G", "T", "P", "E",
                                "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"})
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DIGIT_RUN = re.compile("[0-9]*")
_GO_SPACE = " \t\n\r\v\f"  # strings.TrimSpace's ASCII set, as the decoder meets it


def _skip_digits(text: str, pos: int) -> int:
    match = _DIGIT_RUN.match(text, pos)
    return match.end() if match is not None else pos


def _suffix_is_known(suffix: str) -> bool:
    """``quantitySuffixer.interpret``: a named suffix or ``e``/``E`` and an int64 exponent."""
    if suffix in _QUANTITY_SUFFIXES:
        return True
    if len(suffix) > 1 and suffix[0] in "eE":
        exponent = suffix[1:].removeprefix("+").removeprefix("-")
        return bool(exponent) and _DIGIT_RUN.fullmatch(exponent) is not None \
            and int(exponent) < 2**63
    return False


def quantity_error(text: str) -> str | None:
    """``ParseQuantity(strings.TrimSpace(text))``'s error text, or None when it parses."""
    text = text.strip(_GO_SPACE)
    if not text:
        return QUANTITY_FORMAT_WRONG
    pos = 1 if text[0] in "+-" else 0
    pos = _skip_digits(text, pos)  # parseQuantityString: zeros and numerator
    if pos == len(text):
        return None
    if text[pos] == ".":
        pos = _skip_digits(text, pos + 1)
        if pos == len(text):
            return None
    suffix_start = pos
    while pos < len(text) and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < len(text) and text[pos] in "+-":
        pos += 1
    pos = _skip_digits(text, pos)
    if pos < len(text):
        return QUANTITY_FORMAT_WRONG
    return None if _suffix_is_known(text[suffix_start:]) else QUANTITY_SUFFIX_WRONG


_QUANTITY = re.compile(
    r"([+-]?(?:\d+\.?\d*|\.\d+))(?:[eE]([+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?")
_SUFFIX_SCALE = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000),
                 "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9),
                 "T": Fraction(10**12), "P": Fraction(10**15), "E": Fraction(10**18),
                 "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30),
                 "Ti": Fraction(2**40), "Pi": Fraction(2**50), "Ei": Fraction(2**60)}


def parse_quantity(value: Any) -> Fraction | None:
    """A quantity (text, or a JSON number as users write one) as an exact number, or None.

    Surrounding spaces are trimmed as ``UnmarshalJSON`` trims them; a value that is not a
    quantity (a boolean, ``abc``, ``1Qi``) is None rather than an error: decoding has already
    answered the client with ``quantity_error``'s text.
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        return Fraction(value)
    match = _QUANTITY.fullmatch(value.strip(_GO_SPACE)) if isinstance(value, str) else None
    if match is None:
        return None
    number, exponent, suffix = match.groups()
    scale = Fraction(10) ** int(exponent) if exponent else _SUFFIX_SCALE.get(suffix, Fraction(1))
    return Fraction(number) * scale


__all__ = ["QUANTITY_FORMAT_WRONG", "QUANTITY_SUFFIX_WRONG", "parse_quantity", "quantity_error"]
