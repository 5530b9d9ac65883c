"""networking.k8s.io/v1 IngressClasses: their Table, validation, and the DefaultIngressClass
admission plugin giving new Ingresses without a class the default class's name."""

from __future__ import annotations

import time
from typing import Any

from tests.integration import kubectl
from tests.integration.harness import ServerThread
from tests.integration.wire import call, create, ok

pytestmark = kubectl.needs_kubectl

CLASSES = "/apis/networking.k8s.io/v1/ingressclasses"
INGRESSES = "/apis/networking.k8s.io/v1/namespaces/default/ingresses"
DEFAULT = {"ingressclass.kubernetes.io/is-default-class": "true"}


def _class(name: str, annotations: dict[str, str] | None = None,
           **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": meta,
            "spec": {"controller": "example.com/ingress", **spec}}


def _ingress(name: str, annotations: dict[str, str] | None = None,
             **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    backend = {"service": {"name": "web", "port": {"number": 80}}}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta,
            "spec": {"defaultBackend": backend, **spec}}


def test_ingress_class_table_defaults_and_validation(server: ServerThread) -> None:
    created = create(server, CLASSES, _class("nginx", parameters={
        "apiGroup": "k8s.example.com", "kind": "IngressParameters", "name": "external"}))
    assert created["spec"]["parameters"]["scope"] == "Cluster"  # SetDefaults_IngressClass
    assert created["metadata"]["generation"] == 1
    lines = kubectl.ok(server, "get", "ingressclasses").splitlines()
    assert lines[0].split() == ["NAME", "CONTROLLER", "PARAMETERS", "AGE"]
    assert lines[1].split()[:3] == ["nginx", "example.com/ingress",
                                    "IngressParameters.k8s.example.com/external"]
    reply = call(server, "POST", CLASSES, _class("bad", parameters={
        "kind": "P", "name": "p", "scope": "Namespace"}))
    assert reply.status_object()["message"] == (
        'IngressClass.networking.k8s.io "bad" is invalid: spec.parameters.namespace: Required '
        "value: `parameters.scope` is set to 'Namespace'")
    body = _class("bad")
    body["spec"]["controller"] = "no-slash"
    reply = call(server, "POST", CLASSES, body)
    assert reply.status_object()["message"] == (
        'IngressClass.networking.k8s.io "bad" is invalid: spec.controller: Invalid value: '
        '"no-slash": must be a domain-prefixed path (such as "acme.io/foo")')
    reply = call(server, "PATCH", f"{CLASSES}/nginx", {"spec": {"controller": "other.io/x"}})
    assert reply.status == 422
    assert reply.status_object()["details"]["causes"][0] == {
        "reason": "FieldValueInvalid", "field": "spec.controller",
        "message": 'Invalid value: "other.io/x": field is immutable'}


def test_default_ingress_class_is_given_to_ingresses_without_one(server: ServerThread) -> None:
    plain = create(server, INGRESSES, _ingress("before"))
    assert "ingressClassName" not in plain["spec"]  # no default class yet
    create(server, CLASSES, _class("old", DEFAULT))
    time.sleep(1.1)  # creationTimestamps have second precision: the newer default wins
    create(server, CLASSES, _class("new", DEFAULT))
    create(server, CLASSES, _class("other"))
    defaulted = create(server, INGRESSES, _ingress("a"))
    assert next(iter(defaulted["spec"])) == "ingressClassName"
    assert defaulted["spec"]["ingressClassName"] == "new"
    # admission's field belongs to no manager
    (entry,) = defaulted["metadata"]["managedFields"]
    assert "f:ingressClassName" not in entry["fieldsV1"]["f:spec"]
    named = create(server, INGRESSES, _ingress("b", ingressClassName="other"))
    assert named["spec"]["ingressClassName"] == "other"
    legacy = create(server, INGRESSES, _ingress("c", {"kubernetes.io/ingress.class": "x"}))
    assert "ingressClassName" not in legacy["spec"]
    # create only: an update keeps an Ingress without a class as it is
    updated = ok(call(server, "PATCH", f"{INGRESSES}/before",
                      {"metadata": {"labels": {"x": "y"}}}), 200)
    assert "ingressClassName" not in updated["spec"]
    lines = kubectl.ok(server, "get", "ingress", "a").splitlines()
    assert lines[1].split()[1] == "new"
