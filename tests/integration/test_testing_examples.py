"""The guide's examples (``examples/testing/``, docs/testing.md) run as a user runs them: each
test module in a pytest session of its own (``pytester``, in a subprocess), in a copy of the
directory, with the kubewire plugin loaded and nothing from this project's ``tests/``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.integration.test_pytest_plugin import PLUGIN

pytest_plugins = ["pytester"]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "testing"
# Each module and how many tests pass in it.
MODULES = {
    "test_kopf_operator.py": 1,
    "test_kubernetes_asyncio_controller.py": 1,
    "test_kubewire_client_controller.py": 1,
    "test_acceptance.py": 3,
}


@pytest.fixture(autouse=True)
def _no_plugin_autoload(monkeypatch: pytest.MonkeyPatch) -> None:
    # as in test_pytest_plugin: the plugins by name (-p), none by entry point
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


@pytest.mark.parametrize("module", sorted(MODULES))
def test_the_example_passes(pytester: pytest.Pytester, module: str) -> None:
    shutil.copytree(EXAMPLES, pytester.path, dirs_exist_ok=True)
    # -W error: a connection or task left behind fails the example
    result = pytester.runpytest_subprocess(*PLUGIN, "-W", "error", "-v", module, timeout=240)
    result.assert_outcomes(passed=MODULES[module])


def test_every_example_module_runs() -> None:
    assert {path.name for path in EXAMPLES.glob("test_*.py")} == set(MODULES)
