"""kube's stored allocation ranges: ``v1 RangeAllocation`` bitmaps, and the repair's decisions.

kube-apiserver keeps each Service range in one object (``/registry/ranges/serviceips``,
``/registry/ranges/servicenodeports``; kubewire keys ``core/ranges/...``) that every replica
updates with a compare-and-swap (``pkg/registry/core/service/allocator/storage/storage.go``):

    {"kind":"RangeAllocation","apiVersion":"v1","metadata":{"creationTimestamp":null},
     "range":"10.96.0.0/12","data":"<base64>"}

``data`` is ``allocator.AllocationBitmap.Snapshot``: a Go ``big.Int`` whose bit ``i`` is set
when offset ``i`` is allocated, as ``Int.Bytes()`` gives it (big-endian, no leading zero bytes;
empty when nothing is). The offset of an IP is its distance from the network address + 1
(``ipallocator/bitmap.go``), that of a port its distance from the range's first port
(``portallocator``). ``range`` is the CIDR as Go prints it, or ``<first>-<last>``.

The repair (``ipallocator/controller/repair.go``, ``portallocator/controller/repair.go``
``runOnce``) rebuilds a range from the stored Services: what a Service holds and the bitmap
lacks is added back; what the bitmap holds and no Service does is a possible leak (a write
still in flight may own it), kept for ``REPAIRS_BEFORE_LEAK_CLEANUP`` runs, then freed.
Written by hand: the format is kube's and small.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

IPS_KEY = "core/ranges/serviceips"  # etcd: <prefix>/ranges/serviceips
PORTS_KEY = "core/ranges/servicenodeports"  # etcd: <prefix>/ranges/servicenodeports
REPAIRS_BEFORE_LEAK_CLEANUP = 3  # repair.go numRepairsBeforeLeakCleanup
_NONZERO = bytes([0] + [1] * 255)  # translate table: any set byte becomes 1


def encode_bitmap(offsets: Iterable[int]) -> bytes:
    """``big.Int.Bytes()`` of the bitmap with ``offsets`` set."""
    wanted = [o for o in offsets if o >= 0]
    if not wanted:
        return b""
    length = max(wanted) // 8 + 1
    out = bytearray(length)
    for offset in wanted:
        out[length - 1 - offset // 8] |= 1 << (offset % 8)
    return bytes(out)


def decode_bitmap(data: bytes) -> set[int]:
    """The offsets set in a ``big.Int.Bytes()`` bitmap (leading zero bytes allowed)."""
    length = len(data)
    offsets: set[int] = set()
    marks = data.translate(_NONZERO)  # the set bits are few: find their bytes in C
    index = marks.find(1)
    while index >= 0:
        byte, low = data[index], (length - 1 - index) * 8
        offsets.update(low + bit for bit in range(8) if byte >> bit & 1)
        index = marks.find(1, index + 1)
    return offsets


def range_object(range_spec: str, offsets: Iterable[int],
                 metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``RangeAllocation`` to store (``metadata`` kept from the stored one, if any)."""
    meta = dict(metadata) if metadata else {"creationTimestamp": None}
    meta.pop("resourceVersion", None)
    return {"kind": "RangeAllocation", "apiVersion": "v1", "metadata": meta,
            "range": range_spec,
            "data": base64.b64encode(encode_bitmap(offsets)).decode("ascii")}


def read_range(obj: Mapping[str, Any]) -> tuple[str, set[int]] | None:
    """(range, offsets) of a stored ``RangeAllocation``; None when it is not one."""
    spec, data = obj.get("range"), obj.get("data")
    if not isinstance(spec, str) or not isinstance(data, str | None):
        return None
    try:
        raw = binascii.a2b_base64(data or "", strict_mode=True)
    except (binascii.Error, ValueError):
        return None
    return spec, decode_bitmap(raw)


@dataclass(slots=True)
class Repair:
    """One repair run's outcome for a range (values, not offsets)."""

    rebuilt: set[int]  # what the range should hold now
    not_allocated: list[int] = field(default_factory=list)  # held by a Service, missing
    duplicates: list[int] = field(default_factory=list)  # held by two Services
    out_of_range: list[int] = field(default_factory=list)
    suspected: list[int] = field(default_factory=list)  # possible leaks, kept this time
    freed: list[int] = field(default_factory=list)  # leaks given back


def repair(stored: set[int], held: Iterable[Iterable[int]], contains: Any,
           leaks: dict[int, int], reserved: Iterable[int] = ()) -> Repair:
    """repair.go runOnce for one range: ``held`` lists each Service's values, ``contains`` says
    whether a value is in the range, ``leaks`` (updated in place) counts the runs each possible
    leak has left; ``reserved`` values are never leaks (the first IP)."""
    outcome = Repair(set(reserved))
    left = set(stored) - outcome.rebuilt
    for values in held:
        for value in values:
            if not contains(value):
                outcome.out_of_range.append(value)
            elif value in outcome.rebuilt and value not in reserved:
                outcome.duplicates.append(value)
            else:
                if value not in stored:
                    outcome.not_allocated.append(value)
                outcome.rebuilt.add(value)
                left.discard(value)
    for value in list(leaks):
        if value not in left:
            del leaks[value]  # in use again, or gone
    for value in sorted(left):
        count = leaks.get(value, REPAIRS_BEFORE_LEAK_CLEANUP - 1)
        if count > 0:
            leaks[value] = count - 1
            outcome.rebuilt.add(value)
            outcome.suspected.append(value)
        else:
            leaks.pop(value, None)
            outcome.freed.append(value)
    return outcome


__all__ = ["IPS_KEY", "PORTS_KEY", "REPAIRS_BEFORE_LEAK_CLEANUP", "Repair", "decode_bitmap",
           "encode_bitmap", "range_object", "read_range", "repair"]
