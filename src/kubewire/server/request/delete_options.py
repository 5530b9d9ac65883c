"""DELETE options from a request body or, without one, from the query, as kube decodes them.

Sources: apiserver ``pkg/endpoints/handlers/delete.go`` (``DeleteResource``), apimachinery
``pkg/apis/meta/v1/validation`` (``ValidateDeleteOptions``) and ``sigs.k8s.io/json``, whose decode
errors reach clients verbatim. Failures raise BadRequest (400) or Invalid (422) with
kube-apiserver v1.32's exact texts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import msgspec

from kubewire.go_text import JSON_KIND_NAMES, GoLiteral, decode_go_json, go_json_error, go_quote
from kubewire.server.request.query_params import Query, first_value, int64_param, optional_bool
from kubewire.server.request.write_options import dry_run_errors
from kubewire.server.wire.json_depth import EXCEEDED_MAX_DEPTH, too_deep
from kubewire.status import BadRequest, FieldError, invalid, invalid_object, not_supported

META_V1 = "meta.k8s.io/v1"  # the group version of DeleteOptions besides the legacy "v1"


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteOptions:
    """``metav1.DeleteOptions`` from a DELETE body or, without a body, from the query."""

    grace_period_seconds: int | None = None
    precondition_uid: str | None = None
    precondition_resource_version: str | None = None
    propagation_policy: str | None = None
    orphan_dependents: bool | None = None
    dry_run: bool = False


_PROPAGATION = ("Foreground", "Background", "Orphan")
_FIND_KIND = ('struct { APIVersion string "json:\\"apiVersion,omitempty\\""; '
              'Kind string "json:\\"kind,omitempty\\"" }')
# JSON field -> (Python type, Go type name) for sigs.k8s.io/json's case-sensitive decode.
_BODY_FIELDS: dict[str, tuple[type, str]] = {
    "gracePeriodSeconds": (int, "int64"), "orphanDependents": (bool, "bool"),
    "propagationPolicy": (str, "v1.DeletionPropagation"), "dryRun": (list, "[]string"),
    "preconditions": (dict, "v1.Preconditions"), "preconditions.uid": (str, "types.UID"),
    "preconditions.resourceVersion": (str, "string"), "dryRun[]": (str, "string"),
    "apiVersion": (str, "string"), "kind": (str, "string"),
}
_META_SCHEME = "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme/register.go:28"


def _type_error(value: Any, struct: str, name: str) -> BadRequest | None:
    want, go_type = _BODY_FIELDS[name]
    if want is int:
        ok = type(value) is int and -(2**63) <= value < 2**63
    else:
        ok = isinstance(value, want)
    if value is None or ok:
        return None
    kind = JSON_KIND_NAMES[type(value)]
    # Go names the literal only when a number fails to fit a numeric field.
    shown = f"number {json.dumps(value)}" if kind == "number" and want is int else kind
    field_name = name.removesuffix("[]")
    return BadRequest(f"json: cannot unmarshal {shown} into Go struct field "
                      f"{struct}.{field_name} of type {go_type}")


_TOO_DEEP = "couldn't get version/kind; json parse error: " + EXCEEDED_MAX_DEPTH


def _decode_delete_body(body: bytes) -> dict[str, Any]:
    """Decode a DeleteOptions body; 400 with Go's decoder text (kube 1.32 answers 500 here)."""
    try:
        doc = decode_go_json(body)
    except msgspec.DecodeError as exc:
        raise BadRequest("couldn't get version/kind; json parse error: "
                         + go_json_error(body, exc)) from None
    except RecursionError:
        raise BadRequest(_TOO_DEEP) from None
    if too_deep(doc):
        raise BadRequest(_TOO_DEEP)
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise BadRequest("couldn't get version/kind; json parse error: json: cannot unmarshal "
                         f"{JSON_KIND_NAMES[type(doc)]} into Go value of type {_FIND_KIND}")
    for name in ("apiVersion", "kind"):
        err = _type_error(doc.get(name), "", name)
        if err is not None:
            raise BadRequest("couldn't get version/kind; json parse error: " + err.message)
    version, kind = doc.get("apiVersion") or "", doc.get("kind") or ""
    if version not in ("", "v1", META_V1) or kind not in ("", "DeleteOptions"):
        raise BadRequest(f'no kind {go_quote(kind or "DeleteOptions")} is registered for version '
                         f'{go_quote(version or META_V1)} in scheme "{_META_SCHEME}"')
    _check_body_types(doc)
    return doc


def _check_body_types(doc: dict[str, Any]) -> None:
    checks: list[tuple[Any, str]] = [(doc.get(n), n) for n in _BODY_FIELDS
                                     if "." not in n and "[" not in n and n in doc]
    checks += [(v, "dryRun[]") for v in doc.get("dryRun") or () if isinstance(doc["dryRun"], list)]
    pre = doc.get("preconditions")
    if isinstance(pre, dict):
        checks += [(pre.get(n), f"preconditions.{n}") for n in ("uid", "resourceVersion")]
    for value, name in checks:
        err = _type_error(value, "DeleteOptions", name)
        if err is not None:
            raise err


def _delete_query_fields(query: Query) -> dict[str, Any]:
    grace = first_value(query, "gracePeriodSeconds")
    return {"gracePeriodSeconds": None if grace is None else int64_param(grace),
            "orphanDependents": optional_bool(query, "orphanDependents"),
            "propagationPolicy": first_value(query, "propagationPolicy"),
            "dryRun": list(query.get("dryRun", ()))}


def parse_delete_options(body: bytes, query: Query) -> DeleteOptions:
    """Decode DELETE options as ``DeleteResource`` does: the body if any, else the query.

    Raises BadRequest for an undecodable body or bad integer, and Invalid (422,
    ``DeleteOptions.meta.k8s.io "" is invalid: ...``) per ``ValidateDeleteOptions``.
    """
    doc = _decode_delete_body(body) if body else _delete_query_fields(query)
    policy, orphan = doc.get("propagationPolicy"), doc.get("orphanDependents")
    dry_run = doc.get("dryRun") or []
    errs: list[FieldError] = []
    if orphan is not None and policy is not None:
        errs.append(invalid("propagationPolicy", GoLiteral(go_quote(policy)),
                            "orphanDependents and deletionPropagation cannot be both set"))
    if policy is not None and policy not in _PROPAGATION:
        errs.append(not_supported("propagationPolicy", GoLiteral(go_quote(policy)),
                                  [*_PROPAGATION, "nil"]))
    errs += dry_run_errors(dry_run)
    if errs:
        raise invalid_object("meta.k8s.io", "DeleteOptions", "", errs)
    pre = doc.get("preconditions") or {}
    return DeleteOptions(grace_period_seconds=doc.get("gracePeriodSeconds"),
                         precondition_uid=pre.get("uid"),
                         precondition_resource_version=pre.get("resourceVersion"),
                         propagation_policy=policy, orphan_dependents=orphan,
                         dry_run=bool(dry_run))
