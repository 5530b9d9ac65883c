"""The HorizontalPodAutoscaler controller's decisions (pure), after kube v1.32
``pkg/controller/podautoscaler`` (``horizontal.go``, ``replica_calculator.go``,
``metrics/utilization.go``), written by hand for the simulated cluster.

Usage is simulated (``kubewire.simulated_usage``, the rule the server's ``metrics.k8s.io``
serves): a pod's usage of a resource is its annotation ``kubewire.io/<resource>-usage``, else
``DEFAULT_USAGE_FRACTION`` of the sum of its containers' requests; a container's share
(ContainerResource metrics) is the pod's usage split by the containers' requests. The
controller reads it as kube does, from ``metrics.k8s.io`` PodMetrics (``pod_samples``). Only
Resource and ContainerResource metrics have a source; Pods, Object and External metrics report
kube's "unable to get metric" condition. A pod's sample is always fresh, so kube's CPU
initialization window reduces to readiness: a pod without a True Ready condition is unready.

Replica arithmetic is kube's: the usage ratio against the target, no change within
``TOLERANCE``, missing pods counted at 100% (scale-down) or 0% (scale-up), unready pods at 0%
on a scale-up, the result clamped by min/max and (without ``behavior``) by
``max(2 * current, 4)`` per step; scale-down stabilization keeps the highest recommendation of
the window (300 s by default); ``behavior`` adds per-direction windows and Pods/Percent rate
policies over the recorded scale events.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kubewire.quantity import parse_quantity
from kubewire.quantity_text import Amount, canonical
from kubewire.simulated_usage import DEFAULT_USAGE_FRACTION as DEFAULT_USAGE_FRACTION
from kubewire.simulated_usage import USAGE_ANNOTATION as USAGE_ANNOTATION
from kubewire.simulated_usage import container_usage as container_usage
from kubewire.simulated_usage import pod_usage as pod_usage
from kubewire.simulated_usage import request_of

Obj = dict[str, Any]
TOLERANCE = 0.1  # --horizontal-pod-autoscaler-tolerance
DOWNSCALE_STABILIZATION_S = 300.0  # --horizontal-pod-autoscaler-downscale-stabilization
SCALE_UP_LIMIT_FACTOR, SCALE_UP_LIMIT_MINIMUM = 2.0, 4.0
MAX_INT32, MIN_INT32 = 2**31 - 1, -(2**31)


class MetricError(Exception):
    """A metric that yields no replica count; ``reason`` names kube's condition reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _d(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


# --- simulated usage (kubewire.simulated_usage, shared with the server's metrics.k8s.io) ------

def _requests(container: Mapping[str, Any], resource: str) -> Fraction | None:
    return request_of(container, resource)


# --- samples: what the resource metrics API reports ------------------------------------------

def _milli(text: Any) -> int | None:
    """``Quantity.MilliValue()``: rounded up."""
    value = parse_quantity(text)
    return None if value is None else math.ceil(value * 1000)


def pod_samples(items: list[Obj], resource: str, container: str) -> dict[str, int]:
    """``getPodMetrics``/``getContainerMetrics`` of kube's REST metrics client: milli-values by
    pod name; ValueError when a pod's metrics lack ``container``."""
    out: dict[str, int] = {}
    for item in items:
        meta = _d(item.get("metadata"))
        name = str(meta.get("name") or "")
        containers = [_d(c) for c in item.get("containers") or ()]
        if container:
            mine = next((c for c in containers if c.get("name") == container), None)
            if mine is None:
                raise ValueError(f"container {container} not present in metrics for pod "
                                 f"{meta.get('namespace', '')}/{name}")
            value = _milli(_d(mine.get("usage")).get(resource))
            if value is not None:
                out[name] = value
            continue
        values = [_milli(_d(c.get("usage")).get(resource)) for c in containers]
        if values and all(v is not None for v in values):
            out[name] = sum(v for v in values if v is not None)
    return out


# --- pods: which count ------------------------------------------------------------------------

def _ready(pod: Mapping[str, Any]) -> bool:
    return any(_d(c).get("type") == "Ready" and _d(c).get("status") == "True"
               for c in _d(pod.get("status")).get("conditions") or ())


@dataclass(frozen=True, slots=True)
class PodGroups:
    """``groupPods``: samples of counted pods (milli-units), and the names of the others."""

    metrics: dict[str, int]
    ready_count: int
    unready: frozenset[str]
    missing: frozenset[str]
    ignored: frozenset[str]


def group_pods(pods: Sequence[Mapping[str, Any]], samples: Mapping[str, int],
               resource: str) -> PodGroups:
    """kube's ``groupPods``: deleted and failed pods are ignored, pending pods (and, for CPU,
    pods not Ready) are unready, pods without a sample are missing."""
    metrics: dict[str, int] = {}
    unready: set[str] = set()
    missing: set[str] = set()
    ignored: set[str] = set()
    for pod in pods:
        name = str(_d(pod.get("metadata")).get("name") or "")
        phase = _d(pod.get("status")).get("phase")
        if _d(pod.get("metadata")).get("deletionTimestamp") or phase == "Failed":
            ignored.add(name)
            continue
        if phase == "Pending":
            unready.add(name)
            continue
        if name not in samples:
            missing.add(name)
            continue
        if resource == "cpu" and not _ready(pod):
            unready.add(name)
            continue
        metrics[name] = samples[name]
    ready = len(pods) - len(unready) - len(ignored)
    return PodGroups(metrics, ready, frozenset(unready), frozenset(missing), frozenset(ignored))


def pod_requests(pods: Sequence[Mapping[str, Any]], resource: str,
                 container: str = "") -> dict[str, int]:
    """``calculatePodRequests`` (milli-units); MetricError when a container has no request."""
    out: dict[str, int] = {}
    for pod in pods:
        name = str(_d(pod.get("metadata")).get("name") or "")
        total = Fraction(0)
        for c in (_d(c) for c in _d(pod.get("spec")).get("containers") or ()):
            if container and c.get("name") != container:
                continue
            request = _requests(c, resource)
            if request is None:
                raise MetricError("FailedGetResourceMetric", f"missing request for {resource} "
                                  f"in container {c.get('name')} of Pod {name}")
            total += request
        out[name] = math.floor(total * 1000)
    return out


def utilization_ratio(metrics: Mapping[str, int], requests: Mapping[str, int],
                      target: int) -> tuple[float, int, int]:
    """``GetResourceUtilizationRatio``: (ratio, utilization %, average raw milli-value)."""
    used = total = count = 0
    for name, value in metrics.items():
        if name not in requests:
            continue
        used, total, count = used + value, total + requests[name], count + 1
    if total == 0:
        raise MetricError("FailedGetResourceMetric", "no metrics returned matched known pods")
    utilization = (used * 100) // total
    return utilization / target, utilization, used // count


def _rebalanced(groups: PodGroups, metrics: dict[str, int], ratio: float,
                missing_value: int, ) -> dict[str, int]:
    out = dict(metrics)
    if ratio < 1.0:
        out.update(dict.fromkeys(groups.missing, missing_value))
    elif ratio > 1.0:
        out.update(dict.fromkeys(groups.missing, 0))
    if groups.unready and ratio > 1.0:
        out.update(dict.fromkeys(groups.unready, 0))
    return out


@dataclass(frozen=True, slots=True)
class Source:
    """What a Resource or ContainerResource metric measures."""

    resource: str
    container: str = ""


def utilization_replicas(current: int, target: int, pods: Sequence[Mapping[str, Any]],  # noqa: PLR0913
                         samples: Mapping[str, int], source: Source, *,
                         tolerance: float = TOLERANCE) -> tuple[int, int, int]:
    """``GetResourceReplicas``: (replicas, utilization %, average raw milli-value); no change
    within ``tolerance`` (``--horizontal-pod-autoscaler-tolerance``) of the target."""
    resource, container = source.resource, source.container
    if not pods:
        raise MetricError("FailedGetResourceMetric",
                          "no pods returned by selector while calculating replica count")
    groups = group_pods(pods, samples, resource)
    requests = pod_requests(pods, resource, container)
    if not groups.metrics:
        raise MetricError("FailedGetResourceMetric", "did not receive metrics for targeted "
                          "pods (pods might be unready)")
    ratio, utilization, raw = utilization_ratio(groups.metrics, requests, target)
    rebalance = bool(groups.unready) and ratio > 1.0
    if not rebalance and not groups.missing:
        if abs(1.0 - ratio) <= tolerance:
            return current, utilization, raw
        return math.ceil(ratio * groups.ready_count), utilization, raw
    # on a scale-down a missing pod counts at 100% of its request (or the target if higher)
    fallback = max(100, target)
    metrics = dict(groups.metrics)
    for name in groups.missing:
        metrics[name] = requests.get(name, 0) * fallback // 100 if ratio < 1.0 else 0
    if rebalance:
        metrics.update(dict.fromkeys(groups.unready, 0))
    new_ratio, _, _ = utilization_ratio(metrics, requests, target)
    return _direction_checked(current, ratio, new_ratio, len(metrics), tolerance), \
        utilization, raw


def _direction_checked(current: int, ratio: float, new_ratio: float, count: int,
                       tolerance: float) -> int:
    if abs(1.0 - new_ratio) <= tolerance or (ratio < 1.0 < new_ratio) \
            or (ratio > 1.0 > new_ratio):
        return current
    proposal = math.ceil(new_ratio * count)
    if (new_ratio < 1.0 and proposal > current) or (new_ratio > 1.0 and proposal < current):
        return current
    return proposal


def average_value_replicas(current: int, target_milli: int,  # noqa: PLR0913
                           pods: Sequence[Mapping[str, Any]],
                           samples: Mapping[str, int], resource: str, *,
                           tolerance: float = TOLERANCE) -> tuple[int, int]:
    """``GetRawResourceReplicas`` (``calcPlainMetricReplicas``): (replicas, average milli)."""
    if not pods:
        raise MetricError("FailedGetResourceMetric",
                          "no pods returned by selector while calculating replica count")
    groups = group_pods(pods, samples, resource)
    if not groups.metrics:
        raise MetricError("FailedGetResourceMetric", "did not receive metrics for targeted "
                          "pods (pods might be unready)")
    total = sum(groups.metrics.values())
    ratio = total / (target_milli * len(groups.metrics))
    average = total // len(groups.metrics)
    rebalance = bool(groups.unready) and ratio > 1.0
    if not rebalance and not groups.missing:
        if abs(1.0 - ratio) <= tolerance:
            return current, average
        return math.ceil(ratio * groups.ready_count), average
    metrics = _rebalanced(groups, groups.metrics, ratio, target_milli)
    new_ratio = sum(metrics.values()) / (target_milli * len(metrics))
    return _direction_checked(current, ratio, new_ratio, len(metrics), tolerance), average


def milli_quantity(milli: int) -> str:
    """``resource.NewMilliQuantity(v, DecimalSI).String()``."""
    return canonical(Amount(Fraction(milli, 1000), "DecimalSI"))


# --- normalization: stabilization and limits -------------------------------------------------

@dataclass(slots=True)
class History:
    """What kube's controller remembers per HPA: recommendations and scale events (times in
    seconds), each list bounded by reuse of stale entries as kube does."""

    recommendations: list[tuple[float, int]] = field(default_factory=list)
    scale_up: list[tuple[float, int, bool]] = field(default_factory=list)  # (time, change, old)
    scale_down: list[tuple[float, int, bool]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Normalization:
    """kube's ``NormalizationArg``: the replicas now, the recommendation, min/max, the time."""

    current: int
    desired: int
    low: int
    high: int
    now: float


def scale_up_limit(current: int) -> int:
    """``calculateScaleUpLimit``: at most double, at least 4."""
    return int(max(SCALE_UP_LIMIT_FACTOR * current, SCALE_UP_LIMIT_MINIMUM))


def record_initial_recommendation(history: History, current: int, now: float) -> None:
    """``recordInitialRecommendation``: an HPA's first turn counts the target's current
    replicas as a recommendation, so a scale-down waits out the stabilization window."""
    if not history.recommendations:
        history.recommendations.append((now, current))


def stabilize(history: History, desired: int, now: float,
              window_s: float = DOWNSCALE_STABILIZATION_S) -> int:
    """``stabilizeRecommendation``: the highest recommendation of the window; this one is
    recorded (in the slot of a sample older than the window when there is one)."""
    highest, old = desired, -1
    for i, (stamp, value) in enumerate(history.recommendations):
        if stamp < now - window_s:
            old = i
        elif value > highest:
            highest = value
    if old >= 0:
        history.recommendations[old] = (now, desired)
    else:
        history.recommendations.append((now, desired))
    return highest


def limit_with_rules(current: int, desired: int, low: int, high: int) -> tuple[int, str, str]:
    """``convertDesiredReplicasWithRules``: (replicas, ScalingLimited reason, message)."""
    up_limit = scale_up_limit(current)
    if high > up_limit:
        allowed, reason = up_limit, ("ScaleUpLimit", "the desired replica count is increasing "
                                     "faster than the maximum scale rate")
    else:
        allowed, reason = high, ("TooManyReplicas",
                                 "the desired replica count is more than the maximum replica "
                                 "count")
    if desired < low:
        return low, "TooFewReplicas", ("the desired replica count is less than the minimum "
                                       "replica count")
    if desired > allowed:
        return allowed, reason[0], reason[1]
    return desired, "DesiredWithinRange", "the desired count is within the acceptable range"


def stabilize_with_behavior(history: History, arg: Normalization, windows: tuple[int, int],
                            ) -> tuple[int, str, str]:
    """``stabilizeRecommendationWithBehaviors`` (``windows``: scale-up and scale-down
    stabilization seconds): (recommendation, reason, message)."""
    current, desired, now = arg.current, arg.desired, arg.now
    up_window_s, down_window_s = windows
    up, down, old = desired, desired, -1
    for i, (stamp, value) in enumerate(history.recommendations):
        if stamp > now - up_window_s:
            up = min(value, up)
        if stamp > now - down_window_s:
            down = max(value, down)
        if stamp < now - up_window_s and stamp < now - down_window_s:
            old = i
    recommendation = min(max(current, up), down)
    if old >= 0:
        history.recommendations[old] = (now, desired)
    else:
        history.recommendations.append((now, desired))
    if desired >= current:
        return recommendation, "ScaleUpStabilized", ("recent recommendations were lower than "
                                                     "current one, applying the lowest recent "
                                                     "recommendation")
    return recommendation, "ScaleDownStabilized", ("recent recommendations were higher than "
                                                   "current one, applying the highest recent "
                                                   "recommendation")


def _change_in_period(period_s: int, events: Sequence[tuple[float, int, bool]],
                      now: float) -> int:
    """``getReplicasChangePerPeriod``."""
    return sum(change for stamp, change, _ in events if stamp > now - period_s)


def _rate_limit(current: int, history: History, rules: Mapping[str, Any], now: float,
                up: bool) -> int:
    """``calculateScaleUpLimitWithScalingRules`` / ``calculateScaleDownLimitWithBehaviors``."""
    select = rules.get("selectPolicy") or "Max"
    if select == "Disabled":
        return current
    pick_low = (select == "Min") == up  # scale-up Min and scale-down Max take the lowest
    result = MAX_INT32 if pick_low else MIN_INT32
    for policy in (_d(p) for p in rules.get("policies") or ()):
        period = int(policy.get("periodSeconds") or 0)
        start = (current - _change_in_period(period, history.scale_up, now)
                 + _change_in_period(period, history.scale_down, now))
        value = int(policy.get("value") or 0)
        if policy.get("type") == "Pods":
            proposed = start + value if up else start - value
        elif up:
            proposed = math.ceil(start * (1 + value / 100))
        else:
            proposed = int(start * (1 - value / 100))
        result = min(result, proposed) if pick_low else max(result, proposed)
    return result


def limit_with_behavior(history: History, behavior: Mapping[str, Any], arg: Normalization,
                        ) -> tuple[int, str, str]:
    """``convertDesiredReplicasWithBehaviorRate``: (replicas, reason, message)."""
    current, desired, low, high, now = arg.current, arg.desired, arg.low, arg.high, arg.now
    if desired > current:
        limit = max(_rate_limit(current, history, _d(behavior.get("scaleUp")), now, True),
                    current)
        if high > limit:
            allowed, reason, message = limit, "ScaleUpLimit", (
                "the desired replica count is increasing faster than the maximum scale rate")
        else:
            allowed, reason, message = high, "TooManyReplicas", (
                "the desired replica count is more than the maximum replica count")
        if desired > allowed:
            return allowed, reason, message
    elif desired < current:
        limit = min(_rate_limit(current, history, _d(behavior.get("scaleDown")), now, False),
                    current)
        if low < limit:
            allowed, reason, message = limit, "ScaleDownLimit", (
                "the desired replica count is decreasing faster than the maximum scale rate")
        else:
            allowed, reason, message = low, "TooFewReplicas", (
                "the desired replica count is less than the minimum replica count")
        if desired < allowed:
            return allowed, reason, message
    return desired, "DesiredWithinRange", "the desired count is within the acceptable range"


def _longest_period(rules: Mapping[str, Any]) -> int:
    return max((int(_d(p).get("periodSeconds") or 0) for p in rules.get("policies") or ()),
               default=0)


def record_scale_event(history: History, behavior: Mapping[str, Any] | None, previous: int,
                       new: int, now: float) -> None:
    """``storeScaleEvent``: only HPAs with ``behavior`` keep scale events; an entry older than
    the direction's longest policy period is reused."""
    if behavior is None:
        return
    up = new > previous
    events = history.scale_up if up else history.scale_down
    longest = _longest_period(_d(behavior.get("scaleUp" if up else "scaleDown")))
    events[:] = [(t, c, old or t < now - longest) for t, c, old in events]
    entry = (now, abs(new - previous), False)
    stale = max((i for i, (_, _, old) in enumerate(events) if old), default=None)
    if stale is None:
        events.append(entry)
    else:
        events[stale] = entry


# --- status ----------------------------------------------------------------------------------

@dataclass(slots=True)
class Conditions:
    """An HPA's status conditions being rewritten at ``now`` (``setCondition``)."""

    items: list[Obj]
    now: str

    def set(self, kind: str, status: str, reason: str, message: str) -> None:
        """The transition time changes only with the status."""
        for condition in self.items:
            if condition.get("type") == kind:
                if condition.get("status") != status:
                    condition["lastTransitionTime"] = self.now
                condition.update(status=status, reason=reason, message=message)
                return
        self.items.append({"type": kind, "status": status, "lastTransitionTime": self.now,
                           "reason": reason, "message": message})
