"""``resource.Quantity`` amounts with their format, and Go's ``Quantity.String()`` of them.

Quota and LimitRange messages print sums and differences of quantities the way kube does:
``requested: limits.cpu=1500m``, ``used: memory=1536Mi``. A ``Amount`` is an exact value and
the format it came with (``DecimalSI``, ``BinarySI``, ``DecimalExponent``, as
``ParseQuantity`` picks from the suffix); ``add``/``subtract`` keep the format of the left
operand unless it is zero (apimachinery ``Quantity.Add``: a zero receiver takes the other's
format); ``canonical`` is ``CanonicalizeBytes`` (apimachinery ``pkg/api/resource/quantity.go``,
``amount.go`` ``AsCanonicalBytes``/``AsCanonicalBase1024Bytes``), written by hand because no
Python library renders Go's canonical quantity text.

Core module: pure functions; imports only ``kubewire.quantity``.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

from kubewire.quantity import parse_quantity

Format = Literal["DecimalSI", "BinarySI", "DecimalExponent"]
_BINARY_SUFFIXES = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL_SUFFIXES = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T",
                     15: "P", 18: "E"}
_BINARY_BY_EXPONENT = {0: "", 1: "Ki", 2: "Mi", 3: "Gi", 4: "Ti", 5: "Pi", 6: "Ei"}
_NANO = Fraction(1, 10**9)


@dataclass(frozen=True, slots=True)
class Amount:
    """A quantity's exact value and its format."""

    value: Fraction
    format: Format = "DecimalSI"

    def __str__(self) -> str:
        return canonical(self)


ZERO = Amount(Fraction(0))
ONE = Amount(Fraction(1))


def format_of(text: str) -> Format:
    """The format ``ParseQuantity`` gives ``text``: binary suffixes are BinarySI, an ``e``
    exponent is DecimalExponent, anything else DecimalSI."""
    stripped = text.strip()
    if stripped.endswith(_BINARY_SUFFIXES):
        return "BinarySI"
    body = stripped.lstrip("+-")
    if "e" in body or "E" in body:
        return "DecimalExponent"
    return "DecimalSI"


def amount_of(value: Any) -> Amount | None:
    """A JSON quantity (text, or a number) as an ``Amount``; None when it is not one. Values
    are rounded up to nano units as ``ParseQuantity`` rounds them."""
    parsed = parse_quantity(value)
    if parsed is None:
        return None
    if parsed.denominator > 10**9 and (parsed / _NANO).denominator != 1:
        steps = -((-parsed) // _NANO)  # ceiling, as Quantity rounds up
        parsed = steps * _NANO
    fmt: Format = format_of(value) if isinstance(value, str) else "DecimalSI"
    return Amount(parsed, fmt)


def add(left: Amount, right: Amount) -> Amount:
    fmt = right.format if left.value == 0 else left.format
    return Amount(left.value + right.value, fmt)


def subtract(left: Amount, right: Amount) -> Amount:
    fmt = right.format if left.value == 0 else left.format
    return Amount(left.value - right.value, fmt)


def _strip_tens(mantissa: int, exponent: int) -> tuple[int, int]:
    while mantissa and mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    return mantissa, exponent


def canonical(amount: Amount) -> str:
    """Go's ``Quantity.String()``: ``0``; ``1500m``, ``2k``, ``1536Mi``, ``1e3``..."""
    value = amount.value
    if value == 0:
        return "0"
    fmt = amount.format
    if fmt == "BinarySI" and (-1024 < value < 1024 or value.denominator != 1):
        fmt = "DecimalSI"  # CanonicalizeBytes: small or fractional binary amounts
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if fmt == "BinarySI":
        whole, exponent = int(magnitude), 0
        while whole % 1024 == 0 and exponent < 6:
            whole //= 1024
            exponent += 1
        return f"{sign}{whole}{_BINARY_BY_EXPONENT[exponent]}"
    scale = 0
    while magnitude.denominator != 1:  # at most nano: amount_of rounded
        magnitude *= 10
        scale -= 1
    mantissa, exponent = _strip_tens(int(magnitude), scale)
    while exponent % 3:
        mantissa *= 10
        exponent -= 1
    if fmt == "DecimalExponent":
        suffix = "" if exponent == 0 else f"e{exponent}"
    else:
        suffix = _DECIMAL_SUFFIXES.get(exponent, f"e{exponent}")
    return f"{sign}{mantissa}{suffix}"


__all__ = ["ONE", "ZERO", "Amount", "Format", "add", "amount_of", "canonical", "format_of",
           "subtract"]
