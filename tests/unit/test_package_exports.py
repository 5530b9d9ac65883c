"""``kubewire``'s own public names: ``Server`` (imported on first use) and ``__version__``."""

from __future__ import annotations

import subprocess
import sys

import kubewire


def test_the_package_exports_server_and_version() -> None:
    assert set(kubewire.__all__) == {"Server", "__version__"}
    assert kubewire.Server.__doc__
    assert kubewire.Server.__module__ == "kubewire.testing.server"


def test_importing_kubewire_does_not_import_the_server() -> None:
    code = ("import sys, kubewire; assert not any(m.startswith(('kubewire.server', "
            "'kubewire.testing')) for m in sys.modules), sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_an_unknown_attribute_is_an_attribute_error() -> None:
    try:
        kubewire.Nothing  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as err:
        assert "Nothing" in str(err)
    else:
        raise AssertionError("no AttributeError")


def test_the_pytest_plugin_imports_no_server_until_a_test_asks() -> None:
    """pytest loads the plugin (entry point) in every run of a project with kubewire
    installed, where the server's extra may be missing."""
    code = ("import sys, kubewire.testing.pytest_plugin; assert not any(m.startswith(("
            "'kubewire.server', 'kubewire.storage', 'kubewire.client')) for m in sys.modules),"
            " sorted(m for m in sys.modules if m.startswith('kubewire'))")
    subprocess.run([sys.executable, "-c", code], check=True)
