"""The one ``JSON`` alias every module uses for raw wire values.

JSON bodies reach kubewire as msgspec/PyYAML output (dicts, lists, strings, numbers, booleans,
None) and are walked by code that checks shapes as it goes, so the alias is ``Any``: a precise
recursive union would force a cast at every step without catching more mistakes. Declaring it
once keeps the name meaning the same thing everywhere. Core module: imports nothing of kubewire.
"""

from __future__ import annotations

from typing import Any

JSON = Any
"""Raw JSON values (dicts, lists, scalars) as decoded from the wire."""

__all__ = ["JSON"]
