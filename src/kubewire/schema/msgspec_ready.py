"""Types made at run time for msgspec, made ready before they are shared between threads.

msgspec keeps a Struct type's decoding information on the class and builds it on first use.
When that first use is ``msgspec.convert`` in two threads at once, the process can crash
(msgspec 0.22: a segmentation fault; two in-process servers validating their first objects at
the same moment did it, and four threads converting into a fresh Pod type reproduce it).
Constructing a ``Decoder`` builds the information for the whole type eagerly, and one lock
makes it a single thread's work, so the typed forms that ``validate_typed`` and
``go_decode_typed`` make pass through ``ready`` before any caller sees them.
"""

from __future__ import annotations

import threading
from typing import TypeVar

import msgspec

T = TypeVar("T")
_BUILDING = threading.Lock()


def ready(made: T) -> T:
    """``made`` (a type for ``msgspec.convert``), with msgspec's information about it built."""
    with _BUILDING:
        msgspec.json.Decoder(made)
    return made


__all__ = ["ready"]
