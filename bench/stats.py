"""Summaries of repeated measurements: medians, paired ratios, percentiles."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def summary(values: Sequence[float]) -> dict[str, float]:
    """Median with min and max: the shape every reported number takes."""
    if not values:
        return {"median": float("nan"), "min": float("nan"), "max": float("nan"), "n": 0}
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values)}


def paired_ratios(ours: Sequence[float], reference: Sequence[float]) -> list[float]:
    """``ours[i] / reference[i]`` for each repetition (the pair ran back to back)."""
    return [a / b if b else float("nan") for a, b in zip(ours, reference, strict=True)]


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (``fraction`` in [0, 1]) of unsorted ``values``."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * len(ordered) + 0.5) - 1))
    return ordered[index]


def row(case: str, unit: str, ours: Sequence[float], reference: Sequence[float],
        **extra: Any) -> dict[str, Any]:
    """One result row: both sides' medians and the paired ratio ours/reference.

    ``extra`` carries ``target`` (text), ``met`` (bool, or None without a target) and any
    other per-row detail worth printing.
    """
    return {"case": case, "unit": unit, "ours": summary(ours), "reference": summary(reference),
            "ratio": summary(paired_ratios(ours, reference)), "target": "", "met": None,
            "samples": {"ours": list(ours), "reference": list(reference)}, **extra}


def rotated(sides: Sequence[T], rep: int) -> list[T]:
    """``sides`` in the order repetition ``rep`` runs them: each leads in turn, so no side
    always runs first (or last) on a machine whose load drifts."""
    shift = rep % len(sides)
    return [*sides[shift:], *sides[:shift]]


def interleaved_rounds(sides: Sequence[str], watchers: Sequence[int], repeats: int,
                       one_round: Callable[[str, int], dict[str, Any]],
                       ) -> dict[int, dict[str, list[dict[str, Any]]]]:
    """Per watcher count, ``repeats`` rounds of every side, interleaved and rotated:
    ``{watchers: {side: [round results]}}``."""
    samples: dict[int, dict[str, list[dict[str, Any]]]] = {}
    for count in watchers:
        by_side: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
        for rep in range(repeats):
            for side in rotated(sides, rep):
                by_side[side].append(one_round(side, count))
        samples[count] = by_side
    return samples
