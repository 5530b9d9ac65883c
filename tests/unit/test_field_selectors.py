"""kubewire.selectors.fields: kube-exact parsing, matching and per-kind conversion (§9.2, §9.3)."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubewire.resources import REGISTRY, Resource
from kubewire.selectors.errors import SelectorError
from kubewire.selectors.field_sets import field_set
from kubewire.selectors.fields import (
    FieldSelector,
    convert_field_selector,
    parse_field_selector,
)
from tests.gateway_api import gateway_registry


def resource(plural: str) -> Resource:
    found = next((r for r in gateway_registry() if r.plural == plural), None)
    assert found is not None
    return found


def field_error(text: str) -> str:
    with pytest.raises(SelectorError) as info:
        parse_field_selector(text)
    return info.value.message



# --- field selectors (§9.2) -------------------------------------------------------------------

@pytest.mark.parametrize(("text", "message"), [
    ("a=b=c", "invalid field selector: unescaped character in value: 61"),
    ("a=\\x", "invalid field selector: invalid escape sequence: \\x"),
    ("a=b\\", "invalid field selector: invalid escape sequence: \\"),
    ("a", "invalid selector: 'a'; can't understand 'a'"),
    ("x=1,a", "invalid selector: 'x=1,a'; can't understand 'a'"),
])
def test_field_selector_messages_are_kube_exact(text: str, message: str) -> None:
    assert field_error(text) == message


def test_field_selector_parsing() -> None:
    sel = parse_field_selector("b==1,a!=2,,c=x\\,y\\=z\\\\,")
    assert [(t.field, t.operator, t.value) for t in sel.terms] == [
        ("a", "!=", "2"), ("b", "=", "1"), ("c", "=", "x,y=z\\")]
    assert str(sel) == "a!=2,b=1,c=x\\,y\\=z\\\\"
    assert parse_field_selector("a = b").terms[0].field == "a "  # no trimming
    assert parse_field_selector("").is_empty and parse_field_selector(",").is_empty


def test_field_selector_matching_and_exact() -> None:
    sel = parse_field_selector("metadata.name=web,status.phase!=Failed")
    assert sel.matches({"metadata.name": "web", "status.phase": "Running"})
    assert sel.matches({"metadata.name": "web"})  # absent reads as ""
    assert not sel.matches({"metadata.name": "web", "status.phase": "Failed"})
    assert parse_field_selector("a=").matches({})
    assert not parse_field_selector("a!=").matches({})
    assert sel.exact("metadata.name") == "web"
    assert sel.exact("status.phase") is None
    assert FieldSelector().exact("metadata.name") is None


# --- field-label conversion per kind (§9.3) ---------------------------------------------------

ACCEPTED = {
    "pods": ["metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy",
             "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork", "status.phase",
             "status.podIP", "status.podIPs", "status.nominatedNodeName", "spec.host"],
    "services": ["metadata.name", "metadata.namespace", "spec.clusterIP", "spec.type"],
    "nodes": ["metadata.name", "spec.unschedulable"],
    "namespaces": ["metadata.name", "status.phase"],
    "events": ["metadata.name", "metadata.namespace", "reason", "type", "reportingController",
               "source", "regarding.kind", "regarding.namespace", "regarding.name",
               "regarding.uid", "regarding.apiVersion", "regarding.resourceVersion",
               "regarding.fieldPath"],
    "deployments": ["metadata.name", "metadata.namespace"],
    # apps/v1 registers no field label conversion: kube's default one (ReplicaSets'
    # status.replicas is a selectable field that the default converter never lets through)
    "replicasets": ["metadata.name", "metadata.namespace"],
    "statefulsets": ["metadata.name", "metadata.namespace"],
    "daemonsets": ["metadata.name", "metadata.namespace"],
    "controllerrevisions": ["metadata.name", "metadata.namespace"],
    "ingresses": ["metadata.name", "metadata.namespace"],
    "networkpolicies": ["metadata.name", "metadata.namespace"],
    "endpointslices": ["metadata.name", "metadata.namespace"],
    "gatewayclasses": ["metadata.name"],
    "gateways": ["metadata.name", "metadata.namespace"],
    "grpcroutes": ["metadata.name", "metadata.namespace"],
    "httproutes": ["metadata.name", "metadata.namespace"],
    "referencegrants": ["metadata.name", "metadata.namespace"],
    "configmaps": ["metadata.name", "metadata.namespace"],
    "secrets": ["metadata.name", "metadata.namespace", "type"],
    "serviceaccounts": ["metadata.name", "metadata.namespace"],
    "leases": ["metadata.name", "metadata.namespace"],
    "customresourcedefinitions": ["metadata.name"],
    "roles": ["metadata.name", "metadata.namespace"],
    "rolebindings": ["metadata.name", "metadata.namespace"],
    "clusterroles": ["metadata.name"],
    "clusterrolebindings": ["metadata.name"],
    "certificatesigningrequests": ["metadata.name", "spec.signerName"],
    "resourcequotas": ["metadata.name", "metadata.namespace"],
    "limitranges": ["metadata.name", "metadata.namespace"],
    "persistentvolumeclaims": ["metadata.name", "metadata.namespace"],
    "persistentvolumes": ["metadata.name"],
    "storageclasses": ["metadata.name"],
    "endpoints": ["metadata.name", "metadata.namespace"],
    # core/v1 conversion.go AddFieldLabelConversionsForReplicationController
    "replicationcontrollers": ["metadata.name", "metadata.namespace", "status.replicas"],
    "jobs": ["metadata.name", "metadata.namespace", "status.successful"],
    "cronjobs": ["metadata.name", "metadata.namespace"],
    "poddisruptionbudgets": ["metadata.name", "metadata.namespace"],
    "priorityclasses": ["metadata.name"],
    "ingressclasses": ["metadata.name"],
    "apiservices": ["metadata.name"],
    "horizontalpodautoscalers": ["metadata.name", "metadata.namespace"],
}
REJECTED = {"pods": "spec.foo", "services": "spec.ports", "nodes": "metadata.namespace",
            "namespaces": "name", "events": "involvedObject.name", "deployments": "spec.replicas",
            "replicasets": "status.replicas", "statefulsets": "status.successful",
            "daemonsets": "spec.selector", "controllerrevisions": "revision",
            "ingresses": "spec.rules", "networkpolicies": "spec.podSelector",
            "endpointslices": "addressType", "gateways": "spec.gatewayClassName",
            "httproutes": "spec.hostnames", "gatewayclasses": "spec.controllerName",
            "grpcroutes": "spec.hostnames", "referencegrants": "spec.from",
            "configmaps": "data", "secrets": "data",
            "serviceaccounts": "secrets", "leases": "spec.holderIdentity",
            "customresourcedefinitions": "spec.group", "roles": "rules",
            "rolebindings": "roleRef.name", "clusterroles": "aggregationRule",
            "clusterrolebindings": "subjects", "certificatesigningrequests": "spec.username",
            "resourcequotas": "spec.hard",
            # the claim and volume strategies' legacy "name" field: core/v1's conversion
            # does not take it, so it cannot be selected
            "limitranges": "spec.limits", "persistentvolumeclaims": "name",
            "persistentvolumes": "name", "storageclasses": "provisioner",
            "jobs": "status.succeeded",
            "cronjobs": "spec.schedule", "poddisruptionbudgets": "spec.minAvailable",
            "priorityclasses": "value", "ingressclasses": "spec.controller",
            "endpoints": "subsets", "horizontalpodautoscalers": "spec.maxReplicas",
            "apiservices": "spec.group", "replicationcontrollers": "spec.replicas"}


def test_every_registry_kind_is_covered() -> None:
    # create-only kinds (bindings) are never listed: no field selectors to cover; the Gateway
    # API kinds are served from their pre-installed CRDs
    listed = {r.plural for r in gateway_registry() if not r.create_only}
    assert listed == set(ACCEPTED) == set(REJECTED)


@pytest.mark.parametrize("plural", sorted(ACCEPTED))
def test_convert_accepts_the_kinds_labels(plural: str) -> None:
    for label in ACCEPTED[plural]:
        converted = convert_field_selector(resource(plural), parse_field_selector(f"{label}=v"))
        expected = "spec.nodeName" if label == "spec.host" else label
        assert converted.terms[0].field == expected


@pytest.mark.parametrize("plural", sorted(REJECTED))
def test_convert_rejects_with_the_kinds_message(plural: str) -> None:
    res, label = resource(plural), REJECTED[plural]
    with pytest.raises(SelectorError) as info:
        convert_field_selector(res, parse_field_selector(f"{label}=v"))
    if res.field_label_style == "default":
        expected = (f'"{label}" is not a known field selector: only "metadata.name", '
                    '"metadata.namespace"')
    elif res.field_label_style == "batchv1.Job":  # pkg/apis/batch/v1/conversion.go
        expected = f'field label "{label}" not supported for batchv1.Job'
    else:
        expected = f"field label not supported: {label}"
    assert info.value.message == expected


def test_default_style_kinds_and_message_quoting() -> None:
    assert {r.plural for r in REGISTRY if r.field_label_style == "default"} == {
        "deployments", "replicasets", "statefulsets", "daemonsets", "controllerrevisions",
        "ingresses", "networkpolicies", "endpointslices", "configmaps",
        "serviceaccounts", "leases", "customresourcedefinitions", "roles", "rolebindings",
        "clusterroles", "clusterrolebindings", "resourcequotas", "limitranges",
        "persistentvolumeclaims", "persistentvolumes", "storageclasses", "cronjobs",
        "poddisruptionbudgets", "priorityclasses", "ingressclasses", "endpoints",
        "horizontalpodautoscalers", "apiservices"}
    with pytest.raises(SelectorError) as info:
        convert_field_selector(resource("deployments"), parse_field_selector('a"b=1'))
    assert info.value.message.startswith('"a\\"b" is not a known field selector')


# --- properties -------------------------------------------------------------------------------

@given(st.text())
def test_field_parser_only_raises_selector_error(text: str) -> None:
    with contextlib.suppress(SelectorError):
        parse_field_selector(text)


@given(st.lists(st.tuples(st.from_regex(r"\A[a-zA-Z.]{1,8}\Z"), st.sampled_from(["=", "!="]),
                          st.text()), max_size=4))
def test_field_selector_round_trip(terms: list[tuple[str, str, str]]) -> None:
    escaped = [f + op + v.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")
               for f, op, v in terms]
    sel = parse_field_selector(",".join(escaped))
    assert parse_field_selector(str(sel)) == sel
    assert sorted((t.field, t.operator, t.value) for t in sel.terms) == sorted(terms)


def test_job_status_successful_is_the_succeeded_count_zero_when_unset() -> None:
    # job/strategy.go JobToSelectableFields: strconv.Itoa(int(job.Status.Succeeded))
    jobs = resource("jobs")
    job = {"metadata": {"name": "j", "namespace": "ns"}, "status": {}}
    assert field_set(jobs, job)["status.successful"] == "0"
    job["status"] = {"succeeded": 3}
    assert field_set(jobs, job)["status.successful"] == "3"


def test_replication_controller_status_replicas_is_the_count_zero_when_unset() -> None:
    # replicationcontroller/strategy.go ControllerToSelectableFields: strconv.Itoa
    controllers = resource("replicationcontrollers")
    controller = {"metadata": {"name": "rc", "namespace": "ns"}, "status": {}}
    assert field_set(controllers, controller)["status.replicas"] == "0"
    controller["status"] = {"replicas": 2}
    assert field_set(controllers, controller)["status.replicas"] == "2"
