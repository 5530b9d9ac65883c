"""``kubewire user``'s pure and file parts: the bindings ``--role`` makes and how a user's
bindings are read back, the token file's revocation, issued certificates' records, and the
command line's shapes (``user add|list|revoke``, and the first ``user NAME`` form)."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from kubewire.cli import build_parser, user_argv
from kubewire.server.access.authn import TokenFile, parse_token_file
from kubewire.server.access.pki import issue_client, make_ca
from kubewire.server.access.user_bindings import (
    binding_name,
    grants,
    made_for,
    table,
    user_binding,
)
from kubewire.server.access.users import (
    add_token,
    certificate_credential,
    credentials,
    issued_certificates,
    record_certificate,
    revoke_tokens,
    token_line,
)

GROUP = "rbac.authorization.k8s.io"


def test_a_role_in_a_namespace_is_a_rolebinding_to_kubes_clusterrole() -> None:
    assert user_binding("alice", "view", "team-a") == {
        "apiVersion": f"{GROUP}/v1", "kind": "RoleBinding",
        "metadata": {"name": "kubewire:user:alice:view", "namespace": "team-a",
                     "labels": {"app.kubernetes.io/managed-by": "kubewire-user"},
                     "annotations": {"kubewire.io/user": "alice"}},
        "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "apiGroup": GROUP, "name": "alice"}]}


def test_a_role_without_a_namespace_is_a_clusterrolebinding() -> None:
    body = user_binding("bob@example.com", "cluster-admin", None)
    assert body["kind"] == "ClusterRoleBinding" and "namespace" not in body["metadata"]
    assert body["metadata"]["name"] == "kubewire:user:bob@example.com:cluster-admin"


def test_binding_names_are_path_segments_for_any_user() -> None:
    assert binding_name("a/b%c", "edit") == "kubewire:user:a-b-c:edit"


def test_made_for_needs_the_label_and_the_users_annotation() -> None:
    body = user_binding("a/b", "edit", "ns")
    assert made_for(body, "a/b")
    assert not made_for(body, "a-b")  # same name, another user: the annotation tells
    by_hand = {**body, "metadata": {**body["metadata"], "labels": {}}}
    assert not made_for(by_hand, "a/b")


def test_grants_name_the_user_and_its_groups() -> None:
    ours = {**user_binding("alice", "view", "team-a")}
    group = {"kind": "ClusterRoleBinding", "metadata": {"name": "devs"},
             "roleRef": {"kind": "ClusterRole", "name": "edit"},
             "subjects": [{"kind": "Group", "name": "devs"}, {"kind": "User", "name": "alice"}]}
    role = {"kind": "RoleBinding", "metadata": {"name": "r", "namespace": "x"},
            "roleRef": {"kind": "Role", "name": "reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "alice", "namespace": "x"}]}
    found = grants([ours, group, role], "alice", ("devs",))
    assert [g.text() for g in found] == ["view in team-a", "edit cluster-wide (via devs)"]
    assert grants([role], "alice") == []  # a service account of that name is not the user
    role["subjects"] = [{"kind": "User", "name": "alice"}]
    assert [g.text() for g in grants([role], "alice")] == ["Role/reader in x"]


def test_table_aligns_columns() -> None:
    assert table([["NAME", "X"], ["alice", "1"]]) == "NAME    X\nalice   1\n"
    assert table([]) == ""


def test_revoke_tokens_keeps_every_other_line_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "tokens.csv"
    other = token_line("t-other", "carol", "c-uid", ("a", "b"))
    path.write_text("# not a token line\n" + token_line("t1", "bob", "bob", ()) + other
                    + "\n" + token_line("t2", "bob", "bob", ("devs",)))
    path.chmod(0o600)
    assert revoke_tokens(path, "bob") == 2
    assert path.read_text() == "# not a token line\n" + other + "\n"
    assert path.stat().st_mode & 0o777 == 0o600
    assert revoke_tokens(path, "bob") == 0
    assert revoke_tokens(tmp_path / "missing.csv", "bob") == 0


def test_a_token_file_reader_refuses_a_revoked_token_after_its_interval(tmp_path: Path) -> None:
    now = [100.0]
    path = tmp_path / "tokens.csv"
    token = add_token(path, "bob", ())
    tokens = TokenFile(path, clock=lambda: now[0])
    assert tokens.get(token) is not None
    revoke_tokens(path, "bob")
    now[0] += 1.0  # the re-check interval ``kubewire user revoke`` waits for
    assert tokens.get(token) is None


def test_issued_certificates_are_recorded_with_groups_and_expiry(tmp_path: Path) -> None:
    ca = make_ca()
    for user, groups in (("zoe", ()), ("alice", ("dev", "ops"))):
        record_certificate(tmp_path, issue_client(ca, user, groups).cert)
    (tmp_path / "pki" / "users" / "junk.crt").write_text("not a certificate")
    found = issued_certificates(tmp_path)
    assert [(c.user, c.kind, c.groups) for c in found] == [
        ("alice", "certificate", ("dev", "ops")), ("zoe", "certificate", ())]
    soon = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=366)
    assert all(c.expires is not None and c.expires < soon for c in found)
    assert all(len(c.serial) > 8 for c in found)


def test_credentials_list_tokens_and_certificates_by_user(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.csv"
    add_token(tokens, "bob", ("devs",))
    record_certificate(tmp_path, issue_client(make_ca(), "alice").cert)
    found = credentials(tmp_path, tokens)
    assert [(c.user, c.kind, c.groups, c.expires is None) for c in found] == [
        ("alice", "certificate", (), False), ("bob", "token", ("devs",), True)]
    assert parse_token_file(tokens.read_text())  # still kube's format


def test_certificate_credential_reads_cn_and_o() -> None:
    cred = certificate_credential(issue_client(make_ca(), "x", ("g1", "g2")).cert)
    assert (cred.user, cred.groups) == ("x", ("g1", "g2"))


@pytest.mark.parametrize(("argv", "expected"), [
    (["user", "alice", "--token"], ["user", "add", "alice", "--token"]),
    (["user", "--data-dir", "d", "alice"], ["user", "add", "--data-dir", "d", "alice"]),
    (["user", "add", "list"], ["user", "add", "list"]),
    (["user", "list"], ["user", "list"]),
    (["user", "revoke", "bob"], ["user", "revoke", "bob"]),
    (["user", "--help"], ["user", "--help"]),
    (["user"], ["user"]),
    (["user", "--data-dir", "d", "list"], ["user", "list", "--data-dir", "d"]),
    (["user", "--data-dir=d", "revoke", "bob"], ["user", "revoke", "--data-dir=d", "bob"]),
    (["user", "--token", "--group", "list", "al"],
     ["user", "add", "--token", "--group", "list", "al"]),
    (["user", "--data-dir", "d"], ["user", "--data-dir", "d"]),
    (["user", "--group", "g", "--help"], ["user", "--group", "g", "--help"]),
    (["serve", "alice"], ["serve", "alice"]),
])
def test_the_first_user_form_is_user_add(argv: list[str], expected: list[str]) -> None:
    assert user_argv(argv) == expected


def test_user_add_flags() -> None:
    args = build_parser().parse_args(user_argv(
        ["user", "alice", "--role", "view", "--namespace", "team-a", "--group", "g"]))
    assert (args.user_action, args.name, args.role, args.namespace, args.group) == (
        "add", "alice", "view", "team-a", ["g"])
    args = build_parser().parse_args(["user", "add", "bob"])
    assert (args.role, args.namespace, args.token) == (None, None, False)


def test_an_unknown_role_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["user", "add", "alice", "--role", "root"])
    assert exited.value.code == 2
    assert ("argument --role: invalid choice: 'root' (choose from 'view', 'edit', 'admin', "
            "'cluster-admin')") in capsys.readouterr().err


def test_only_the_certificate_is_kept_not_its_key(tmp_path: Path) -> None:
    pair = issue_client(make_ca(), "alice")
    path = record_certificate(tmp_path, pair.cert)
    assert path.read_bytes() == pair.cert
    assert [p.name for p in path.parent.iterdir()] == [path.name]
