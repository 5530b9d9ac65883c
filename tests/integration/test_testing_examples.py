"""The guide's examples (``examples/testing/``, docs/testing.md) run as a user runs them: each
test module in a pytest session of its own (``pytester``, in a subprocess), in a copy of the
directory, with the kubewire plugin loaded and nothing from this project's ``tests/``."""

from __future__ import annotations

import re
import shlex
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


# --- the guide stays true to the code -----------------------------------------------------------

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def test_the_guide_names_only_methods_that_exist() -> None:
    from kubewire.server.faults.faults import Faults
    from kubewire.testing.server import Server

    text = GUIDE.read_text()
    fault_calls = set(re.findall(r"\bfaults\.([a-z_]+)\(", text))
    assert fault_calls >= {"drop_watches", "expire_history", "stall_streams", "inject_error",
                           "fail_store", "recover_store", "clear"}
    assert [name for name in sorted(fault_calls) if not hasattr(Faults, name)] == []
    server_calls = set(re.findall(r"\bserver\.([a-z_]+)", text)) - {"faults"}
    known = set(dir(Server)) | set(vars(Server()))  # methods, properties, attributes
    assert sorted(server_calls - known) == []
    fixtures = set(re.findall(r"`(kubewire_[a-z_]+)`", text))
    from kubewire.testing import pytest_plugin

    assert fixtures - {"kubewire_scope", "kubewire_reset"} == set(pytest_plugin.FIXTURES)


def test_the_guide_s_commands_parse() -> None:
    from kubewire.cli import build_parser

    parser = build_parser()
    commands = re.findall(r"^(kubewire (?:fault|record|replay|snapshot) [^#\n]*?)\s*(?:#.*)?$",
                          GUIDE.read_text(), re.MULTILINE)
    assert len(commands) >= 15
    for command in commands:
        args = shlex.split(command.replace("\\", "").replace("[ID]", ""))[1:]
        parser.parse_args(args)  # exits (fails the test) on an unknown command or flag


def test_the_guide_s_figures_are_bench_results() -> None:
    results = (Path(__file__).resolve().parents[2] / "bench" / "RESULTS.md").read_text()
    section = GUIDE.read_text().split("## How fast")[1].split("\n## ")[0]
    figures = re.findall(r"\| (\d[\d.]* (?:ms|s)) \|", section)
    assert len(figures) == 4
    toolkit_rows = [line for line in results.splitlines()
                    if line.startswith("| Testing toolkit (issue 17)")]
    assert all(any(f"| {figure} |" in row for row in toolkit_rows) for figure in figures)
