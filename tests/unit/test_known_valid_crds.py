"""writes.validation.crds: the creates proven valid at build time (``known_valid_crds``, written
by ``tools/gen_known_valid_crds.py``) are the package-data CRDs' keys as a real server's create
path computes them, each validated in full with no errors; a create whose key is listed skips
the CEL compile, and anything else (one changed byte) is still validated in full."""

from __future__ import annotations

import asyncio
import copy
import importlib.util
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from kubewire.resources import REGISTRY
from kubewire.server.apiextensions.crd import crd_strategy
from kubewire.server.apiextensions.crd.gateway_crds import gateway_crds
from kubewire.server.writes.validation import crds as crd_validation
from kubewire.server.writes.validation.known_valid_crds import KNOWN_VALID_CREATES

KIND = REGISTRY.by_id(crd_strategy.CRD_ID)
assert KIND is not None
TOOL = Path(__file__).resolve().parents[2] / "tools" / "gen_known_valid_crds.py"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_known_valid_crds", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def empty_caches() -> None:
    crd_validation._created.clear()
    crd_validation._checked.clear()


def test_the_list_is_the_package_data_each_validated_in_full() -> None:
    keys = _generator().proven_keys()  # runs the full validation: raises on any error
    assert len(keys) == len(gateway_crds()) == 5
    assert {bytes.fromhex(k) for k in keys.values()} == KNOWN_VALID_CREATES, (
        "the package-data CRDs or their create path changed: run tools/gen_known_valid_crds.py")
    assert crd_validation._checked  # the proof compiled the schemas (no shortcut taken)


async def _start_and_stop(data_dir: Path) -> set[str]:
    from kubewire.server.app import APIServer
    from kubewire.server.context import ServerConfig

    server = APIServer(ServerConfig(data_dir=data_dir, port=0, insecure_http=True,
                                    storage="memory"))
    await server.start()
    try:
        return {res.crd_name for res in server.ctx.registry.custom()}
    finally:
        await server.stop()


def test_a_server_start_creates_the_preinstalled_crds_without_compiling_them() -> None:
    with tempfile.TemporaryDirectory(prefix="kw-known-valid-") as d:
        served = asyncio.run(_start_and_stop(Path(d)))
    assert served >= {c["metadata"]["name"] for c in gateway_crds()}
    # no schema checked, no CEL rule compiled: the create path's keys are the listed ones
    assert crd_validation._checked == {}, "run tools/gen_known_valid_crds.py"
    assert crd_validation._created == {}  # answered from the list, not the cache


def _created(obj: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = _generator().as_created(copy.deepcopy(obj))
    out["metadata"].update(uid="u", creationTimestamp="2024-01-01T00:00:00Z")
    return out


def test_a_changed_rule_is_compiled_and_refused() -> None:
    route = next(c for c in gateway_crds() if c["metadata"]["name"].startswith("httproutes"))
    obj = _created(route)
    assert crd_validation.validate_custom_resource_definition(KIND, obj, None) == []
    assert crd_validation._checked == {}
    schema = obj["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["properties"]["spec"]["x-kubernetes-validations"] = [{"rule": "self.nope +"}]
    errors = [str(e) for e in crd_validation.validate_custom_resource_definition(KIND, obj, None)]
    assert len(errors) == 1 and "compilation failed" in errors[0], errors
