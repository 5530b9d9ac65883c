"""server/allocation/ranges.py: kube's RangeAllocation bitmaps and the repair's decisions."""

from __future__ import annotations

import base64

import pytest

from kubewire.server.allocation.ranges import (
    REPAIRS_BEFORE_LEAK_CLEANUP,
    decode_bitmap,
    encode_bitmap,
    range_object,
    read_range,
    repair,
)


@pytest.mark.parametrize(("offsets", "data"), [
    (set(), b""),  # big.Int zero: Bytes() is empty
    ({0}, b"\x01"),
    ({7}, b"\x80"),
    ({8}, b"\x01\x00"),  # big-endian, no leading zero byte
    ({0, 9}, b"\x02\x01"),
    ({1, 17}, b"\x02\x00\x02"),
])
def test_bitmaps_are_go_big_int_bytes(offsets: set[int], data: bytes) -> None:
    assert encode_bitmap(offsets) == data
    assert decode_bitmap(data) == offsets


def test_decoding_tolerates_leading_zero_bytes_and_round_trips_a_large_range() -> None:
    assert decode_bitmap(b"\x00\x00\x02\x01") == {0, 9}
    offsets = {0, 5, 4095, 65535, 1048573}
    assert decode_bitmap(encode_bitmap(offsets)) == offsets
    assert len(encode_bitmap({1048573})) == 1048573 // 8 + 1


def test_range_objects_are_kubes_v1_range_allocation() -> None:
    obj = range_object("10.96.0.0/12", [0, 9])
    assert obj == {"kind": "RangeAllocation", "apiVersion": "v1",
                   "metadata": {"creationTimestamp": None}, "range": "10.96.0.0/12",
                   "data": base64.b64encode(b"\x02\x01").decode()}
    kept = range_object("30000-32767", [], {"creationTimestamp": None, "resourceVersion": "9"})
    assert kept["metadata"] == {"creationTimestamp": None} and kept["data"] == ""
    assert read_range(obj) == ("10.96.0.0/12", {0, 9})
    assert read_range({"range": "30000-32767", "data": None}) == ("30000-32767", set())
    assert read_range({"range": "10.96.0.0/12", "data": "not base64!"}) is None
    assert read_range({"data": ""}) is None


def in_range(value: int) -> bool:
    return 0 <= value < 100


def test_repair_adds_back_what_services_hold_and_reports_duplicates() -> None:
    leaks: dict[int, int] = {}
    outcome = repair({0, 5}, [{5}, {7}, {7}, {200}], in_range, leaks, reserved=(0,))
    assert outcome.rebuilt == {0, 5, 7}
    assert outcome.not_allocated == [7]
    assert outcome.duplicates == [7]
    assert outcome.out_of_range == [200]
    assert not outcome.suspected and not outcome.freed and not leaks


def test_a_leak_is_freed_on_the_third_run_and_forgotten_when_used_again() -> None:
    leaks: dict[int, int] = {}
    for _ in range(REPAIRS_BEFORE_LEAK_CLEANUP - 1):
        outcome = repair({3, 4}, [{4}], in_range, leaks)
        assert outcome.rebuilt == {3, 4} and outcome.suspected == [3]
    outcome = repair({3, 4}, [{4}], in_range, leaks)
    assert outcome.rebuilt == {4} and outcome.freed == [3] and not leaks
    repair({3, 4}, [{4}], in_range, leaks)
    assert leaks == {3: 1}
    repair({3, 4}, [{3}, {4}], in_range, leaks)  # a Service holds it now: no longer a leak
    assert not leaks
