"""Custom resource creates against built-in creates on the same server, and CEL's cost per
write (issue 16).

One ``kubewire serve`` (durability full, its default) with two CRDs installed through the API
at start: ``Gadget`` and ``RuledGadget``, the same structural schema (nested objects, an enum, a
default, a list of objects, ``maxLength``/``maxItems`` bounds), the second with six CEL rules
of the kinds real CRDs carry (field comparisons, ``has``, list uniqueness over its items, a
rule per item, ``matches``, a transition rule with ``oldSelf``). One client process keeps C
keep-alive connections creating (``generateName``) back to back, in turn per repetition:

- ConfigMaps of about the same JSON size (the built-in reference),
- Gadgets (a custom resource without CEL rules),
- RuledGadgets (the same custom resource with the rules).

Rows: CR creates/s relative to ConfigMap creates/s (the issue's target: >= 0.7), for both CR
kinds; and the server's loop CPU per create with the CEL rules relative to without (CEL's
share of a write; the difference in µs is printed beside it).

    python -m bench.crd_writes [--smoke] [--repeats 5]
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

from bench import report
from bench.request_cpu import LoadOptions, in_turn, timed_round
from bench.servers import ServerProcess, kubewire_serve_argv
from bench.stats import row, summary
from bench.wire import create_namespace, request
from bench.worker import Worker

NAME = "crd_writes"
NAMESPACE = "bench"
GROUP = "bench.kubewire.io"
TARGET = 0.7  # issue 16: CR creates/s relative to built-in creates on the same server
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


CRDWritesOptions = LoadOptions  # request_cpu's: C connections, timed rounds after a warm-up
default_options = CRDWritesOptions
SMOKE = CRDWritesOptions.smoke()

RULES = [
    {"rule": "self.minReplicas <= self.maxReplicas",
     "message": "minReplicas must not exceed maxReplicas"},
    {"rule": "!has(self.tls) || self.tls.mode != 'Terminate' || size(self.tls.secretName) > 0",
     "message": "a terminating listener needs a secret"},
    {"rule": "self.ports.all(a, self.ports.exists_one(b, a.name == b.name))",
     "message": "port names must be unique"},
    {"rule": "self.owner.matches('^[a-z][a-z0-9-]*$')", "message": "owner must be a DNS label"},
    {"rule": "!has(oldSelf.owner) || self.owner == oldSelf.owner",
     "message": "owner is immutable"},
]
ITEM_RULE = {"rule": "self.port > 0 && self.port < 65536", "message": "port out of range"}


def gadget_schema(with_rules: bool) -> dict[str, Any]:
    port: dict[str, Any] = {
        "type": "object", "required": ["name", "port"],
        "properties": {"name": {"type": "string", "maxLength": 15},
                       "port": {"type": "integer"},
                       "protocol": {"type": "string", "enum": ["TCP", "UDP"],
                                    "default": "TCP"}}}
    spec: dict[str, Any] = {
        "type": "object", "required": ["owner", "ports"],
        "properties": {
            "owner": {"type": "string", "maxLength": 63},
            "minReplicas": {"type": "integer", "minimum": 0, "default": 1},
            "maxReplicas": {"type": "integer", "minimum": 0, "default": 10},
            "tls": {"type": "object", "properties": {
                "mode": {"type": "string", "enum": ["Terminate", "Passthrough"]},
                "secretName": {"type": "string", "maxLength": 253}}},
            "ports": {"type": "array", "maxItems": 16, "items": port,
                      "x-kubernetes-list-type": "map",
                      "x-kubernetes-list-map-keys": ["name"]},
            "labels": {"type": "object", "maxProperties": 16,
                       "additionalProperties": {"type": "string", "maxLength": 63}}}}
    if with_rules:
        spec["x-kubernetes-validations"] = RULES
        port["x-kubernetes-validations"] = [ITEM_RULE]
    return {"type": "object", "properties": {
        "spec": spec,
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}}}


def crd(kind: str, with_rules: bool) -> dict[str, Any]:
    plural = kind.lower() + "s"
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced",
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": gadget_schema(with_rules)}}]}}


def gadget(kind: str) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": kind,
            "metadata": {"generateName": "g-", "namespace": NAMESPACE,
                         "labels": {"app": "bench"}},
            "spec": {"owner": "team-a", "minReplicas": 2, "maxReplicas": 5,
                     "tls": {"mode": "Terminate", "secretName": "web-tls"},
                     "ports": [{"name": f"p{i}", "port": 8000 + i} for i in range(4)],
                     "labels": {"tier": "web", "zone": "a"}}}


def config_map(size: int) -> dict[str, Any]:
    """A ConfigMap whose JSON is ``size`` bytes, give or take a few."""
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"generateName": "c-", "namespace": NAMESPACE,
                                        "labels": {"app": "bench"}},
                           "data": {"pad": ""}}
    obj["data"]["pad"] = "x" * max(0, size - len(msgspec.json.encode(obj)))
    return obj


# side -> (collection path, kind label)
SIDES = {
    "configmap": f"/api/v1/namespaces/{NAMESPACE}/configmaps",
    "cr": f"/apis/{GROUP}/v1/namespaces/{NAMESPACE}/gadgets",
    "cr_cel": f"/apis/{GROUP}/v1/namespaces/{NAMESPACE}/ruledgadgets",
}


def bodies() -> dict[str, bytes]:
    cr = msgspec.json.encode(gadget("Gadget"))
    return {"configmap": msgspec.json.encode(config_map(len(cr))), "cr": cr,
            "cr_cel": msgspec.json.encode(gadget("RuledGadget"))}


def install(server: ServerProcess) -> None:
    create_namespace(server.port, NAMESPACE)
    for kind, with_rules in (("Gadget", False), ("RuledGadget", True)):
        status, body = request(server.port, "POST", CRDS, crd(kind, with_rules))
        if status != 201:
            raise RuntimeError(f"creating the {kind} CRD: {status} {body[:300]!r}")
    plural_paths = [SIDES["cr"], SIDES["cr_cel"]]
    deadline = time.monotonic() + 30
    while any(request(server.port, "GET", p)[0] != 200 for p in plural_paths):
        if time.monotonic() > deadline:
            raise RuntimeError("the CRDs were not served within 30 s")
        time.sleep(0.05)
    # The rules really run: an object breaking one is refused.
    bad = gadget("RuledGadget")
    bad["spec"]["minReplicas"] = 9
    status, body = request(server.port, "POST", SIDES["cr_cel"], bad)
    if status != 422 or b"minReplicas must not exceed maxReplicas" not in body:
        raise RuntimeError(f"the CEL rule did not refuse: {status} {body[:300]!r}")


def measure(server: ServerProcess, load: Worker, side: str, body: bytes,
            opts: CRDWritesOptions) -> dict[str, float]:
    def go(duration_s: float) -> dict[str, Any]:
        return load.call("closed_loop", duration_s + 60, path=SIDES[side], body=body,
                         max_requests=opts.max_requests, duration_s=duration_s)

    return timed_round(server, load, opts, go, (f"{side} creates", 201))


def run(opts: CRDWritesOptions) -> dict[str, Any]:
    payloads = bodies()
    samples: dict[str, list[dict[str, float]]] = {side: [] for side in SIDES}
    with contextlib.ExitStack() as stack:
        data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kw-crdw-")))
        server = stack.enter_context(
            ServerProcess("kubewire", kubewire_serve_argv(data_dir / "kw"))).wait_ready()
        install(server)
        load = stack.enter_context(Worker("bench.load:LoadGenerator"))
        for rep in range(opts.repeats):
            for side in in_turn(list(SIDES), rep):
                samples[side].append(measure(server, load, side, payloads[side], opts))
    return result(opts, samples, {side: len(b) for side, b in payloads.items()})


def result(opts: CRDWritesOptions, samples: dict[str, list[dict[str, float]]],
           sizes: dict[str, int]) -> dict[str, Any]:
    def values(side: str, key: str) -> list[float]:
        return [s[key] for s in samples[side]]

    rows = []
    for side, label in (("cr", "without CEL"), ("cr_cel", "with 6 CEL rules")):
        rate = row(f"C={opts.clients}: CR creates ({label}) / ConfigMap creates", "creates/s",
                   values(side, "rate"), values("configmap", "rate"),
                   loop_cpu_us={s: summary(values(s, "loop_cpu_us")) for s in ("configmap", side)},
                   target=f">= {TARGET}")
        rate["met"] = rate["ratio"]["median"] >= TARGET
        rows.append(rate)
    cel_extra = [a - b for a, b in zip(values("cr_cel", "loop_cpu_us"),
                                       values("cr", "loop_cpu_us"), strict=True)]
    rows.append(row(f"C={opts.clients}: loop CPU per CR create, with CEL rules / without", "µs",
                    values("cr_cel", "loop_cpu_us"), values("cr", "loop_cpu_us"),
                    cel_us_per_write=summary(cel_extra),
                    process_cpu_us={s: summary(values(s, "process_cpu_us"))
                                    for s in ("cr", "cr_cel")}))
    rows.append(row(f"C={opts.clients}: loop CPU per create, CR (without CEL) / ConfigMap", "µs",
                    values("cr", "loop_cpu_us"), values("configmap", "loop_cpu_us")))
    return {"name": NAME, "title": "Custom resource writes (issue 16)",
            "reference": "ConfigMap creates on the same server (rates, loop CPU), or the same CR "
                         "without CEL rules (CEL's cost)",
            "command": "python -m bench.crd_writes", "repeats": opts.repeats, "rows": rows,
            "notes": [f"{opts.duration_s} s of back-to-back creates per kind and repetition after "
                      f"{opts.warm_up_s} s of warm-up, kinds in turn (reversed every other "
                      "repetition); durability full; one server, one client process.",
                      f"Bodies: CR {sizes['cr']} B (nested spec, a 4-item list map, defaults "
                      f"applied), ConfigMap {sizes['configmap']} B (one padded data key).",
                      "CEL rules: 5 on spec (a comparison, has/size, uniqueness over the list, "
                      "matches, a transition rule) and 1 per list item (4 evaluations).",
                      "Loop CPU: the server's main thread (/proc/<pid>/task/<pid>/stat) per "
                      "answered create; cel_us_per_write is the per-repetition difference."]}


def main() -> None:
    report.main(__doc__, SMOKE, default_options, run)


if __name__ == "__main__":
    main()
