"""batch/v1 Job create strategy: the generated selector and labels (pure).

kube's ``pkg/registry/batch/job/strategy.go`` ``PrepareForCreate`` calls ``generateSelector``
unless ``spec.manualSelector`` is true: the pod template gets ``job-name`` and
``batch.kubernetes.io/job-name`` (the Job's name) and ``controller-uid`` and
``batch.kubernetes.io/controller-uid`` (its uid) unless it already has them, and the selector
gets ``matchLabels[batch.kubernetes.io/controller-uid]`` unless it already has that key
(a conflicting user value is refused by validation, ``validateGeneratedSelector``).

A Job whose body had no labels of its own shows its template's labels as its own: kube's
``SetDefaults_Job`` shares the template's label map with the Job (the generated labels land in
both) and defaults again each time it decodes the stored Job. kubewire copies them here and in
its defaulter, so the object clients read is the one kube answers.
"""

from __future__ import annotations

from kubewire.json_copy import copy_json
from kubewire.json_types import JSON

__all__ = ["CONTROLLER_UID_LABEL", "JOB_NAME_LABEL", "LEGACY_CONTROLLER_UID_LABEL",
           "LEGACY_JOB_NAME_LABEL", "generate_job_selector", "ownership_basis"]

JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
LEGACY_JOB_NAME_LABEL = "job-name"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"


def generate_job_selector(job: dict[str, JSON]) -> None:
    """``generateSelectorIfNeeded`` on a Job being created (its name and uid already set):
    changes ``job`` in place, copying ``spec`` and ``metadata`` first (they may be shared)."""
    spec = job.get("spec")
    meta = job.get("metadata")
    if not isinstance(spec, dict) or not isinstance(meta, dict):
        return
    if spec.get("manualSelector") is True:
        return
    spec = copy_json(spec)
    job["spec"] = spec
    template = spec.get("template")
    if not isinstance(template, dict):
        template = spec["template"] = {}
    template_meta = template.get("metadata")
    if not isinstance(template_meta, dict):
        template_meta = template["metadata"] = {}
    labels = template_meta.get("labels")
    given = dict(labels) if isinstance(labels, dict) else None
    labels = dict(given or {})
    name, uid = str(meta.get("name") or ""), str(meta.get("uid") or "")
    for key in (LEGACY_JOB_NAME_LABEL, JOB_NAME_LABEL):
        labels.setdefault(key, name)
    for key in (LEGACY_CONTROLLER_UID_LABEL, CONTROLLER_UID_LABEL):
        labels.setdefault(key, uid)
    template_meta["labels"] = labels
    selector = spec.get("selector")
    if not isinstance(selector, dict):
        selector = spec["selector"] = {}
    match = selector.get("matchLabels")
    match = dict(match) if isinstance(match, dict) else {}
    match.setdefault(CONTROLLER_UID_LABEL, uid)
    selector["matchLabels"] = match
    own = meta.get("labels")
    if not own or own == given:  # the defaulter's copy of the template's labels, or none
        meta["labels"] = dict(labels)


def ownership_basis(prepared: dict[str, JSON], decoded: dict[str, JSON]) -> dict[str, JSON]:
    """``prepared`` with the selector and labels as the request's decoded body had them: kube's
    create handler records the writer's fields before the strategy generates these, so the
    generated ones belong to no manager (a shallow copy; ``prepared`` is not changed)."""
    def at(obj: dict[str, JSON], *path: str) -> JSON:
        value: JSON = obj
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        return value

    basis = dict(prepared)
    meta = dict(prepared.get("metadata") or {}) if isinstance(prepared.get("metadata"),
                                                               dict) else {}
    _put(meta, "labels", at(decoded, "metadata", "labels"))
    basis["metadata"] = meta
    spec = prepared.get("spec")
    if isinstance(spec, dict):
        spec = dict(spec)
        _put(spec, "selector", at(decoded, "spec", "selector"))
        template = spec.get("template")
        if isinstance(template, dict):
            template = dict(template)
            template_meta = template.get("metadata")
            if isinstance(template_meta, dict):
                template_meta = dict(template_meta)
                _put(template_meta, "labels", at(decoded, "spec", "template", "metadata",
                                                 "labels"))
                template["metadata"] = template_meta
            spec["template"] = template
        basis["spec"] = spec
    return basis


def _put(holder: dict[str, JSON], key: str, value: JSON) -> None:
    if value is None:
        holder.pop(key, None)
    else:
        holder[key] = value
