"""authorization.k8s.io/v1's reviews on a running server, with real clients: ``kubectl auth
can-i`` (yes/no, exit codes, ``-n``, ``--subresource``, non-resource URLs, ``--as``,
``--list``), the ``kubernetes`` package's typed API, protobuf bodies, kube's 400/422 answers for
bad reviews, and nothing stored: the reviews have no list, get or watch.

The decisions come from the server's authorizer: an ABAC policy file here (what this branch
enforces), with the review rights kube's ``system:basic-user`` role gives everyone
authenticated (SelfSubjectAccessReview, SelfSubjectRulesReview); SubjectAccessReview is left to
``system:masters``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from tests.integration.harness import ServerThread
from tests.integration.kubectl import needs_kubectl, run
from tests.integration.test_access import ensure_namespaces, https, issue
from tests.integration.wire import call, list_rv
from tests.unit.test_protobuf import encode_body

GROUP = "authorization.k8s.io"
BASE = f"/apis/{GROUP}/v1"
LOCAL_A = f"{BASE}/namespaces/a/localsubjectaccessreviews"
POLICY = "\n".join(json.dumps({
    "apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": spec})
    for spec in [
        {"user": "bob", "namespace": "a", "resource": "*", "apiGroup": "*"},
        {"group": "viewers", "namespace": "*", "resource": "pods", "apiGroup": "",
         "readonly": True},
        {"group": "system:authenticated", "nonResourcePath": "*", "readonly": True},
        {"group": "system:authenticated", "namespace": "*", "apiGroup": GROUP,
         "resource": "selfsubjectaccessreviews"},
        {"group": "system:authenticated", "namespace": "*", "apiGroup": GROUP,
         "resource": "selfsubjectrulesreviews"},
    ])
HEADER = ["Resources", "Non-Resource", "URLs", "Resource", "Names", "Verbs"]


@pytest.fixture
def abac(make_server: Callable[..., ServerThread], tmp_path: Path) -> ServerThread:
    policy = tmp_path / "policy.jsonl"
    policy.write_text(POLICY + "\n")
    server = make_server(insecure_http=False, authorization_policy_file=policy)
    ensure_namespaces(server, "a", "b")
    return server


def admin_cert(server: ServerThread) -> tuple[Path, Path]:
    pki = server.config.data_dir / "pki"
    return pki / "admin.crt", pki / "admin.key"


def ssar(verb: str, resource: str, namespace: str = "", **more: Any) -> dict[str, Any]:
    attributes = {"namespace": namespace, "verb": verb, "resource": resource, **more}
    return {"apiVersion": f"{GROUP}/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {k: v for k, v in attributes.items() if v}}}


# --- kubectl auth can-i --------------------------------------------------------------------------

@needs_kubectl
def test_kubectl_auth_can_i_answers_from_the_authorizer(abac: ServerThread) -> None:
    bob = issue(abac, "bob")
    cases: list[tuple[Path, tuple[str, ...], int, str]] = [
        (abac.kubeconfig, ("create", "pods"), 0, "yes"),  # system:masters
        (bob, ("create", "pods", "-n", "a"), 0, "yes"),
        (bob, ("create", "pods", "-n", "b"), 1, "no - No policy matched."),
        (bob, ("get", "pods", "--subresource=log", "-n", "a"), 0, "yes"),
        (bob, ("create", "deployments.apps", "-n", "a"), 0, "yes"),
        (bob, ("get", "/healthz"), 0, "yes"),
        (bob, ("post", "/healthz"), 1, "no - No policy matched."),
    ]
    for kubeconfig, args, code, answer in cases:
        done = run(kubeconfig, "auth", "can-i", *args)
        assert (done.returncode, done.stdout.strip()) == (code, answer), (args, done.stderr)


@needs_kubectl
def test_kubectl_auth_can_i_as_another_user(abac: ServerThread) -> None:
    # SelfSubjectAccessReview asks about the user the request runs as: the impersonated one
    done = run(abac.kubeconfig, "auth", "can-i", "create", "pods", "-n", "b", "--as", "bob")
    assert (done.returncode, done.stdout.strip()) == (1, "no - No policy matched.")
    done = run(abac.kubeconfig, "auth", "can-i", "list", "pods", "-n", "b", "--as", "vera",
               "--as-group", "viewers")
    assert (done.returncode, done.stdout.strip()) == (0, "yes")
    done = run(abac.kubeconfig, "auth", "can-i", "delete", "pods", "-n", "b", "--as", "vera",
               "--as-group", "viewers")
    assert done.returncode == 1


@needs_kubectl
def test_kubectl_auth_can_i_list(abac: ServerThread) -> None:
    done = run(issue(abac, "bob"), "auth", "can-i", "--list", "-n", "a")
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()]
    assert rows[0] == HEADER
    assert ["*.*", "[]", "[]", "[*]"] in rows[1:]
    assert [f"selfsubjectaccessreviews.{GROUP}", "[]", "[]", "[*]"] in rows[1:]
    done = run(issue(abac, "vera", "viewers"), "auth", "can-i", "--list", "-n", "b")
    rows = [line.split() for line in done.stdout.splitlines()]
    assert ["pods", "[]", "[]", "[get", "list", "watch]"] in rows[1:]
    assert ["*.*", "[]", "[]", "[*]"] not in rows


@needs_kubectl
def test_creating_a_review_is_authorized_like_any_create(abac: ServerThread) -> None:
    review = {"apiVersion": f"{GROUP}/v1", "kind": "SubjectAccessReview",
              "spec": {"user": "bob", "resourceAttributes": {"verb": "get",
                                                             "resource": "pods"}}}
    done = run(issue(abac, "bob"), "create", "--validate=false", "-f", "-", "-o", "json",
               stdin=json.dumps(review))
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f'Error from server (Forbidden): error when creating "STDIN": subjectaccessreviews.{GROUP}'
        f' is forbidden: User "bob" cannot create resource "subjectaccessreviews" in API group '
        f'"{GROUP}" at the cluster scope: No policy matched.')
    reply = https(abac, "POST", f"{BASE}/subjectaccessreviews", cert=admin_cert(abac),
                  body=review)
    assert reply.status == 201, reply.body
    assert reply.json["status"] == {"allowed": False, "reason": "No policy matched."}


@needs_kubectl
def test_discovery_lists_the_reviews_as_create_only(abac: ServerThread) -> None:
    done = run(abac.kubeconfig, "api-resources", f"--api-group={GROUP}", "-o", "wide")
    rows = [line.split() for line in done.stdout.splitlines()[1:]]
    assert rows == [
        ["localsubjectaccessreviews", f"{GROUP}/v1", "true", "LocalSubjectAccessReview",
         "create"],
        ["selfsubjectaccessreviews", f"{GROUP}/v1", "false", "SelfSubjectAccessReview",
         "create"],
        ["selfsubjectrulesreviews", f"{GROUP}/v1", "false", "SelfSubjectRulesReview", "create"],
        ["subjectaccessreviews", f"{GROUP}/v1", "false", "SubjectAccessReview", "create"]]


# --- the kubernetes package ----------------------------------------------------------------------

def test_kubernetes_typed_api(abac: ServerThread) -> None:
    models = kubernetes.client
    attributes = models.V1ResourceAttributes(namespace="a", verb="create", resource="pods")
    with kubernetes.config.new_client_from_config(str(issue(abac, "bob"))) as api:
        authz = models.AuthorizationV1Api(api)
        answer = authz.create_self_subject_access_review(models.V1SelfSubjectAccessReview(
            spec=models.V1SelfSubjectAccessReviewSpec(resource_attributes=attributes)))
        assert answer.status.allowed is True
        assert answer.spec.resource_attributes.resource == "pods"
        rules = authz.create_self_subject_rules_review(models.V1SelfSubjectRulesReview(
            spec=models.V1SelfSubjectRulesReviewSpec(namespace="a")))
        assert rules.status.incomplete is False
        assert [(r.verbs, r.api_groups, r.resources) for r in rules.status.resource_rules] == [
            (["*"], ["*"], ["*"]), (["*"], [GROUP], ["selfsubjectaccessreviews"]),
            (["*"], [GROUP], ["selfsubjectrulesreviews"])]
    with kubernetes.config.new_client_from_config(str(abac.kubeconfig)) as api:
        authz = models.AuthorizationV1Api(api)
        in_b = models.V1ResourceAttributes(namespace="b", verb="create", resource="pods")
        answer = authz.create_subject_access_review(models.V1SubjectAccessReview(
            spec=models.V1SubjectAccessReviewSpec(user="bob", resource_attributes=in_b)))
        assert (answer.status.allowed, answer.status.reason) == (False, "No policy matched.")
        viewer = authz.create_subject_access_review(models.V1SubjectAccessReview(
            spec=models.V1SubjectAccessReviewSpec(
                user="someone", groups=["viewers"],
                resource_attributes=models.V1ResourceAttributes(namespace="b", verb="watch",
                                                                resource="pods"))))
        assert viewer.status.allowed is True
        local = authz.create_namespaced_local_subject_access_review(
            "a", models.V1LocalSubjectAccessReview(spec=models.V1SubjectAccessReviewSpec(
                user="bob", resource_attributes=attributes)))
        assert local.status.allowed is True
        assert local.metadata.namespace == "a"
        # NamespaceLifecycle lets access reviews through: a missing namespace tells nothing
        elsewhere = authz.create_namespaced_local_subject_access_review(
            "nope", models.V1LocalSubjectAccessReview(spec=models.V1SubjectAccessReviewSpec(
                user="bob", resource_attributes=models.V1ResourceAttributes(
                    namespace="nope", verb="get", resource="pods"))))
        assert (elsewhere.status.allowed, elsewhere.metadata.namespace) == (False, "nope")


# --- the wire ------------------------------------------------------------------------------------

def test_answer_is_the_review_with_its_status(abac: ServerThread) -> None:
    reply = https(abac, "POST", f"{BASE}/selfsubjectaccessreviews", cert=admin_cert(abac),
                  body=ssar("get", "pods", "a", version="v1", name="x", labelSelector={
                      "requirements": [{"key": "app", "operator": "In", "values": ["web"]}]}),
                  headers=[("User-Agent", "reviewer/1.0")])
    assert reply.status == 201, reply.body
    body = reply.json
    entry = body["metadata"].pop("managedFields")
    assert [(e["manager"], e["operation"], e["apiVersion"]) for e in entry] == [
        ("reviewer", "Update", f"{GROUP}/v1")]
    assert entry[0]["fieldsV1"] == {"f:spec": {"f:resourceAttributes": {
        ".": {}, "f:labelSelector": {".": {}, "f:requirements": {}}, "f:name": {},
        "f:namespace": {}, "f:resource": {}, "f:verb": {}, "f:version": {}}}}
    assert body == {
        "kind": "SelfSubjectAccessReview", "apiVersion": f"{GROUP}/v1",
        "metadata": {"creationTimestamp": None},
        "spec": {"resourceAttributes": {
            "namespace": "a", "verb": "get", "version": "v1", "resource": "pods", "name": "x",
            "labelSelector": {"requirements": [{"key": "app", "operator": "In",
                                                "values": ["web"]}]}}},
        "status": {"allowed": True}}


def test_selectors_that_do_not_parse_show_in_evaluation_error(server: ServerThread) -> None:
    review = {"apiVersion": f"{GROUP}/v1", "kind": "SubjectAccessReview", "spec": {
        "user": "u", "resourceAttributes": {
            "verb": "list", "resource": "pods",
            "fieldSelector": {"requirements": [
                {"key": "spec.nodeName", "operator": "In", "values": ["n1"]},
                {"key": "metadata.name", "operator": "Exists"}]},
            "labelSelector": {"rawSelector": "app in (web"}}}}
    reply = call(server, "POST", f"{BASE}/subjectaccessreviews", review)
    assert reply.status == 201, reply.body
    assert reply.json["status"] == {
        "allowed": True,
        "evaluationError": "spec.resourceAttributes.fieldSelector partially ignored due to "
                           "parse error; spec.resourceAttributes.labelSelector ignored due to "
                           "parse error"}
    assert reply.json["spec"]["resourceAttributes"]["labelSelector"] == {
        "rawSelector": "app in (web"}


def test_rules_review_answers_a_new_object(abac: ServerThread) -> None:
    review = {"apiVersion": f"{GROUP}/v1", "kind": "SelfSubjectRulesReview",
              "spec": {"namespace": "b"}}
    reply = https(abac, "POST", f"{BASE}/selfsubjectrulesreviews", cert=admin_cert(abac),
                  body=review, headers=[("Impersonate-User", "vera"),
                                        ("Impersonate-Group", "viewers")])
    assert reply.status == 201, reply.body
    assert reply.json == {
        "kind": "SelfSubjectRulesReview", "apiVersion": f"{GROUP}/v1",
        "metadata": {"creationTimestamp": None}, "spec": {},
        "status": {"resourceRules": [
            {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]},
            {"verbs": ["*"], "apiGroups": [GROUP], "resources": ["selfsubjectaccessreviews"]},
            {"verbs": ["*"], "apiGroups": [GROUP], "resources": ["selfsubjectrulesreviews"]}],
            "nonResourceRules": [], "incomplete": False}}


def test_protobuf_bodies(server: ServerThread) -> None:
    review = {"apiVersion": f"{GROUP}/v1", "kind": "SubjectAccessReview",
              "metadata": {"creationTimestamp": None},
              "spec": {"nonResourceAttributes": {"path": "/metrics", "verb": "get"},
                       "user": "u", "groups": ["g"]},
              "status": {"allowed": False}}
    reply = call(server, "POST", f"{BASE}/subjectaccessreviews", encode_body(review),
                 {"Content-Type": "application/vnd.kubernetes.protobuf",
                  "Accept": "application/vnd.kubernetes.protobuf,application/json"})
    assert reply.status == 201, reply.body
    assert reply.headers["content-type"] == "application/json"
    assert reply.json["spec"] == review["spec"]
    assert reply.json["status"] == {"allowed": True}  # no policy file: AlwaysAllow


def status(message: str, reason: str, code: int, details: dict[str, Any] | None = None,
           ) -> dict[str, Any]:
    out = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason}
    if details is not None:
        out["details"] = details
    return out | {"code": code}


def test_bad_reviews_get_kubes_answers_and_change_nothing(server: ServerThread) -> None:
    before = list_rv(server, "/api/v1/namespaces")
    empty = {"apiVersion": f"{GROUP}/v1", "kind": "SubjectAccessReview", "spec": {}}
    reply = call(server, "POST", f"{BASE}/subjectaccessreviews", empty)
    assert reply.status == 422
    assert reply.json == status(
        '.authorization.k8s.io "" is invalid: [spec.resourceAttributes: Invalid value: "null": '
        "exactly one of nonResourceAttributes or resourceAttributes must be specified, "
        'spec.user: Invalid value: "": at least one of user or group must be specified]',
        "Invalid", 422, {"group": GROUP, "causes": [
            {"reason": "FieldValueInvalid", "message": 'Invalid value: "null": exactly one of '
             "nonResourceAttributes or resourceAttributes must be specified",
             "field": "spec.resourceAttributes"},
            {"reason": "FieldValueInvalid", "message": 'Invalid value: "": at least one of user '
             "or group must be specified", "field": "spec.user"}]})
    local = {"apiVersion": f"{GROUP}/v1", "kind": "LocalSubjectAccessReview",
             "spec": {"user": "u", "resourceAttributes": {"namespace": "b", "verb": "get"}}}
    reply = call(server, "POST", LOCAL_A, local)
    assert (reply.status, reply.json["message"]) == (422, (
        '.authorization.k8s.io "" is invalid: spec.resourceAttributes.namespace: Invalid value: '
        '"b": must match metadata.namespace'))
    reply = call(server, "POST", LOCAL_A, local | {"metadata": {"namespace": "b"}})
    assert reply.json == status("the namespace of the provided object does not match the "
                                "namespace sent on the request", "BadRequest", 400)
    rules = {"apiVersion": f"{GROUP}/v1", "kind": "SelfSubjectRulesReview", "spec": {}}
    reply = call(server, "POST", f"{BASE}/selfsubjectrulesreviews", rules)
    assert reply.json == status("no namespace on request", "BadRequest", 400)
    typo = ssar("get", "pods") | {"spec": {"resourceAttribute": {"verb": "get"}}}
    reply = call(server, "POST", f"{BASE}/selfsubjectaccessreviews", typo,
                 params={"fieldValidation": "Strict"})
    assert reply.json == status(
        'SelfSubjectAccessReview in version "v1" cannot be handled as a SelfSubjectAccessReview:'
        ' strict decoding error: unknown field "spec.resourceAttribute"', "BadRequest", 400)
    reply = call(server, "POST", f"{BASE}/selfsubjectaccessreviews", ssar("get", "pods") | {
        "spec": {"resourceAttributes": {"verb": "get"}, "extraField": 1}})
    assert reply.status == 201
    assert reply.headers["warning"] == '299 - "unknown field \\"spec.extraField\\""'
    reply = call(server, "POST", f"{BASE}/selfsubjectaccessreviews", ssar("get", "pods"),
                 params={"dryRun": "All"})
    assert (reply.status, reply.json["status"]) == (201, {"allowed": True})
    assert list_rv(server, "/api/v1/namespaces") == before


def test_reviews_have_no_list_get_or_watch(server: ServerThread) -> None:
    not_allowed = status("the server does not allow this method on the requested resource",
                         "MethodNotAllowed", 405, {})
    not_found = status("the server could not find the requested resource", "NotFound", 404, {})
    for plural in ("selfsubjectaccessreviews", "subjectaccessreviews",
                   "selfsubjectrulesreviews"):
        for method in ("GET", "DELETE"):
            assert call(server, method, f"{BASE}/{plural}").json == not_allowed
        assert call(server, "GET", f"{BASE}/{plural}/x").json == not_found
        assert call(server, "PUT", f"{BASE}/{plural}/x", {}).json == not_found
        assert call(server, "GET", f"{BASE}/watch/{plural}").json == not_found
        assert call(server, "GET", f"{BASE}/{plural}", params={"watch": "true"}).json == \
            not_allowed
    assert call(server, "GET", LOCAL_A).json == not_allowed
    for method in ("GET", "POST"):  # a namespaced Creater has no path outside namespaces
        assert call(server, method, f"{BASE}/localsubjectaccessreviews", {}).json == not_found

