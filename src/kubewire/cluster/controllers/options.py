"""Reading a component's settings from the options its factory gets.

A factory is called as ``factory(ctx, options)``; the options carry per-component settings in
an ``extra`` mapping (or are that mapping themselves, or None in tests). ``setting`` reads one
number with a default, refusing what is not a positive number.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def settings_of(options: object) -> Mapping[str, Any]:
    """The settings mapping inside ``options`` (``options.extra``, or ``options`` itself)."""
    if options is None:
        return {}
    if isinstance(options, Mapping):
        return options
    extra = getattr(options, "extra", None)
    return extra if isinstance(extra, Mapping) else {}


def seconds(options: object, name: str, default: float) -> float:
    """A positive number of seconds named ``name`` in ``options``, else ``default``."""
    value = settings_of(options).get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")
    return float(value)
