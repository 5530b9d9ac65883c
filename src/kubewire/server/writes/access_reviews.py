"""``POST`` of authorization.k8s.io/v1's reviews: SelfSubjectAccessReview, SubjectAccessReview,
LocalSubjectAccessReview and SelfSubjectRulesReview, answered as kube v1.32's
``pkg/registry/authorization/*`` REST Creaters do (``kubectl auth can-i``, its ``--list``, and
controllers checking access). Nothing is stored: the answer is ``201`` with the review and its
``status``.

The create handler's steps come first, as for any create: the output negotiated (406), the
options (400: ``dryRun``, ``fieldValidation``, ``fieldManager``), the body decoded (400/415, a
local review's namespace defaulted to and checked against the URL's), unknown fields warned of or
refused by ``fieldValidation``, and ``metadata.managedFields`` recorded for the write's manager
(kube's field manager runs before the REST ``Create``, which is why validation looks past them).
Then the REST step: validation (``validation/authorization.py``: 422 ``.authorization.k8s.io ""
is invalid``, kube's message naming the internal object's empty kind and no name), and the
decision from the server's authorizer (``decide``, ``rules_for``):

- SelfSubjectAccessReview: about the requesting user (after impersonation, so
  ``kubectl auth can-i --as`` asks about the impersonated user);
- SubjectAccessReview and LocalSubjectAccessReview: about the spec's user, groups, uid and extra;
- SelfSubjectRulesReview: the requesting user's rules in ``spec.namespace`` (400 ``no
  namespace on request`` without one); its answer is a new object with the status alone.

A local review's namespace need not exist (NamespaceLifecycle lets access reviews through, so
a "not found" cannot reveal a namespace). ``dryRun`` changes nothing (nothing is written either
way). Who may create a review is decided
before, by the authorization of ``create`` on its resource, as for any request.
"""

from __future__ import annotations

from typing import Any, Protocol

from kubewire.json_types import JSON
from kubewire.schema import validate as schema_validate
from kubewire.server.access.authn import UserInfo
from kubewire.server.access.authz import Attributes, Decision, RulesResult
from kubewire.server.context import ServerContext
from kubewire.server.patch.field_ownership import (
    WriteFacts,
    parse_tracked_write_options,
    track_write,
)
from kubewire.server.request.options import WriteOptions
from kubewire.server.request.routes import Route
from kubewire.server.wire.encoding import json_response, negotiate_json
from kubewire.server.wire.http_messages import Request, Response
from kubewire.server.writes.payloads import decode_payload
from kubewire.server.writes.rbac_writes import REQUESTER
from kubewire.server.writes.review_attributes import (
    access_status,
    go_spec,
    own_pointer_structs,
    review_attributes,
    rules_status,
    spec_user,
)
from kubewire.server.writes.validation.authorization import (
    validate_local_subject_access_review,
    validate_self_subject_access_review,
    validate_subject_access_review,
)
from kubewire.status import (
    BadRequest,
    FieldError,
    Invalid,
    MethodNotAllowed,
    NotFound,
    aggregate_messages,
)

__all__ = ["GROUP", "ReviewAuthorizer", "invalid_review", "serve_access_review"]

GROUP = "authorization.k8s.io"
SELF_ACCESS, ACCESS, LOCAL_ACCESS, SELF_RULES = (
    "SelfSubjectAccessReview", "SubjectAccessReview", "LocalSubjectAccessReview",
    "SelfSubjectRulesReview")
_VALIDATORS = {SELF_ACCESS: validate_self_subject_access_review,
               ACCESS: validate_subject_access_review,
               LOCAL_ACCESS: validate_local_subject_access_review}


class ReviewAuthorizer(Protocol):
    """What the reviews ask of the server's authorizer chain (``access/authz.py``)."""

    def decide(self, attrs: Attributes) -> Decision: ...

    def rules_for(self, user: UserInfo, namespace: str) -> RulesResult: ...


def invalid_review(errors: list[FieldError]) -> Invalid:
    """``NewInvalid(authorizationapi.Kind(review.Kind), "", errs)``: the decoded internal object
    has no kind, so the message starts ``.authorization.k8s.io "" is invalid`` and the details
    name the group alone."""
    return Invalid(f'.{GROUP} "" is invalid: {aggregate_messages(errors)}',
                   {"group": GROUP, "causes": [e.to_cause() for e in errors]})


async def serve_access_review(ctx: ServerContext, request: Request, route: Route,
                              authorizer: ReviewAuthorizer) -> Response:
    """Answer a POST to one of the four review collections."""
    resource = route.resource
    if (not route.is_collection or route.watch_path
            or (resource.namespaced and not route.namespace)):  # no such route: 404
        raise NotFound("the server could not find the requested resource", {})
    if request.method != "POST":  # the collection serves POST alone
        raise MethodNotAllowed("the server does not allow this method on the requested resource",
                               {})
    negotiate_json(request.header("accept"))
    wopts = parse_tracked_write_options(request.query, request.header("user-agent"))
    body = decode_payload(request, route, resource.api_version, resource.kind)
    body, warnings = _known_fields(resource.api_version, resource.kind, body, wopts)
    requester = REQUESTER.get()
    user = requester.user if requester is not None else None
    spec = _dict(body.get("spec"))
    if resource.kind == SELF_RULES:
        return _rules_answer(resource.api_version, authorizer, user, spec, warnings)
    meta = _dict(body.get("metadata"))
    answer: dict[str, JSON] = {"kind": resource.kind, "apiVersion": resource.api_version,
                               "metadata": _echoed_meta(meta),
                               "spec": go_spec(spec, subject=resource.kind != SELF_ACCESS)}
    answer = _tracked(WriteFacts(route, wopts, ctx.now()), answer)
    managed = answer["metadata"]
    assert isinstance(managed, dict)
    if "managedFields" in managed:
        meta = {**meta, "managedFields": managed["managedFields"]}
    errors = _VALIDATORS[resource.kind](body | {"metadata": meta})
    if errors:
        raise invalid_review(errors)
    if resource.kind == SELF_ACCESS:
        if user is None:
            raise BadRequest("no user present on request")
        asked = user
    else:
        asked = spec_user(spec)
    decision = authorizer.decide(review_attributes(asked, spec))
    answer["status"] = access_status(decision, spec)
    return json_response(201, answer, _warning_headers(warnings))


def _tracked(facts: WriteFacts, answer: dict[str, JSON]) -> dict[str, JSON]:
    """The answer with the write's managedFields entry (``track_write``, then kube's members
    for the spec's pointer structs)."""
    spec = answer["spec"]
    assert isinstance(spec, dict)
    if not spec:
        return track_write(facts, None, answer, answer)
    answer = track_write(facts, None, answer, answer)
    meta = answer["metadata"]
    assert isinstance(meta, dict)
    entries = meta.get("managedFields")
    if isinstance(entries, list) and entries and isinstance(entries[0], dict):
        own_pointer_structs(entries[0].get("fieldsV1"), spec)
    return answer


def _rules_answer(api_version: str, authorizer: ReviewAuthorizer, user: UserInfo | None,
                  spec: dict[str, Any], warnings: list[str]) -> Response:
    """selfsubjectrulesreview ``REST.Create``: a new review holding only the status."""
    if user is None:
        raise BadRequest("no user present on request")
    namespace = spec.get("namespace")
    if not isinstance(namespace, str) or not namespace:
        raise BadRequest("no namespace on request")
    result = authorizer.rules_for(user, namespace)
    answer = {"kind": SELF_RULES, "apiVersion": api_version,
              "metadata": {"creationTimestamp": None}, "spec": {},
              "status": rules_status(result)}
    return json_response(201, answer, _warning_headers(warnings))


def _dict(value: JSON) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _echoed_meta(meta: dict[str, Any]) -> dict[str, JSON]:
    """The metadata a valid review comes back with: its namespace (a local review's), then
    Go's zero creationTimestamp."""
    out: dict[str, JSON] = {}
    if isinstance(meta.get("namespace"), str) and meta["namespace"]:
        out["namespace"] = meta["namespace"]
    out["creationTimestamp"] = None
    return out


def _known_fields(api_version: str, kind: str, body: dict[str, Any],
                  wopts: WriteOptions) -> tuple[dict[str, Any], list[str]]:
    """Unknown fields: a strict decode refuses them (400), the default warns of them, and the
    decoded object never holds them."""
    unknown = schema_validate.unknown_fields(api_version, kind, body)
    if not unknown:
        return body, []
    texts = [f'unknown field "{path}"' for path in unknown]
    if wopts.field_validation == "Strict":
        version = api_version.rpartition("/")[2]
        raise BadRequest(f'{kind} in version "{version}" cannot be handled as a {kind}: '
                         "strict decoding error: " + ", ".join(texts))
    pruned = schema_validate.prune_unknown_fields(api_version, kind, body)
    assert isinstance(pruned, dict)
    return pruned, texts if wopts.field_validation != "Ignore" else []


def _warning_headers(warnings: list[str]) -> list[tuple[str, str]]:
    """RFC 7234 warn-text: a quoted string with ``\\`` and ``"`` escaped."""
    return [("Warning", '299 - "' + w.replace("\\", "\\\\").replace('"', '\\"') + '"')
            for w in warnings]
