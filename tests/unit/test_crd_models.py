"""``kubewire models``: CRD YAML → a module of msgspec models. Each test generates, imports the
module it wrote, and round-trips objects through the models (``kubewire.models`` decode and
encode, as the client's ``Api`` does)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import typing
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec
import pytest
import yaml

from kubewire.cli import main
from kubewire.client.crd_models import CRDError, generate_from_yaml
from kubewire.models import KubeObject, ObjectMeta, decode, encode

GATEWAY_API = Path("/work/shared/openapi/gateway-api-v1.2.1/standard")
RUFF = Path(sys.executable).with_name("ruff")

WIDGET_CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  versions:
  - name: v1alpha1
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {size: {type: string}}}
  - name: v1
    served: true
    storage: true
    subresources: {status: {}, scale: {specReplicasPath: .spec.replicas,
                                      statusReplicasPath: .status.replicas}}
    schema:
      openAPIV3Schema:
        type: object
        required: [spec]
        properties:
          apiVersion: {type: string}
          kind: {type: string}
          metadata: {type: object}
          spec:
            type: object
            required: [size, replicaCount]
            properties:
              size: {type: string, enum: [small, "big]one", 'say "hi"']}
              replicaCount: {type: integer, format: int32}
              replicas: {type: integer, enum: [1, 3, 5]}
              ratio: {type: number}
              enabled: {type: boolean}
              port: {x-kubernetes-int-or-string: true}
              labels: {type: object, additionalProperties: {type: string}}
              limits:
                type: object
                additionalProperties:
                  type: object
                  properties: {max: {type: integer}}
              raw: {x-kubernetes-preserve-unknown-fields: true}
              config: {type: object, x-kubernetes-preserve-unknown-fields: true}
              template: {type: object, x-kubernetes-embedded-resource: true,
                         x-kubernetes-preserve-unknown-fields: true}
              note: {type: string, nullable: true}
              from: {type: string}
              list: {type: array, items: {type: string}}
              fooBar: {type: string}
              foo_bar: {type: string}
              matrix: {type: array, items: {type: array, items: {type: integer}}}
              primary:
                type: object
                required: [host]
                properties: {host: {type: string}, port: {type: integer}}
              secondary:
                type: object
                required: [host]
                properties: {host: {type: string}, port: {type: integer}}
          status:
            type: object
            properties:
              replicas: {type: integer}
              phase: {type: string, nullable: true}
  - name: v0
    served: false
    storage: false
---
apiVersion: v1
kind: ConfigMap
metadata: {name: not-a-crd}
"""

WIDGET = {
    "apiVersion": "example.com/v1", "kind": "Widget",
    "metadata": {"name": "w", "namespace": "default", "labels": {"a": "b"}},
    "spec": {"size": "big]one", "replicaCount": 2, "replicas": 3, "ratio": 1, "enabled": False,
             "port": "http", "labels": {"x": "y"}, "limits": {"cpu": {"max": 4}},
             "raw": [1, {"a": None}], "config": {"anything": {"goes": True}},
             "template": {"apiVersion": "v1", "kind": "Pod", "spec": {}}, "note": "n",
             "from": "there", "list": ["a"], "fooBar": "1", "foo_bar": "2",
             "matrix": [[1, 2], []], "primary": {"host": "h", "port": 1},
             "secondary": {"host": "s"}, "unknownToTheSchema": {"kept": 1}},
    "status": {"replicas": 2, "phase": "Ready"},
}


def load(tmp_path: Path, source: str, name: str = "generated") -> ModuleType:
    """Write ``source`` as a module and import it (as a user's project would)."""
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def round_trip(cls: type[KubeObject], obj: dict[str, Any]) -> KubeObject:
    decoded = decode(cls, msgspec.json.encode(obj))
    assert msgspec.json.decode(encode(decoded)) == obj
    return decoded


@pytest.fixture
def widgets(tmp_path: Path) -> ModuleType:
    return load(tmp_path, generate_from_yaml([("widget.yaml", WIDGET_CRD)]))


def test_a_kind_class_per_served_version_with_its_api_facts(widgets: ModuleType) -> None:
    assert [k.__name__ for k in widgets.KINDS] == ["Widget", "WidgetV1alpha1"]
    widget, old = widgets.Widget, widgets.WidgetV1alpha1
    assert issubclass(widget, KubeObject)
    assert (widget.API_VERSION, widget.KIND, widget.PLURAL, widget.NAMESPACED) == (
        "example.com/v1", "Widget", "widgets", True)
    assert old.API_VERSION == "example.com/v1alpha1" and not hasattr(widgets, "WidgetV0")
    assert typing.get_type_hints(widget)["metadata"] == ObjectMeta | None


def test_schema_types_become_python_types(widgets: ModuleType) -> None:
    spec = typing.get_type_hints(widgets.WidgetSpec)
    assert spec["size"] == typing.Literal["small", "big]one", 'say "hi"']  # required
    assert spec["replica_count"] is int
    assert spec["replicas"] == typing.Literal[1, 3, 5] | None
    assert spec["ratio"] == int | float | None
    assert spec["enabled"] == bool | None
    assert spec["port"] == int | str | None  # IntOrString
    assert spec["labels"] == dict[str, str] | None
    assert spec["limits"] == dict[str, widgets.WidgetSpecLimits] | None
    assert spec["raw"] == typing.Any | None
    assert spec["config"] == dict[str, typing.Any] | None
    assert spec["template"] == dict[str, typing.Any] | None
    assert spec["from_"] == str | None and spec["list_"] == list[str] | None
    assert {spec["foo_bar"], spec["foo_bar_"]} == {str | None}
    assert spec["matrix"] == list[list[int]] | None
    # Two objects of the same shape are one class.
    assert spec["primary"] == spec["secondary"] == widgets.WidgetSpecPrimary | None
    status = typing.get_type_hints(widgets.WidgetStatus)
    assert status["phase"] == str | None
    kind = typing.get_type_hints(widgets.Widget)
    assert kind["spec"] is widgets.WidgetSpec  # required at the root
    assert kind["status"] == widgets.WidgetStatus | None


def test_objects_round_trip_and_required_fields_are_enforced(widgets: ModuleType) -> None:
    widget = round_trip(widgets.Widget, WIDGET)
    assert widget.spec.foo_bar_ in ("1", "2") and widget.spec.from_ == "there"
    assert widget.spec.limits["cpu"].max == 4
    # Built in Python, it encodes with the kind's apiVersion and kind.
    made = widgets.Widget(metadata=ObjectMeta(name="n"), spec=widgets.WidgetSpec(
        size="small", replica_count=1))
    assert msgspec.json.decode(encode(made)) == {
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "n"},
        "spec": {"replicaCount": 1, "size": "small"}}
    with pytest.raises(TypeError, match="replica_count"):
        widgets.WidgetSpec(size="small")
    bad = {**WIDGET, "spec": {"size": "huge", "replicaCount": 1}}
    with pytest.raises(msgspec.ValidationError, match=r"spec.size"):
        decode(widgets.Widget, msgspec.json.encode(bad))
    round_trip(widgets.WidgetV1alpha1, {"apiVersion": "example.com/v1alpha1", "kind": "Widget",
                                        "metadata": {"name": "w"}, "spec": {"size": "x"}})


def test_the_output_passes_ruff(tmp_path: Path) -> None:
    if not RUFF.exists():
        pytest.skip("ruff is not installed beside this interpreter")
    path = tmp_path / "models.py"
    path.write_text(generate_from_yaml([("widget.yaml", WIDGET_CRD)]))
    done = subprocess.run([str(RUFF), "check", "--isolated", "--line-length", "100",
                           "--select", "E,F,I,UP,B,RUF", str(path)],
                          capture_output=True, text=True, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stdout


@pytest.mark.skipif(not GATEWAY_API.is_dir(), reason="the Gateway API CRDs are not here")
def test_gateway_api_crds(tmp_path: Path) -> None:
    files = sorted(GATEWAY_API.glob("*.yaml"))
    module = load(tmp_path, generate_from_yaml([(p.name, p.read_text()) for p in files]),
                  "gateway_models")
    assert sorted(k.__name__ for k in module.KINDS) == [
        "Gateway", "GatewayClass", "GatewayClassV1beta1", "GatewayV1beta1", "HTTPRoute",
        "HTTPRouteV1beta1"]
    assert module.GatewayClass.NAMESPACED is False
    assert module.HTTPRoute.PLURAL == "httproutes"
    listener = typing.get_type_hints(module.GatewaySpecListeners)
    assert listener["protocol"] is str and listener["port"] is int  # required
    assert listener["hostname"] == str | None
    # v1 and v1beta1 share their schema: the v1beta1 classes reuse the v1 ones.
    assert (typing.get_type_hints(module.GatewayV1beta1)["spec"]
            is typing.get_type_hints(module.Gateway)["spec"])
    gateway = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
               "metadata": {"name": "gw", "namespace": "default"},
               "spec": {"gatewayClassName": "example", "listeners": [
                   {"name": "http", "port": 80, "protocol": "HTTP",
                    "allowedRoutes": {"namespaces": {"from": "Same"}}}]},
               "status": {"conditions": [{"type": "Accepted", "status": "Unknown",
                                          "reason": "Pending", "message": "Waiting",
                                          "lastTransitionTime": "1970-01-01T00:00:00Z"}]}}
    decoded = round_trip(module.Gateway, gateway)
    assert decoded.spec.listeners[0].allowed_routes.namespaces.from_ == "Same"
    route = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
             "metadata": {"name": "r"},
             "spec": {"parentRefs": [{"name": "gw"}], "hostnames": ["a.example.com"],
                      "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/"},
                                              "method": "GET"}],
                                 "filters": [{"type": "RequestHeaderModifier",
                                              "requestHeaderModifier": {
                                                  "set": [{"name": "x", "value": "1"}]}}],
                                 "backendRefs": [{"name": "svc", "port": 8080}]}]}}
    round_trip(module.HTTPRoute, route)
    with pytest.raises(msgspec.ValidationError, match="method"):
        decode(module.HTTPRoute, msgspec.json.encode(
            {**route, "spec": {"rules": [{"matches": [{"method": "BREW"}]}]}}))


@pytest.mark.parametrize(("text", "message"), [
    ("a: [", "x.yaml: not YAML: "),
    ("kind: ConfigMap\n", "x.yaml: no CustomResourceDefinition in it"),
    ("apiVersion: apiextensions.k8s.io/v1beta1\nkind: CustomResourceDefinition\n",
     "x.yaml: apiextensions.k8s.io/v1beta1 CustomResourceDefinition: only "
     "apiextensions.k8s.io/v1 is read"),
    ("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
     "metadata: {name: a.b}\nspec: {group: b, names: {kind: A}}\n",
     "CustomResourceDefinition 'a.b': spec.group, spec.names.kind and spec.names.plural are "
     "required"),
    ("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
     "metadata: {name: as.b}\nspec: {group: b, names: {kind: A, plural: as}, versions: "
     "[{name: v1, served: false}]}\n", "CustomResourceDefinition 'as.b': no served version"),
])
def test_bad_input_is_said_in_one_line(text: str, message: str) -> None:
    with pytest.raises(CRDError) as err:
        generate_from_yaml([("x.yaml", text)])
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_crds_in_a_list_and_several_files(tmp_path: Path) -> None:
    crd = yaml.safe_load(WIDGET_CRD.split("---")[0])
    gadget = yaml.safe_load(WIDGET_CRD.split("---")[0].replace("Widget", "Gadget")
                            .replace("widget", "gadget"))
    gadget["spec"]["scope"] = "Cluster"
    listed = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [gadget]})
    module = load(tmp_path, generate_from_yaml([("a.yaml", yaml.safe_dump(crd)),
                                                ("b.yaml", listed)]))
    assert [k.__name__ for k in module.KINDS] == ["Widget", "Gadget", "WidgetV1alpha1",
                                                 "GadgetV1alpha1"]
    assert module.Gadget.NAMESPACED is False


def test_the_cli_writes_the_module(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    crd = tmp_path / "widget.yaml"
    crd.write_text(WIDGET_CRD)
    assert main(["models", str(crd)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("# Generated by `kubewire models` from widget.yaml; do not edit.")
    out = tmp_path / "models.py"
    assert main(["models", str(crd), "-o", str(out)]) == 0
    assert out.read_text() == printed
    assert main(["models", str(tmp_path / "missing.yaml")]) == 1
    assert capsys.readouterr().err.startswith("kubewire: models: [Errno 2] No such file")
    (tmp_path / "cm.yaml").write_text("kind: ConfigMap\n")
    assert main(["models", str(tmp_path / "cm.yaml")]) == 1
    assert capsys.readouterr().err == (
        "kubewire: models: cm.yaml: no CustomResourceDefinition in it\n")
