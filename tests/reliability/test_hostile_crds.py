"""Hostile CustomResourceDefinitions: a CRD is code the server compiles, so each way of making
that work unbounded must meet a bound, and the server must keep answering others meanwhile.

The bounds: the request body (3 MiB, kube's), the stored object (1.5 MiB, etcd's), JSON nesting
(kubewire's decoder limit), CEL's parser limits (100,000 code points, nesting), the static cost
estimate (kube's 10M per rule), and kubewire's own compile budget per CRD
(``server.writes.validation.crds``: at most 1000 rules and 64 KiB of rule text; kube has no such
bound, but it does not compile on the one loop every client shares), and kubewire's bound on a
CRD's schema nodes (30,000; validating one costs ~40 us on the loop). Each case asserts the
answer, how long it took, and that ``/readyz`` kept answering while it was computed. (A rule
over CEL's 100,000 code points is over the 64 KiB budget first.)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from kubewire.server.writes.validation.crds import MAX_RULE_TEXT, MAX_RULES, MAX_SCHEMA_NODES
from tests.integration.harness import ServerThread
from tests.integration.wire import Reply, call

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
SPEC_AT = "spec.validation.openAPIV3Schema.properties[spec]"
ANSWER_BOUND_S = 3.0  # the hostile request itself (a 2.8 MB body takes ~1 s to read and check)
STALL_BOUND_S = 1.9  # the longest a /readyz waited meanwhile (its store check gives up at 2 s)


def crd(name: str, spec_schema: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{name}s.hostile.example.com"},
            "spec": {"group": "hostile.example.com", "scope": "Namespaced",
                     "names": {"plural": f"{name}s", "kind": name.capitalize()},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "properties": {"spec": spec_schema}}}}]}}


def with_rules(rules: list[str], **properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"x": {"type": "integer"}, **properties},
            "x-kubernetes-validations": [{"rule": r} for r in rules]}


@contextmanager
def probing(server: ServerThread) -> Iterator[list[float]]:
    """GET /readyz every 10 ms on a thread; yields the latencies seen."""
    latencies: list[float] = []
    done = threading.Event()

    def run() -> None:
        while not done.is_set():
            started = time.monotonic()
            assert call(server, "GET", "/readyz").status == 200
            latencies.append(time.monotonic() - started)
            done.wait(0.01)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield latencies
    finally:
        done.set()
        thread.join(30)


def hostile_post(server: ServerThread, body: dict[str, Any]) -> Reply:
    with probing(server) as latencies:
        started = time.monotonic()
        reply = call(server, "POST", CRDS, body)
        took = time.monotonic() - started
    assert took < ANSWER_BOUND_S, f"the hostile CRD took {took:.2f} s"
    assert latencies and max(latencies) < STALL_BOUND_S, f"/readyz waited {max(latencies):.2f} s"
    assert call(server, "GET", f"{CRDS}/{body['metadata']['name']}").status in (200, 404)
    return reply


def message(reply: Reply, status: int) -> str:
    assert reply.status == status, reply.body[:500]
    text: str = reply.status_object()["message"]
    return text


def _many_small_rules() -> dict[str, Any]:
    # ~2.8 MB: just under the request limit; compiled, it held the loop for over 10 s.
    return crd("manyrules", with_rules([f"self.x != {i}" for i in range(95_000)]))


def _long_rules() -> dict[str, Any]:
    rule = " || ".join(f"self.x == {i}" for i in range(1500))  # ~24,000 characters each
    return crd("longrules", with_rules([rule] * 4))


@pytest.mark.parametrize("make", [_many_small_rules, _long_rules], ids=["count", "text"])
def test_more_cel_than_the_compile_budget_is_refused_without_compiling(
        server: ServerThread, make: Callable[[], dict[str, Any]]) -> None:
    text = message(hostile_post(server, make()), 422)
    assert text.endswith(
        "is invalid: spec.validation.openAPIV3Schema: Forbidden: the CustomResourceDefinition's "
        "x-kubernetes-validations rules exceed what kubewire compiles for one "
        f"CustomResourceDefinition (at most {MAX_RULES} rules and {MAX_RULE_TEXT} characters "
        "of rule and messageExpression)"), text


def test_the_compile_budget_itself_is_accepted(server: ServerThread) -> None:
    rules = [f"self.x != {i}" for i in range(MAX_RULES)]
    reply = hostile_post(server, crd("budget", with_rules(rules)))
    assert reply.status == 201, reply.body[:500]


def test_deeply_nested_rule_is_invalid(server: ServerThread) -> None:
    rule = "(" * 5000 + "self.x" + ")" * 5000 + " == 1"
    text = message(hostile_post(server, crd("parens", with_rules([rule]))), 422)
    assert f"{SPEC_AT}.x-kubernetes-validations[0].rule: Invalid value" in text
    assert "compilation failed" in text


def test_an_unbounded_rule_is_refused_by_the_cost_estimate(server: ServerThread) -> None:
    names = {"type": "array", "items": {"type": "string"}}
    rule = "self.names.all(a, self.names.all(b, a == b))"
    text = message(hostile_post(server, crd("quadratic", with_rules([rule], names=names))), 422)
    assert (f"{SPEC_AT}.x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds "
            "budget by factor of more than 100x") in text


def test_a_schema_nested_past_the_decoders_limit_is_refused_at_decode(
        server: ServerThread) -> None:
    nested: dict[str, Any] = {"type": "string"}
    for _ in range(150):  # two JSON levels per schema level
        nested = {"type": "object", "properties": {"a": nested}}
    text = message(hostile_post(server, crd("deep", nested)), 400)
    assert text.startswith("the object provided is unrecognized (must be of type "
                           "CustomResourceDefinition): couldn't get version/kind; json parse "
                           "error: exceeded max depth")


def test_a_crd_over_the_stored_object_limit_is_refused(server: ServerThread) -> None:
    """~1.7 MB in 20,000 properties with long descriptions: within the node bound, valid, but
    larger than etcd's 1.5 MiB object limit."""
    properties = {f"p{i}": {"type": "string", "description": "d" * 50} for i in range(20_000)}
    body = crd("wide", {"type": "object", "properties": properties})
    text = message(hostile_post(server, body), 413)
    assert text.startswith("Request entity too large: the object is "), text
    assert text.endswith(" bytes, the limit is 1572864"), text
    assert call(server, "GET", "/apis/hostile.example.com/v1").status == 404


NODES_ERROR = (f"spec: Forbidden: the CustomResourceDefinition's spec holds more than "
               f"{MAX_SCHEMA_NODES} objects (schema nodes), more than kubewire validates for "
               "one CustomResourceDefinition")


def test_a_schema_of_more_nodes_than_the_bound_is_refused_without_validating(
        server: ServerThread) -> None:
    """~2.6 MB of empty schemas: 200,000 nodes, ~8 s of validation on the loop unbounded."""
    properties = {f"{i:x}": {} for i in range(200_000)}
    text = message(hostile_post(server, crd("nodes", {"type": "object",
                                                        "properties": properties})), 422)
    assert text.endswith(NODES_ERROR), text[-500:]
    one_over = {f"p{i}": {"type": "string"} for i in range(MAX_SCHEMA_NODES)}
    text = message(call(server, "POST", CRDS, crd("nodes", {"type": "object",
                                                             "properties": one_over})), 422)
    assert text.endswith(NODES_ERROR), text[-500:]


def test_a_schema_at_the_node_bound_is_accepted(server: ServerThread) -> None:
    # the spec's own objects count too: names, the version, its schema wrappers, the objects
    # above the properties, and the defaulted conversion (9 here)
    properties = {f"p{i}": {"type": "string"} for i in range(MAX_SCHEMA_NODES - 9)}
    reply = hostile_post(server, crd("atbound", {"type": "object", "properties": properties}))
    assert reply.status == 201, reply.body[:500]
