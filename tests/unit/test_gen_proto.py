"""tools/gen_proto.py: the .proto subset parser and the committed proto_facts.json."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
FACTS = REPO / "src" / "kubewire" / "schema" / "proto_facts.json"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_proto", REPO / "tools" / "gen_proto.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_proto"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


SAMPLE = """
/* licence */
syntax = "proto2";
package k8s.io.api.demo.v1;
import "k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto";
option go_package = "k8s.io/api/demo/v1";

// Widget is a demo.
message Widget {
  // +optional
  optional .k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;

  // count of things
  // +optional
  optional int32 count = 3;

  optional string name = 2;

  repeated Part parts = 4;

  map<string, bytes> blobs = 5;
}

message Part {
  repeated int64 sizes = 1;
}
"""


def test_parse_proto_subset() -> None:
    gen = _generator()
    widget, part = gen.parse_proto(SAMPLE)
    assert widget.name == "k8s.io.api.demo.v1.Widget"
    assert [(f.number, f.name, f.type, f.label, f.is_optional) for f in widget.fields] == [
        (1, "metadata", "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta", "optional", True),
        (3, "count", "int32", "optional", True),
        (2, "name", "string", "optional", False),
        (4, "parts", "k8s.io.api.demo.v1.Part", "repeated", False),
        (5, "blobs", "bytes", "map", False),
    ]
    assert part.fields[0].label == "repeated"


@pytest.mark.parametrize("text", [
    "package p;\nmessage A {\n  message B {\n  }\n}\n",
    "package p;\nenum E {\n}\n",
    "package p;\nmessage A {\n  map<int32, string> m = 1;\n}\n",
    "package p;\nmessage A {\n",
])
def test_parse_proto_rejects_what_it_does_not_understand(text: str) -> None:
    with pytest.raises(ValueError):
        _generator().parse_proto(text)


def test_committed_facts_are_marked_and_compact() -> None:
    doc = json.loads(FACTS.read_text())
    assert doc["generated"].endswith("do not edit")
    assert FACTS.stat().st_size < 200_000
    deployment = doc["messages"][doc["kinds"]["apps/v1"]["Deployment"]]
    assert deployment[0] == [1, "metadata", "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta", ""]
    spec = {row[1]: row for row in doc["messages"]["k8s.io.api.apps.v1.DeploymentSpec"]}
    assert spec["replicas"][3] == "" and spec["minReadySeconds"][3] == "e"
    volume = {row[1]: row for row in doc["messages"]["k8s.io.api.core.v1.Volume"]}
    assert volume["volumeSource"][3] == "i"
    ref = doc["messages"]["k8s.io.api.networking.v1.IngressClassParametersReference"]
    assert ref[0][1] == "apiGroup"  # .proto says aPIGroup


@pytest.mark.skipif(not (SHARED / "proto").is_dir(), reason="../shared/proto is absent")
def test_regenerating_gives_the_committed_file(tmp_path: Path) -> None:
    written = _generator().generate(SHARED, tmp_path)
    assert written.read_bytes() == FACTS.read_bytes()
