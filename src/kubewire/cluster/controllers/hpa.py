"""The HorizontalPodAutoscaler controller (``horizontal-pod-autoscaler-controller``, kube's
``pkg/controller/podautoscaler/horizontal.go`` v1.32), a client of the API.

Every HPA is reconciled once per sync period (kube's ``--horizontal-pod-autoscaler-sync-period``,
15 s; an add or a change waits for the next turn, as kube's fixed-interval queue does): read the
target's ``/scale``, compute a replica count per metric from the pods its selector picks and
their usage as ``metrics.k8s.io`` reports it (kube's REST metrics client: a PodMetrics list by
the selector, a pod's value the sum of its containers' milli-values; ``hpa_rules``: kube's
arithmetic), take the highest, normalize it
(stabilization, min/max, rate limits or ``behavior`` policies), write ``/scale`` when it
changes, and write the HPA's ``/status`` (autoscaling/v2: currentReplicas, desiredReplicas,
currentMetrics, lastScaleTime, the AbleToScale/ScalingActive/ScalingLimited conditions) when it
differs. Events are kube's, from component ``horizontal-pod-autoscaler``:
``SuccessfulRescale`` ``New size: N; reason: cpu resource utilization (percentage of request)
above target``, ``FailedGetScale``, ``FailedGetResourceMetric``,
``FailedComputeMetricsReplicas``, ``SelectorRequired``, ``FailedRescale``.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

import msgspec

from kubewire.client import Api, WorkQueue
from kubewire.client.errors import ClientError, Conflict, NotFound, StatusError
from kubewire.cluster.controllers import hpa_rules as rules
from kubewire.cluster.controllers.hpa_rules import History, MetricError
from kubewire.cluster.controllers.replica_rules import meta, option
from kubewire.cluster.runtime import ClusterContext, now_rfc3339, run_workers
from kubewire.models import encode
from kubewire.quantity import parse_quantity
from kubewire.selectors.labels import LabelSelector, parse_label_selector

log = logging.getLogger(__name__)
Obj = dict[str, Any]
NAME = "horizontal-pod-autoscaler-controller"
COMPONENT = "horizontal-pod-autoscaler"  # its events' source
SYNC_PERIOD_S = 15.0  # --horizontal-pod-autoscaler-sync-period
METRICS_API_VERSION = "metrics.k8s.io/v1beta1"
# the keys of kube-controller-manager's HPA flags in ``ComponentOptions.extra``
SYNC_PERIOD_OPTION = "horizontal_pod_autoscaler_sync_period_s"
TOLERANCE_OPTION = "horizontal_pod_autoscaler_tolerance"
STABILIZATION_OPTION = "horizontal_pod_autoscaler_downscale_stabilization_s"
WORKERS = 5  # --concurrent-horizontal-pod-autoscaler-syncs
NAMESPACE_INDEX = "namespace"
_UNSERVED = {"Pods": ("pods", "FailedGetPodsMetric"),
             "Object": ("object", "FailedGetObjectMetric"),
             "External": ("external", "FailedGetExternalMetric")}


def _d(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


class _Unscalable(Exception):
    """The target's scale could not be read: the message for the condition and event."""


class HorizontalPodAutoscalerController:
    """Scales the targets of HorizontalPodAutoscalers from simulated resource usage."""

    name = NAME

    def __init__(self, ctx: ClusterContext, *, sync_period_s: float = SYNC_PERIOD_S,
                 workers: int = WORKERS,
                 downscale_stabilization_s: float = rules.DOWNSCALE_STABILIZATION_S,
                 tolerance: float = rules.TOLERANCE) -> None:
        self.ctx = ctx
        self.clock = ctx.clock
        self.sync_period_s = sync_period_s
        self.workers = workers
        self.downscale_stabilization_s = downscale_stabilization_s
        self.tolerance = tolerance
        self.pod_metrics: Api[Obj] = Api(dict, client=ctx.client, namespace=None,
                                         api_version=METRICS_API_VERSION, kind="PodMetrics",
                                         plural="pods", namespaced=True)
        self.hpa_api = ctx.api("autoscaling/v2", "HorizontalPodAutoscaler")
        self.hpas = ctx.informer("autoscaling/v2", "HorizontalPodAutoscaler")
        self.pods = ctx.informer("v1", "Pod")
        self.recorder = ctx.recorder(COMPONENT)
        self.queue: WorkQueue[str] = WorkQueue()
        self.histories: dict[str, History] = {}
        self._scheduled: set[str] = set()  # keys with a turn pending: one chain per HPA
        self.hpas.add_handlers(on_add=self._added)

    async def _added(self, hpa: Obj) -> None:
        self._schedule(_key(hpa))

    def _schedule(self, key: str) -> None:
        """The next turn, one sync period away (kube's fixed-interval queue: a request while
        one is pending is dropped)."""
        if key not in self._scheduled:
            self._scheduled.add(key)
            self.queue.add_after(key, self.sync_period_s)

    async def run(self) -> None:
        await self.hpas.wait_for_sync()
        await self.pods.wait_for_sync()
        await run_workers(self.queue, self.process, workers=self.workers, what="hpa")

    async def process(self, key: str) -> None:
        self._scheduled.discard(key)
        namespace, name = key.split("/", 1)
        hpa = self.hpas.get(name, namespace)
        if hpa is None:  # deleted: forget it (kube's deleteHPA drops its recommendations)
            self.histories.pop(key, None)
            return
        try:
            await self.reconcile(key, copy.deepcopy(hpa))
        except (StatusError, ClientError) as err:  # the next turn tries again
            log.debug("hpa %s: %s", key, err)
        finally:
            self._schedule(key)

    # --- one turn ---------------------------------------------------------------------------

    async def reconcile(self, key: str, hpa: Obj) -> None:
        """``reconcileAutoscaler``."""
        original = copy.deepcopy(hpa.get("status"))
        status = hpa.setdefault("status", {})
        conds = rules.Conditions(list(status.get("conditions") or []), now_rfc3339(self.clock))
        status["conditions"] = conds.items
        try:
            api, scale = await self._scale(hpa)
        except _Unscalable as err:
            self._event(hpa, "Warning", "FailedGetScale", str(err))
            conds.set("AbleToScale", "False", "FailedGetScale",
                      f"the HPA controller was unable to get the target's current scale: {err}")
            await self._write_status(hpa, original)
            return
        conds.set("AbleToScale", "True", "SucceededGetScale",
                  "the HPA controller was able to get the target's current scale")
        current = int(_d(scale.get("spec")).get("replicas") or 0)
        rules.record_initial_recommendation(self._history(key), current, self.clock())
        decided = await self._decide(key, hpa, scale, conds, current)
        if decided is None:  # no replica count: status and event written
            await self._write_status(hpa, original)
            return
        desired, reason, statuses = decided
        rescale = desired != current
        if rescale and not await self._rescale(hpa, api, scale, conds, (desired, reason)):
            status["currentReplicas"] = current
            status["currentMetrics"] = statuses or None
            await self._write_status(hpa, original)
            return
        if rescale:
            rules.record_scale_event(self._history(key), _d(hpa["spec"]).get("behavior"),
                                     current, desired, self.clock())
        # setStatus
        status["currentReplicas"] = current
        status["desiredReplicas"] = desired if rescale else current
        status["currentMetrics"] = statuses or None
        if rescale:
            status["lastScaleTime"] = conds.now
        await self._write_status(hpa, original)

    async def _decide(self, key: str, hpa: Obj, scale: Obj, conds: rules.Conditions,
                      current: int) -> tuple[int, str, list[Obj]] | None:
        """The replica count and its reason (``""`` with scaling disabled), with the metrics'
        statuses; None when the metrics gave none (status fields and event already set)."""
        spec = _d(hpa.get("spec"))
        low = int(spec["minReplicas"]) if spec.get("minReplicas") is not None else 1
        high = int(spec.get("maxReplicas") or 0)
        if current == 0 and low != 0:
            conds.set("ScalingActive", "False", "ScalingDisabled",
                      "scaling is disabled since the replica count of the target is zero")
            return current, "", []
        if current > high:
            return high, "Current number of replicas above Spec.MaxReplicas", []
        if current < low:
            return low, "Current number of replicas below Spec.MinReplicas", []
        proposal, metric_name, statuses, failure = await self._replicas_for_metrics(hpa, scale,
                                                                                    conds)
        if proposal == -1:
            hpa["status"]["currentReplicas"] = current
            hpa["status"]["currentMetrics"] = statuses or None
            self._event(hpa, "Warning", "FailedComputeMetricsReplicas", failure)
            return None
        reason = f"{metric_name} above target" if proposal > current else \
            "All metrics below target" if proposal < current else ""
        desired = self._normalize(key, hpa, conds,
                                  rules.Normalization(current, proposal, low, high, self.clock()))
        return desired, reason, statuses

    async def _rescale(self, hpa: Obj, api: Any, scale: Obj, conds: rules.Conditions,
                       change: tuple[int, str]) -> bool:
        """Write the target's ``/scale``; False (event and condition set) when refused."""
        desired, reason = change
        # kube's Scales().Update with the scale it read (its resourceVersion a precondition):
        # the controller's role may update */scale, not patch it
        scale["spec"] = {**_d(scale.get("spec")), "replicas": desired}
        try:
            await api.replace_scale(_d(_d(hpa["spec"]).get("scaleTargetRef")).get("name", ""),
                                    scale, namespace=meta(hpa).get("namespace"))
        except (StatusError, ClientError) as err:
            self._event(hpa, "Warning", "FailedRescale",
                        f"New size: {desired}; reason: {reason}; error: {err}")
            conds.set("AbleToScale", "False", "FailedUpdateScale",
                      f"the HPA controller was unable to update the target scale: {err}")
            return False
        conds.set("AbleToScale", "True", "SucceededRescale",
                  f"the HPA controller was able to update the target scale to {desired}")
        self._event(hpa, "Normal", "SuccessfulRescale", f"New size: {desired}; reason: {reason}")
        return True

    async def _scale(self, hpa: Mapping[str, Any]) -> tuple[Any, Obj]:
        ref = _d(_d(hpa.get("spec")).get("scaleTargetRef"))
        try:
            api = self.ctx.api(str(ref.get("apiVersion") or "v1"), str(ref.get("kind") or ""))
            scale = await api.get_scale(str(ref.get("name") or ""),
                                        namespace=meta(hpa).get("namespace"))
        except (StatusError, ClientError) as err:
            raise _Unscalable(str(err)) from err
        return api, _d(encode_scale(scale))

    def _history(self, key: str) -> History:
        return self.histories.setdefault(key, History())

    def _event(self, hpa: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        self.recorder.event(hpa, type_, reason, message)

    async def _write_status(self, hpa: Obj, original: Any) -> None:
        """``updateStatusIfNeeded``: a /status write only when the status changed."""
        status = hpa["status"]
        if not status.get("conditions"):
            status.pop("conditions", None)
        if status == original:
            return
        try:
            await self.hpa_api.replace_status(hpa, namespace=meta(hpa).get("namespace"))
        except (Conflict, NotFound):
            return  # the next turn reads the newer object

    # --- metrics ----------------------------------------------------------------------------

    async def _replicas_for_metrics(self, hpa: Obj, scale: Obj, conds: rules.Conditions,
                                    ) -> tuple[int, str, list[Obj], str]:
        """``computeReplicasForMetrics``: (replicas or -1, metric name, statuses, error)."""
        metrics = [_d(m) for m in _d(hpa.get("spec")).get("metrics") or ()]
        selector_text = _d(scale.get("status")).get("selector")
        if not selector_text:
            self._event(hpa, "Warning", "SelectorRequired", "selector is required")
            conds.set("ScalingActive", "False", "InvalidSelector",
                                "the HPA target's scale is missing a selector")
            return -1, "", [], "selector is required"
        try:
            selector = parse_label_selector(str(selector_text))
        except ValueError as err:
            message = f"couldn't convert selector into a corresponding internal selector " \
                      f"object: {err}"
            self._event(hpa, "Warning", "InvalidSelector", message)
            conds.set("ScalingActive", "False", "InvalidSelector",
                                message)
            return -1, "", [], message
        namespace = str(meta(hpa).get("namespace") or "")
        pods = self._pods(namespace, selector)
        spec_replicas = int(_d(scale.get("spec")).get("replicas") or 0)
        replicas, metric_name = 0, ""
        statuses: list[Obj] = []
        invalid: list[tuple[str, str]] = []  # (reason, error) per failed metric
        for metric in metrics:
            try:
                proposal, name, metric_status = await self._one_metric(
                    metric, spec_replicas, pods, (str(selector_text), namespace))
            except MetricError as err:
                statuses.append({"type": ""})  # kube's zero MetricStatus
                self._event(hpa, "Warning", err.reason, _inner(err))
                invalid.append((err.reason, str(err)))
                continue
            statuses.append(metric_status)
            if replicas == 0 or proposal > replicas:
                replicas, metric_name = proposal, name
        if invalid and (len(invalid) >= len(metrics) or replicas < spec_replicas):
            reason, first = invalid[0]
            conds.set("ScalingActive", "False", reason,
                                f"the HPA was unable to compute the replica count: "
                                f"{_inner_text(first)}")
            return -1, "", statuses, (f"invalid metrics ({len(invalid)} invalid out of "
                                      f"{len(metrics)}), first error is: {first}")
        conds.set("ScalingActive", "True", "ValidMetricFound",
                            f"the HPA was able to successfully calculate a replica count from "
                            f"{metric_name}")
        return replicas, metric_name, statuses, ""

    def _pods(self, namespace: str, selector: LabelSelector) -> list[Obj]:
        return [pod for pod in self.pods.by_index(NAMESPACE_INDEX, namespace)
                if selector.matches(_d(meta(pod).get("labels")))]

    async def _one_metric(self, metric: Obj, current: int, pods: list[Obj],
                          selector: tuple[str, str]) -> tuple[int, str, Obj]:
        """``computeReplicasForMetric`` for one spec: (replicas, metric name, status)."""
        kind = metric.get("type")
        if kind in ("Resource", "ContainerResource"):
            member = "resource" if kind == "Resource" else "containerResource"
            src = _d(metric.get(member))
            resource, container = str(src.get("name") or ""), str(src.get("container") or "")
            what = "resource" if kind == "Resource" else "container"
            try:
                replicas, name, current_value = await self._resource(
                    src, current, (pods, selector), kind)
            except MetricError as err:
                raise MetricError(err.reason, f"failed to get {resource} {what} metric value: "
                                  f"{err}") from err
            member_status: Obj = {"name": resource, "current": current_value}
            if container:
                member_status["container"] = container
            return replicas, name, {"type": kind, member: member_status}
        member, reason = _UNSERVED.get(str(kind), ("", "FailedGetResourceMetric"))
        ident = _d(_d(metric.get(member)).get("metric")).get("name", "")
        raise MetricError(reason, f"failed to get {member or kind} metric value: unable to get "
                          f"metric {ident}: kubewire simulates resource metrics only")

    async def _resource(self, src: Obj, current: int,
                        selected: tuple[list[Obj], tuple[str, str]],
                        kind: str) -> tuple[int, str, Obj]:
        """``computeStatusForResourceMetricGeneric``."""
        resource, container = str(src.get("name") or ""), str(src.get("container") or "")
        target = _d(src.get("target"))
        pods, (selector, namespace) = selected
        if target.get("averageValue") is not None:
            wanted = parse_quantity(target["averageValue"])
            milli = int(wanted * 1000) if wanted is not None else 0
            try:
                samples = await self._metrics(namespace, selector, resource, container)
                replicas, average = rules.average_value_replicas(
                    current, milli, pods, samples, resource, tolerance=self.tolerance)
            except MetricError as err:
                raise MetricError(err.reason, f"failed to get {resource} usage: {err}") from err
            return replicas, f"{resource} resource", {
                "averageValue": rules.milli_quantity(average)}
        if target.get("averageUtilization") is None:
            raise MetricError("FailedGetResourceMetric", "invalid resource metric source: "
                              "neither an average utilization target nor an average value "
                              "(usage) target was set")
        try:
            samples = await self._metrics(namespace, selector, resource, container)
            replicas, utilization, raw = rules.utilization_replicas(
                current, int(target["averageUtilization"]), pods, samples,
                rules.Source(resource, container), tolerance=self.tolerance)
        except MetricError as err:
            raise MetricError(err.reason,
                              f"failed to get {resource} utilization: {err}") from err
        name = f"{resource} resource utilization (percentage of request)"
        if kind == "ContainerResource":
            name = f"{resource} container resource utilization (percentage of request)"
        return replicas, name, {"averageValue": rules.milli_quantity(raw),
                                "averageUtilization": utilization}

    async def _metrics(self, namespace: str, selector: str, resource: str,
                       container: str) -> dict[str, int]:
        """kube's REST metrics client ``GetResourceMetric``: the PodMetrics of the selector's
        pods; a pod's value (milli-units) is the sum of its containers' (the named
        container's alone for a container metric), a pod missing the resource has none."""
        try:
            listed = await self.pod_metrics.list(namespace=namespace, label_selector=selector)
        except (StatusError, ClientError) as err:
            raise MetricError("FailedGetResourceMetric", f"unable to get metrics for resource "
                              f"{resource}: unable to fetch metrics from resource metrics API: "
                              f"{err}") from err
        if not listed.items:
            raise MetricError("FailedGetResourceMetric", f"unable to get metrics for resource "
                              f"{resource}: no metrics returned from resource metrics API")
        try:
            return rules.pod_samples(listed.items, resource, container)
        except ValueError as err:
            raise MetricError("FailedGetResourceMetric", f"unable to get metrics for resource "
                              f"{resource}: failed to get container metrics: {err}") from err

    def _normalize(self, key: str, hpa: Obj, conds: rules.Conditions,
                   arg: rules.Normalization) -> int:
        """``normalizeDesiredReplicas`` / ``normalizeDesiredReplicasWithBehaviors``."""
        history = self._history(key)
        behavior = _d(hpa.get("spec")).get("behavior")
        if isinstance(behavior, dict):
            up, down = _d(behavior.get("scaleUp")), _d(behavior.get("scaleDown"))
            down_window = down.get("stabilizationWindowSeconds")
            windows = (int(up.get("stabilizationWindowSeconds") or 0),
                       int(self.downscale_stabilization_s if down_window is None
                           else down_window))
            stabilized, reason, message = rules.stabilize_with_behavior(history, arg, windows)
            limited, why, text = rules.limit_with_behavior(
                history, behavior, dataclasses.replace(arg, desired=stabilized))
        else:
            stabilized = rules.stabilize(history, arg.desired, arg.now,
                                         self.downscale_stabilization_s)
            reason, message = "ScaleDownStabilized", ("recent recommendations were higher "
                                                      "than current one, applying the highest "
                                                      "recent recommendation")
            limited, why, text = rules.limit_with_rules(arg.current, stabilized, arg.low,
                                                        arg.high)
        if stabilized == arg.desired:
            reason, message = "ReadyForNewScale", "recommended size matches current size"
        conds.set("AbleToScale", "True", reason, message)
        conds.set("ScalingLimited", "False" if limited == stabilized else "True", why, text)
        return limited


def _inner(err: MetricError) -> str:
    """The text kube's event carries: the metric's error without the outer wrapping."""
    return _inner_text(str(err))


def _inner_text(text: str) -> str:
    prefix = text.split(": ", 1)
    return prefix[1] if len(prefix) == 2 and prefix[0].startswith("failed to get ") \
        and prefix[0].endswith("metric value") else text


def encode_scale(scale: Any) -> Any:
    """A Scale model as JSON data."""
    return msgspec.json.decode(encode(scale))


def _key(obj: Mapping[str, Any]) -> str:
    return f"{meta(obj).get('namespace', '')}/{meta(obj).get('name', '')}"


def make_hpa_controller(ctx: ClusterContext,
                        options: object = None) -> HorizontalPodAutoscalerController:
    """The component factory. Options (kube-controller-manager's flags, which ``kubewire
    serve`` and ``kubewire controller-manager`` pass in ``ComponentOptions.extra``):
    ``SYNC_PERIOD_OPTION`` (``--horizontal-pod-autoscaler-sync-period``, 15 s),
    ``TOLERANCE_OPTION`` (``--horizontal-pod-autoscaler-tolerance``, 0.1),
    ``STABILIZATION_OPTION`` (``--horizontal-pod-autoscaler-downscale-stabilization``, 300 s),
    ``workers`` (``--concurrent-horizontal-pod-autoscaler-syncs``, 5)."""
    return HorizontalPodAutoscalerController(
        ctx, sync_period_s=_seconds(options, SYNC_PERIOD_OPTION, SYNC_PERIOD_S),
        workers=option(options, "workers", WORKERS),
        downscale_stabilization_s=_seconds(options, STABILIZATION_OPTION,
                                           rules.DOWNSCALE_STABILIZATION_S),
        tolerance=_seconds(options, TOLERANCE_OPTION, rules.TOLERANCE))


def flag_options(sync_period_s: float, tolerance: float,
                 downscale_stabilization_s: float) -> dict[str, float]:
    """kube-controller-manager's HPA flags as ``ComponentOptions.extra`` entries."""
    return {SYNC_PERIOD_OPTION: sync_period_s, TOLERANCE_OPTION: tolerance,
            STABILIZATION_OPTION: downscale_stabilization_s}


def _seconds(options: object, name: str, default: float) -> float:
    """A float option: from a mapping, or the ``extra`` mapping of ``ComponentOptions``."""
    found = options.get(name, default) if isinstance(options, Mapping) else \
        _d(getattr(options, "extra", None)).get(name, default)
    try:
        return float(found)
    except (TypeError, ValueError):
        return default
