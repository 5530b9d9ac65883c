"""A deep copy for decoded JSON (dicts, lists, scalars), several times cheaper than
``copy.deepcopy``: no memo, no per-type dispatch. Anything that is not plain JSON (a YAML body
may carry dates, sets, subclasses) falls back to ``copy.deepcopy``, so the result is always an
independent copy. Unlike ``copy.deepcopy``, a subtree reachable twice (a YAML alias) is copied
twice: no two places of the result share a container.
"""

from __future__ import annotations

import copy
from typing import Any, TypeVar

_IMMUTABLE = (str, int, float, bool, type(None))
T = TypeVar("T")


def copy_json(value: T) -> T:
    """An independent deep copy of ``value``."""
    return _copy(value)  # type: ignore[no-any-return]


def _copy(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return {key: item if type(item) in _IMMUTABLE else _copy(item)
                for key, item in value.items()}
    if kind is list:
        return [item if type(item) in _IMMUTABLE else _copy(item) for item in value]
    if kind in _IMMUTABLE:
        return value
    return copy.deepcopy(value)


__all__ = ["copy_json"]
