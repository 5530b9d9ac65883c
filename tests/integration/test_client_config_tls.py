"""Client configuration against a real HTTPS server: CA and client certificate from the
server's kubeconfig, tokens, an exec plugin refreshed after 401, CA mismatch, insecure mode,
tls-server-name."""

from __future__ import annotations

import base64
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from kubewire.client.api import Api
from kubewire.client.client import create_client
from kubewire.client.errors import TransportError, Unauthorized
from kubewire.models import Namespace
from kubewire.server.access import pki
from kubewire.server.access.users import add_token
from tests.integration.harness import ServerThread


@pytest.fixture
def secure(make_server: Callable[..., ServerThread]) -> ServerThread:
    server = make_server(insecure_http=False)
    assert server.url.startswith("https://")
    return server


def kubeconfig_with(server: ServerThread, path: Path, *, user: dict[str, object],
                    **cluster: object) -> Path:
    """The server's kubeconfig with another user and extra cluster fields."""
    doc = yaml.safe_load(server.kubeconfig.read_text())
    doc["users"][0]["user"] = user
    doc["clusters"][0]["cluster"].update(cluster)
    path.write_text(yaml.safe_dump(doc))
    return path


async def namespace_names(kubeconfig: Path) -> list[str]:
    async with await create_client(kubeconfig) as client:
        return sorted(n.metadata.name or "" for n in await Api(Namespace, client=client).list()
                      if n.metadata)


async def test_admin_kubeconfig_over_tls_with_client_certificate(secure: ServerThread) -> None:
    assert "default" in await namespace_names(secure.kubeconfig)


async def test_token_and_token_file(secure: ServerThread, tmp_path: Path) -> None:
    token = add_token(secure.config.data_dir / "tokens.csv", "ann", ["system:masters"])
    inline = kubeconfig_with(secure, tmp_path / "inline", user={"token": token})
    assert "default" in await namespace_names(inline)
    (tmp_path / "token").write_text(token + "\n")
    from_file = kubeconfig_with(secure, tmp_path / "file", user={"tokenFile": "token"})
    assert "default" in await namespace_names(from_file)
    wrong = kubeconfig_with(secure, tmp_path / "wrong", user={"token": "nope"})
    with pytest.raises(Unauthorized) as denied:
        await namespace_names(wrong)
    assert denied.value.code == 401


PLUGIN = """\
import json, os, sys
counter, good = sys.argv[1], sys.argv[2]
n = int(open(counter).read()) + 1 if os.path.exists(counter) else 1
open(counter, "w").write(str(n))
token = "revoked" if n == 1 else good
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {"token": token}}))
"""


async def test_exec_plugin_is_rerun_after_401(secure: ServerThread, tmp_path: Path) -> None:
    token = add_token(secure.config.data_dir / "tokens.csv", "bot", ["system:masters"])
    (tmp_path / "plugin.py").write_text(PLUGIN)
    path = kubeconfig_with(secure, tmp_path / "exec", user={"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
        "args": [str(tmp_path / "plugin.py"), str(tmp_path / "count"), token]}})
    assert "default" in await namespace_names(path)  # first token revoked: 401, rerun, retry
    assert (tmp_path / "count").read_text() == "2"


async def test_wrong_ca_fails_and_insecure_skips_verification(
        secure: ServerThread, tmp_path: Path) -> None:
    admin = yaml.safe_load(secure.kubeconfig.read_text())["users"][0]["user"]
    other_ca = base64.b64encode(pki.make_ca("another-ca").cert).decode()
    wrong = kubeconfig_with(secure, tmp_path / "wrong-ca", user=admin,
                            **{"certificate-authority-data": other_ca})
    with pytest.raises(TransportError):
        await namespace_names(wrong)
    doc = yaml.safe_load(wrong.read_text())
    del doc["clusters"][0]["cluster"]["certificate-authority-data"]
    doc["clusters"][0]["cluster"]["insecure-skip-tls-verify"] = True
    (tmp_path / "insecure").write_text(yaml.safe_dump(doc))
    assert "default" in await namespace_names(tmp_path / "insecure")


async def test_tls_server_name_is_checked_against_the_certificate(
        secure: ServerThread, tmp_path: Path) -> None:
    admin = yaml.safe_load(secure.kubeconfig.read_text())["users"][0]["user"]
    good = kubeconfig_with(secure, tmp_path / "good", user=admin,
                           **{"tls-server-name": "localhost"})
    assert "default" in await namespace_names(good)
    bad = kubeconfig_with(secure, tmp_path / "bad", user=admin,
                          **{"tls-server-name": "not-in-the-cert.example"})
    with pytest.raises(TransportError):
        await namespace_names(bad)


CERT_PLUGIN = """\
import json, os, sys
counter, first_cert, first_key, second_cert, second_key = sys.argv[1:6]
n = int(open(counter).read()) + 1 if os.path.exists(counter) else 1
open(counter, "w").write(str(n))
cert, key = (first_cert, first_key) if n == 1 else (second_cert, second_key)
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {"clientCertificateData": open(cert).read(),
                             "clientKeyData": open(key).read()}}))
"""


async def test_exec_plugin_client_certificate_and_its_rotation(
        secure: ServerThread, tmp_path: Path) -> None:
    pki_dir = secure.config.data_dir / "pki"
    stranger = pki.issue_client(pki.make_ca("not-the-servers-ca"), "stranger")
    (tmp_path / "stranger.crt").write_bytes(stranger.cert)
    (tmp_path / "stranger.key").write_bytes(stranger.key)
    (tmp_path / "plugin.py").write_text(CERT_PLUGIN)
    path = kubeconfig_with(secure, tmp_path / "exec-cert", user={"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
        "args": [str(tmp_path / "plugin.py"), str(tmp_path / "count"),
                 str(pki_dir / "admin.crt"), str(pki_dir / "admin.key"),
                 str(tmp_path / "stranger.crt"), str(tmp_path / "stranger.key")]}})
    async with await create_client(path) as client:
        namespaces = Api(Namespace, client=client)
        assert "default" in names_of(await namespaces.list())
        client.config.credentials.invalidate()  # as after a 401: the plugin runs again
        # Its new certificate is used: the handshake succeeds, as with kube, and the server
        # answers 401, after which the client runs the plugin once more before giving up.
        with pytest.raises(Unauthorized):
            await namespaces.list()
    assert (tmp_path / "count").read_text() == "3"


def names_of(items: object) -> list[str]:
    return sorted(n.metadata.name or "" for n in items if n.metadata)  # type: ignore[attr-defined]
