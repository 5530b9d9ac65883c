"""``--controllers``: kubewire's controllers switched on and off with kube-controller-manager's
list, on real servers (the API server's own work, such as the ``kubernetes`` Service, stays)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.api_only import API_ONLY
from tests.integration.harness import ServerThread
from tests.integration.wire import call, create, wait_for


def _idle(server: ServerThread) -> bool:
    assert server.server is not None
    return bool(server.call(lambda: server.server.controllers.idle))  # type: ignore[union-attr]


def test_serviceaccount_controller_off_leaves_new_namespaces_without_a_default_account(
        make_server: Callable[..., ServerThread]) -> None:
    on = make_server()
    off = make_server(controllers=("*", "-serviceaccount"))
    for server in (on, off):
        create(server, "/api/v1/namespaces", {"metadata": {"name": "team"}})
    wait_for(lambda: call(on, "GET", "/api/v1/namespaces/team/serviceaccounts/default")
             .status == 200, what="the default ServiceAccount where the controller runs")
    wait_for(lambda: _idle(off), what="the controllers to be idle")
    assert call(off, "GET", "/api/v1/namespaces/team/serviceaccounts/default").status == 404
    # the API server's own controller is not one of them
    assert call(off, "GET", "/api/v1/namespaces/default/services/kubernetes").status == 200


def test_namespace_controller_off_leaves_a_deleted_namespace_terminating(
        make_server: Callable[..., ServerThread]) -> None:
    on = make_server(namespace_deletion_delay_s=0.0)
    off = make_server(namespace_deletion_delay_s=0.0, controllers=("*", "-namespace"))
    for server in (on, off):
        create(server, "/api/v1/namespaces", {"metadata": {"name": "gone"}})
        assert call(server, "DELETE", "/api/v1/namespaces/gone").status == 200
    wait_for(lambda: call(on, "GET", "/api/v1/namespaces/gone").status == 404,
             what="the namespace to go where the controller runs")
    left = call(off, "GET", "/api/v1/namespaces/gone")
    assert left.status == 200 and left.json["status"]["phase"] == "Terminating"
    assert off.server is not None
    assert off.call(lambda: dict(off.server.controllers.deletion._namespaces)) == {}  # type: ignore[union-attr]


def test_serve_refuses_a_controller_kube_does_not_know(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "kubewire.cli", "serve", *API_ONLY, "--data-dir",
                           str(tmp_path), "--controllers", "*,-nosuch"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert 'argument --controllers: "nosuch" is not in the list of known controllers' in \
        done.stderr


def test_an_embedded_server_with_no_controllers_writes_nothing_of_its_own() -> None:
    import kubewire

    with kubewire.Server(controllers=()) as server:
        before = len(server.requests())
        create(server, "/api/v1/namespaces", {"metadata": {"name": "quiet"}})
        wait_for(lambda: server.server is not None and server.server.controllers.idle,
                 what="idle controllers")
        accounts = call(server, "GET", "/api/v1/namespaces/quiet/serviceaccounts")
        assert accounts.json["items"] == []
        # the record holds the test's two requests
        assert [e.verb for e in server.requests()[before:]] == ["create", "list"]
