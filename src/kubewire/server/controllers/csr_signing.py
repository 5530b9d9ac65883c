"""kube-controller-manager's CSR signing controller (``csrsigning``,
pkg/controller/certificates/signer) and cleaner (``csrcleaner``,
pkg/controller/certificates/cleaner).

The signer: an approved CertificateSigningRequest for one of the Kubernetes signers
(``csr_policy.SIGNERS``) that has no certificate, no ``Failed`` condition and passes its
signer's checks is signed with the cluster CA (``DIR/pki/ca.crt`` and ``ca.key``, the CA the
server verifies client certificates with), and ``status.certificate`` is written through
``/status`` as ``kube-controller-manager``; a request its signer refuses gets kube's
``Failed`` condition (reason ``SignerValidationFailure``). Denied and pending requests, other
signers' and ``legacy-unknown`` ones are left alone. The certificate is made as Go's
``x509.CreateCertificate`` makes kube's: the request's subject and SANs, the usages asked for,
BasicConstraints CA:FALSE, the CA's key id as authority key id, a random 128-bit serial, valid
from 5 minutes ago for ``expirationSeconds`` capped by ``--cluster-signing-duration``.

kube runs the signer only when it has a signing key (``--cluster-signing-key-file``, which
kubeadm points at the cluster CA's key); so does kubewire: with a ``--client-ca-file`` that
does not hold kubewire's CA (a CA whose key kubewire does not hold) or without a CA in the
data directory the signer does not start, and approved requests stay unsigned, as kube's do
when it logs "Skipping CSR signer controller because no csr cert/key was specified".

The cleaner deletes, once at start and then hourly on the server's clock, what kube's does
(``csr_policy.should_clean``). Both are kube-controller-manager's: they start and stop with
that part (``--controllers``, leader election).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.x509.oid import NameOID

from kubewire.server.context import ServerConfig, ServerContext
from kubewire.server.controllers import csr_policy
from kubewire.server.controllers.work_queue import FeedController, WorkQueue
from kubewire.server.request.options import WriteOptions, parse_delete_options
from kubewire.server.request.routes import Route
from kubewire.server.writes.create_update import guaranteed_update
from kubewire.server.writes.deletes import delete_object
from kubewire.server.writes.rbac_writes import REQUESTER
from kubewire.server.writes.validation.certificates import (
    check_csr,
    decoded_bytes,
    has_condition,
    pem_blocks,
)
from kubewire.status import StatusError
from kubewire.storage.base import Change
from kubewire.times import format_time

log = logging.getLogger(__name__)

GROUP = "certificates.k8s.io"
CONTROLLER_MANAGER = WriteOptions(field_manager="kube-controller-manager")
SERIAL_LIMIT = 1 << 128

_decode = msgspec.json.Decoder(dict[str, Any]).decode

SigningKey = (rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey
              | ed448.Ed448PrivateKey)


@dataclass(frozen=True, slots=True)
class SigningFiles:
    cert: Path
    key: Path


def signing_files(config: ServerConfig) -> SigningFiles | None:
    """The CA pair the signer signs with: kubewire's own CA in ``DIR/pki``; None when it has
    made none, or when the server verifies clients with a CA bundle of the user's
    (``--client-ca-file``) that does not hold it (what it signed would not authenticate)."""
    pki = config.data_dir / "pki"
    files = SigningFiles(pki / "ca.crt", pki / "ca.key")
    if not (files.cert.is_file() and files.key.is_file()):
        return None
    if config.client_ca_file is not None:
        try:
            trusted = config.client_ca_file.read_bytes()
        except OSError:
            return None
        if files.cert.read_bytes().strip() not in trusted:
            return None
    return files


@dataclass(frozen=True, slots=True)
class Authority:
    cert: x509.Certificate
    key: SigningKey


def load_authority(files: SigningFiles) -> Authority:
    cert = x509.load_pem_x509_certificate(files.cert.read_bytes())
    key = serialization.load_pem_private_key(files.key.read_bytes(), password=None)
    if not isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
                      | ed25519.Ed25519PrivateKey | ed448.Ed448PrivateKey):
        raise ValueError(f"{files.key}: not a signing key")
    return Authority(cert, key)


def request_facts(csr: x509.CertificateSigningRequest) -> csr_policy.RequestFacts:
    names = csr.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    orgs = csr.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    san = _sans(csr)
    return csr_policy.RequestFacts(
        str(names[0].value) if names else "", tuple(str(o.value) for o in orgs),
        dns_names=len(san.get_values_for_type(x509.DNSName)) if san else 0,
        ip_addresses=len(san.get_values_for_type(x509.IPAddress)) if san else 0,
        emails=len(san.get_values_for_type(x509.RFC822Name)) if san else 0,
        uris=len(san.get_values_for_type(x509.UniformResourceIdentifier)) if san else 0)


def _sans(csr: x509.CertificateSigningRequest) -> x509.SubjectAlternativeName | None:
    try:
        return csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return None


def sign(authority: Authority, csr: x509.CertificateSigningRequest, usages: Sequence[str],
         ttl: timedelta, now: datetime) -> bytes:
    """A PEM certificate for ``csr``, ``ttl`` long (``csr_policy.certificate_duration``);
    ValueError: kube's text for what stops it."""
    not_before, not_after = csr_policy.validity(now, ttl, authority.cert.not_valid_after_utc)
    bits, extended = csr_policy.key_usages(usages)
    serial = 0
    while serial == 0:  # cryptography refuses 0, which Go's rand.Int may give
        serial = secrets.randbelow(SERIAL_LIMIT)
    builder = (x509.CertificateBuilder().subject_name(csr.subject)
               .issuer_name(authority.cert.subject).public_key(csr.public_key())
               .serial_number(serial).not_valid_before(not_before).not_valid_after(not_after))
    if bits:
        builder = builder.add_extension(x509.KeyUsage(**{name: name in bits for name in (
            "digital_signature", "content_commitment", "key_encipherment", "data_encipherment",
            "key_agreement", "key_cert_sign", "crl_sign", "encipher_only", "decipher_only")}),
            critical=True)
    if extended:
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([x509.ObjectIdentifier(oid) for oid in extended]),
            critical=False)
    builder = builder.add_extension(x509.BasicConstraints(ca=False, path_length=None),
                                    critical=True)
    with contextlib.suppress(x509.ExtensionNotFound):
        ski = authority.cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier(ski.value.digest, None, None), critical=False)
    san = _sans(csr)
    if san is not None and list(san):
        # Go marks the SAN extension critical when the subject is empty (RFC 5280 4.2.1.6)
        builder = builder.add_extension(san, critical=not list(csr.subject))
    algorithm = None if isinstance(authority.key, ed25519.Ed25519PrivateKey
                                   | ed448.Ed448PrivateKey) else hashes.SHA256()
    cert = builder.sign(authority.key, algorithm)
    return cert.public_bytes(serialization.Encoding.PEM)


class CsrSigning(FeedController):
    """``start()``/``await stop()``, possibly again (leader election)."""

    def __init__(self, ctx: ServerContext, files: SigningFiles) -> None:
        self.ctx = ctx
        resource = ctx.registry.lookup(GROUP, "v1", "certificatesigningrequests")
        assert resource is not None
        self.resource = resource
        self.files = files
        self.queue = WorkQueue("csrsigning", self._sync)
        self._authority: tuple[tuple[int, int], Authority] | None = None

    def mark_initial(self) -> None:
        cache = self.ctx.caches.for_resource(self.resource)
        for item in cache.scan(self.resource.storage_prefix()):
            self.queue.mark(item.name)

    def changed(self, changes: Sequence[Change]) -> None:
        prefix = self.resource.storage_prefix()
        for change in changes:
            if change.key.startswith(prefix) and change.value is not None:
                self.queue.mark(change.key[len(prefix):])

    def authority(self) -> Authority:
        """The CA, read again when its files change (kube's dynamic CA reloader)."""
        stamp = (self.files.cert.stat().st_mtime_ns, self.files.key.stat().st_mtime_ns)
        if self._authority is None or self._authority[0] != stamp:
            self._authority = (stamp, load_authority(self.files))
        return self._authority[1]

    async def _sync(self, name: str) -> None:
        REQUESTER.set(None)  # the controller's own writes (its queue task's context only)
        found = self.ctx.caches.for_resource(self.resource).get(
            self.resource.storage_key("", name))
        if found is None:
            return
        csr = _decode(found.value)
        if not _wants_certificate(csr):
            return
        spec = csr.get("spec") or {}
        signer = spec.get("signerName")
        if signer not in csr_policy.SIGNERS:
            return
        try:
            request = check_csr(decoded_bytes(spec.get("request")))
        except ValueError as err:  # validation let it in: kube's sync fails and retries
            raise ValueError(f'unable to parse csr "{name}": {err}') from None
        usages = [str(u) for u in spec.get("usages") or []]
        problem = csr_policy.signer_problem(signer, request_facts(request), usages)
        if problem is not None:
            await self._write_status(name, _failed(problem, self.ctx.now()))
            return
        expiration = spec.get("expirationSeconds")
        ttl = csr_policy.certificate_duration(
            expiration if isinstance(expiration, int) else None,
            self.ctx.config.cluster_signing_duration_s)
        pem = sign(self.authority(), request, usages, ttl, self.ctx.now())
        await self._write_status(name, _with_certificate(pem))

    async def _write_status(self, name: str, change: Any) -> None:
        route = Route(self.resource, "", name, "status", False)

        def mutate(live: dict[str, Any]) -> dict[str, Any]:
            if not _wants_certificate(live):
                raise _Settled
            return change(live)  # type: ignore[no-any-return]

        with contextlib.suppress(_Settled):
            try:
                await guaranteed_update(self.ctx, route, mutate, CONTROLLER_MANAGER)
            except StatusError as err:
                if err.code != 404:
                    raise


class _Settled(Exception):
    """The request was signed, failed, denied or deleted meanwhile: nothing to write."""


def _wants_certificate(csr: dict[str, Any]) -> bool:
    """Approved, not Failed, no certificate yet (certificate_controller.go and signer.handle)."""
    status = csr.get("status") or {}
    return (has_condition(csr, "Approved") and not has_condition(csr, "Failed")
            and not status.get("certificate"))


def _failed(message: str, now: datetime) -> Any:
    def add(live: dict[str, Any]) -> dict[str, Any]:
        status = live.setdefault("status", {})
        status.setdefault("conditions", []).append({
            "type": "Failed", "status": "True", "reason": "SignerValidationFailure",
            "message": message, "lastUpdateTime": format_time(now)})
        return live

    return add


def _with_certificate(pem: bytes) -> Any:
    def put(live: dict[str, Any]) -> dict[str, Any]:
        live.setdefault("status", {})["certificate"] = base64.b64encode(pem).decode("ascii")
        return live

    return put


def first_not_after(certificate: bytes) -> datetime | None:
    """The NotAfter of the first PEM certificate (the cleaner's ``isExpired``)."""
    blocks = pem_blocks(certificate)
    if not blocks:
        return None
    try:
        return x509.load_der_x509_certificate(blocks[0].data).not_valid_after_utc
    except ValueError:
        return None


class CsrCleaner:
    """``start()``/``await stop()``: a sweep at start, then every ``CLEANER_INTERVAL_S`` on the
    server's clock (a manual clock's ``advance`` runs it)."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx
        resource = ctx.registry.lookup(GROUP, "v1", "certificatesigningrequests")
        assert resource is not None
        self.resource = resource
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="csrcleaner")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        REQUESTER.set(None)
        while True:
            try:
                await self.sweep()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("csrcleaner: sweep failed")
            await self.ctx.clock.sleep(csr_policy.CLEANER_INTERVAL_S)

    async def sweep(self) -> None:
        now = self.ctx.now()
        cache = self.ctx.caches.for_resource(self.resource)
        for item in list(cache.scan(self.resource.storage_prefix())):
            csr = _decode(item.value)
            certificate = decoded_bytes((csr.get("status") or {}).get("certificate"))
            not_after = first_not_after(certificate) if certificate else None
            if csr_policy.should_clean(csr, now, not_after):
                try:
                    await delete_object(self.ctx, self.resource, "", item.name,
                                        parse_delete_options(b"", {}))
                except StatusError as err:
                    if err.code != 404:
                        log.warning("csrcleaner: unable to delete CSR %s: %s", item.name, err)
