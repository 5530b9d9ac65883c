"""Connection settings: from kubeconfig files (as kubectl reads them) or the in-cluster account.

kubeconfig rules (client-go ``tools/clientcmd/loader.go``):
- ``KUBECONFIG`` is a list of paths (``os.pathsep``); missing files are skipped. For the named
  maps (clusters, users, contexts) the first file that defines a name wins; the first non-empty
  ``current-context`` wins.
- Relative file paths (certificate-authority, client-certificate, client-key, tokenFile, exec
  command) resolve against the directory of the file that defined them.
- ``*-data`` fields (base64) win over their file counterparts; a token wins over tokenFile.
- Without ``KUBECONFIG`` the default is ``~/.kube/config``.

In-cluster (client-go ``rest.InClusterConfig``): ``KUBERNETES_SERVICE_HOST``/``_PORT``, the
service-account token (re-read, since kubelet rotates it), its CA and namespace file.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from kubewire.client.credentials import (
    Credentials,
    ExecCredentials,
    StaticCredentials,
    TokenFileCredentials,
    exec_config_from,
)
from kubewire.client.errors import ConfigError
from kubewire.json_types import JSON

DEFAULT_KUBECONFIG = Path("~/.kube/config")
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
_NAMED_SECTIONS = ("clusters", "users", "contexts")


@dataclass(frozen=True, slots=True)
class TLSSettings:
    """How to verify the server and present ourselves (PEM bytes, already read from files)."""

    ca_pem: bytes | None = None
    insecure_skip_verify: bool = False
    server_name: str | None = None
    client_cert_pem: bytes | None = None
    client_key_pem: bytes | None = None


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """Everything the transport needs to reach one API server."""

    server: str
    namespace: str = "default"
    tls: TLSSettings = field(default_factory=TLSSettings)
    credentials: Credentials = field(default_factory=StaticCredentials)
    proxy_url: str | None = None


@dataclass(slots=True)
class KubeConfig:
    """Merged kubeconfig documents: named clusters, users and contexts, each with its source
    directory for relative paths."""

    clusters: dict[str, tuple[Mapping[str, JSON], Path]] = field(default_factory=dict)
    users: dict[str, tuple[Mapping[str, JSON], Path]] = field(default_factory=dict)
    contexts: dict[str, tuple[Mapping[str, JSON], Path]] = field(default_factory=dict)
    current_context: str = ""

    def merge(self, doc: Mapping[str, JSON], base_dir: Path) -> None:
        """Fold one file into this config; names already present are kept (first file wins)."""
        for section in _NAMED_SECTIONS:
            target: dict[str, tuple[Mapping[str, JSON], Path]] = getattr(self, section)
            inner = section[:-1]  # clusters -> cluster
            for entry in doc.get(section) or ():
                name = entry.get("name")
                if name and name not in target:
                    target[name] = (entry.get(inner) or {}, base_dir)
        if not self.current_context:
            self.current_context = str(doc.get("current-context") or "")

    def resolve(self, context: str | None = None) -> ClientConfig:
        """The settings of ``context`` (default: current-context)."""
        name = context or self.current_context
        if not name:
            raise ConfigError("no context given and current-context is not set")
        if name not in self.contexts:
            raise ConfigError(f"context {name!r} not found in kubeconfig")
        ctx, _ = self.contexts[name]
        cluster_name, user_name = ctx.get("cluster", ""), ctx.get("user", "")
        if cluster_name not in self.clusters:
            raise ConfigError(f"cluster {cluster_name!r} of context {name!r} not found")
        cluster, cluster_dir = self.clusters[cluster_name]
        user, user_dir = self.users.get(user_name, ({}, cluster_dir))
        server = cluster.get("server")
        if not server:
            raise ConfigError(f"cluster {cluster_name!r} has no server")
        cert = _read_data_or_file(user, "client-certificate", user_dir)
        key = _read_data_or_file(user, "client-key", user_dir)
        tls = TLSSettings(
            ca_pem=_read_data_or_file(cluster, "certificate-authority", cluster_dir),
            insecure_skip_verify=bool(cluster.get("insecure-skip-tls-verify")),
            server_name=cluster.get("tls-server-name") or None,
            client_cert_pem=cert, client_key_pem=key)
        return ClientConfig(
            server=str(server).rstrip("/"),
            namespace=str(ctx.get("namespace") or "default"),
            tls=tls,
            credentials=_credentials(user, user_dir, _cluster_info(cluster, tls)),
            proxy_url=cluster.get("proxy-url") or None,
        )


def kubeconfig_paths(env: Mapping[str, str] | None = None) -> list[Path]:
    """The files kubectl would read: ``KUBECONFIG``'s list, else ``~/.kube/config``."""
    env = os.environ if env is None else env
    value = env.get("KUBECONFIG", "")
    if value:
        return [Path(p).expanduser() for p in value.split(os.pathsep) if p]
    return [DEFAULT_KUBECONFIG.expanduser()]


def load_kubeconfig(paths: list[Path] | Path | str | None = None) -> KubeConfig:
    """Read and merge kubeconfig files (``None``: as kubectl finds them). Missing files in a
    list are skipped, as kubectl does; no readable file at all is a ``ConfigError``."""
    if paths is None:
        paths = kubeconfig_paths()
    elif not isinstance(paths, list):
        paths = [Path(paths)]
    merged, found = KubeConfig(), False
    for path in paths:
        try:
            text = path.read_text()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise ConfigError(f"cannot read kubeconfig {path}: {exc}") from exc
        try:
            doc = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"kubeconfig {path} is not valid YAML: {exc}") from exc
        if not isinstance(doc, dict):
            raise ConfigError(f"kubeconfig {path} is not a mapping")
        merged.merge(doc, path.resolve().parent)
        found = True
    if not found:
        raise ConfigError(f"no kubeconfig found in {[str(p) for p in paths]}")
    return merged


def in_cluster_config(env: Mapping[str, str] | None = None,
                      account_dir: Path = SERVICE_ACCOUNT_DIR) -> ClientConfig:
    """The pod's service account; raises ``ConfigError`` outside a cluster."""
    env = os.environ if env is None else env
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise ConfigError("not in a cluster: KUBERNETES_SERVICE_HOST/PORT are not set")
    token_path = account_dir / "token"
    if not token_path.exists():
        raise ConfigError(f"not in a cluster: {token_path} does not exist")
    host = f"[{host}]" if ":" in host else host
    ca_path = account_dir / "ca.crt"
    ns_path = account_dir / "namespace"
    namespace = ns_path.read_text().strip() if ns_path.exists() else "default"
    return ClientConfig(
        server=f"https://{host}:{port}",
        namespace=namespace or "default",
        tls=TLSSettings(ca_pem=ca_path.read_bytes() if ca_path.exists() else None),
        credentials=TokenFileCredentials(token_path),
    )


def load_config(kubeconfig: Path | str | None = None, context: str | None = None) -> ClientConfig:
    """A given kubeconfig; else ``KUBECONFIG``/``~/.kube/config``; else the in-cluster
    account (client-go's order for ``kubectl`` inside a pod)."""
    if kubeconfig is not None:
        return load_kubeconfig(kubeconfig).resolve(context)
    paths = kubeconfig_paths()
    if any(p.exists() for p in paths):
        return load_kubeconfig(paths).resolve(context)
    return in_cluster_config()


def _read_data_or_file(section: Mapping[str, JSON], key: str, base_dir: Path) -> bytes | None:
    data = section.get(f"{key}-data")
    if data:
        try:
            return base64.b64decode(data, validate=True)
        except ValueError as exc:
            raise ConfigError(f"{key}-data is not valid base64") from exc
    path = section.get(key)
    if not path:
        return None
    try:
        return (base_dir / Path(path).expanduser()).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {key} {path}: {exc}") from exc


def _credentials(user: Mapping[str, JSON], base_dir: Path,
                 cluster_info: Mapping[str, JSON]) -> Credentials:
    if user.get("token"):
        return StaticCredentials.bearer(str(user["token"]))
    if user.get("tokenFile"):
        return TokenFileCredentials(base_dir / Path(user["tokenFile"]).expanduser())
    if user.get("exec"):
        return ExecCredentials(exec_config_from(user["exec"], base_dir, cluster_info))
    if user.get("username"):
        return StaticCredentials.basic(str(user["username"]), str(user.get("password") or ""))
    return StaticCredentials()


def _cluster_info(cluster: Mapping[str, JSON], tls: TLSSettings) -> dict[str, JSON]:
    """The ``spec.cluster`` an exec plugin gets with provideClusterInfo."""
    info: dict[str, JSON] = {"server": cluster.get("server", "")}
    if tls.ca_pem:
        info["certificate-authority-data"] = base64.b64encode(tls.ca_pem).decode()
    if tls.insecure_skip_verify:
        info["insecure-skip-tls-verify"] = True
    if tls.server_name:
        info["tls-server-name"] = tls.server_name
    if cluster.get("proxy-url"):
        info["proxy-url"] = cluster["proxy-url"]
    return info
