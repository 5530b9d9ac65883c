"""A conversion webhook's ``ConversionReview``: the request kube sends, the checks of the answer.

Source: apiextensions-apiserver ``pkg/apiserver/conversion/webhook_converter.go``
(``createConversionReviewObjects``, ``getConvertedObjectsFromResponse``, ``Convert``,
``validateConvertedObject``, ``restoreObjectMeta``; crds.md §6.3). Every failure is a
``ConversionFailure`` whose text is kube's, whole (``conversion webhook for <gvk> failed: ...``);
the server answers it as kube does a plain Go error: 500, no reason.

kube's storage converts one object per call (each object is decoded from etcd on its own), so
its texts for one object are the ones clients meet; a batch of several objects (kubewire sends
the objects of one list page or one watch flush together, which the review allows) fails with
kube's list texts (``... at index <i>``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubewire.go_text import go_quote, go_type_name
from kubewire.json_types import JSON
from kubewire.names import is_qualified_name, is_valid_label_value
from kubewire.server.apiextensions.crd.crd_internal import as_dict, as_list, as_str
from kubewire.server.apiextensions.schemas.go_values import deep_copy

REVIEW_GROUP_VERSION = "apiextensions.k8s.io/v1"
REVIEW_VERSIONS = ("v1beta1", "v1")  # what kube can send, in conversionReviewVersions' order


class ConversionFailure(Exception):
    """A conversion that failed; ``str()`` is kube's whole message."""


def gvk_text(api_version: str, kind: str) -> str:
    """Go's ``schema.GroupVersionKind.String()``: ``<group>/<version>, Kind=<kind>``."""
    group, _, version = api_version.rpartition("/")
    return f"{group}/{version}, Kind={kind}"


def review_version(crd: Mapping[str, Any]) -> str | None:
    """The first of ``conversionReviewVersions`` kube can send (``v1`` or ``v1beta1``)."""
    webhook = as_dict(as_dict(as_dict(crd.get("spec")).get("conversion")).get("webhook"))
    for version in as_list(webhook.get("conversionReviewVersions")):
        if version in REVIEW_VERSIONS:
            return as_str(version)
    return None


def review_request(version: str, uid: str, desired: str,
                   objects: Sequence[Mapping[str, JSON]]) -> dict[str, JSON]:
    """The ``ConversionReview`` kube posts (in ``apiextensions.k8s.io/<version>``)."""
    return {"kind": "ConversionReview", "apiVersion": f"apiextensions.k8s.io/{version}",
            "request": {"uid": uid, "desiredAPIVersion": desired, "objects": list(objects)}}


def converted_objects(version: str, uid: str, review: JSON) -> list[JSON]:
    """``getConvertedObjectsFromResponse``: the converted objects of a decoded answer, or the
    failure (without kube's ``conversion webhook for <gvk> failed: `` prefix)."""
    body = review if isinstance(review, dict) else {}
    if version == "v1":  # v1beta1 answers were never checked for these
        got = f"{as_str(body.get('apiVersion'))}, Kind={as_str(body.get('kind'))}"
        if got != f"{REVIEW_GROUP_VERSION}, Kind=ConversionReview":
            raise ConversionFailure(f"expected webhook response of {REVIEW_GROUP_VERSION}, "
                                    f"Kind=ConversionReview, got {_gvk_of(body)}")
    response = body.get("response")
    if not isinstance(response, dict):
        raise ConversionFailure("no response provided")
    if version == "v1" and response.get("uid", "") != uid:
        raise ConversionFailure(f'expected response.uid="{uid}", '
                                f'got "{as_str(response.get("uid"))}"')
    result = as_dict(response.get("result"))
    if result.get("status") != "Success":
        message = as_str(result.get("message"))
        raise ConversionFailure(message or f"response.result.status was "
                                f"'{as_str(result.get('status'))}', not 'Success'")
    return as_list(response.get("convertedObjects"))


def _gvk_of(body: Mapping[str, JSON]) -> str:
    api_version = as_str(body.get("apiVersion"))
    group, _, version = api_version.rpartition("/")
    return f"{group}/{version}, Kind={as_str(body.get('kind'))}" if group else \
        f"/{version}, Kind={as_str(body.get('kind'))}"


def checked_object(original: Mapping[str, JSON], converted: JSON, desired: str,
                   index: int, batch: bool) -> dict[str, JSON]:
    """One converted object checked against what was sent (``Convert``'s checks), with the
    original's metadata restored but for the answer's labels and annotations. The failure's
    text is whole but for the ``conversion webhook for <gvk> `` prefix."""
    at = f" at index {index}" if batch else ""
    if not isinstance(converted, dict):
        raise ConversionFailure(f"returned invalid converted object{at}: "
                                "json: cannot unmarshal into Go value of type map")
    where = f"invalid converted object at index {index}" if batch else \
        "invalid object at index 0"
    got_version = as_str(converted.get("apiVersion"))
    if got_version != desired:
        raise ConversionFailure(f"returned {where}: invalid groupVersion (expected "
                                f"{_gv(desired)}, received {_gv(got_version)})")
    if converted.get("kind") != original.get("kind"):
        raise ConversionFailure(f"returned {where}: invalid kind (expected "
                                f"{as_str(original.get('kind'))}, received "
                                f"{as_str(converted.get('kind'))})")
    invalid = f"invalid converted object at index {index}" if batch else "invalid object"
    problem = _identity_problem(original, converted)
    if problem:
        raise ConversionFailure(f"returned {invalid}: {problem}")
    try:
        return _restore_meta(original, converted)
    except ConversionFailure as err:
        where = f"invalid metadata in object at index {index}" if batch else "invalid metadata"
        raise ConversionFailure(f"returned {where}: {err}") from None


def _gv(api_version: str) -> str:
    """Go's ``GroupVersion.String()``: ``group/version``, or ``version`` for the core group."""
    group, _, version = api_version.rpartition("/")
    return f"{group}/{version}" if group else version


def _identity_problem(original: Mapping[str, JSON], converted: Mapping[str, JSON]) -> str:
    """``validateConvertedObject``: kind, name, namespace and uid unchanged."""
    before, after = as_dict(original.get("metadata")), as_dict(converted.get("metadata"))
    checks = (("kind", as_str(original.get("kind")), as_str(converted.get("kind"))),
              ("name", as_str(before.get("name")), as_str(after.get("name"))),
              ("namespace", as_str(before.get("namespace")), as_str(after.get("namespace"))),
              ("UID", as_str(before.get("uid")), as_str(after.get("uid"))))
    for what, expected, got in checks:
        if expected != got:
            return f"must have the same {what}: {expected} != {got}"
    return ""


def _restore_meta(original: Mapping[str, JSON], converted: dict[str, JSON]) -> dict[str, JSON]:
    """``restoreObjectMeta``: the original's metadata, with the answer's labels and
    annotations (checked when they changed)."""
    answered = converted.get("metadata")
    if "metadata" not in converted:
        raise ConversionFailure("missing metadata in converted object")
    if not isinstance(answered, dict):
        raise ConversionFailure(f"invalid metadata of type {go_type_name(answered)} in converted "
                                "object")
    meta = deep_copy(as_dict(original.get("metadata")))
    for key in ("labels", "annotations"):
        value = answered.get(key)
        if value is None:
            meta.pop(key, None)
            continue
        if not isinstance(value, dict):
            raise ConversionFailure(f"invalid metadata.{key} of type {go_type_name(value)} in "
                                    "converted object")
        for name, item in value.items():
            if not isinstance(item, str):
                raise ConversionFailure(f"metadata.{key}[{name}] must be a string, but is "
                                        f"{go_type_name(item)} in converted object")
        if value != meta.get(key) and key == "labels":
            _check_labels(value)
        meta[key] = dict(value)
    out = dict(converted)
    out["metadata"] = meta
    return out


def _check_labels(labels: Mapping[str, JSON]) -> None:
    """``ValidateLabels``: keys qualified names, values label values (kube's aggregate text;
    Go walks the map in random order, kubewire in key order)."""
    errors: list[str] = []
    for key in sorted(labels):
        value = as_str(labels[key])
        errors += [f"metadata.labels: Invalid value: {go_quote(key)}: {problem}"
                   for problem in is_qualified_name(key)]
        errors += [f"metadata.labels: Invalid value: {go_quote(value)}: {problem}"
                   for problem in is_valid_label_value(value)]
    if errors:
        raise ConversionFailure(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")


