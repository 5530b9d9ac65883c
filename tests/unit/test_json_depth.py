"""The nesting-depth check every body decoder applies (server/wire/json_depth.py): the
recursive walk answers as the explicit-stack walk does, at the limit's edges and where the
caller's stack leaves no room for it."""

from __future__ import annotations

import random
import sys
from typing import Any
from unittest import mock

import pytest

from kubewire.server.wire import json_depth
from kubewire.server.wire.json_depth import MAX_NESTING_DEPTH, too_deep


def nested(levels: int, empty_leaf: bool = False) -> Any:
    """``levels`` alternating objects and arrays around a scalar (or an empty object)."""
    value: Any = {} if empty_leaf else 1
    for i in range(levels - (1 if empty_leaf else 0)):
        value = [value] if i % 2 else {"a": value}
    return value


@pytest.mark.parametrize("levels", [0, 1, 2, MAX_NESTING_DEPTH - 1, MAX_NESTING_DEPTH,
                                    MAX_NESTING_DEPTH + 1, 20_000])
@pytest.mark.parametrize("empty_leaf", [False, True])
def test_the_limit_counts_every_object_and_array(levels: int, empty_leaf: bool) -> None:
    value = nested(levels, empty_leaf)
    assert too_deep(value) is (levels > MAX_NESTING_DEPTH)
    assert too_deep(value) is json_depth._too_deep_iteratively(value, MAX_NESTING_DEPTH)


def random_json(rng: random.Random, depth: int) -> Any:
    if depth == 0 or rng.random() < 0.2:
        return rng.choice([1, 1.5, "x", None, True, {}, []])
    if rng.random() < 0.5:
        return {str(i): random_json(rng, depth - 1) for i in range(rng.randint(0, 3))}
    return [random_json(rng, depth - 1) for _ in range(rng.randint(0, 3))]


def test_the_walks_agree_on_random_documents() -> None:
    rng = random.Random(15)
    for _ in range(2_000):
        value = random_json(rng, 9)
        for limit in range(11):
            assert too_deep(value, limit) is json_depth._too_deep_iteratively(value, limit)


def test_a_caller_deep_in_its_own_stack_gets_the_same_answer() -> None:
    # Called with fewer free frames than the limit, the recursive walk runs out of stack and
    # the explicit-stack walk answers (a spy on it: the real walk runs).
    deep, shallow = nested(MAX_NESTING_DEPTH + 1), nested(MAX_NESTING_DEPTH)
    answers: list[bool] = []

    def at_depth(frames_left: int) -> None:
        if frames_left > 0:
            at_depth(frames_left - 1)
            return
        answers.extend([too_deep(deep), too_deep(shallow)])

    with mock.patch.object(json_depth, "_too_deep_iteratively",
                           wraps=json_depth._too_deep_iteratively) as fallback:
        at_depth(sys.getrecursionlimit() - len_stack() - MAX_NESTING_DEPTH // 2)
    assert answers == [True, False]
    assert fallback.call_count == 2


def len_stack() -> int:
    frame, n = sys._getframe(), 0
    while frame is not None:
        frame, n = frame.f_back, n + 1  # type: ignore[assignment]
    return n
