"""How deep decoded JSON nests: the one limit every body decoder enforces.

Go's encoding/json allows 10000 levels; kubewire's write path recurses per level, so the
decoders (create/update bodies, patches, apply, delete options) refuse deeper bodies with Go's
text. Pure: imported by the pure request modules and by the I/O layer alike.
"""

from __future__ import annotations

from typing import Any

# Go's encoding/json allows 10000 levels; the write path here recurses per level (patches,
# validation, managedFields), so a body deeper than this is refused at decode time with Go's
# text instead of exhausting Python's recursion limit (a 500) several layers later.
MAX_NESTING_DEPTH = 200
EXCEEDED_MAX_DEPTH = "exceeded max depth"


def too_deep(value: Any, limit: int = MAX_NESTING_DEPTH) -> bool:
    """Whether objects and arrays in ``value`` nest more than ``limit`` levels (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, dict | list):
            continue
        children = item.values() if isinstance(item, dict) else item
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children
                     if isinstance(child, dict | list))
    return False
