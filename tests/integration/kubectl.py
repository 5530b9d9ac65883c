"""Run the real kubectl against a test server: one place for the binary, its environment and
its limits.

kubectl 1.32 must be installed (``tools/ensure-kubectl``). Outside CI a machine without it skips
the kubectl tests (``needs_kubectl``); in CI (``CI`` set) they run and fail loudly instead.
Each server gets its own HOME, so kubectl's discovery cache never leaks between tests.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Protocol

import pytest

KUBECTL = shutil.which("kubectl")
TIMEOUT_S = 60.0
needs_kubectl = pytest.mark.skipif(KUBECTL is None and not os.environ.get("CI"),
                                   reason="kubectl is not installed")


class HasKubeconfig(Protocol):
    @property
    def kubeconfig(self) -> Path: ...


def kubectl_env(server: HasKubeconfig | Path) -> dict[str, str]:
    """kubectl's environment for a server (its admin kubeconfig) or another kubeconfig."""
    kubeconfig = server if isinstance(server, Path) else server.kubeconfig
    return {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(kubeconfig.parent)}


def run(server: HasKubeconfig | Path, *args: str, stdin: str | None = None,
        ) -> subprocess.CompletedProcess[str]:
    """Run kubectl with the server's kubeconfig; the caller checks the outcome."""
    assert KUBECTL is not None, "kubectl is required (tools/ensure-kubectl)"
    return subprocess.run([KUBECTL, *args], env=kubectl_env(server), input=stdin,
                          capture_output=True, text=True, timeout=TIMEOUT_S, check=False)


def ok(server: HasKubeconfig | Path, *args: str, stdin: str | None = None) -> str:
    """Run kubectl, assert it succeeded without warnings, and return its stdout."""
    done = run(server, *args, stdin=stdin)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    assert done.stderr == "", (args, done.stderr)
    return done.stdout


def background(server: HasKubeconfig | Path, *args: str) -> subprocess.Popen[str]:
    """Start kubectl (e.g. ``get -w``) in the background; stop it with ``stop``."""
    assert KUBECTL is not None, "kubectl is required (tools/ensure-kubectl)"
    return subprocess.Popen([KUBECTL, *args], env=kubectl_env(server), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def stop(process: subprocess.Popen[str]) -> tuple[str, str]:
    """Stop a background kubectl and return what it printed."""
    process.terminate()
    try:
        out, err = process.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
    return out, err
