"""``kubewire user add | list | revoke`` against a real server, with real kubectl.

``add --role`` binds through the running server (a RoleBinding with ``--namespace``, else a
ClusterRoleBinding); ``list`` shows the data dir's credentials and their bindings; ``revoke``
removes tokens (refused by the time the command returns) and the bindings ``add`` made, and
says that client certificates stay valid. Every refusal is one line and a non-zero exit, with
nothing issued or bound.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from kubewire.cli import main
from tests.integration import kubectl as cli
from tests.integration.harness import ServerThread

pytestmark = cli.needs_kubectl
Capsys = pytest.CaptureFixture[str]


@pytest.fixture
def secure(make_server: Callable[..., ServerThread]) -> ServerThread:
    """HTTPS, the admin's client certificate in DIR/kubeconfig, no authorization policy."""
    return make_server(insecure_http=False)


def kubewire(capsys: Capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def user(capsys: Capsys, server: ServerThread, *args: str) -> tuple[int, str, str]:
    return kubewire(capsys, "user", *args, "--data-dir", str(server.config.data_dir))


def save(server: ServerThread, name: str, text: str) -> Path:
    path = server.config.data_dir.parent / f"{name}.kubeconfig"
    path.write_text(text)
    return path


def rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()]


def issued(server: ServerThread) -> list[Path]:
    return sorted((server.config.data_dir / "pki" / "users").glob("*.crt"))


def token_lines(server: ServerThread) -> list[str]:
    path = server.config.data_dir / "tokens.csv"
    return path.read_text().splitlines() if path.exists() else []


def test_add_with_a_role_in_a_namespace_binds_through_the_server(
        secure: ServerThread, capsys: Capsys) -> None:
    cli.ok(secure, "create", "namespace", "team-a")
    code, out, err = user(capsys, secure, "add", "alice", "--role", "view",
                          "--namespace", "team-a")
    assert code == 0, err
    assert err == ("kubewire: RoleBinding kubewire:user:alice:view in team-a binds alice to "
                   "ClusterRole view\n")
    config = yaml.safe_load(out)
    assert config["contexts"][0]["context"]["namespace"] == "team-a"
    assert "client-certificate-data" in config["users"][0]["user"]
    alice = save(secure, "alice", out)
    done = cli.run(alice, "get", "pods")  # its context's namespace is team-a
    assert (done.returncode, done.stderr) == (0, "No resources found in team-a namespace.\n")
    got = rows(cli.ok(secure, "get", "rolebindings", "-n", "team-a", "-o", "wide"))
    assert got[1][:2] == ["kubewire:user:alice:view", "ClusterRole/view"]
    assert got[1][3] == "alice"
    # Again: another certificate; the binding is kept as it is.
    code, _, err = user(capsys, secure, "add", "alice", "--role", "view",
                        "--namespace", "team-a")
    assert code == 0
    assert err == ("kubewire: RoleBinding kubewire:user:alice:view in team-a already binds "
                   "alice to view\n")
    assert len(issued(secure)) == 2


def test_list_then_revoke_a_token_user_bound_cluster_wide(
        secure: ServerThread, capsys: Capsys) -> None:
    code, out, _ = user(capsys, secure, "add", "bob", "--token", "--group", "devs",
                        "--role", "edit")
    assert code == 0
    bob = save(secure, "bob", out)
    assert cli.ok(bob, "get", "namespace", "default", "-o", "name") == "namespace/default\n"
    assert cli.ok(secure, "get", "clusterrolebinding", "kubewire:user:bob:edit",
                  "-o", "jsonpath={.roleRef.name} {.subjects[0].name}") == "edit bob"
    code, out, _ = user(capsys, secure, "add", "carol")  # a certificate, no binding
    assert code == 0
    code, out, err = user(capsys, secure, "list")
    assert (code, err) == (0, "")
    table = rows(out)
    assert table[0] == ["NAME", "CREDENTIAL", "GROUPS", "EXPIRES", "BINDINGS"]
    assert table[1] == ["bob", "token", "devs", "never", "edit", "cluster-wide"]
    assert table[2][:3] == ["carol", "certificate", "<none>"]
    assert table[2][3].endswith("Z") and table[2][4] == "<none>"

    code, out, err = user(capsys, secure, "revoke", "bob")
    assert (code, err) == (0, "")
    assert out == ("kubewire: removed 1 token(s) of bob: the server refuses them from now on\n"
                   "kubewire: deleted ClusterRoleBinding kubewire:user:bob:edit\n")
    refused = cli.run(bob, "get", "namespace", "default")  # at once: no wait here
    assert refused.returncode == 1
    assert "You must be logged in to the server (Unauthorized)" in refused.stderr
    assert cli.run(secure, "get", "clusterrolebinding", "kubewire:user:bob:edit").returncode
    assert [row[0] for row in rows(user(capsys, secure, "list")[1])] == [
        "NAME", "carol"]


def test_revoke_says_certificates_stay_valid_and_keeps_bindings_made_by_hand(
        secure: ServerThread, capsys: Capsys) -> None:
    code, out, _ = user(capsys, secure, "add", "dave", "--group", "ops", "--role", "view")
    assert code == 0
    dave = save(secure, "dave", out)
    cli.ok(secure, "create", "clusterrolebinding", "ops-admin", "--clusterrole", "admin",
           "--group", "ops")
    expiry = rows(user(capsys, secure, "list")[1])[1][3]
    code, out, err = user(capsys, secure, "revoke", "dave")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "kubewire: deleted ClusterRoleBinding kubewire:user:dave:view"
    assert lines[1].startswith("kubewire: dave's client certificate ")
    assert lines[1].endswith(" (groups: ops) stays valid until " + expiry + ": kube has no "
                             "revocation list for client certificates; it gets only what RBAC "
                             "still grants its user and groups")
    assert lines[2] == "kubewire: still bound, not by kubewire user: admin cluster-wide (via ops)"
    assert cli.ok(secure, "get", "clusterrolebinding", "ops-admin", "-o", "name")
    assert cli.ok(dave, "get", "namespace", "default", "-o", "name")  # still authenticates


def test_bad_input_is_one_line_and_changes_nothing(
        secure: ServerThread, capsys: Capsys) -> None:
    code, out, err = user(capsys, secure, "add", "erin", "--role", "view",
                          "--namespace", "nowhere")
    assert (code, out) == (1, "")
    assert err == ('kubewire: cannot bind erin to view: namespaces "nowhere" not found '
                   "(create it first: kubectl create namespace nowhere)\n")
    code, out, err = user(capsys, secure, "revoke", "nobody")
    assert (code, out) == (1, "")
    assert err == (f"kubewire: unknown user nobody: no token, certificate or binding in "
                   f"{secure.config.data_dir}\n")
    with pytest.raises(SystemExit) as exited:
        user(capsys, secure, "add", "erin", "--role", "root")
    assert exited.value.code == 2
    assert "argument --role: invalid choice: 'root'" in capsys.readouterr().err
    code, _, err = kubewire(capsys, "user")
    assert code == 2 and err == ("kubewire: user: say what to do: kubewire user add NAME | "
                                 "list | revoke NAME\n")
    for action in ("add", "revoke"):
        with pytest.raises(SystemExit) as exited:
            user(capsys, secure, action, " ")
        assert exited.value.code == 2
        assert "argument name: a user name cannot be empty" in capsys.readouterr().err
    code, out, err = user(capsys, secure, "add", "x" * 65)
    assert (code, out) == (1, "")
    assert err == (f"kubewire: cannot issue a certificate: {'x' * 65!r} is longer than 64 "
                   "characters, the most a certificate's CN or O holds (use --token)\n")
    assert issued(secure) == [] and token_lines(secure) == []
    code, out, _ = user(capsys, secure, "add", "x" * 65, "--token")  # a token has no bound
    assert code == 0 and token_lines(secure)[0].split(",")[1] == "x" * 65


def test_a_binding_of_that_name_made_otherwise_is_not_taken_over(
        secure: ServerThread, capsys: Capsys) -> None:
    cli.ok(secure, "create", "clusterrolebinding", "kubewire:user:ivy:view", "--clusterrole",
           "view", "--user", "someone-else")
    code, out, err = user(capsys, secure, "add", "ivy", "--role", "view")
    assert (code, out) == (1, "")
    assert err == ("kubewire: cannot bind ivy to view: ClusterRoleBinding kubewire:user:ivy:view "
                   "cluster-wide exists and does not bind ivy to ClusterRole view: delete it or "
                   "edit it by hand\n")
    assert issued(secure) == []


def test_a_stopped_server_is_named_and_nothing_is_issued(
        secure: ServerThread, capsys: Capsys) -> None:
    code, _, _ = user(capsys, secure, "add", "frank", "--token")
    assert code == 0
    secure.stop()
    down = (f"the server at {secure.url} is not running: start it with kubewire serve "
            f"--data-dir {secure.config.data_dir}")
    code, out, err = user(capsys, secure, "add", "gina", "--token", "--role", "view")
    assert (code, out) == (1, "")
    assert err == f"kubewire: cannot bind gina to view: {down}\n"
    assert [line.split(",")[1] for line in token_lines(secure)] == ["frank"]
    code, out, err = user(capsys, secure, "list")
    assert code == 0 and err == f"kubewire: bindings not shown: {down}\n"
    assert rows(out)[1] == ["frank", "token", "<none>", "never", "?"]
    # revoke still removes the tokens (a file), and says the bindings are left to do
    code, out, err = user(capsys, secure, "revoke", "frank")
    assert code == 1
    assert out == ("kubewire: removed 1 token(s) of frank: the server refuses them from now "
                   "on\n")
    assert err == f"kubewire: cannot delete frank's bindings: {down}\n"
    assert token_lines(secure) == []


def test_list_with_no_users(tmp_path: Path, capsys: Capsys) -> None:
    code, out, err = kubewire(capsys, "user", "list", "--data-dir", str(tmp_path))
    assert (code, out) == (0, "")
    assert err == f"kubewire: no users in {tmp_path} yet (kubewire user add NAME)\n"


def test_add_before_the_first_serve_binds_nothing(tmp_path: Path, capsys: Capsys) -> None:
    code, _, err = kubewire(capsys, "user", "add", "hal", "--role", "view", "--data-dir",
                            str(tmp_path / "new"))
    assert code == 1
    assert err == (f"kubewire: cannot issue credentials: no CA in {tmp_path}/new/pki: start "
                   "`kubewire serve` once first\n")
