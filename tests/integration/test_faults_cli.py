"""``kubewire fault ...`` driving a server in another process (``kubewire serve``), with the data
directory's admin kubeconfig; a user outside ``system:masters`` gets 403."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.integration import kubectl
from tests.integration.harness import ServerThread
from tests.integration.kubectl import needs_kubectl
from tests.integration.test_access import issue
from tests.integration.test_cli import Server, one_line_error, run
from tests.integration.test_cli import servers as servers  # the fixture


def fault(data: Path, *args: str) -> dict[str, object]:
    done = run("fault", "--data-dir", str(data), *args)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert isinstance(found, dict)
    return found


@needs_kubectl
def test_the_cli_drives_a_server_in_another_process(tmp_path: Path,
                                                    servers: list[Server]) -> None:
    data = tmp_path / "data"
    servers.append(Server(data, "--port", "0", "--manual-clock"))  # TLS, admin kubeconfig
    kubeconfig = data / "kubeconfig"
    kubectl.ok(kubeconfig, "create", "configmap", "c")
    added = fault(data, "error", "--verb", "get", "--resource", "configmaps", "--code", "503",
                  "--rate", "1")
    assert (added["type"], added["code"], added["verb"]) == ("error", 503, "get")
    assert fault(data, "list")["items"] == [added]
    done = kubectl.run(kubeconfig, "get", "configmap", "c")
    assert done.returncode == 1 and "(ServiceUnavailable)" in done.stderr, done.stderr
    assert fault(data, "clear") == {"cleared": 1}
    kubectl.ok(kubeconfig, "get", "configmap", "c")

    assert fault(data, "fail-store")["type"] == "storeFailure"
    done = kubectl.run(kubeconfig, "create", "configmap", "d")
    assert "etcdserver: request timed out" in done.stderr, done.stderr
    assert fault(data, "recover-store") == {"cleared": 1}
    kubectl.ok(kubeconfig, "create", "configmap", "d")

    assert fault(data, "drop-watches", "--resource", "pods") == {"type": "dropWatches",
                                                                  "dropped": 0}
    before = fault(data, "clock")
    assert before["manual"] is True
    after = fault(data, "advance-clock", "90")
    assert after["fired"] == 0 and after["now"] > before["now"]

    bad = run("fault", "--data-dir", str(data), "error", "--code", "404")
    assert "invalid fault: code must be one of 429, 500, 503, 504" in one_line_error(bad)
    assert fault(data, "list")["items"] == []


def test_a_user_outside_system_masters_gets_403(make_server: Callable[..., ServerThread]
                                                ) -> None:
    server = make_server(insecure_http=False)
    alice = issue(server, "alice", "developers")
    done = run("fault", "--kubeconfig", str(alice), "list")
    line = one_line_error(done)
    assert 'forbidden: User "alice" cannot get path "/kubewire/faults"' in line, line
    done = run("fault", "--kubeconfig", str(alice), "fail-store")
    assert "forbidden" in one_line_error(done)
    assert run("fault", "--data-dir", str(server.config.data_dir), "list").returncode == 0
    assert server.call(lambda: server.server.faults.list_faults()) == []  # type: ignore[union-attr]
