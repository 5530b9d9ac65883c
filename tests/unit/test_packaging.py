"""What a user installs: the Apache-2.0 licence, metadata, a client that installs without the
server's dependencies, and documentation that stays inside the repository."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower()


SERVER_ONLY = {_name(r) for r in PROJECT["optional-dependencies"]["server"]}

# Imports ``argv[1]`` (``-c`` code) with every package of the [server] extra refused, as on a
# machine where only ``pip install kubewire`` ran.
BLOCKER = """
import importlib.abc, sys
BLOCKED = set(sys.argv[1].split(","))
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Refuse())
for name in BLOCKED:
    sys.modules.pop(name, None)
"""


def _without_server(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", BLOCKER + code, ",".join(SERVER_ONLY), *args],
                          capture_output=True, text=True, timeout=60, check=False)


def test_the_license_is_apache_2() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert PROJECT["license"] == "Apache-2.0"
    assert PROJECT["license-files"] == ["LICENSE"]


def test_metadata() -> None:
    assert (ROOT / PROJECT["readme"]).is_file()
    assert PROJECT["requires-python"] == ">=3.11"
    classifiers = PROJECT["classifiers"]
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert not [c for c in classifiers if c.startswith("License ::")]  # the SPDX field says it
    assert "urls" not in PROJECT  # nothing outside the repository to point at


def test_the_server_dependencies_are_an_extra() -> None:
    base = {_name(r) for r in PROJECT["dependencies"]}
    assert {"httptools", "uvloop", "cryptography"} <= SERVER_ONLY
    assert not base & SERVER_ONLY
    assert "kubewire[server]" in PROJECT["optional-dependencies"]["test"]


def test_the_client_imports_without_the_server_extra() -> None:
    done = _without_server(
        "import kubewire.client, kubewire.client.informers, kubewire.models\n"
        "from kubewire.client import Api, Informer, Watch, create_client\n"
        "from kubewire.client.config import load_kubeconfig\n"
        "assert not [m for m in sys.modules if m.startswith(('kubewire.server', "
        "'kubewire.storage'))]\n"
        "assert not BLOCKED & set(sys.modules)\n"
        "print('ok')\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"


def test_the_blocker_blocks() -> None:
    """The check above could not fail if the finder let the server's modules through."""
    done = _without_server("import kubewire.server.app\n")
    assert done.returncode == 1
    assert "ModuleNotFoundError: No module named" in done.stderr


def test_the_command_line_without_the_server_extra(tmp_path: Path) -> None:
    """``kubewire`` says what to install instead of a traceback."""
    code = "from kubewire.cli import main\nsys.exit(main(sys.argv[2:]))\n"
    version = _without_server(code, "--version")
    assert (version.returncode, version.stdout) == (0, "kubewire 0.1.0\n"), version.stderr
    serve = _without_server(code, "serve", "--data-dir", str(tmp_path / "data"))
    assert (serve.returncode, serve.stderr) == (
        1, "kubewire: serve needs the server's dependencies (httptools is missing): "
           "pip install 'kubewire[server]'\n")
    # ``kubewire models`` is the client's: it runs without them.
    crd = tmp_path / "crd.yaml"
    crd.write_text("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
                   "spec: {group: example.com, names: {kind: Widget, plural: widgets}, "
                   "versions: [{name: v1, served: true, storage: true}]}\n")
    models = _without_server(code, "models", str(crd))
    assert models.returncode == 0, models.stderr
    assert 'KIND: ClassVar[str] = "Widget"' in models.stdout


def test_docs_link_nothing_outside_the_repository() -> None:
    """Every link in ``docs/`` is relative and names a file that exists."""
    for path in sorted((ROOT / "docs").rglob("*.md")):
        text = path.read_text()
        assert not re.findall(r"\b(?:https?|ftp)://\S+|\bwww\.\S+", text), path
        for target in re.findall(r"\]\(([^)#\s]+)", text):
            assert (path.parent / target).exists(), f"{path}: {target}"
