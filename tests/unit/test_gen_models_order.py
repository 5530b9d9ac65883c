"""The model generator defines classes before the annotations that name them, and quotes only
the fields that close a cycle, so a generated module runs with real annotation objects."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import gen_models  # noqa: E402
from gen_models import ClassDef, FieldDef  # noqa: E402


def classes() -> dict[str, ClassDef]:
    return {
        "Alpha": ClassDef("Alpha", [FieldDef("beta", "beta", "Beta"),
                                    FieldDef("items", "items", "list[Gamma]")]),
        "Beta": ClassDef("Beta", [FieldDef("alpha", "alpha", "Alpha")]),  # closes a cycle
        "Gamma": ClassDef("Gamma", [FieldDef("labels", "labels", "dict[str, str]"),
                                    FieldDef("child", "child", "Gamma")]),  # recursive
        "Delta": ClassDef("Delta", [FieldDef("n", "n", "int")]),
    }


def test_dependencies_come_first_and_only_cycles_are_quoted() -> None:
    defs = classes()
    order = gen_models.definition_order(defs)
    assert order == ["Beta", "Gamma", "Alpha", "Delta"]
    quoted = {(name, f.py_name) for name, c in defs.items() for f in c.fields if f.quoted}
    assert quoted == {("Beta", "alpha"), ("Gamma", "child")}


def test_the_rendered_classes_run_and_decode() -> None:
    defs = classes()
    order = gen_models.definition_order(defs)
    source = "import msgspec\nfrom kubewire.models.base import Model\n\n" + "\n\n".join(
        gen_models.render_class(defs[name]) for name in order)
    # A real module: quoted annotations are resolved in the module's globals.
    module = types.ModuleType("generated_order_test")
    sys.modules[module.__name__] = module
    try:
        exec(compile(source, "<generated>", "exec"), module.__dict__)
        alpha: Any = msgspec.json.decode(
            b'{"beta":{"alpha":{"items":[]}},"items":[{"child":{"labels":{"a":"b"}}}]}',
            type=module.Alpha)
    finally:
        del sys.modules[module.__name__]
    assert alpha.beta.alpha.items == []
    assert alpha.items[0].child.labels == {"a": "b"}
