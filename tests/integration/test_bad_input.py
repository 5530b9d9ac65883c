"""Bad input gets kube-apiserver's exact Status, and changes nothing.

Every case checks the whole Status object (code, reason, message, details) — or, where noted,
the part of the message kube's text is known for — and that the store is unchanged: lists of
several kinds (global resourceVersion included) are identical before and after. Sources:
watch-protocol.md §1.2, §1.3, §2.3, §8, §9, §10.2 and objects-and-clients.md §1.7, §1.8, §2.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.harness import ServerThread
from tests.integration.kinds import (
    DEPLOYMENT,
    GATEWAY,
    NAMESPACE,
    NODE,
    POD,
    SERVICE,
    Kind,
)
from tests.integration.wire import Reply, call, create, get, send_oversized

MAX_BODY_BYTES = 3 * 1024 * 1024  # kube-apiserver's default request body limit (3 MiB)
GO_FIND_KIND = ('json: cannot unmarshal array into Go value of type struct { APIVersion string '
                '"json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }')
SNAPSHOT_COLLECTIONS = [POD.collection(None), DEPLOYMENT.collection(None),
                        SERVICE.collection(None), GATEWAY.collection(None),
                        NAMESPACE.collection(), NODE.collection()]


def status(code: int, reason: str, message: str, details: dict[str, Any] | None = None,
           ) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                           "status": "Failure", "message": message, "reason": reason}
    if details is not None:
        out["details"] = details
    out["code"] = code
    return out


UNCHECKED_RULES = ('Invalid value: "null": some validation rules were not checked because the '
                   "object was invalid; correct the existing errors to complete validation")


def invalid(kind: str, name: str, causes: list[tuple[str, str, str]], group: str = "",
            ) -> dict[str, Any]:
    """422 Invalid: causes are (reason, field, message after "<field>: ")."""
    group_kind = f"{kind}.{group}" if group else kind
    texts = [f"{field}: {message}" for _, field, message in causes]
    joined = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = kind
    details["causes"] = [{"reason": r, "message": m, "field": f} for r, f, m in causes]
    if not name:
        del details["name"]
    return status(422, "Invalid", f'{group_kind} "{name}" is invalid: {joined}', details)


def list_options_invalid(causes: list[tuple[str, str, str]]) -> dict[str, Any]:
    return invalid("ListOptions", "", causes, group="meta.k8s.io")


def snapshot(server: ServerThread) -> list[Any]:
    return [get(server, path) for path in SNAPSHOT_COLLECTIONS]


@pytest.fixture
def seeded(server: ServerThread) -> Iterator[ServerThread]:
    """A server with one object of a few kinds; the store must be the same after each test."""
    create(server, POD.collection(), POD.obj("existing"))
    create(server, DEPLOYMENT.collection(), DEPLOYMENT.obj("existing"))
    create(server, GATEWAY.collection(), GATEWAY.obj("existing"))
    before = snapshot(server)
    yield server
    assert snapshot(server) == before, "a rejected request changed the store"


def send(server: ServerThread, method: str, path: str, body: Any = None,
         headers: dict[str, str] | None = None, **params: Any) -> Reply:
    reply = call(server, method, path, body, headers, params=params or None)
    assert reply.status != 500, reply.body
    return reply


def expect(reply: Reply, expected: dict[str, Any]) -> None:
    assert reply.status == expected["code"], reply.body
    assert reply.headers["content-type"] == "application/json"
    assert reply.status_object() == expected


# --- bodies -------------------------------------------------------------------------------------

def test_unparseable_json(seeded: ServerThread) -> None:
    reply = send(seeded, "POST", POD.collection(), b'{"metadata": ',
                 {"Content-Type": "application/json"})
    # create.go transformDecodeError: no kind could be read, so "unrecognized" + a data summary.
    expect(reply, status(400, "BadRequest",
                         "the object provided is unrecognized (must be of type Pod): couldn't "
                         "get version/kind; json parse error: unexpected end of JSON input "
                         '({"metadata": )'))


def test_json_array_body(seeded: ServerThread) -> None:
    reply = send(seeded, "POST", POD.collection(), b"[1,2]", {"Content-Type": "application/json"})
    expect(reply, status(400, "BadRequest",
                         "the object provided is unrecognized (must be of type Pod): couldn't "
                         f"get version/kind; json parse error: {GO_FIND_KIND} (5b312c325d)"))


def test_kind_not_matching_the_url(seeded: ServerThread) -> None:
    reply = send(seeded, "POST", POD.collection(), SERVICE.obj("svc"))
    assert reply.status == 400
    body = reply.status_object()
    assert body["reason"] == "BadRequest"
    # The tail is the codec's conversion error; only the transformDecodeError prefix is pinned.
    assert body["message"].startswith('Service in version "v1" cannot be handled as a Pod: ')


def test_api_version_not_matching_the_url(seeded: ServerThread) -> None:
    body = DEPLOYMENT.obj("web")
    body["apiVersion"] = "apps/v1beta2"
    reply = send(seeded, "POST", DEPLOYMENT.collection(), body)
    assert reply.status == 400
    assert reply.status_object()["reason"] == "BadRequest"
    assert "apps/v1beta2" in reply.status_object()["message"]


def test_resource_version_on_create(seeded: ServerThread) -> None:
    reply = send(seeded, "POST", POD.collection(), POD.obj("x", resourceVersion="5"))
    # kube answers 500 with no reason (a plain storage error, §2.1); kubewire never sends 500s.
    expect(reply, status(400, "BadRequest",
                         "resourceVersion should not be set on objects to be created"))


SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
             "'-' or '.', and must start and end with an alphanumeric character (e.g. "
             "'example.com', regex used for validation is "
             "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
DNS1035 = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
           "with an alphabetic character, and end with an alphanumeric character (e.g. "
           "'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
DNS1123_LABEL = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
                 "or '-', and must start and end with an alphanumeric character (e.g. 'my-name', "
                 " or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")


@pytest.mark.parametrize(("kind", "name", "detail"), [
    (POD, "Bad_Name", SUBDOMAIN),
    (DEPLOYMENT, "web..1", SUBDOMAIN),
    (SERVICE, "1abc", DNS1035),
    (SERVICE, "a.b", DNS1035),
    (NAMESPACE, "Bad_NS", DNS1123_LABEL),
    (NAMESPACE, "a.b", "must not contain dots"),
], ids=["pod-subdomain", "deployment-subdomain", "service-dns1035-digit",
        "service-dns1035-dot", "namespace-label", "namespace-dots"])
def test_invalid_names(seeded: ServerThread, kind: Kind, name: str, detail: str) -> None:
    reply = send(seeded, "POST", kind.collection(), kind.obj(name))
    expect(reply, invalid(kind.kind, name, [
        ("FieldValueInvalid", "metadata.name", f'Invalid value: "{name}": {detail}')],
        group=kind.group))


def test_missing_required_field(seeded: ServerThread) -> None:
    body = POD.obj("x")
    body["spec"] = {}
    reply = send(seeded, "POST", POD.collection(), body)
    expect(reply, invalid("Pod", "x", [("FieldValueRequired", "spec.containers",
                                        "Required value")]))


def test_body_namespace_differs_from_url(seeded: ServerThread) -> None:
    reply = send(seeded, "POST", POD.collection(), POD.obj("x", namespace="kube-system"))
    expect(reply, status(400, "BadRequest", "the namespace of the provided object does not "
                         "match the namespace sent on the request"))


def test_wrong_json_type_for_a_builtin_field(seeded: ServerThread) -> None:
    body = DEPLOYMENT.obj("web")
    body["spec"]["replicas"] = "three"
    reply = send(seeded, "POST", DEPLOYMENT.collection(), body)
    # Built-in kinds are decoded into Go structs: a type error is a decode error (400).
    expect(reply, status(400, "BadRequest",
                         'Deployment in version "v1" cannot be handled as a Deployment: json: '
                         "cannot unmarshal string into Go struct field "
                         "DeploymentSpec.spec.replicas of type int32"))


def test_wrong_json_type_for_a_custom_kind_field(seeded: ServerThread) -> None:
    body = GATEWAY.obj("gw")
    body["spec"]["listeners"][0]["port"] = "eighty"
    reply = send(seeded, "POST", GATEWAY.collection(), body)
    # CRDs are checked against their OpenAPI schema: 422 with a typed cause. A type error
    # blocks the CRD's CEL rules, which kube says in one more cause (customresource/strategy.go
    # hasBlockingErr): Gateway's CRD has rules.
    field = "spec.listeners[0].port"
    expect(reply, invalid("Gateway", "gw", [
        ("FieldValueTypeInvalid", field,
         f'Invalid value: "string": {field} in body must be of type integer: "string"'),
        ("FieldValueInvalid", "<nil>", UNCHECKED_RULES)],
        group=GATEWAY.group))


def test_unknown_field_with_strict_validation(seeded: ServerThread) -> None:
    body = DEPLOYMENT.obj("web")
    body["spec"]["foo"] = 1
    reply = send(seeded, "POST", DEPLOYMENT.collection(), body, fieldValidation="Strict")
    expect(reply, status(400, "BadRequest",
                         'Deployment in version "v1" cannot be handled as a Deployment: strict '
                         'decoding error: unknown field "spec.foo"'))


def test_oversized_body(seeded: ServerThread) -> None:
    reply = send_oversized(seeded, "POST", POD.collection(), MAX_BODY_BYTES + 1024)
    expect(reply, status(413, "RequestEntityTooLarge",
                         f"Request entity too large: limit is {MAX_BODY_BYTES}"))


@pytest.mark.parametrize(("kind", "accepted"), [
    (POD, "application/json, application/yaml, application/vnd.kubernetes.protobuf"),
    (GATEWAY, "application/json, application/yaml"),
], ids=["builtin", "custom"])
def test_unsupported_content_type(seeded: ServerThread, kind: Kind, accepted: str) -> None:
    reply = send(seeded, "POST", kind.collection(), b"name: x", {"Content-Type": "text/plain"})
    expect(reply, status(415, "UnsupportedMediaType", "the body of the request was in an "
                         f"unknown format - accepted media types include: {accepted}"))


def test_patch_with_a_non_patch_content_type_on_a_builtin(seeded: ServerThread) -> None:
    reply = send(seeded, "PATCH", POD.item("existing"), b"{}", {"Content-Type": "text/plain"})
    # go-restful matches PATCH routes by Consumes: no route → its generic 415.
    expect(reply, status(415, "UnsupportedMediaType", "415: Unsupported Media Type", {}))


def test_strategic_merge_patch_on_a_custom_kind(seeded: ServerThread) -> None:
    reply = send(seeded, "PATCH", GATEWAY.item("existing"), b"{}",
                 {"Content-Type": "application/strategic-merge-patch+json"})
    expect(reply, status(415, "UnsupportedMediaType", "the body of the request was in an "
                         "unknown format - accepted media types include: "
                         "application/json-patch+json, application/merge-patch+json, "
                         "application/apply-patch+yaml"))


# --- query parameters ---------------------------------------------------------------------------

@pytest.mark.parametrize(("params", "message"), [
    ({"timeoutSeconds": "abc"}, 'strconv.ParseInt: parsing "abc": invalid syntax'),
    ({"timeoutSeconds": "1.5", "watch": "true"}, 'strconv.ParseInt: parsing "1.5": invalid syntax'),
    ({"limit": "x"}, 'strconv.ParseInt: parsing "x": invalid syntax'),
    ({"resourceVersion": "abc"},
     'resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax'),
], ids=["timeoutSeconds", "timeoutSeconds-watch", "limit", "resourceVersion"])
def test_malformed_query_parameters(seeded: ServerThread, params: dict[str, str],
                                    message: str) -> None:
    expect(send(seeded, "GET", POD.collection(), **params), status(400, "BadRequest", message))


FORBIDDEN = "FieldValueForbidden"
NOT_SUPPORTED = "FieldValueNotSupported"
RVM = "resourceVersionMatch"


@pytest.mark.parametrize(("params", "causes"), [
    ({RVM: "Exact"},
     [(FORBIDDEN, RVM, "Forbidden: resourceVersionMatch is forbidden unless resourceVersion "
                       "is provided")]),
    ({"resourceVersion": "0", RVM: "Exact"},
     [(FORBIDDEN, RVM, 'Forbidden: resourceVersionMatch "exact" is forbidden for '
                       'resourceVersion "0"')]),
    ({"resourceVersion": "5", RVM: "Foo"},
     [(NOT_SUPPORTED, RVM, 'Unsupported value: "Foo": supported values: "Exact", '
                           '"NotOlderThan", ""')]),
    ({"sendInitialEvents": "true"},
     [(FORBIDDEN, "sendInitialEvents", "Forbidden: sendInitialEvents is forbidden for list")]),
    ({"watch": "true", "sendInitialEvents": "true"},
     [(FORBIDDEN, RVM, "Forbidden: sendInitialEvents requires setting resourceVersionMatch to "
                       "NotOlderThan")]),
    ({"watch": "true", RVM: "NotOlderThan"},
     [(FORBIDDEN, RVM, "Forbidden: resourceVersionMatch is forbidden for watch unless "
                       "sendInitialEvents is provided")]),
    ({"watch": "true", "sendInitialEvents": "true", RVM: "Exact"},
     [(FORBIDDEN, RVM, "Forbidden: sendInitialEvents requires setting resourceVersionMatch to "
                       "NotOlderThan"),
      (NOT_SUPPORTED, RVM, 'Unsupported value: "Exact": supported values: "NotOlderThan"')]),
], ids=["list-rvm-without-rv", "list-exact-rv0", "list-unknown-rvm", "list-send-initial",
        "watch-send-initial-without-rvm", "watch-rvm-without-send-initial", "watch-two-errors"])
def test_list_options_validation(seeded: ServerThread, params: dict[str, str],
                                 causes: list[tuple[str, str, str]]) -> None:
    expect(send(seeded, "GET", POD.collection(), **params), list_options_invalid(causes))


def _token(payload: dict[str, Any]) -> str:
    raw = json.dumps(payload, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize(("token", "reason"), [
    (_token({"v": "meta.k8s.io/v1", "rv": 0, "start": "a\u0000"}),
     "continue key is not valid: incorrect encoded start resourceVersion (version "
     "meta.k8s.io/v1)"),
    (_token({"v": "meta.k8s.io/v1", "rv": 5, "start": ""}),
     "continue key is not valid: encoded start key empty (version meta.k8s.io/v1)"),
    (_token({"v": "v2", "rv": 5, "start": "a\u0000"}),
     "continue key is not valid: server does not recognize this encoded version v2"),
], ids=["rv-zero", "empty-start", "unknown-version"])
def test_bad_continue_tokens(seeded: ServerThread, token: str, reason: str) -> None:
    reply = send(seeded, "GET", POD.collection(), **{"continue": token, "limit": "1"})
    expect(reply, status(400, "BadRequest", f"invalid continue token: {reason}"))


def test_continue_with_a_resource_version(server: ServerThread) -> None:
    for name in ("first", "second"):
        create(server, POD.collection(), POD.obj(name))
    token = get(server, POD.collection(), limit=1)["metadata"]["continue"]
    before = snapshot(server)
    reply = send(server, "GET", POD.collection(), **{"continue": token, "resourceVersion": "5"})
    expect(reply, status(400, "BadRequest",
                         "specifying resource version is not allowed when using continue"))
    assert snapshot(server) == before


PARSE_NAME = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must "
              "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
              "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?"
              "[A-Za-z0-9]')")
PARSE_VALUE = ("a valid label must be an empty string or consist of alphanumeric characters, "
               "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
               "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
               "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")


@pytest.mark.parametrize(("selector", "message"), [
    ("env in prod", "unable to parse requirement: found 'prod' expected: '('"),
    ("a=b c=d", "found 'c', expected: ',' or 'end of string'"),
    ("a=b,", "found '', expected: identifier after ','"),
    (",a", "found ',', expected: !, identifier, or 'end of string'"),
    ("a in (b c)", "unable to parse requirement: found 'c', expected: ',' or ')'"),
    ("-a=b", f'unable to parse requirement: <nil>: Invalid value: "-a": {PARSE_NAME}'),
    ("app=-x", f'unable to parse requirement: values[0][app]: Invalid value: "-x": '
               f"{PARSE_VALUE}"),
], ids=["in-without-paren", "missing-comma", "trailing-comma", "leading-comma", "in-no-comma",
        "bad-key", "bad-value"])
@pytest.mark.parametrize("watching", [False, True], ids=["list", "watch"])
def test_invalid_label_selectors(seeded: ServerThread, selector: str, message: str,
                                 watching: bool) -> None:
    params = {"labelSelector": selector} | ({"watch": "true"} if watching else {})
    expect(send(seeded, "GET", POD.collection(), **params), status(400, "BadRequest", message))


@pytest.mark.parametrize(("path", "selector", "message"), [
    (POD.collection(), "spec.foo=x", "field label not supported: spec.foo"),
    (POD.collection(), "abc", "invalid selector: 'abc'; can't understand 'abc'"),
    (POD.collection(), "metadata.name=a=b",
     "invalid field selector: unescaped character in value: 61"),
    (POD.collection(), "metadata.name=a\\x",
     "invalid field selector: invalid escape sequence: \\x"),
    (POD.collection(), "metadata.name = a", "field label not supported: metadata.name "),
    (DEPLOYMENT.collection(), "spec.replicas=1",
     '"spec.replicas" is not a known field selector: only "metadata.name", '
     '"metadata.namespace"'),
    (NODE.collection(), "metadata.namespace=x",
     "field label not supported: metadata.namespace"),
    (SERVICE.collection(), "spec.selector=x", "field label not supported: spec.selector"),
    (GATEWAY.collection(), "spec.gatewayClassName=x",
     "field label not supported: spec.gatewayClassName"),
    ("/apis/events.k8s.io/v1/namespaces/default/events", "involvedObject.name=x",
     "field label not supported: involvedObject.name"),
], ids=["pods-unknown", "no-operator", "unescaped-equals", "bad-escape", "spaces-kept",
        "deployments-default-converter", "nodes-namespace", "services-unknown", "crd",
        "events-core-name"])
def test_invalid_field_selectors(seeded: ServerThread, path: str, selector: str,
                                 message: str) -> None:
    expect(send(seeded, "GET", path, fieldSelector=selector), status(400, "BadRequest", message))
    expect(send(seeded, "GET", path, fieldSelector=selector, watch="true"),
           status(400, "BadRequest", message))


# --- routing ------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", [
    "/api/v1/namespaces/default/widgets",
    "/api/v1/namespaces/default/widgets/x",
    "/apis/apps/v1/namespaces/default/widgets?watch=true",
    "/apis/gateway.networking.k8s.io/v1/namespaces/default/widgets",
])
def test_unknown_resource_under_a_served_group(seeded: ServerThread, path: str) -> None:
    expect(send(seeded, "GET", path),
           status(404, "NotFound", "the server could not find the requested resource", {}))


@pytest.mark.parametrize("path", ["/apis/example.com/v1/widgets", "/apis/apps/v9/deployments",
                                  "/nonsense"])
def test_unknown_group_is_plain_text(seeded: ServerThread, path: str) -> None:
    reply = send(seeded, "GET", path)
    assert reply.status == 404
    assert reply.headers["content-type"] == "text/plain; charset=utf-8"
    assert reply.body == b"404 page not found\n"


@pytest.mark.parametrize(("method", "path"), [
    ("PUT", POD.collection()),
    ("PATCH", POD.collection()),
    ("POST", POD.item("existing")),
    ("DELETE", NAMESPACE.collection()),  # namespaces have no deletecollection
])
def test_method_not_allowed(seeded: ServerThread, method: str, path: str) -> None:
    body = POD.obj("existing") if method in ("PUT", "POST") else ({} if method == "PATCH" else None)
    expect(send(seeded, method, path, body), status(
        405, "MethodNotAllowed", "the server does not allow this method on the requested "
        "resource", {}))


def test_not_found_item(seeded: ServerThread) -> None:
    expect(send(seeded, "GET", GATEWAY.item("ghost")), status(
        404, "NotFound", 'gateways.gateway.networking.k8s.io "ghost" not found',
        {"name": "ghost", "group": GATEWAY.group, "kind": "gateways"}))
