"""The access reviews' pure parts: kube v1.32's validation texts
(pkg/apis/authorization/validation, its test cases), the attributes a review asks about, the
selectors' evaluation errors, the status and the echoed spec, the authorizer's ``decide`` and
``rules_for``, and protobuf bodies as kubectl sends them."""

from __future__ import annotations

from typing import Any

import pytest

from kubewire.rbac_rules import RuleResolver
from kubewire.server.access.authn import UserInfo
from kubewire.server.access.authorizers import build_chain
from kubewire.server.access.authz import (
    NO_POLICY_MATCHED,
    Attributes,
    Decision,
    Policy,
    RulesResult,
)
from kubewire.server.wire.protobuf import ENVELOPE_PREFIX, decode_protobuf_object
from kubewire.server.writes.access_reviews import invalid_review
from kubewire.server.writes.review_attributes import (
    access_status,
    go_spec,
    own_pointer_structs,
    review_attributes,
    rules_status,
    selector_errors,
    spec_user,
)
from kubewire.server.writes.validation.authorization import (
    validate_local_subject_access_review,
    validate_self_subject_access_review,
    validate_subject_access_review,
)
from kubewire.status import FieldError
from tests.unit.test_protobuf import _delimited, encode_body, encode_message

GROUP = "authorization.k8s.io"
ME = UserInfo("me", "", ("team", "system:authenticated"))


def texts(errors: list[FieldError]) -> list[str]:
    return [str(e) for e in errors]


def sar(spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {"kind": "SubjectAccessReview", "apiVersion": f"{GROUP}/v1", "metadata": meta,
            "spec": spec}


# --- validation (kube's TestValidateSARSpec, TestValidateSelfSAR, TestValidateLocalSAR) --------

def test_a_valid_subject_access_review_has_no_errors() -> None:
    for spec in ({"resourceAttributes": {}, "user": "me"},
                 {"nonResourceAttributes": {}, "groups": ["my-group"]},
                 {"user": "me", "resourceAttributes": {"fieldSelector": {"rawSelector": "***foo"}}},
                 {"user": "me", "resourceAttributes": {"labelSelector": {"rawSelector": "***foo"}}},
                 {"user": "me", "resourceAttributes": {"fieldSelector": {"requirements": [
                     {"key": "k", "operator": "fake", "values": ["val"]}]}}},
                 {"user": "me", "resourceAttributes": {"labelSelector": {"requirements": [
                     {"key": "k", "operator": "fake", "values": ["val"]}]}}}):
        assert validate_subject_access_review(sar(spec)) == []


@pytest.mark.parametrize(("spec", "first"), [
    ({"user": "me"}, 'spec.resourceAttributes: Invalid value: "null": exactly one of '
                     "nonResourceAttributes or resourceAttributes must be specified"),
    ({"resourceAttributes": {}, "nonResourceAttributes": {"path": "/x", "verb": "get"},
      "user": "me"},
     'spec.nonResourceAttributes: Invalid value: authorization.NonResourceAttributes{Path:"/x", '
     'Verb:"get"}: cannot be specified in combination with resourceAttributes'),
    ({"resourceAttributes": {}},
     'spec.user: Invalid value: "": at least one of user or group must be specified'),
    ({"user": "me", "resourceAttributes": {"fieldSelector": {"rawSelector": "foo",
                                                            "requirements": [{}]}}},
     'spec.resourceAttributes.fieldSelector.rawSelector: Invalid value: "foo": may not '
     "specified at the same time as requirements"),
    ({"user": "me", "resourceAttributes": {"fieldSelector": {}}},
     "spec.resourceAttributes.fieldSelector.requirements: Required value: when "
     "spec.resourceAttributes.fieldSelector is specified, requirements or rawSelector is "
     "required"),
    ({"user": "me", "resourceAttributes": {"fieldSelector": {"requirements": [{"key": ""}]}}},
     "spec.resourceAttributes.fieldSelector.requirements[0].key: Required value: must be "
     "specified"),
    ({"user": "me", "resourceAttributes": {"fieldSelector": {"requirements": [
        {"key": "k", "operator": "NotIn", "values": []}]}}},
     "spec.resourceAttributes.fieldSelector.requirements[0].values: Required value: must be "
     "specified when `operator` is 'In' or 'NotIn'"),
    ({"user": "me", "resourceAttributes": {"fieldSelector": {"requirements": [
        {"key": "k", "operator": "DoesNotExist", "values": ["val"]}]}}},
     "spec.resourceAttributes.fieldSelector.requirements[0].values: Forbidden: may not be "
     "specified when `operator` is 'Exists' or 'DoesNotExist'"),
    ({"user": "me", "resourceAttributes": {"labelSelector": {"requirements": [{"key": ""}]}}},
     'spec.resourceAttributes.labelSelector.requirements[0].key: Invalid value: "": name part '
     "must be non-empty"),
    ({"user": "me", "resourceAttributes": {"labelSelector": {"requirements": [
        {"key": "()foo"}]}}},
     'spec.resourceAttributes.labelSelector.requirements[0].key: Invalid value: "()foo": name '
     "part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
     "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used "
     "for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
    ({"user": "me", "resourceAttributes": {"labelSelector": {"requirements": [
        {"key": "k", "operator": "In", "values": []}]}}},
     "spec.resourceAttributes.labelSelector.requirements[0].values: Required value: must be "
     "specified when `operator` is 'In' or 'NotIn'"),
    ({"user": "me", "resourceAttributes": {"labelSelector": {"requirements": [
        {"key": "k", "operator": "Exists", "values": ["val"]}]}}},
     "spec.resourceAttributes.labelSelector.requirements[0].values: Forbidden: may not be "
     "specified when `operator` is 'Exists' or 'DoesNotExist'"),
])
def test_subject_access_review_errors(spec: dict[str, Any], first: str) -> None:
    assert texts(validate_subject_access_review(sar(spec)))[0] == first
    local = sar(spec) | {"metadata": {"namespace": ""}}
    assert texts(validate_local_subject_access_review(local))[0] == first


def test_self_subject_access_review_needs_no_user() -> None:
    assert validate_self_subject_access_review(sar({"resourceAttributes": {}})) == []
    assert texts(validate_self_subject_access_review(sar({}))) == [
        'spec.resourceAttributes: Invalid value: "null": exactly one of nonResourceAttributes '
        "or resourceAttributes must be specified"]
    errors = validate_self_subject_access_review(sar({"resourceAttributes": {"labelSelector": {
        "rawSelector": "foo", "requirements": [{}]}}}))
    assert texts(errors)[0] == ('spec.resourceAttributes.labelSelector.rawSelector: Invalid '
                                'value: "foo": may not specified at the same time as '
                                "requirements")


def test_metadata_must_be_empty_and_prints_as_go() -> None:
    assert validate_subject_access_review(sar({"user": "u", "resourceAttributes": {}},
                                              creationTimestamp=None, labels={})) == []
    errors = validate_subject_access_review(sar({"user": "u", "resourceAttributes": {}},
                                                name="a"))
    assert texts(errors) == [
        'metadata: Invalid value: v1.ObjectMeta{Name:"a", GenerateName:"", Namespace:"", '
        'SelfLink:"", UID:"", ResourceVersion:"", Generation:0, CreationTimestamp:time.Date(1, '
        "time.January, 1, 0, 0, 0, 0, time.UTC), DeletionTimestamp:(*v1.Time)(nil), "
        "DeletionGracePeriodSeconds:(*int64)(nil), Labels:map[string]string(nil), "
        "Annotations:map[string]string(nil), OwnerReferences:[]v1.OwnerReference(nil), "
        "Finalizers:[]string(nil), ManagedFields:[]v1.ManagedFieldsEntry(nil)}: must be empty"]
    # the create handler's managedFields do not count
    managed = sar({"user": "u", "resourceAttributes": {}},
                  managedFields=[{"manager": "kubectl", "operation": "Update"}])
    assert validate_subject_access_review(managed) == []


def test_local_review_namespace_rules() -> None:
    ok = sar({"user": "u", "resourceAttributes": {"namespace": "a", "verb": "get"}},
             namespace="a")
    assert validate_local_subject_access_review(ok) == []
    wrong = sar({"user": "u", "resourceAttributes": {"namespace": "b"}}, namespace="a")
    assert texts(validate_local_subject_access_review(wrong)) == [
        'spec.resourceAttributes.namespace: Invalid value: "b": must match metadata.namespace']
    named = sar({"user": "u", "resourceAttributes": {"namespace": "a"}}, namespace="a",
                name="x")
    assert texts(validate_local_subject_access_review(named))[0].endswith(
        ": must be empty except for namespace")
    non_resource = sar({"user": "u", "nonResourceAttributes": {"path": "/a"}}, namespace="a")
    assert texts(validate_local_subject_access_review(non_resource)) == [
        'spec.nonResourceAttributes: Invalid value: authorization.NonResourceAttributes{'
        'Path:"/a", Verb:""}: disallowed on this kind of request']


def test_invalid_review_names_no_kind() -> None:
    err = invalid_review(validate_subject_access_review(sar({})))
    assert err.code == 422
    assert err.message == (
        '.authorization.k8s.io "" is invalid: [spec.resourceAttributes: Invalid value: "null": '
        "exactly one of nonResourceAttributes or resourceAttributes must be specified, "
        'spec.user: Invalid value: "": at least one of user or group must be specified]')
    assert err.details["group"] == GROUP and "kind" not in err.details
    assert [c["field"] for c in err.details["causes"]] == ["spec.resourceAttributes",
                                                          "spec.user"]


# --- attributes, selectors, status -------------------------------------------------------------

def test_attributes_of_a_review() -> None:
    spec = {"resourceAttributes": {"namespace": "a", "verb": "get", "group": "apps",
                                   "resource": "deployments", "subresource": "scale",
                                   "name": "web"}}
    attrs = review_attributes(ME, spec)
    assert attrs == Attributes(ME, "get", resource_request=True, namespace="a",
                               api_group="apps", api_version="*", resource="deployments",
                               subresource="scale", name="web")
    assert review_attributes(ME, {"nonResourceAttributes": {"path": "/healthz",
                                                            "verb": "get"}}) == Attributes(
        ME, "get", path="/healthz")
    user = spec_user({"user": "u", "groups": ["g"], "uid": "1", "extra": {"b": ["2"],
                                                                          "a": None}})
    assert user == UserInfo("u", "1", ("g",), (("a", ()), ("b", ("2",))))


@pytest.mark.parametrize(("attributes", "expected"), [
    ({"fieldSelector": {"rawSelector": "metadata.name=a"}}, []),
    ({"fieldSelector": {"rawSelector": "a=b=c"}},
     ["spec.resourceAttributes.fieldSelector ignored due to parse error"]),
    ({"labelSelector": {"rawSelector": "a in (b"}},
     ["spec.resourceAttributes.labelSelector ignored due to parse error"]),
    ({"fieldSelector": {"requirements": [{"key": "a", "operator": "In", "values": ["1"]},
                                         {"key": "b", "operator": "Exists"}]}},
     ["spec.resourceAttributes.fieldSelector partially ignored due to parse error"]),
    ({"fieldSelector": {"requirements": [{"key": "a", "operator": "In", "values": ["1", "2"]}]},
      "labelSelector": {"requirements": [{"key": "a", "operator": "fake"}]}},
     ["spec.resourceAttributes.fieldSelector ignored due to parse error",
      "spec.resourceAttributes.labelSelector ignored due to parse error"]),
    ({"labelSelector": {"requirements": [{"key": "a", "operator": "NotIn", "values": ["x"]},
                                         {"key": "b", "operator": "Gt", "values": ["1"]}]}},
     ["spec.resourceAttributes.labelSelector partially ignored due to parse error"]),
])
def test_selectors_as_authorize_with_selectors_parses_them(attributes: dict[str, Any],
                                                           expected: list[str]) -> None:
    assert selector_errors({"resourceAttributes": attributes}) == expected


def test_status_fields() -> None:
    assert access_status(Decision(True, False, ""), {}) == {"allowed": True}
    spec = {"resourceAttributes": {"fieldSelector": {"rawSelector": "no-operator"}}}
    assert access_status(Decision(False, True, "nope", "boom"), spec) == {
        "allowed": False, "denied": True, "reason": "nope",
        "evaluationError": "boom; spec.resourceAttributes.fieldSelector ignored due to parse "
                           "error"}
    result = RulesResult([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"],
                           "resourceNames": []}], [{"verbs": ["get"], "nonResourceURLs": ["/a"]}],
                         True, "partial")
    assert rules_status(result) == {
        "resourceRules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}],
        "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/a"]}],
        "incomplete": True, "evaluationError": "partial"}
    assert rules_status(RulesResult([], [], False, "")) == {
        "resourceRules": [], "nonResourceRules": [], "incomplete": False}


def test_the_spec_comes_back_as_go_encodes_it() -> None:
    spec = {"uid": "", "groups": [], "extra": {"b": [], "a": ["x"]}, "user": "u",
            "resourceAttributes": {"name": "", "resource": "pods", "verb": "get",
                                   "labelSelector": {"requirements": [{"operator": "In",
                                                                       "key": "a"}]}}}
    assert go_spec(spec, subject=True) == {
        "resourceAttributes": {"verb": "get", "resource": "pods", "labelSelector": {
            "requirements": [{"key": "a", "operator": "In"}]}},
        "user": "u", "extra": {"a": ["x"], "b": []}}
    assert go_spec(spec, subject=False) == {"resourceAttributes": {
        "verb": "get", "resource": "pods",
        "labelSelector": {"requirements": [{"key": "a", "operator": "In"}]}}}


def test_pointer_structs_are_members_of_their_own() -> None:
    # kube's managedFields (the zero review has no attributes): "." where the struct has
    # children, {} where it is empty; keys in FieldsV1's order
    fields: dict[str, Any] = {"f:spec": {"f:resourceAttributes": {
        "f:verb": {}, "f:fieldSelector": {"f:rawSelector": {}}}, "f:user": {}}}
    own_pointer_structs(fields, {"resourceAttributes": {"verb": "get", "fieldSelector": {
        "rawSelector": "a=b"}, "labelSelector": {}}, "nonResourceAttributes": {}, "user": "u"})
    assert fields == {"f:spec": {
        "f:nonResourceAttributes": {},
        "f:resourceAttributes": {".": {}, "f:fieldSelector": {".": {}, "f:rawSelector": {}},
                                 "f:labelSelector": {}, "f:verb": {}},
        "f:user": {}}}
    assert list(fields["f:spec"]["f:resourceAttributes"]) == [
        ".", "f:fieldSelector", "f:labelSelector", "f:verb"]


# --- the authorizer's answers ------------------------------------------------------------------

def test_decide_and_rules_for_always_allow() -> None:
    always = build_chain(("AlwaysAllow",), None, None)
    assert always.decide(Attributes(ME, "delete", resource_request=True,
                                    resource="pods")) == Decision(True, False, "")
    assert always.rules_for(ME, "a") == RulesResult(
        [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
        [{"verbs": ["*"], "nonResourceURLs": ["*"]}], False, "")


def test_decide_and_rules_for_abac() -> None:
    abac = build_chain(("ABAC",),
                       [Policy(user="me", namespace="a", resource="*", api_group="*"),
                        Policy(group="team", namespace="*", resource="pods", readonly=True),
                        Policy(group="team", non_resource_path="/healthz"),
                        Policy(user="someone-else", namespace="*", resource="*")], None)
    pods = Attributes(ME, "create", resource_request=True, namespace="b", resource="pods")
    assert abac.decide(pods) == Decision(False, False, NO_POLICY_MATCHED)
    assert abac.decide(Attributes(ME, "get", resource_request=True, namespace="b",
                                  resource="pods")).allowed
    masters = UserInfo("root", "", ("system:masters",))
    assert abac.decide(Attributes(masters, "create", resource_request=True,
                                  resource="pods")).allowed
    # abac.go PolicyList.RulesFor: lines whose subject and namespace match; a non-resource line
    # too, when its namespace matches (these have none, so only the "" namespace)
    assert abac.rules_for(ME, "a") == RulesResult(
        [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
         {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]}],
        [], False, "")
    assert abac.rules_for(ME, "") == RulesResult(
        [{"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]}],
        [{"verbs": ["*"], "nonResourceURLs": ["/healthz"]}], False, "")
    assert abac.rules_for(masters, "a") == RulesResult([], [], False, "")


class _Objects:
    """Roles and bindings in memory (``RbacObjects``)."""

    def __init__(self) -> None:
        self.roles = {("a", "reader"): {"rules": [{"verbs": ["get", "list"], "apiGroups": [""],
                                                   "resources": ["pods"]}]}}
        self.bindings = {"a": [{"metadata": {"name": "b", "namespace": "a"},
                                "subjects": [{"kind": "User", "name": "me",
                                              "apiGroup": "rbac.authorization.k8s.io"}],
                                "roleRef": {"kind": "Role", "name": "reader",
                                            "apiGroup": "rbac.authorization.k8s.io"}}]}

    def role(self, namespace: str, name: str) -> Any:
        return self.roles.get((namespace, name))

    def cluster_role(self, name: str) -> Any:
        return None

    def role_bindings(self, namespace: str) -> Any:
        return self.bindings.get(namespace, [])

    def cluster_role_bindings(self) -> Any:
        return []


def test_rules_status_of_what_the_rbac_resolver_gives() -> None:
    # the RBAC authorizer (another part of the issue) hands its rules over in kube's JSON
    # shape; the pure resolver shows what a view-like Role gives the review
    rules, errors = RuleResolver(_Objects()).rules_for(ME, "a")
    assert errors == []
    status = rules_status(RulesResult([r.to_json() for r in rules if r.resources],
                                      [r.to_json() for r in rules if r.non_resource_urls],
                                      False, ""))
    assert status["resourceRules"] == [{"verbs": ["get", "list"], "apiGroups": [""],
                                        "resources": ["pods"]}]


# --- protobuf bodies ---------------------------------------------------------------------------

def test_kubectl_can_i_protobuf_body_decodes() -> None:
    review = {"apiVersion": f"{GROUP}/v1", "kind": "SelfSubjectAccessReview",
              "metadata": {"creationTimestamp": None},
              "spec": {"resourceAttributes": {"namespace": "default", "verb": "create",
                                              "resource": "pods", "subresource": "log"}},
              "status": {"allowed": False}}
    decoded = decode_protobuf_object(encode_body(review), f"{GROUP}/v1",
                                     "SelfSubjectAccessReview")
    assert decoded == review


def test_subject_access_review_extra_decodes_as_lists() -> None:
    spec_message = f"k8s.io.api.{GROUP.split('.')[0]}.v1.SubjectAccessReviewSpec"
    spec = {"nonResourceAttributes": {"path": "/x", "verb": "get"}, "user": "u",
            "groups": ["g"]}
    extra = b"".join(
        _delimited(5, _delimited(1, key.encode()) + _delimited(2, b"".join(
            _delimited(1, v.encode()) for v in values)))
        for key, values in (("scopes", ["a", "b"]), ("empty", [])))
    raw = _delimited(2, encode_message(spec, spec_message, True) + extra)
    type_meta = _delimited(1, f"{GROUP}/v1".encode()) + _delimited(2, b"SubjectAccessReview")
    body = ENVELOPE_PREFIX + _delimited(1, type_meta) + _delimited(2, raw)
    decoded = decode_protobuf_object(body, f"{GROUP}/v1", "SubjectAccessReview")
    assert decoded["spec"] == {**spec, "extra": {"empty": None, "scopes": ["a", "b"]}}
