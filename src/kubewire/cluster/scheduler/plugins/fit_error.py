"""The text of an unschedulable Pod: kube v1.32's ``FitError.Error``
(``pkg/scheduler/framework/types.go``) and DefaultPreemption's PostFilter message.

``0/<all> nodes are available: `` + the histogram of reasons (``"<count> <reason>"``, sorted
as strings, joined with ``, ``) + ``.``, then `` preemption: `` + the preemption attempt's own
FitError (since 1.30 without a second period: kubernetes#117588).
Preemption: nodes whose status is ``UnschedulableAndUnresolvable`` are "Preemption is not
helpful for scheduling"; on the others kube looks for lower-priority victims: none there is
"No preemption victims found for incoming pod", and when removing them all still leaves the
pod unfit the node keeps its filter reasons. When preemption nominates a node the message has
no preemption part (``plugins.preemption`` decides, the scheduler evicts). A pod with
``preemptionPolicy: Never`` gets "not eligible due to
preemptionPolicy=Never.". With no nodes at all: ``no nodes available to schedule pods``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

NO_NODES = "no nodes available to schedule pods"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_ELIGIBLE = "not eligible due to preemptionPolicy=Never."
NOTE_LENGTH_LIMIT = 1024  # events.k8s.io note limit (schedule_one.go truncateMessage)


def fit_error(num_nodes: int, reasons: Iterable[tuple[str, ...]]) -> str:
    """``FitError.Error`` without the PostFilter part: one tuple of reasons per node."""
    histogram: Counter[str] = Counter()
    for node_reasons in reasons:
        histogram.update(node_reasons)
    text = f"0/{num_nodes} nodes are available:"
    entries = sorted(f"{count} {reason}" for reason, count in histogram.items())
    if entries:
        text += f" {', '.join(entries)}."
    return text


def unschedulable_message(num_nodes: int, reasons: Iterable[tuple[str, ...]],
                          preemption: str) -> str:
    """The whole message: the filter histogram, then `` preemption: ...`` (``preemption`` is
    the PostFilter's message, ``""`` for none)."""
    text = fit_error(num_nodes, reasons)
    if preemption:
        text += f" preemption: {preemption}"
    return text


def truncate(message: str) -> str:
    """``truncateMessage``: events' notes are at most 1024 characters."""
    if len(message) <= NOTE_LENGTH_LIMIT:
        return message
    return message[:NOTE_LENGTH_LIMIT - 4] + " ..."
