"""Types made at run time for msgspec, made ready before they are shared between threads.

msgspec keeps a Struct type's decoding information on the class and builds it on first use.
When that first use is ``msgspec.convert`` in two threads at once, the process can crash
(msgspec 0.22: a segmentation fault; two in-process servers validating their first objects at
the same moment did it, and four threads converting into a fresh Pod type reproduce it).
Constructing a ``Decoder`` builds the information for the whole type eagerly, so the typed forms
that ``validate_typed`` and ``go_decode_typed`` make pass through ``ready`` before they are
returned (and cached): each builder call makes types of its own, which no other thread sees
until they are ready, so no lock is needed (two threads building at once each build and
prepare their own; the cache keeps one).
"""

from __future__ import annotations

from typing import TypeVar

import msgspec

T = TypeVar("T")


def ready(made: T) -> T:
    """``made`` (a type for ``msgspec.convert``, not yet shared), with msgspec's information
    about it built."""
    msgspec.json.Decoder(made)
    return made


__all__ = ["ready"]
