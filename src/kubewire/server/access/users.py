"""``kubewire user``: credentials for a new user, printed as a ready kubeconfig.

A client certificate is signed by the data dir's CA (CN = user, O = groups); a token is a random
secret appended to the token file the server reads (and re-reads when it changes). Neither grants
anything by itself: authorization (the ABAC policy file) decides what the user may do, except for
members of ``system:masters``.
"""

from __future__ import annotations

import csv
import io
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from kubewire.server.access.kubeconfig import Credentials, kubeconfig_text
from kubewire.server.access.pki import issue_client, load_ca


def admin_server_url(data_dir: Path) -> str:
    """The server URL in ``DIR/kubeconfig`` (written by the server at each start)."""
    doc = yaml.safe_load((data_dir / "kubeconfig").read_text())
    return str(doc["clusters"][0]["cluster"]["server"])


def token_line(token: str, user: str, uid: str, groups: Sequence[str]) -> str:
    """One CSV line in kube's token-auth-file format."""
    out = io.StringIO()
    row = [token, user, uid]
    if groups:
        row.append(",".join(groups))
    csv.writer(out, lineterminator="\n").writerow(row)
    return out.getvalue()


def add_token(token_file: Path, user: str, groups: Sequence[str]) -> str:
    token = secrets.token_urlsafe(32)
    token_file.parent.mkdir(parents=True, exist_ok=True)
    with token_file.open("a") as out:
        out.write(token_line(token, user, user, groups))
    token_file.chmod(0o600)
    return token


@dataclass(frozen=True, slots=True)
class UserRequest:
    """Who to issue for; with ``token_file`` a token there, else a client certificate."""

    name: str
    groups: tuple[str, ...] = ()
    token_file: Path | None = None
    namespace: str = "default"


def user_kubeconfig(data_dir: Path, request: UserRequest, server: str | None = None) -> str:
    """Issue the user's credentials and return a kubeconfig that uses them."""
    ca = load_ca(data_dir / "pki")
    url = server or admin_server_url(data_dir)
    name, groups = request.name, request.groups
    if request.token_file is not None:
        creds = Credentials(user=name, token=add_token(request.token_file, name, groups))
    else:
        pair = issue_client(ca, name, groups)
        creds = Credentials(user=name, client_cert=pair.cert, client_key=pair.key)
    return kubeconfig_text(url, creds, ca_cert=ca.cert, namespace=request.namespace)
