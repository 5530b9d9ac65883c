"""kubeconfig loading, merging and credentials, with generated files (no cluster)."""

from __future__ import annotations

import base64
import shutil
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kubewire.client.config import (
    in_cluster_config,
    kubeconfig_paths,
    load_config,
    load_kubeconfig,
)
from kubewire.client.credentials import (
    ExecCredentials,
    StaticCredentials,
    TokenFileCredentials,
    parse_exec_output,
)
from kubewire.client.errors import ConfigError, CredentialError
from kubewire.client.tls import ssl_context


def write_config(path: Path, *, clusters: dict[str, dict[str, object]],
                 users: dict[str, dict[str, object]], contexts: dict[str, dict[str, object]],
                 current: str = "") -> Path:
    doc = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": n, "cluster": c} for n, c in clusters.items()],
        "users": [{"name": n, "user": u} for n, u in users.items()],
        "contexts": [{"name": n, "context": c} for n, c in contexts.items()],
        "current-context": current,
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def test_kubeconfig_env_list_is_split_on_pathsep(tmp_path: Path) -> None:
    env = {"KUBECONFIG": f"{tmp_path / 'a'}:{tmp_path / 'b'}"}
    assert kubeconfig_paths(env) == [tmp_path / "a", tmp_path / "b"]
    assert kubeconfig_paths({})[0].name == "config"


def test_first_file_wins_for_names_and_current_context(tmp_path: Path) -> None:
    first = write_config(
        tmp_path / "first", clusters={"c": {"server": "https://first:6443"}},
        users={"u": {"token": "t1"}}, contexts={"x": {"cluster": "c", "user": "u"}})
    second = write_config(
        tmp_path / "second",
        clusters={"c": {"server": "https://second:6443"}, "d": {"server": "http://d:80/"}},
        users={"u": {"token": "t2"}},
        contexts={"x": {"cluster": "d", "user": "u"},
                  "y": {"cluster": "d", "user": "u", "namespace": "team"}},
        current="y")
    merged = load_kubeconfig([tmp_path / "missing", first, second])
    assert merged.current_context == "y"
    current = merged.resolve()
    assert (current.server, current.namespace) == ("http://d:80", "team")
    other = merged.resolve("x")
    assert (other.server, other.namespace) == ("https://first:6443", "default")


async def test_token_beats_token_file(tmp_path: Path) -> None:
    (tmp_path / "tok").write_text("from-file\n")
    path = write_config(
        tmp_path / "cfg", clusters={"c": {"server": "https://k:6443"}},
        users={"both": {"token": "inline", "tokenFile": "tok"}, "file": {"tokenFile": "tok"}},
        contexts={"both": {"cluster": "c", "user": "both"},
                  "file": {"cluster": "c", "user": "file"}})
    cfg = load_kubeconfig(path)
    both = await cfg.resolve("both").credentials.current()
    assert both.authorization == "Bearer inline"
    from_file = await cfg.resolve("file").credentials.current()
    assert from_file.authorization == "Bearer from-file"


async def test_basic_auth(tmp_path: Path) -> None:
    path = write_config(tmp_path / "cfg", clusters={"c": {"server": "https://k"}},
                        users={"u": {"username": "ann", "password": "pw"}},
                        contexts={"x": {"cluster": "c", "user": "u"}}, current="x")
    auth = await load_kubeconfig(path).resolve().credentials.current()
    assert auth.authorization == "Basic " + base64.b64encode(b"ann:pw").decode()


def test_unknown_context_and_missing_files_are_config_errors(tmp_path: Path) -> None:
    path = write_config(tmp_path / "cfg", clusters={"c": {"server": "https://k"}},
                        users={}, contexts={"x": {"cluster": "c", "user": "u"}})
    with pytest.raises(ConfigError, match="current-context"):
        load_kubeconfig(path).resolve()
    with pytest.raises(ConfigError, match="'nope' not found"):
        load_kubeconfig(path).resolve("nope")
    with pytest.raises(ConfigError, match="no kubeconfig"):
        load_kubeconfig([tmp_path / "a", tmp_path / "b"])
    bad = write_config(tmp_path / "bad", clusters={"c": {"server": "https://k",
                                                         "certificate-authority": "nope.pem"}},
                       users={}, contexts={"x": {"cluster": "c"}}, current="x")
    with pytest.raises(ConfigError, match="certificate-authority"):
        load_kubeconfig(bad).resolve()


def test_load_config_prefers_explicit_file(tmp_path: Path) -> None:
    path = write_config(tmp_path / "cfg", clusters={"c": {"server": "http://127.0.0.1:1"}},
                        users={}, contexts={"x": {"cluster": "c", "namespace": "n"}},
                        current="x")
    assert load_config(path).namespace == "n"


async def test_token_file_is_reread_after_period_and_on_invalidate(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("one")
    now = [0.0]
    creds = TokenFileCredentials(token, reread_s=60, clock=lambda: now[0])
    assert (await creds.current()).authorization == "Bearer one"
    token.write_text("two")
    assert (await creds.current()).authorization == "Bearer one"
    now[0] = 61.0
    assert (await creds.current()).authorization == "Bearer two"
    token.write_text("three")
    creds.invalidate()
    assert (await creds.current()).authorization == "Bearer three"


async def test_in_cluster_reads_service_account(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "namespace").write_text("kube-system")
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    cfg = in_cluster_config(env, tmp_path)
    assert (cfg.server, cfg.namespace) == ("https://10.0.0.1:443", "kube-system")
    assert (await cfg.credentials.current()).authorization == "Bearer sa-token"
    assert in_cluster_config({"KUBERNETES_SERVICE_HOST": "fd00::1",
                              "KUBERNETES_SERVICE_PORT": "443"}, tmp_path).server \
        == "https://[fd00::1]:443"
    with pytest.raises(ConfigError):
        in_cluster_config({}, tmp_path)


PLUGIN = """\
import json, os, sys
counter = sys.argv[1]
n = int(open(counter).read()) + 1 if os.path.exists(counter) else 1
open(counter, "w").write(str(n))
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
status = {"token": f"tok-{n}-{os.environ['EXTRA']}-{info['spec']['cluster']['server']}"}
if len(sys.argv) > 2:
    status["expirationTimestamp"] = sys.argv[2]
print(json.dumps({"apiVersion": info["apiVersion"], "kind": "ExecCredential",
                  "status": status}))
"""


def exec_kubeconfig(tmp_path: Path, *args: str) -> Path:
    (tmp_path / "plugin.py").write_text(PLUGIN)
    return write_config(
        tmp_path / "cfg", clusters={"c": {"server": "https://k:6443"}},
        users={"u": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
            "args": [str(tmp_path / "plugin.py"), str(tmp_path / "count"), *args],
            "env": [{"name": "EXTRA", "value": "e"}], "provideClusterInfo": True,
            "interactiveMode": "Never"}}},
        contexts={"x": {"cluster": "c", "user": "u"}}, current="x")


async def test_exec_plugin_runs_once_until_invalidated(tmp_path: Path) -> None:
    creds = load_kubeconfig(exec_kubeconfig(tmp_path)).resolve().credentials
    assert isinstance(creds, ExecCredentials)
    assert (await creds.current()).authorization == "Bearer tok-1-e-https://k:6443"
    assert (await creds.current()).authorization == "Bearer tok-1-e-https://k:6443"
    creds.invalidate()  # what the transport does on 401
    assert (await creds.current()).authorization == "Bearer tok-2-e-https://k:6443"


async def test_exec_plugin_reruns_when_token_expires(tmp_path: Path) -> None:
    creds = load_kubeconfig(exec_kubeconfig(tmp_path, "2030-01-01T00:00:00Z")).resolve() \
        .credentials
    assert isinstance(creds, ExecCredentials)
    now = [1_800_000_000.0]  # 2027: before expiry
    creds.wall_clock = lambda: now[0]
    assert (await creds.current()).authorization.endswith("tok-1-e-https://k:6443")  # type: ignore[union-attr]
    assert (await creds.current()).authorization.endswith("tok-1-e-https://k:6443")  # type: ignore[union-attr]
    now[0] = 1_900_000_000.0  # 2030: expired
    assert (await creds.current()).authorization.endswith("tok-2-e-https://k:6443")  # type: ignore[union-attr]


async def test_exec_plugin_failure_is_credential_error(tmp_path: Path) -> None:
    path = write_config(tmp_path / "cfg", clusters={"c": {"server": "https://k"}},
                        users={"u": {"exec": {"command": sys.executable,
                                              "args": ["-c", "import sys; sys.exit(3)"]}}},
                        contexts={"x": {"cluster": "c", "user": "u"}}, current="x")
    with pytest.raises(CredentialError, match="exited 3"):
        await load_kubeconfig(path).resolve().credentials.current()
    with pytest.raises(CredentialError):
        parse_exec_output(b'{"status": {}}')


@pytest.fixture(scope="module")
def cert_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl CLI not available")
    tmp = tmp_path_factory.mktemp("pki")
    cert, key = tmp / "tls.crt", tmp / "tls.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=kubewire-test", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key


def test_tls_from_files_and_data(tmp_path: Path, cert_pair: tuple[Path, Path]) -> None:
    cert, key = cert_pair
    b64 = base64.b64encode
    path = write_config(
        tmp_path / "cfg",
        clusters={"files": {"server": "https://k", "certificate-authority": str(cert),
                            "tls-server-name": "kube.local", "proxy-url": "http://p:3128"},
                  "data": {"server": "https://k",
                           "certificate-authority-data": b64(cert.read_bytes()).decode(),
                           "insecure-skip-tls-verify": True}},
        users={"files": {"client-certificate": str(cert), "client-key": str(key)},
               "data": {"client-certificate-data": b64(cert.read_bytes()).decode(),
                        "client-key-data": b64(key.read_bytes()).decode()}},
        contexts={"files": {"cluster": "files", "user": "files"},
                  "data": {"cluster": "data", "user": "data"}})
    merged = load_kubeconfig(path)
    files, data = merged.resolve("files"), merged.resolve("data")
    assert files.tls.ca_pem == cert.read_bytes() == data.tls.ca_pem
    assert files.tls.client_key_pem == key.read_bytes() == data.tls.client_key_pem
    assert (files.tls.server_name, files.proxy_url) == ("kube.local", "http://p:3128")
    verifying = ssl_context(files.tls)
    assert verifying.verify_mode == ssl.CERT_REQUIRED
    assert verifying.get_ca_certs()[0]["subject"] == ((("commonName", "kubewire-test"),),)
    assert ssl_context(data.tls).verify_mode == ssl.CERT_NONE
    with pytest.raises(ConfigError, match="cannot be loaded"):
        ssl_context(files.tls, cert_pem=cert.read_bytes(), key_pem=b"not a key")


def test_static_credentials_send_nothing_by_default() -> None:
    assert StaticCredentials().auth.authorization is None
