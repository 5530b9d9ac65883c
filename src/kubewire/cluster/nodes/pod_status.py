"""The pod statuses a kubelet writes, as ``PATCH pods/<n>/status`` bodies (strategic merge).

``pending`` (first sync: Pending, ``ContainerCreating``/``PodInitializing``, hostIP, startTime),
``running`` (sandbox ready, podIP, containers started; init containers ``Completed``),
``exited`` (run-once containers exit: ``Succeeded``/``Failed``, or a restart for
``OnFailure``/``Always``), ``terminated`` (graceful deletion: containers stopped, terminal phase)
— the rows of §13.2/§13.3 of the controllers reference (kubelet_pods.go
``generateAPIPodStatus``, ``status/generate.go``). Each builder also names the events the kubelet
would record (``Pulling``/``Pulled``/``Created``/``Started``/``Killing``).

The body carries ``metadata.uid`` and ``$setElementOrder/conditions`` as the kubelet's
``PatchPodStatus`` does, so conditions keep kube's order. ``lastTransitionTime`` is kept while a
condition's status is unchanged. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubewire.cluster.nodes.stages import ANNOTATION_EXIT, ANNOTATION_NOT_READY

PROBE_FAILURE = "HTTP probe failed with statuscode: 503"  # what the simulated probes see

Obj = dict[str, Any]
CONDITION_ORDER = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                   "PodScheduled")
RUNTIME = "containerd"


@dataclass(frozen=True, slots=True)
class PodEvent:
    type: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Where:
    """What a builder needs besides the pod: the node's IP, the pod's IP, the time."""

    host_ip: str
    pod_ip: str
    now: str


@dataclass(frozen=True, slots=True)
class Built:
    status: Obj
    events: tuple[PodEvent, ...] = ()


Builder = Callable[[Obj, Where], Built]


def normalized_image(image: str) -> str:
    """containerd's image name: ``nginx`` → ``docker.io/library/nginx:latest``."""
    name, digest = [*image.split("@", 1), ""][:2]
    first = name.split("/", 1)[0]
    if "/" not in name:
        name = f"docker.io/library/{name}"
    elif "." not in first and ":" not in first and first != "localhost":
        name = f"docker.io/{name}"
    if digest:
        return f"{name}@{digest}"
    if ":" not in name.rsplit("/", 1)[-1]:
        name += ":latest"
    return name


def image_id(image: str) -> str:
    repo = normalized_image(image).split("@", 1)[0]
    repo = repo.rsplit(":", 1)[0] if ":" in repo.rsplit("/", 1)[-1] else repo
    return f"{repo}@sha256:{hashlib.sha256(image.encode()).hexdigest()}"


def container_id(pod: Obj, name: str, restarts: int) -> str:
    uid = (pod.get("metadata") or {}).get("uid", "")
    digest = hashlib.sha256(f"{uid}/{name}/{restarts}".encode()).hexdigest()
    return f"{RUNTIME}://{digest}"


def _conditions(pod: Obj, wanted: list[tuple[str, str, str, str]], now: str) -> list[Obj]:
    old = {c.get("type"): c for c in (pod.get("status") or {}).get("conditions") or ()}
    out = []
    for type_, status, reason, message in wanted:
        before = old.get(type_) or {}
        condition: Obj = {"type": type_, "status": status, "lastProbeTime": None,
                          "lastTransitionTime": before.get("lastTransitionTime")
                          if before.get("status") == status and before.get("lastTransitionTime")
                          else now}
        # null removes an earlier reason/message: the kubelet's patch is a two-way diff
        condition["reason"] = reason or None
        condition["message"] = message or None
        out.append(condition)
    return out


def _names(containers: list[Obj]) -> str:
    return "[" + " ".join(str(c.get("name")) for c in containers) + "]"


def _mounts(container: Mapping[str, Any]) -> list[Obj]:
    mounts = []
    for mount in container.get("volumeMounts") or ():
        echo: Obj = {"name": mount.get("name"), "mountPath": mount.get("mountPath")}
        if mount.get("readOnly"):
            echo["readOnly"] = True
            echo["recursiveReadOnly"] = "Disabled"
        mounts.append(echo)
    return mounts


def _base(container: Mapping[str, Any]) -> Obj:
    status: Obj = {"name": container.get("name"), "image": container.get("image", ""),
                   "imageID": "", "lastState": {}, "ready": False, "restartCount": 0,
                   "started": False}
    mounts = _mounts(container)
    if mounts:
        status["volumeMounts"] = mounts
    return status


def _patch(pod: Obj, status: Obj, conditions: list[Obj]) -> Obj:
    status["conditions"] = conditions
    status["$setElementOrder/conditions"] = [{"type": c["type"]} for c in conditions]
    return {"metadata": {"uid": (pod.get("metadata") or {}).get("uid")}, "status": status}


def _spec(pod: Obj) -> Obj:
    return pod.get("spec") or {}


def _regular(pod: Obj) -> list[Obj]:
    return list(_spec(pod).get("containers") or ())


def _inits(pod: Obj) -> list[Obj]:
    return list(_spec(pod).get("initContainers") or ())


def _ips(ip: str) -> list[Obj]:
    return [{"ip": ip}] if ip else []


def pending(pod: Obj, where: Where) -> Built:
    """Row 1: accepted by the kubelet, sandbox not yet ready."""
    inits = _inits(pod)
    waiting = "PodInitializing" if inits else "ContainerCreating"
    statuses = [_base(c) | {"state": {"waiting": {"reason": waiting}}} for c in _regular(pod)]
    init_statuses = [_base(c) | {"state": {"waiting": {"reason": "PodInitializing"}}}
                     for c in inits]
    names = _names(_regular(pod))
    wanted = [("PodReadyToStartContainers", "False", "", ""),
              ("Initialized", "False", "ContainersNotInitialized",
               f"containers with incomplete status: {_names(inits)}") if inits
              else ("Initialized", "True", "", ""),
              ("Ready", "False", "ContainersNotReady", f"containers with unready status: {names}"),
              ("ContainersReady", "False", "ContainersNotReady",
               f"containers with unready status: {names}"),
              ("PodScheduled", "True", "", "")]
    status: Obj = {"phase": "Pending", "hostIP": where.host_ip, "hostIPs": _ips(where.host_ip),
                   "startTime": where.now, "containerStatuses": statuses}
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    return Built(_patch(pod, status, _conditions(pod, wanted, where.now)))


def _pull_events(container: Mapping[str, Any]) -> list[PodEvent]:
    image = str(container.get("image", ""))
    policy = container.get("imagePullPolicy") or ("Always" if image.endswith(":latest")
                                                  or ":" not in image.rsplit("/", 1)[-1]
                                                  else "IfNotPresent")
    if policy == "Always":
        return [PodEvent("Normal", "Pulling", f'Pulling image "{image}"'),
                PodEvent("Normal", "Pulled",
                         f'Successfully pulled image "{image}" in 1.02s (1.02s including '
                         f'waiting). Image size: 72080558 bytes.')]
    return [PodEvent("Normal", "Pulled", f'Container image "{image}" already present on machine')]


def _start_events(container: Mapping[str, Any]) -> list[PodEvent]:
    name = container.get("name")
    return [*_pull_events(container), PodEvent("Normal", "Created", f"Created container: {name}"),
            PodEvent("Normal", "Started", f"Started container {name}")]


def _running(pod: Obj, container: Mapping[str, Any], now: str, *, ready: bool,
             history: tuple[int, Obj] = (0, {})) -> Obj:
    restarts, last = history
    image = str(container.get("image", ""))
    name = str(container.get("name"))
    return _base(container) | {
        "image": normalized_image(image), "imageID": image_id(image),
        "containerID": container_id(pod, name, restarts), "ready": ready, "started": True,
        "restartCount": restarts, "lastState": last,
        "state": {"running": {"startedAt": now}}}


@dataclass(frozen=True, slots=True)
class Exit:
    """How a container ended: exit code, when it started and ended, its restarts so far."""

    code: int
    started: str
    finished: str
    restarts: int


def _terminated(pod: Obj, container: Mapping[str, Any], end: Exit) -> Obj:
    code, now, started, restarts = end.code, end.finished, end.started, end.restarts
    image = str(container.get("image", ""))
    name = str(container.get("name"))
    cid = container_id(pod, name, restarts)
    return _base(container) | {
        "image": normalized_image(image), "imageID": image_id(image), "containerID": cid,
        "ready": False, "started": False, "restartCount": restarts,
        "state": {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                 "startedAt": started, "finishedAt": now, "containerID": cid}}}


def _ready_flag(pod: Obj) -> bool:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return annotations.get(ANNOTATION_NOT_READY) != "true"


def running(pod: Obj, where: Where) -> Built:
    """Rows 2 and 3: sandbox ready, init containers done, containers running."""
    now = where.now
    ready = _ready_flag(pod)
    events: list[PodEvent] = []
    init_statuses = []
    for c in _inits(pod):
        events += _start_events(c)
        if c.get("restartPolicy") == "Always":  # a sidecar keeps running
            init_statuses.append(_running(pod, c, now, ready=True))
        else:
            init_statuses.append(_terminated(pod, c, Exit(0, now, now, 0)))
    statuses = []
    for c in _regular(pod):
        events += _start_events(c)
        statuses.append(_running(pod, c, now, ready=ready))
    names = _names(_regular(pod))
    state = ("True", "", "") if ready else ("False", "ContainersNotReady",
                                            f"containers with unready status: {names}")
    wanted = [("PodReadyToStartContainers", "True", "", ""), ("Initialized", "True", "", ""),
              ("Ready", *state), ("ContainersReady", *state), ("PodScheduled", "True", "", "")]
    status: Obj = {"phase": "Running", "hostIP": where.host_ip, "hostIPs": _ips(where.host_ip),
                   "podIP": where.pod_ip, "podIPs": _ips(where.pod_ip),
                   "containerStatuses": statuses}
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    return Built(_patch(pod, status, _conditions(pod, wanted, now)), tuple(events))


def _started_at(pod: Obj, name: str) -> tuple[str, int]:
    for status in (pod.get("status") or {}).get("containerStatuses") or ():
        if status.get("name") == name:
            running_ = (status.get("state") or {}).get("running") or {}
            return running_.get("startedAt", ""), int(status.get("restartCount") or 0)
    return "", 0


def exited(pod: Obj, where: Where) -> Built:
    """Run-once containers exit with ``kubewire.io/exit-code`` (0 by default): ``Succeeded``;
    a failure is ``Failed`` under ``Never`` and a restart under ``OnFailure``/``Always``."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    try:
        code = int(annotations.get(ANNOTATION_EXIT) or 0)
    except ValueError:
        code = 1
    policy = _spec(pod).get("restartPolicy") or "Always"
    if policy == "Always" or (code != 0 and policy == "OnFailure"):
        return _restarted(pod, where, code, ())
    return _finished(pod, where, code, "PodCompleted" if code == 0 else "PodFailed", ())


def _restarted(pod: Obj, where: Where, code: int, before: tuple[PodEvent, ...]) -> Built:
    """The containers exited with ``code`` and the kubelet started them again."""
    now = where.now
    statuses = []
    events = list(before)
    for c in _regular(pod):
        started, restarts = _started_at(pod, str(c.get("name")))
        last = _terminated(pod, c, Exit(code, started or now, now, restarts))["state"]
        statuses.append(_running(pod, c, now, ready=_ready_flag(pod),
                                 history=(restarts + 1, last)))
        events += _start_events(c)
    return Built({"metadata": {"uid": (pod.get("metadata") or {}).get("uid")},
                  "status": {"containerStatuses": statuses}}, tuple(events))


def liveness_failed(pod: Obj, where: Where) -> Built:
    """Liveness probes failed: ``Unhealthy``, the kubelet kills the containers (exit 137) and
    restarts them (``restartCount`` + 1, ``lastState.terminated``)."""
    events = []
    for c in _regular(pod):
        name = c.get("name")
        events += [PodEvent("Warning", "Unhealthy", f"Liveness probe failed: {PROBE_FAILURE}"),
                   PodEvent("Normal", "Killing",
                            f"Container {name} failed liveness probe, will be restarted")]
    return _restarted(pod, where, 137, tuple(events))


def readiness(pod: Obj, where: Where) -> Built:
    """Readiness probes fail (``kubewire.io/not-ready: "true"``) or pass again: the containers'
    ``ready`` and the ``Ready``/``ContainersReady`` conditions follow."""
    ready = _ready_flag(pod)
    old = list((pod.get("status") or {}).get("containerStatuses") or ())
    statuses = [{**s, "ready": ready} for s in old]  # the list has no merge key: all of it
    names = _names(_regular(pod))
    state = ("True", "", "") if ready else ("False", "ContainersNotReady",
                                            f"containers with unready status: {names}")
    wanted = [("PodReadyToStartContainers", "True", "", ""), ("Initialized", "True", "", ""),
              ("Ready", *state), ("ContainersReady", *state), ("PodScheduled", "True", "", "")]
    status: Obj = {"containerStatuses": statuses}
    events = () if ready else (
        PodEvent("Warning", "Unhealthy", f"Readiness probe failed: {PROBE_FAILURE}"),)
    return Built(_patch(pod, status, _conditions(pod, wanted, where.now)), events)


def _finished(pod: Obj, where: Where, code: int, reason: str,
              events: tuple[PodEvent, ...]) -> Built:
    now = where.now
    statuses = []
    for c in _regular(pod):
        started, restarts = _started_at(pod, str(c.get("name")))
        if started:
            statuses.append(_terminated(pod, c, Exit(code, started, now, restarts)))
        else:  # never started: the kubelet reports it as gone before it ran
            statuses.append(_base(c) | {"state": {"terminated": {
                "exitCode": 137, "reason": "ContainerStatusUnknown",
                "message": "The container could not be located when the pod was terminated",
                "startedAt": None, "finishedAt": None}}})
    phase = "Succeeded" if code == 0 and all(
        s["state"]["terminated"]["exitCode"] == 0 for s in statuses) else "Failed"
    reason = "PodCompleted" if phase == "Succeeded" else reason if reason != "PodCompleted" \
        else "PodFailed"
    initialized = ("True", "PodCompleted", "") if phase == "Succeeded" else ("True", "", "")
    wanted = [("PodReadyToStartContainers", "False", "", ""), ("Initialized", *initialized),
              ("Ready", "False", reason, ""), ("ContainersReady", "False", reason, ""),
              ("PodScheduled", "True", "", "")]
    status: Obj = {"phase": phase, "containerStatuses": statuses}
    return Built(_patch(pod, status, _conditions(pod, wanted, now)), events)


def terminated(pod: Obj, where: Where) -> Built:
    """Graceful deletion: ``Killing`` each running container; they exit 0 on SIGTERM and the
    kubelet writes the terminal phase (§13.3)."""
    events = tuple(PodEvent("Normal", "Killing", f"Stopping container {c.get('name')}")
                   for c in _regular(pod) if _started_at(pod, str(c.get("name")))[0])
    return _finished(pod, where, 0, "PodCompleted", events)


BUILDERS: dict[str, Builder] = {"pending": pending, "running": running, "exited": exited,
                                "terminated": terminated, "readiness": readiness,
                                "liveness_failed": liveness_failed}
