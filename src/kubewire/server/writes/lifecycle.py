"""Server-set metadata and the object lifecycle (create, update, delete) as pure functions.

Objects are JSON dicts; inputs are never mutated (functions work on copies; ``prepare_create``
shares the subtrees it leaves alone with its input). Time
comes in as ``now`` and randomness as a ``random.Random``. Rules and messages follow
kube-apiserver v1.32 (objects-and-clients.md §1-§2): ``registry/rest/{create,update,delete}.go``,
``registry/generic/registry/store.go``, ``endpoints/handlers/{create,update,patch}.go`` and the
per-kind ``strategy.go`` files cited inline.

Call order for a write, mirroring kube: ``prepare_create`` | (``prepare_update`` then
``update_precondition`` on the request body, compared by storage), then ``is_noop_update`` and
``should_remove_after_update``. For DELETE: ``plan_delete`` then ``delete_response``.

Garbage-collector finalizers (``orphan``, ``foregroundDeletion``) are added for a DELETE's
``propagationPolicy``/``orphanDependents`` (or the kind's default policy) only when
``DeleteRequest.garbage_collection`` says a garbage collector runs to remove them (kube-apiserver's
``--enable-garbage-collector``; store.go ``deletionFinalizersForGarbageCollection``): without
one, objects would hang. ``managedFields`` are dropped on every write because no field manager
keeps them current (§1.5).
"""

from __future__ import annotations

import copy
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from fractions import Fraction
from types import MappingProxyType
from typing import Literal, cast

from kubewire.go_text import uuid4_text
from kubewire.json_copy import copy_json
from kubewire.json_types import JSON
from kubewire.quantity import parse_quantity
from kubewire.resources import Resource
from kubewire.server.apiextensions.crd import crd_strategy
from kubewire.server.patch.json_patch import json_equal
from kubewire.server.writes import csr_strategy
from kubewire.server.writes.batch_strategy import generate_job_selector
from kubewire.server.writes.validation.certificates import CSR_ID
from kubewire.status import (
    BadRequest,
    FieldError,
    Forbidden,
    conflict,
    forbidden,
    forbidden_resource,
    invalid,
    invalid_object,
    success_status,
)
from kubewire.times import format_time, parse_time

GENERATE_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery util/rand/rand.go
GENERATE_NAME_SUFFIX_CHARS = 5  # apiserver storage/names/generate.go randomLength
GENERATE_NAME_MAX_PREFIX_CHARS = 58  # 63 - 5: the generated name fits a DNS label
DEFAULT_TERMINATION_GRACE_PERIOD_S = 30  # pod defaulting, core/v1 defaults.go
IMMORTAL_NAMESPACES = ("default", "kube-system", "kube-public")  # namespace lifecycle admission
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
_WIPED_ON_CREATE = ("creationTimestamp", "uid", "deletionTimestamp",
                    "deletionGracePeriodSeconds", "selfLink", "managedFields")
# ObjectMeta field order (apimachinery meta/v1 types.go), so stored metadata reads like kube's.
_META_ORDER = ("name", "generateName", "namespace", "selfLink", "uid", "resourceVersion",
               "generation", "creationTimestamp", "deletionTimestamp",
               "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences",
               "finalizers", "managedFields")
_META_FIELDS = frozenset(_META_ORDER)
_EMPTY: Mapping[str, JSON] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class LifecycleTraits:
    """Per-kind lifecycle facts (kube ``strategy.go``) not yet fields of the ``Resource`` entry."""

    create_status: Literal["keep", "drop", "set"] = "keep"  # what create does to .status
    initial_status: Mapping[str, JSON] = field(default_factory=lambda: _EMPTY)  # "set" stores it
    status_keeps_metadata: tuple[str, ...] = ()  # metadata /status restores from the stored object
    status_keeps_all_metadata: bool = False  # CRs: /status changes nothing but .status
    pod_rules: bool = False  # qosClass on create, graceful deletion (pod/strategy.go)
    template_generation: bool = False  # DaemonSets' templateGeneration annotation
    # fields of a feature gate off in v1.32: dropped on create, and on update unless the stored
    # object uses them (the strategies' drop*DisabledFields)
    disabled_fields: tuple[tuple[str, ...], ...] = ()
    namespace_rules: bool = False  # finalizers, Terminating, immortal names (namespace/*.go)
    etcd_prefix: str = ""  # key prefix quoted in storage errors; "" means the plural
    phase_time: bool = False  # PVs: status.lastPhaseTransitionTime when the phase is set


_TRAITS: Mapping[str, LifecycleTraits] = MappingProxyType({
    "core/pods": LifecycleTraits("set", MappingProxyType({"phase": "Pending"}),
                                 ("ownerReferences",), pod_rules=True),
    "core/namespaces": LifecycleTraits("set", MappingProxyType({"phase": "Active"}),
                                       namespace_rules=True),
    "core/nodes": LifecycleTraits("keep", etcd_prefix="minions"),  # nodes may set status on create
    "core/services": LifecycleTraits("set", MappingProxyType({"loadBalancer": {}}),
                                     etcd_prefix="services/specs"),
    "apps/deployments": LifecycleTraits("set", status_keeps_metadata=("labels",)),
    # {replicaset,statefulset,daemonset}/strategy.go PrepareForCreate: the zero status (its
    # counters without omitempty)
    "apps/replicasets": LifecycleTraits("set", MappingProxyType({"replicas": 0})),
    # replicationcontroller/strategy.go PrepareForCreate: the zero status, likewise
    "core/replicationcontrollers": LifecycleTraits("set", MappingProxyType({"replicas": 0})),
    "apps/statefulsets": LifecycleTraits(
        "set", MappingProxyType({"replicas": 0, "availableReplicas": 0}),
        disabled_fields=(("spec", "updateStrategy", "rollingUpdate", "maxUnavailable"),)),
    "apps/daemonsets": LifecycleTraits("set", MappingProxyType({
        "currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0,
        "numberReady": 0}), template_generation=True),
    "networking.k8s.io/ingresses": LifecycleTraits("set", MappingProxyType({"loadBalancer": {}}),
                                                   etcd_prefix="ingress"),
    # persistentvolumeclaim/strategy.go clears status (read back defaulted: Pending);
    # persistentvolume/strategy.go sets Pending and the phase's transition time (GA in 1.31)
    "core/persistentvolumeclaims": LifecycleTraits("set", MappingProxyType({"phase": "Pending"})),
    "core/persistentvolumes": LifecycleTraits("set", MappingProxyType({"phase": "Pending"}),
                                              phase_time=True),
    # poddisruptionbudget/strategy.go PrepareForCreate: the zero status (four counters
    # without omitempty)
    "policy/poddisruptionbudgets": LifecycleTraits("set", MappingProxyType({
        "disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0,
        "expectedPods": 0})),
    # horizontalpodautoscaler/strategy.go PrepareForCreate: the zero status (known to both
    # versions; v2's null currentMetrics comes with its Go encoding, hpa_conversion.v2_as_go)
    "autoscaling/horizontalpodautoscalers": LifecycleTraits("set", MappingProxyType({
        "desiredReplicas": 0})),
})
_JOBS_ID = "batch/jobs"


def lifecycle_traits(resource: Resource) -> LifecycleTraits:
    """The lifecycle facts for ``resource``: its table entry, else defaults from its flags."""
    traits = _TRAITS.get(resource.id)
    if traits is not None:
        return traits
    if resource.is_custom and resource.has_status:  # customresource/strategy.go
        return LifecycleTraits("drop", status_keeps_all_metadata=True,
                               etcd_prefix=f"{resource.group}/{resource.plural}")
    return LifecycleTraits("set" if resource.has_status else "keep")


def generate_name(prefix: str, rng: random.Random) -> str:
    """``generateName`` resolution: the prefix (cut to 58 chars) plus 5 random characters.

    Called twice per pod create: here for the name, and by the ServiceAccount plugin's facts
    for the token volume's suffix (``kube-api-access-<5>``, kube's ``utilrand.String(5)``)."""
    return prefix[:GENERATE_NAME_MAX_PREFIX_CHARS] + _random_suffix(rng)


_ALPHABET_SIZE = len(GENERATE_NAME_ALPHABET)
_ALPHABET_BITS = _ALPHABET_SIZE.bit_length()
_CHOICE = random.Random.choice
# what Random picks for a generator whose ``random`` and ``getrandbits`` are its own (CPython)
_RANDBELOW = getattr(random.Random, "_randbelow_with_getrandbits", None)


def _random_suffix(rng: random.Random) -> str:
    """``GENERATE_NAME_SUFFIX_CHARS`` characters of ``rng.choice(GENERATE_NAME_ALPHABET)``,
    drawn as ``Random._randbelow_with_getrandbits`` draws them (the same ``getrandbits`` calls,
    so a seeded generator gives the same names) without choice's two method calls per
    character; a generator whose ``choice`` or ``_randbelow`` is its own is asked directly."""
    kind = type(rng)
    if (_RANDBELOW is None or kind.choice is not _CHOICE
            or getattr(kind, "_randbelow", None) is not _RANDBELOW):
        return "".join(rng.choice(GENERATE_NAME_ALPHABET)
                       for _ in range(GENERATE_NAME_SUFFIX_CHARS))
    bits = rng.getrandbits
    chars = []
    for _ in range(GENERATE_NAME_SUFFIX_CHARS):
        drawn = bits(_ALPHABET_BITS)
        while drawn >= _ALPHABET_SIZE:
            drawn = bits(_ALPHABET_BITS)
        chars.append(GENERATE_NAME_ALPHABET[drawn])
    return "".join(chars)


# --- create ---------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class CreateContext:
    """Request facts for a create: the URL namespace ("" for cluster-scoped), clock and dice."""

    namespace: str
    now: datetime
    rng: random.Random


def prepare_create(resource: Resource, obj: dict[str, JSON], ctx: CreateContext) -> dict[str, JSON]:
    """The object to store for a create of ``obj``, with every server-set field filled in.

    Sets uid, creationTimestamp, generation, the namespace from the URL and a generated name;
    drops client-set deletion fields, selfLink, managedFields and resourceVersion "0"; resets
    status as the kind's strategy does. Raises BadRequest when the body namespace differs from
    the URL's, or when a resourceVersion is set (kube answers 500; kubewire never 500s a client
    mistake, so 400 with kube's text).
    """
    # Only the top level and metadata change (status is replaced, a namespace's spec copied
    # below), so the rest is shared with ``obj`` instead of deep-copied; ``obj`` is not changed.
    new = dict(obj)
    if isinstance(new.get("metadata"), dict):
        new["metadata"] = dict(new["metadata"])
    meta = metadata_of(new)
    for name in _WIPED_ON_CREATE:  # handlers/create.go WipeObjectMetaSystemFields
        meta.pop(name, None)
    ensure_namespace(resource, meta, ctx.namespace)
    meta["creationTimestamp"] = format_time(ctx.now)  # rest.FillObjectMetaSystemFields
    meta["uid"] = uuid4_text(ctx.rng.getrandbits(128))
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = generate_name(str(meta["generateName"]), ctx.rng)
    traits = lifecycle_traits(resource)
    _status_on_create(traits, new, ctx.now)
    if resource.id == crd_strategy.CRD_ID:
        crd_strategy.prepare_for_create(new)
    if resource.generation != "none":
        meta["generation"] = 1
    for path in traits.disabled_fields:
        _drop_at(new, path)
    if traits.template_generation:  # daemonset/strategy.go: templateGeneration at least 1
        _set_template_generation(meta, max(template_generation(meta), 1))
    meta = _generated_selector(resource, new, meta)
    if traits.namespace_rules:
        if isinstance(new.get("spec"), dict):
            new["spec"] = dict(new["spec"])  # _namespace_defaults sets its finalizers
        _namespace_defaults(new, on_create=True)
    _check_create_resource_version(meta)
    new["metadata"] = _ordered(meta)
    return new


def _generated_selector(resource: Resource, new: dict[str, JSON],
                        meta: dict[str, JSON]) -> dict[str, JSON]:
    """job/strategy.go PrepareForCreate: a Job's generated selector and labels; returns the
    object's metadata (``meta`` itself for other kinds)."""
    if resource.id != _JOBS_ID:
        return meta
    new["metadata"] = meta
    generate_job_selector(new)
    return metadata_of(new)


def _status_on_create(traits: LifecycleTraits, obj: dict[str, JSON], now: datetime) -> None:
    if traits.create_status == "drop":
        obj.pop("status", None)
    elif traits.create_status == "set":
        obj["status"] = copy_json(dict(traits.initial_status))
        if traits.pod_rules:
            _pod_status_on_create(obj, now)
        if traits.phase_time:
            cast(dict[str, JSON], obj["status"])["lastPhaseTransitionTime"] = format_time(now)


def _pod_status_on_create(pod: dict[str, JSON], now: datetime) -> None:
    # pod/strategy.go PrepareForCreate: Pending, the QoS class, and the SchedulingGated condition.
    status = pod["status"]
    spec = _mapping(pod.get("spec"))
    if spec and spec.get("schedulingGates"):
        status["conditions"] = [{
            "type": "PodScheduled", "status": "False", "lastProbeTime": None,
            "lastTransitionTime": format_time(now), "reason": "SchedulingGated",
            "message": "Scheduling is blocked due to non-empty scheduling gates"}]
    status["qosClass"] = pod_qos_class(pod)


def _namespace_defaults(namespace: dict[str, JSON], *, on_create: bool) -> None:
    # core/v1 defaults.go SetDefaults_Namespace; namespace/strategy.go PrepareForCreate.
    meta = metadata_of(namespace)
    if meta.get("name"):
        labels = _mapping(meta.get("labels"))
        meta["labels"] = {**labels, NAMESPACE_NAME_LABEL: meta["name"]}
    if on_create:
        spec = namespace.setdefault("spec", {})
        finalizers = list(spec.get("finalizers") or [])
        if "kubernetes" not in finalizers:
            spec["finalizers"] = [*finalizers, "kubernetes"]


def _check_create_resource_version(meta: dict[str, JSON]) -> None:
    # storage/etcd3/store.go Create: only a parseable, non-zero version is refused.
    version = meta.pop("resourceVersion", None)
    if isinstance(version, str) and version.isdigit() and int(version) != 0:
        raise BadRequest("resourceVersion should not be set on objects to be created")


# --- update ---------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class UpdateContext:
    """Request facts for an update: URL namespace and name, the endpoint, and the clock."""

    namespace: str
    name: str
    now: datetime
    # "" (the object), "status", "scale", "finalize" (namespaces), "ephemeralcontainers" (pods)
    subresource: str = ""


def prepare_update(resource: Resource, old: dict[str, JSON], new: dict[str, JSON],
                   ctx: UpdateContext, *, owned: bool = False) -> dict[str, JSON]:
    """The object to store when ``new`` (a PUT body or patch result) replaces ``old``.

    Keeps server-owned metadata from ``old`` (uid, creationTimestamp, generation, deletion
    fields), restores what the endpoint may not change (status on the main endpoint, everything
    else on ``/status``) and bumps generation per ``resource.generation``. Raises BadRequest for a
    namespace or name differing from the URL's, Conflict for a different uid, Invalid for new
    finalizers on an object being deleted or a changed deletionGracePeriodSeconds. The
    resourceVersion is left as sent: storage compares it (see ``update_precondition``).
    ``owned``: ``new`` is the caller's own copy, changed in place instead of copied.
    """
    obj = new if owned else copy_json(new)
    meta = metadata_of(obj)
    old_meta = _mapping(old.get("metadata"))
    ensure_namespace(resource, meta, ctx.namespace)  # handlers/update.go, then checkName
    if meta.get("name", "") != ctx.name:
        raise BadRequest(f"the name of the object ({meta.get('name', '')}) does not match the "
                         f"name on the URL ({ctx.name})")
    _check_uid_precondition(resource, meta, old_meta, ctx)
    meta.pop("managedFields", None)
    meta.pop("generation", None)  # rest/update.go BeforeUpdate: clients cannot set generation
    if "generation" in old_meta:
        meta["generation"] = old_meta["generation"]
    obj = _apply_update_strategy(resource, old, obj, ctx)
    if lifecycle_traits(resource).phase_time and ctx.subresource == "status":
        _phase_transition_time(old, obj, ctx.now)
    meta = obj["metadata"]
    errors = _keep_system_fields(old_meta, meta)
    if errors:
        raise invalid_object(resource.invalid_group, resource.kind, ctx.name, errors)
    obj["metadata"] = _ordered(meta)
    return obj


def _check_uid_precondition(resource: Resource, meta: dict[str, JSON],
                            old_meta: Mapping[str, JSON], ctx: UpdateContext) -> None:
    # rest/update.go defaultUpdatedObjectInfo.Preconditions -> storage Preconditions.Check.
    uid, stored = meta.get("uid"), old_meta.get("uid", "")
    if not uid or uid == stored:
        return
    prefix = lifecycle_traits(resource).etcd_prefix or resource.plural
    key = "/".join(p for p in ("/registry", prefix, ctx.namespace, ctx.name) if p)
    raise conflict(resource.group, resource.plural, ctx.name,
                   f"StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, "
                   f"AdditionalErrorMsg: Precondition failed: UID in precondition: {uid}, "
                   f"UID in object meta: {stored}")


def _apply_update_strategy(resource: Resource, old: dict[str, JSON], obj: dict[str, JSON],
                           ctx: UpdateContext) -> dict[str, JSON]:
    """The strategies' ``PrepareForUpdate``: what each endpoint may change, and generation."""
    subresource = ctx.subresource
    if resource.id == CSR_ID:  # the object, /status and /approval: strategies of their own
        return csr_strategy.prepare_update(old, obj, subresource, ctx.now)
    traits = lifecycle_traits(resource)
    if subresource == "status":
        result = _status_endpoint_update(traits, old, obj)
        _workload_rules(traits, old, result, subresource)
        return result
    if subresource == "ephemeralcontainers":
        return _ephemeral_containers_update(old, obj)
    if resource.id == crd_strategy.CRD_ID:
        obj["status"] = crd_strategy.status_on_update(old, obj)
    elif resource.has_status:
        _copy_key(old, obj, "status")
    if traits.namespace_rules:
        if subresource == "":  # only /finalize may change spec.finalizers
            _copy_key(_mapping(old.get("spec")), obj.setdefault("spec", {}), "finalizers")
        _namespace_defaults(obj, on_create=False)
    _workload_rules(traits, old, obj, subresource)
    # /scale writes the parent through its own strategy (ScaleREST): a spec change like any
    if subresource in ("", "scale") and _generation_changed(resource, old, obj):
        old_meta = _mapping(old.get("metadata"))
        obj["metadata"]["generation"] = int(old_meta.get("generation") or 0) + 1
    return obj


def _workload_rules(traits: LifecycleTraits, old: dict[str, JSON], obj: dict[str, JSON],
                    subresource: str) -> None:
    """apps/v1 strategies: disabled fields the stored object does not use are dropped (before
    the generation compares specs); a DaemonSet's templateGeneration is the stored one."""
    for path in traits.disabled_fields:
        if _at(old, path) is None:
            _drop_at(obj, path)
    if traits.template_generation:
        _update_template_generation(old, obj, subresource)


def _at(obj: Mapping[str, JSON], path: tuple[str, ...]) -> JSON:
    value: JSON = obj  # a JSON object
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _drop_at(obj: dict[str, JSON], path: tuple[str, ...]) -> None:
    """Remove ``path`` from ``obj``, copying the dicts along it (they may be shared)."""
    holder = _at(obj, path[:-1])
    if not isinstance(holder, dict) or path[-1] not in holder:
        return
    parent = obj
    for key in path[:-1]:
        child = dict(parent[key])  # a dict: _at found it
        parent[key] = child
        parent = child
    del parent[path[-1]]


TEMPLATE_GENERATION = "deprecated.daemonset.template.generation"  # apps/v1 annotation


def template_generation(meta: Mapping[str, JSON]) -> int:
    """A DaemonSet's internal ``spec.templateGeneration``, which apps/v1 keeps in an
    annotation (``Convert_v1_DaemonSet_To_apps_DaemonSet``): 0 when absent. Raises BadRequest
    with Go's ``strconv.ParseInt`` text when it is not an int64."""
    annotations = _mapping(meta.get("annotations"))
    text = annotations.get(TEMPLATE_GENERATION)
    if not isinstance(text, str):
        return 0
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise BadRequest(f'strconv.ParseInt: parsing "{text}": invalid syntax')
    value = int(text)
    if not -(2**63) <= value < 2**63:
        raise BadRequest(f'strconv.ParseInt: parsing "{text}": value out of range')
    return value


def _set_template_generation(meta: dict[str, JSON], value: int) -> None:
    # Convert_apps_DaemonSet_To_v1_DaemonSet writes the annotation on every encode
    annotations = dict(_mapping(meta.get("annotations")))
    annotations[TEMPLATE_GENERATION] = str(value)
    meta["annotations"] = annotations


def _update_template_generation(old: dict[str, JSON], obj: dict[str, JSON],
                                subresource: str) -> None:
    """daemonset/strategy.go PrepareForUpdate: "update is not allowed to set
    TemplateGeneration": the stored one, plus one when the main endpoint changed the template
    (``/status`` keeps the stored spec)."""
    template_generation(obj["metadata"])  # decoding the body refuses an unparseable one
    value = template_generation(_mapping(old.get("metadata")))
    template = _mapping(obj.get("spec")).get("template")
    if subresource != "status" and not semantic_equal(
            _mapping(old.get("spec")).get("template"), template):
        value += 1
    _set_template_generation(obj["metadata"], value)


def _phase_transition_time(old: Mapping[str, JSON], obj: dict[str, JSON], now: datetime) -> None:
    """persistentvolume/strategy.go status PrepareForUpdate: an unchanged phase keeps its
    ``lastPhaseTransitionTime`` when the body drops it; a changed phase gets ``now`` unless the
    body sets a time of its own."""
    old_status, status = _mapping(old.get("status")), obj.get("status")
    if not isinstance(status, dict):
        return
    old_time, new_time = old_status.get("lastPhaseTransitionTime"), status.get(
        "lastPhaseTransitionTime")
    if old_status.get("phase") == status.get("phase"):
        if new_time is None and old_time is not None:
            status["lastPhaseTransitionTime"] = old_time
    elif new_time is None or new_time == old_time:
        status["lastPhaseTransitionTime"] = format_time(now)


def _ephemeral_containers_update(old: dict[str, JSON], obj: dict[str, JSON]) -> dict[str, JSON]:
    """pod/strategy.go ``dropNonEphemeralContainerUpdates``: the stored pod with the body's
    ``spec.ephemeralContainers`` (and its name, namespace, resourceVersion and uid): nothing
    else a write to ``pods/<name>/ephemeralcontainers`` sends is kept."""
    result = copy.deepcopy(old)
    meta, old_meta = obj["metadata"], dict(_mapping(old.get("metadata")))
    result["metadata"] = old_meta
    for key in ("name", "namespace", "resourceVersion", "uid"):
        _set_or_pop(old_meta, key, meta.get(key))
    spec = result.setdefault("spec", {})
    assert isinstance(spec, dict)
    _set_or_pop(spec, "ephemeralContainers", _mapping(obj.get("spec")).get("ephemeralContainers"))
    return result


def _status_endpoint_update(traits: LifecycleTraits, old: dict[str, JSON],
                            obj: dict[str, JSON]) -> dict[str, JSON]:
    # copy_json, not deepcopy: a stored object is JSON, and deepcopy of a CRD's schemas took
    # several ms of each CRD controller status write
    result = copy_json({k: v for k, v in old.items() if k not in ("metadata", "status")})
    meta, old_meta = obj["metadata"], _mapping(old.get("metadata"))
    if traits.status_keeps_all_metadata:  # customresource/status_strategy.go
        body_version = meta.get("resourceVersion")
        meta = {k: copy_json(v) for k, v in old_meta.items() if k != "managedFields"}
        _set_or_pop(meta, "resourceVersion", body_version)
    for name in traits.status_keeps_metadata:
        _copy_key(old_meta, meta, name)
    result["metadata"] = meta
    if "status" in obj:
        result["status"] = obj["status"]
    if traits.pod_rules and isinstance(result.get("status"), dict):
        status = result["status"]
        if not status.get("qosClass") and _mapping(old.get("status")).get("qosClass"):
            status["qosClass"] = old["status"]["qosClass"]  # qos is immutable once set
    return result


def _generation_changed(resource: Resource, old: dict[str, JSON], obj: dict[str, JSON]) -> bool:
    # Built-ins compare typed structs (apiequality.Semantic: nil == empty); CRs compare raw JSON.
    equal = json_equal if resource.is_custom else semantic_equal
    old_meta, meta = _mapping(old.get("metadata")), _mapping(obj.get("metadata"))
    policy = resource.generation
    if policy in ("spec", "spec_and_annotations"):
        changed = not equal(old.get("spec"), obj.get("spec"))
        if policy == "spec_and_annotations":
            changed = changed or not equal(old_meta.get("annotations"), meta.get("annotations"))
        return changed
    if policy in ("non_metadata", "non_metadata_and_labels"):
        changed = not equal({k: v for k, v in old.items() if k != "metadata"},
                            {k: v for k, v in obj.items() if k != "metadata"})
        if policy == "non_metadata_and_labels":
            changed = changed or not equal(old_meta.get("labels"), meta.get("labels"))
        return changed
    return False


def _keep_system_fields(old_meta: Mapping[str, JSON], meta: dict[str, JSON]) -> list[FieldError]:
    """rest/update.go BeforeUpdate plus ValidateObjectMetaUpdate; returns the field errors."""
    if not meta.get("uid") and old_meta.get("uid"):
        meta["uid"] = old_meta["uid"]
    _copy_key(old_meta, meta, "creationTimestamp")
    _copy_key(old_meta, meta, "deletionTimestamp")  # an update never sets, clears or moves it
    errors: list[FieldError] = []
    if not old_meta.get("deletionTimestamp"):
        meta.pop("deletionGracePeriodSeconds", None)
        return errors
    added = sorted(set(meta.get("finalizers") or []) - set(old_meta.get("finalizers") or []))
    if added:
        listed = "[]string{" + ", ".join(f'"{f}"' for f in added) + "}"
        errors.append(forbidden("metadata.finalizers", "no new finalizers can be added if the "
                                f"object is being deleted, found new finalizers {listed}"))
    grace, old_grace = meta.get("deletionGracePeriodSeconds"), old_meta.get(
        "deletionGracePeriodSeconds")
    if grace is None:
        _set_or_pop(meta, "deletionGracePeriodSeconds", old_grace)
    elif grace != old_grace:
        errors.append(invalid("metadata.deletionGracePeriodSeconds", grace, "field is immutable"))
    return errors


class _GoHexZero:
    """Renders as Go's ``%#v`` of ``uint64(0)`` inside a field error."""

    def __repr__(self) -> str:
        return "0x0"


def update_precondition(resource: Resource, new: dict[str, JSON]) -> int | None:
    """The resourceVersion an update must match, or None for an unconditional update.

    Raises Invalid when the body has none and the kind requires one (CRs), BadRequest when it
    is not a decimal number (kube: a bare strconv error, i.e. 500).
    """
    meta = _mapping(new.get("metadata"))
    text = str(meta.get("resourceVersion") or "")
    if text and not text.isdigit():
        raise BadRequest(f'strconv.ParseUint: parsing "{text}": invalid syntax')
    if text and int(text) >= 2**64:
        raise BadRequest(f'strconv.ParseUint: parsing "{text}": value out of range')
    version = int(text) if text else 0
    if version:
        return version
    if resource.allow_unconditional_update:
        return None
    # store.go Update: the Invalid error names the resource where the kind belongs (#18526).
    error = FieldError("FieldValueInvalid", "metadata.resourceVersion", _GoHexZero(),
                       "must be specified for an update")
    raise invalid_object(resource.group, resource.plural, str(meta.get("name") or ""), [error])


def is_noop_update(old: dict[str, JSON], new: dict[str, JSON]) -> bool:
    """True when ``new`` equals ``old`` apart from resourceVersion: kube then skips the write."""
    old, new = _without_version(old), _without_version(new)
    # json_equal implies ==, which Python answers in C: most updates differ, and end here
    return old == new and json_equal(old, new)


# --- delete ---------------------------------------------------------------------------------------

DeleteAction = Literal["remove", "mark", "mark_then_remove", "unchanged"]
"""``remove``: delete now. ``mark``: store ``DeletePlan.obj`` (MODIFIED), it stays.
``mark_then_remove``: store it, then delete it (kube does both writes for a pod with grace 0).
``unchanged``: nothing to write; answer ``DeletePlan.obj``."""


@dataclass(frozen=True, slots=True)
class DeleteRequest:
    """The DeleteOptions that matter here (objects-and-clients.md §1.12)."""

    grace_period_seconds: int | None = None
    precondition_uid: str | None = None
    precondition_resource_version: str | None = None
    propagation_policy: str | None = None
    orphan_dependents: bool | None = None
    # a garbage collector runs (kube-apiserver's --enable-garbage-collector): the policy's
    # finalizers are added
    garbage_collection: bool = False


@dataclass(frozen=True, slots=True)
class DeletePlan:
    """What a DELETE does: ``action``, and the object after it (marked, or as stored)."""

    action: DeleteAction
    obj: dict[str, JSON]

    @property
    def remove(self) -> bool:
        """The object is deleted from storage (after storing ``obj`` for mark_then_remove)."""
        return self.action in ("remove", "mark_then_remove")

    @property
    def needs_write(self) -> bool:
        """``obj`` must be stored as an update (watchers see MODIFIED)."""
        return self.action in ("mark", "mark_then_remove")


_PROPAGATION_POLICIES = ("Foreground", "Background", "Orphan")


def validate_delete_request(opts: DeleteRequest) -> None:
    """validation.ValidateDeleteOptions for ``propagationPolicy``; raises Invalid."""
    policy = opts.propagation_policy
    if policy is not None and policy not in _PROPAGATION_POLICIES:
        detail = "supported values: " + ", ".join(f'"{p}"' for p in (*_PROPAGATION_POLICIES, "nil"))
        error = FieldError("FieldValueNotSupported", "propagationPolicy", policy, detail)
        raise invalid_object("meta.k8s.io", "DeleteOptions", "", [error])


def plan_delete(resource: Resource, obj: dict[str, JSON], opts: DeleteRequest,
                now: datetime) -> DeletePlan:
    """Decide what DELETE does to the stored ``obj``: remove it, mark it, or leave it.

    Objects with finalizers and graceful pods are marked (deletionTimestamp, grace period,
    generation +1 when set) instead of removed; namespaces are marked Terminating. Raises
    Invalid (bad options), Conflict (a failed precondition) and Forbidden (an immortal
    namespace).
    """
    validate_delete_request(opts)
    traits = lifecycle_traits(resource)
    if traits.namespace_rules:
        return _plan_namespace_delete(resource, traits, obj, opts, now)
    meta = _mapping(obj.get("metadata"))
    why = _failed_precondition(meta, opts, "the {what} in the precondition ({want}) does not match "
                               "the {what} in record ({have}). The object might have been {how}")
    if why:  # rest/delete.go BeforeDelete names the kind, not the resource
        raise conflict(resource.group, resource.kind, meta.get("name", ""), why)
    if resource.id == crd_strategy.CRD_ID and not meta.get("deletionTimestamp"):
        # customresourcedefinition/etcd.go REST.Delete: mark, the cleanup controller finishes
        marked = crd_strategy.mark_deleting(copy.deepcopy(obj), format_time(now))
        return DeletePlan("mark", _with_ordered_meta(marked))
    return _plan_store_delete(traits, obj, opts, now, default_gc_policy(resource))


ORPHAN_FINALIZER = "orphan"  # metav1.FinalizerOrphanDependents
FOREGROUND_FINALIZER = "foregroundDeletion"  # metav1.FinalizerDeleteDependents
GcPolicy = Literal["Unsupported", "Orphan", "Delete"]
# kinds whose strategy's DefaultGarbageCollectionPolicy is not DeleteDependents (for the
# versions kubewire serves): Events are never GC-managed; ReplicationControllers and batch/v1
# Jobs orphan by default (pkg/registry/{core/event,core/replicationcontroller,batch/job})
_GC_POLICIES: Mapping[str, GcPolicy] = MappingProxyType({
    "core/events": "Unsupported", "events.k8s.io/events": "Unsupported",
    "core/replicationcontrollers": "Orphan", "batch/jobs": "Orphan"})


def default_gc_policy(resource: Resource) -> GcPolicy:
    """The kind's ``DefaultGarbageCollectionPolicy``."""
    return _GC_POLICIES.get(resource.id, "Delete")


def gc_finalizers(finalizers: list[str], opts: DeleteRequest,
                  default: GcPolicy) -> list[str] | None:
    """store.go ``deletionFinalizersForGarbageCollection``: the finalizers after this DELETE
    (``orphan`` and ``foregroundDeletion`` removed, then added back as the options, the
    object's own finalizers or the kind's default ask), or None when they do not change."""
    if not opts.garbage_collection or default == "Unsupported":
        return None
    policy = opts.propagation_policy
    if opts.orphan_dependents is not None:
        orphan, foreground = opts.orphan_dependents, False
    elif policy is not None:
        orphan, foreground = policy == "Orphan", policy == "Foreground"
    elif ORPHAN_FINALIZER in finalizers:
        orphan, foreground = True, False
    elif FOREGROUND_FINALIZER in finalizers:
        orphan, foreground = False, True
    else:
        orphan, foreground = default == "Orphan", False
    kept = [f for f in finalizers if f not in (ORPHAN_FINALIZER, FOREGROUND_FINALIZER)]
    if orphan:
        kept.append(ORPHAN_FINALIZER)
    if foreground:
        kept.append(FOREGROUND_FINALIZER)
    return None if set(kept) == set(finalizers) else kept


def _failed_precondition(meta: Mapping[str, JSON], opts: DeleteRequest, template: str) -> str:
    checks = (("UID", opts.precondition_uid, "uid", "deleted and then recreated"),
              ("ResourceVersion", opts.precondition_resource_version, "resourceVersion",
               "modified"))
    for what, want, key, how in checks:
        have = str(meta.get(key) or "")
        if want is not None and want != have:
            return template.format(what=what, want=want, have=have, how=how)
    return ""


def _plan_store_delete(traits: LifecycleTraits, obj: dict[str, JSON], opts: DeleteRequest,
                       now: datetime, gc_policy: GcPolicy = "Unsupported") -> DeletePlan:
    """store.go Delete / updateForGracefulDeletionAndFinalizers (GC finalizers after the
    pending-graceful check: a pod already counting down keeps its finalizers)."""
    marked = copy.deepcopy(obj)
    meta = metadata_of(marked)
    grace = opts.grace_period_seconds
    grace = 1 if grace is not None and grace < 0 else grace  # rest/delete.go: negative means 1
    if isinstance(meta.get("deletionGracePeriodSeconds"), int) and meta[
            "deletionGracePeriodSeconds"] < 0:
        meta["deletionGracePeriodSeconds"] = 1
    graceful = False
    if traits.pod_rules:
        graceful, pending = _graceful_delete(marked, grace, now)
        if pending:
            return DeletePlan("unchanged", obj)
    finalizers = meta.get("finalizers")
    changed = gc_finalizers([str(f) for f in finalizers] if isinstance(finalizers, list) else [],
                            opts, gc_policy)
    if changed is not None:
        _set_or_pop(meta, "finalizers", changed or None)
    has_finalizers = bool(meta.get("finalizers"))
    if graceful:
        lingers = has_finalizers or meta.get("deletionGracePeriodSeconds", 0) > 0
        return DeletePlan("mark" if lingers else "mark_then_remove", _with_ordered_meta(marked))
    if not has_finalizers:
        return DeletePlan("remove", obj)
    _mark_as_deleting(meta, now)
    if json_equal(marked, obj):
        return DeletePlan("unchanged", obj)
    return DeletePlan("mark", _with_ordered_meta(marked))


def _graceful_delete(pod: dict[str, JSON], grace: int | None, now: datetime) -> tuple[bool, bool]:
    """rest/delete.go BeforeDelete for a graceful kind: (graceful, already pending)."""
    meta = pod["metadata"]
    current = meta.get("deletionGracePeriodSeconds")
    if meta.get("deletionTimestamp"):
        if not current:  # nil or 0: finish the deletion now
            return False, False
        if grace is None or grace >= current:  # only a shorter grace period is accepted
            return False, True
        start = parse_time(str(meta["deletionTimestamp"])) - timedelta(seconds=current)
        meta["deletionTimestamp"] = format_time(start + timedelta(seconds=grace))
        meta["deletionGracePeriodSeconds"] = grace
        return True, False
    period = _pod_grace_period(pod, grace)
    meta["deletionTimestamp"] = format_time(now + timedelta(seconds=period))
    meta["deletionGracePeriodSeconds"] = period
    if int(meta.get("generation") or 0) > 0:
        meta["generation"] = int(meta["generation"]) + 1
    return True, False


def _pod_grace_period(pod: Mapping[str, JSON], grace: int | None) -> int:
    # pod/strategy.go CheckGracefulDelete.
    spec = _mapping(pod.get("spec"))
    status = _mapping(pod.get("status"))
    period = grace
    if period is None:
        spec_grace = spec.get("terminationGracePeriodSeconds")
        period = spec_grace if isinstance(spec_grace, int) else DEFAULT_TERMINATION_GRACE_PERIOD_S
    if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
        period = 0  # never scheduled, or already terminated: nothing to wait for
    return 1 if period < 0 else period


def _mark_as_deleting(meta: dict[str, JSON], now: datetime) -> None:
    # store.go markAsDeleting.
    existing = meta.get("deletionTimestamp")
    if not existing and int(meta.get("generation") or 0) > 0:
        meta["generation"] = int(meta["generation"]) + 1
    if not existing or parse_time(str(existing)) > now:
        meta["deletionTimestamp"] = format_time(now)
    meta["deletionGracePeriodSeconds"] = 0


def _plan_namespace_delete(resource: Resource, traits: LifecycleTraits, obj: dict[str, JSON],
                           opts: DeleteRequest, now: datetime) -> DeletePlan:
    # namespace/storage/storage.go Delete: preconditions, admission, then mark Terminating.
    meta = _mapping(obj.get("metadata"))
    name = str(meta.get("name") or "")
    why = _failed_precondition(meta, opts, "Precondition failed: {what} in precondition: {want}, "
                               "{what} in object meta: {have}")
    if why:
        raise conflict(resource.group, resource.plural, name, why)
    if name in IMMORTAL_NAMESPACES:
        raise forbidden_resource(resource.group, resource.plural, name,
                                 "this namespace may not be deleted")
    if not meta.get("deletionTimestamp"):
        marked = copy.deepcopy(obj)
        metadata_of(marked)["deletionTimestamp"] = format_time(now)
        marked.setdefault("status", {})["phase"] = "Terminating"
        return DeletePlan("mark", _with_ordered_meta(marked))
    if _mapping(obj.get("spec")).get("finalizers"):
        return DeletePlan("unchanged", obj)  # the namespace controller still has work to do
    return _plan_store_delete(traits, obj, opts, now)


def should_remove_after_update(resource: Resource, obj: dict[str, JSON]) -> bool:
    """True when a stored update leaves a deleting object with nothing to wait for.

    store.go ShouldDeleteDuringUpdate: deletionTimestamp set, no finalizers, grace period nil or
    0 (a graceful pod waits for its kubelet). Namespaces also need ``spec.finalizers`` empty
    (ShouldDeleteNamespaceDuringUpdate).
    """
    if lifecycle_traits(resource).namespace_rules and _mapping(obj.get("spec")).get("finalizers"):
        return False
    meta = _mapping(obj.get("metadata"))
    if meta.get("finalizers") or not meta.get("deletionTimestamp"):
        return False
    return not meta.get("deletionGracePeriodSeconds")


def delete_response(resource: Resource, obj: dict[str, JSON], *,
                    removed: bool = True) -> dict[str, JSON]:
    """The DELETE body: the object, or for a removed object of a kind without
    ReturnDeletedObject the Success Status (store.go finalizeDelete; ``details.kind`` is the
    resource)."""
    if not removed or resource.return_deleted_object:
        return obj
    meta = _mapping(obj.get("metadata"))
    details: dict[str, JSON] = {}
    if meta.get("name"):
        details["name"] = meta["name"]
    if resource.group:
        details["group"] = resource.group
    details["kind"] = resource.plural
    if meta.get("uid"):
        details["uid"] = meta["uid"]
    return success_status(details)


def namespace_terminating_error(resource: Resource, name: str, namespace: str) -> Forbidden:
    """403 for a create in a Terminating namespace (namespace lifecycle admission)."""
    err = forbidden_resource(resource.group, resource.plural, name, "unable to create new content "
                             f"in namespace {namespace} because it is being terminated")
    assert err.details is not None
    err.details["causes"] = [{"reason": "NamespaceTerminating",
                              "message": f"namespace {namespace} is being terminated",
                              "field": "metadata.namespace"}]
    return err


# --- pod QoS class (pkg/apis/core/helper/qos/qos.go ComputePodQOS) --------------------------------

_QOS_RESOURCES = ("cpu", "memory")


def pod_qos_class(pod: Mapping[str, JSON]) -> str:
    """``Guaranteed``, ``Burstable`` or ``BestEffort`` from the containers' cpu/memory resources.

    Requests missing from a container default to its limits first, as the pod defaulter does
    before kube computes the class (core/v1 defaults.go SetDefaults_Pod).
    """
    spec = _mapping(pod.get("spec"))
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = _mapping(_mapping(container).get("resources"))
        if not resources.get("limits") and not resources.get("requests"):
            guaranteed = False  # no quantities to add, and no cpu and memory limits
            continue
        container_limits = _positive_quantities(_mapping(resources.get("limits")))
        defaulted = {**_mapping(resources.get("limits")), **_mapping(resources.get("requests"))}
        _add_quantities(requests, _positive_quantities(defaulted))
        _add_quantities(limits, container_limits)
        guaranteed = guaranteed and all(name in container_limits for name in _QOS_RESOURCES)
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and len(requests) == len(limits) and all(
            limits.get(name) == amount for name, amount in requests.items()):
        return "Guaranteed"
    return "Burstable"


def _positive_quantities(resources: Mapping[str, JSON]) -> dict[str, Fraction]:
    found = {name: parse_quantity(resources.get(name)) for name in _QOS_RESOURCES}
    return {name: amount for name, amount in found.items() if amount is not None and amount > 0}


def _add_quantities(total: dict[str, Fraction], more: Mapping[str, Fraction]) -> None:
    for name, amount in more.items():
        total[name] = total.get(name, Fraction(0)) + amount


def _mapping(value: JSON) -> Mapping[str, JSON]:
    return value if isinstance(value, dict) else {}


# --- small helpers --------------------------------------------------------------------------------

def metadata_of(obj: dict[str, JSON]) -> dict[str, JSON]:
    """``obj``'s metadata, made an empty object when it is missing or not an object."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = obj["metadata"] = {}
    return meta


def ensure_namespace(resource: Resource, meta: dict[str, JSON], url_namespace: str) -> None:
    """rest.EnsureObjectNamespaceMatchesRequestNamespace: an object's namespace defaults to
    the URL's and must otherwise match it (cluster-scoped kinds expect ""); BadRequest."""
    expected = url_namespace if resource.namespaced else ""
    current = meta.get("namespace") or ""
    if current == expected:
        return
    if not current or not expected:
        _set_or_pop(meta, "namespace", expected or None)
        return
    raise BadRequest("the namespace of the provided object does not match the namespace sent "
                     "on the request")


def _copy_key(source: Mapping[str, JSON], target: dict[str, JSON], key: str) -> None:
    _set_or_pop(target, key, copy.deepcopy(source[key]) if key in source else None)


def _set_or_pop(target: dict[str, JSON], key: str, value: JSON) -> None:
    if value is None:
        target.pop(key, None)
    else:
        target[key] = value


# ObjectMeta's omitempty collections: an empty (or null) one is not written (Go's encoder; a
# custom resource's metadata is coerced through ObjectMeta too)
_OMITTED_WHEN_EMPTY = frozenset({"labels", "annotations", "ownerReferences", "finalizers"})


def _ordered(meta: dict[str, JSON]) -> dict[str, JSON]:
    """``meta`` in ObjectMeta's field order, without empty omitempty collections (other keys
    after them, in their order: one pass over ObjectMeta's fields, and a second over ``meta``
    only when it holds a key that is not one of them)."""
    out: dict[str, JSON] = {}
    for key in _META_ORDER:
        if key in meta:
            value = meta[key]
            if not (key in _OMITTED_WHEN_EMPTY and _is_empty(value)):
                out[key] = value
    if not _META_FIELDS.issuperset(meta):
        for key, value in meta.items():
            if key not in _META_FIELDS:  # _OMITTED_WHEN_EMPTY are ObjectMeta fields
                out[key] = value
    return out


def _with_ordered_meta(obj: dict[str, JSON]) -> dict[str, JSON]:
    obj["metadata"] = _ordered(metadata_of(obj))
    return obj


def _without_version(obj: dict[str, JSON]) -> dict[str, JSON]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or "resourceVersion" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "resourceVersion"}}


def _is_empty(value: JSON) -> bool:
    return value is None or (isinstance(value, dict | list) and not value)


def semantic_equal(a: JSON, b: JSON) -> bool:
    """apiequality.Semantic.DeepEqual on JSON: absent, null, {} and [] are all equal."""
    if _is_empty(a) and _is_empty(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return all(semantic_equal(a.get(k), b.get(k)) for k in a.keys() | b.keys())
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(semantic_equal(x, y) for x, y in zip(a, b, strict=True))
    return json_equal(a, b)
