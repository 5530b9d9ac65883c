"""``kubewire user``: credentials for users, kept in the data directory, listed and revoked.

A client certificate is signed by the data dir's CA (CN = user, O = groups); a copy of the
certificate (not its key) is kept in ``DIR/pki/users/<serial>.crt`` so ``kubewire user list``
can show who holds one, with its groups and expiry. A token is a random secret appended to the
token file the server reads; the server re-reads that file when it changes (``authn.TokenFile``),
so a token removed by ``revoke_tokens`` stops working within a second, without a restart.

Neither credential grants anything by itself: authorization (RBAC bindings, see
``user_bindings``, or the ABAC policy file) decides what the user may do, except for members of
``system:masters``. Kube has no revocation list for client certificates: one stays valid until
it expires, so revoking a certificate user means removing what is bound to it.
"""

from __future__ import annotations

import csv
import datetime
import io
import os
import secrets
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.x509.oid import NameOID

from kubewire.server.access.authn import parse_token_file
from kubewire.server.access.kubeconfig import Credentials, kubeconfig_text
from kubewire.server.access.pki import issue_client, load_ca

ISSUED_DIR = "users"  # under DIR/pki: copies of the client certificates issued


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
        record_certificate(data_dir, pair.cert)
        creds = Credentials(user=name, client_cert=pair.cert, client_key=pair.key)
    return kubeconfig_text(url, creds, ca_cert=ca.cert, namespace=request.namespace)


# --- what the data directory knows -----------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Credential:
    """One credential of a user: ``kind`` is "token" or "certificate"; ``expires`` is None for
    a token (tokens in the token file do not expire)."""

    user: str
    kind: str
    groups: tuple[str, ...]
    expires: datetime.datetime | None = None
    serial: str = ""


def record_certificate(data_dir: Path, cert_pem: bytes) -> Path:
    """Keep a copy of an issued client certificate (public: no key) for ``list``."""
    serial = x509.load_pem_x509_certificate(cert_pem).serial_number
    folder = data_dir / "pki" / ISSUED_DIR
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / f"{serial:x}.crt"
    path.write_bytes(cert_pem)
    return path


def certificate_credential(cert_pem: bytes) -> Credential:
    """The user (CN) and groups (O) a client certificate names, and when it expires."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    subject = cert.subject
    names = subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    orgs = subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    return Credential(str(names[0].value) if names else "", "certificate",
                      tuple(str(org.value) for org in orgs), cert.not_valid_after_utc,
                      f"{cert.serial_number:x}")


def issued_certificates(data_dir: Path) -> list[Credential]:
    """The client certificates ``kubewire user`` issued from this data dir, oldest expiry
    first (a file that is not a certificate is skipped)."""
    folder = data_dir / "pki" / ISSUED_DIR
    out: list[Credential] = []
    for path in sorted(folder.glob("*.crt")) if folder.is_dir() else ():
        try:
            out.append(certificate_credential(path.read_bytes()))
        except ValueError:
            continue
    return sorted(out, key=lambda cred: (cred.user, cred.expires or datetime.datetime.max))


def token_credentials(token_file: Path) -> list[Credential]:
    """One credential per token in the file (none if the file does not exist)."""
    try:
        text = token_file.read_text()
    except FileNotFoundError:
        return []
    return [Credential(user.name, "token", user.groups)
            for user in parse_token_file(text, str(token_file)).values()]


def credentials(data_dir: Path, token_file: Path) -> list[Credential]:
    """Every credential the data dir knows of, by user: tokens first, then certificates."""
    found = token_credentials(token_file) + issued_certificates(data_dir)
    return sorted(found, key=lambda cred: cred.user)  # stable: keeps tokens before certs


def _token_user(line: str) -> str | None:
    """The user a token-file line names (None for a blank or short line: kept as it is)."""
    record = next(csv.reader([line]), [])
    if len(record) < 3 or not record[0].strip():
        return None
    return record[1].strip()


def revoke_tokens(token_file: Path, user: str) -> int:
    """Remove every token of ``user`` from the token file, keeping the other lines as they
    are; the file is replaced at once (a reader sees the old or the new one, never half).
    Returns how many tokens were removed."""
    try:
        lines = token_file.read_text().splitlines(keepends=True)
    except FileNotFoundError:
        return 0
    kept = [line for line in lines if _token_user(line) != user]
    removed = len(lines) - len(kept)
    if removed:
        fd, tmp = tempfile.mkstemp(dir=token_file.parent, prefix=f".{token_file.name}.")
        try:
            with os.fdopen(fd, "w") as out:
                out.writelines(kept)
            os.chmod(tmp, 0o600)
            os.replace(tmp, token_file)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return removed
