"""CertificateSigningRequest validation (certificates.k8s.io/v1), in kube's order, and the PEM
and PKCS#10 parsing it and the signer share.

Source: kubernetes pkg/apis/certificates/validation/validation.go
(``validateCertificateSigningRequest``, ``validateConditions``,
``validateCertificateSigningRequestUpdate`` and ``getValidationOptions``: what stored objects
already break is tolerated on their updates), ``ValidateSignerName`` (pkg/apis/core/validation)
and ``ParseCSR`` (pkg/apis/certificates/helpers.go). Object metadata (any path-segment name:
``ValidateCertificateRequestName`` accepts every name) is checked by the generic meta rules.

PEM is read as Go's ``encoding/pem`` reads it (written here: ``cryptography`` loads one block
and says nothing of the text around it, while kube takes the first ``CERTIFICATE REQUEST``
block anywhere in the data, and counts every ``CERTIFICATE`` block of ``status.certificate``).
DER and signatures are ``cryptography``'s. Go's texts for DER that does not parse (asn1 errors
naming tags and offsets) are not reproduced: such a request is refused with ``x509: malformed
certificate request``.

Pure: objects in, ``FieldError``s out.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm

from kubewire.go_text import GoLiteral
from kubewire.json_types import JSON
from kubewire.names import is_dns1123_label, is_dns1123_subdomain
from kubewire.resources import Resource
from kubewire.status import FieldError, forbidden, invalid, not_supported, required

CSR_ID = "certificates.k8s.io/certificatesigningrequests"
APPROVED, DENIED, FAILED = "Approved", "Denied", "Failed"
LEGACY_UNKNOWN_SIGNER = "kubernetes.io/legacy-unknown"
KUBE_APISERVER_CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client"
KUBELET_CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
KUBELET_SERVING_SIGNER = "kubernetes.io/kubelet-serving"
MIN_EXPIRATION_SECONDS = 600
CSR_BLOCK_TYPE = "CERTIFICATE REQUEST"
CERTIFICATE_BLOCK_TYPE = "CERTIFICATE"
_SUBDOMAIN_MAX, _LABEL_MAX = 253, 63

# allValidUsages (a sorted set: its List() order is the supported-values order)
VALID_USAGES = tuple(sorted((
    "signing", "digital signature", "content commitment", "key encipherment", "key agreement",
    "data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any",
    "server auth", "client auth", "code signing", "email protection", "s/mime",
    "ipsec end system", "ipsec tunnel", "ipsec user", "timestamping", "ocsp signing",
    "microsoft sgc", "netscape sgc")))
_TRUE_ONLY = (APPROVED, DENIED, FAILED)  # trueConditionTypes
_ALL_STATUSES = ("False", "True", "Unknown")  # sorted


# --- PEM and PKCS#10 ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class PemBlock:
    type: str
    has_headers: bool
    data: bytes


_BEGIN = re.compile(rb"-----BEGIN (.*?)-----[ \t]*\r?\n")


def pem_blocks(data: bytes) -> list[PemBlock]:
    """Every block Go's ``pem.Decode`` finds when called until it finds no more: a block whose
    END line is missing or whose body is not base64 is skipped, as Go skips it."""
    blocks: list[PemBlock] = []
    rest = data
    while True:
        match = _BEGIN.search(rest)
        if match is None:
            return blocks
        kind = match.group(1)
        end_marker = b"-----END " + kind + b"-----"
        body_start = match.end()
        end = rest.find(end_marker, body_start)
        if end < 0:
            rest = rest[match.start() + 1:]
            continue
        body = rest[body_start:end]
        headers, payload = _split_headers(body)
        try:
            decoded = base64.b64decode(b"".join(payload.split()), validate=True)
        except (binascii.Error, ValueError):
            rest = rest[match.start() + 1:]
            continue
        blocks.append(PemBlock(kind.decode("latin-1"), headers, decoded))
        rest = rest[end + len(end_marker):]


def _split_headers(body: bytes) -> tuple[bool, bytes]:
    """``Key: value`` lines before a blank line are headers (RFC 1421)."""
    lines = body.split(b"\n")
    if lines and b":" in lines[0]:
        for i, line in enumerate(lines):
            if not line.strip():
                return True, b"\n".join(lines[i + 1:])
        return True, b""
    return False, body


def parse_csr(pem: bytes) -> x509.CertificateSigningRequest:
    """``ParseCSR``: the first PEM block must be a ``CERTIFICATE REQUEST`` of PKCS#10 DER.
    ValueError carries kube's text."""
    blocks = pem_blocks(pem)
    if not blocks or blocks[0].type != CSR_BLOCK_TYPE:
        raise ValueError("PEM block type must be CERTIFICATE REQUEST")
    try:
        return x509.load_der_x509_csr(blocks[0].data)
    except (ValueError, UnsupportedAlgorithm):
        raise ValueError("x509: malformed certificate request") from None


def check_csr(pem: bytes) -> x509.CertificateSigningRequest:
    """``validateCSR``: parsed, and its signature verifies (ValueError: Go's text)."""
    csr = parse_csr(pem)
    try:
        valid = csr.is_signature_valid
    except (UnsupportedAlgorithm, ValueError, InvalidSignature):
        valid = False
    if not valid:
        raise ValueError(_signature_error(csr))
    return csr


def _signature_error(csr: x509.CertificateSigningRequest) -> str:
    """``CheckSignatureFrom``'s error for the request's key type."""
    try:
        name = type(csr.public_key()).__name__
    except (UnsupportedAlgorithm, ValueError):
        return "x509: cannot verify signature: algorithm unimplemented"
    if "RSA" in name:
        return "crypto/rsa: verification error"
    if "Ed25519" in name:
        return "x509: Ed25519 verification failure"
    return "x509: ECDSA verification failure"


def certificate_problem(pem: bytes) -> str | None:
    """``validateCertificate``: None for empty data or PEM ``CERTIFICATE`` blocks only, each
    holding a certificate; else Go's text."""
    if not pem:
        return None
    blocks = pem_blocks(pem)
    for block in blocks:
        if block.type != CERTIFICATE_BLOCK_TYPE:
            return f"only CERTIFICATE PEM blocks are allowed, found {_go_quote(block.type)}"
        if block.has_headers:
            return "no PEM block headers are permitted"
        try:
            x509.load_der_x509_certificate(block.data)
        except ValueError:
            return "x509: malformed certificate"
    if not blocks:
        return "must contain at least one CERTIFICATE PEM block"
    return None


def _go_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def decoded_bytes(value: JSON) -> bytes:
    """A ``[]byte`` field's value (JSON base64; the decode checks ran before)."""
    if not isinstance(value, str) or not value:
        return b""
    try:
        return base64.b64decode(value)
    except (binascii.Error, ValueError):
        return b""


def go_bytes(value: bytes | None) -> GoLiteral:
    """A ``[]byte`` as Go's ``%#v`` prints it in a field error."""
    if value is None:
        return GoLiteral("[]byte(nil)")
    return GoLiteral("[]byte{" + ", ".join(f"0x{b:x}" for b in value) + "}")


# --- the object --------------------------------------------------------------------------------

def _dict(obj: Mapping[str, JSON], key: str) -> Mapping[str, JSON]:
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def conditions(obj: Mapping[str, JSON]) -> list[Mapping[str, JSON]]:
    value = _dict(obj, "status").get("conditions")
    return [c for c in value if isinstance(c, dict)] if isinstance(value, list) else []


def _usages(obj: Mapping[str, JSON]) -> list[str]:
    value = _dict(obj, "spec").get("usages")
    return [str(u) for u in value] if isinstance(value, list) else []


def _text(obj: Mapping[str, JSON], key: str) -> str:
    value = obj.get(key)
    return value if isinstance(value, str) else ""


def has_condition(obj: Mapping[str, JSON], kind: str) -> bool:
    return any(c.get("type") == kind for c in conditions(obj))


@dataclass(frozen=True, slots=True)
class Options:
    """``certificateValidationOptions``."""

    allow_setting_approval_conditions: bool = False
    allow_setting_certificate: bool = False
    allow_both_approved_and_denied: bool = False
    allow_legacy_signer_name: bool = False
    allow_duplicate_condition_types: bool = False
    allow_empty_condition_type: bool = False
    allow_arbitrary_certificate: bool = False
    allow_unknown_usages: bool = False
    allow_duplicate_usages: bool = False


def options_for(new: Mapping[str, JSON], old: Mapping[str, JSON] | None,
                subresource: str = "") -> Options:
    """``getValidationOptions``, plus what the endpoint may set (``/status``: the certificate,
    ``/approval``: the Approved and Denied conditions)."""
    if old is None:
        return Options()
    old_types = [c.get("type") for c in conditions(old)]
    old_usages = _usages(old)
    old_cert = decoded_bytes(_dict(old, "status").get("certificate"))
    new_cert = decoded_bytes(_dict(new, "status").get("certificate"))
    return Options(
        allow_setting_approval_conditions=subresource == "approval",
        allow_setting_certificate=subresource == "status",
        allow_both_approved_and_denied=APPROVED in old_types and DENIED in old_types,
        allow_legacy_signer_name=_text(_dict(old, "spec"), "signerName") == LEGACY_UNKNOWN_SIGNER,
        allow_duplicate_condition_types=len(set(old_types)) != len(old_types),
        allow_empty_condition_type=any(not t for t in old_types),
        allow_arbitrary_certificate=(new_cert == old_cert
                                     or certificate_problem(old_cert) is not None),
        allow_unknown_usages=any(u not in VALID_USAGES for u in old_usages),
        allow_duplicate_usages=len(set(old_usages)) != len(old_usages),
    )


def validate_signer_name(path: str, signer: str) -> list[FieldError]:
    """``ValidateSignerName``: ``<domain>/<path>``, each part DNS names, 571 bytes at most."""
    if not signer:
        return [required(path)]
    segments = signer.split("/")
    if len(segments) != 2:
        return [invalid(path, signer, "must be a fully qualified domain and path of the form "
                                      "'example.com/signer-name'")]
    domain, rest = segments
    errors: list[FieldError] = []
    if len(domain.encode()) > _SUBDOMAIN_MAX:
        errors.append(FieldError("FieldValueTooLong", path, "",
                                 f"must have at most {_SUBDOMAIN_MAX} bytes"))
    labels = domain.split(".")
    for label in labels:
        problems = is_dns1123_label(label)
        if problems:
            errors += [invalid(path, domain, f"validating label {_go_quote(label)}: {p}")
                       for p in problems]
            break
    if len(labels) < 2:
        errors.append(invalid(path, domain,
                              "should be a domain with at least two segments separated by dots"))
    for label in rest.split("."):
        problems = is_dns1123_subdomain(label)
        if problems:
            errors += [invalid(path, rest, f"validating label {_go_quote(label)}: {p}")
                       for p in problems]
            break
    longest = _SUBDOMAIN_MAX + (_SUBDOMAIN_MAX + _LABEL_MAX + 1) + 1
    if len(signer.encode()) > longest:
        errors.append(FieldError("FieldValueTooLong", path, "",
                                 f"must have at most {longest} bytes"))
    return errors


def _validate(obj: Mapping[str, JSON], opts: Options) -> list[FieldError]:
    """``validateCertificateSigningRequest`` without the metadata (checked generically)."""
    spec = _dict(obj, "spec")
    errors: list[FieldError] = []
    raw_request = spec.get("request")
    request = decoded_bytes(raw_request)
    try:
        check_csr(request)
    except ValueError as err:
        shown = go_bytes(None if raw_request is None else request)
        errors.append(invalid("spec.request", shown, str(err)))
    errors += _validate_usages(_usages(obj), opts)
    signer = _text(spec, "signerName")
    if not opts.allow_legacy_signer_name and signer == LEGACY_UNKNOWN_SIGNER:
        errors.append(invalid("spec.signerName", signer,
                              "the legacy signerName is not allowed via this API version"))
    else:
        errors += validate_signer_name("spec.signerName", signer)
    seconds = spec.get("expirationSeconds")
    if isinstance(seconds, int) and not isinstance(seconds, bool) \
            and seconds < MIN_EXPIRATION_SECONDS:
        errors.append(invalid("spec.expirationSeconds", seconds,
                              "may not specify a duration less than 600 seconds (10 minutes)"))
    errors += _validate_conditions(obj, opts)
    if not opts.allow_arbitrary_certificate:
        problem = certificate_problem(decoded_bytes(_dict(obj, "status").get("certificate")))
        if problem is not None:
            errors.append(invalid("status.certificate", "<certificate data>", problem))
    return errors


def _validate_usages(usages: list[str], opts: Options) -> list[FieldError]:
    errors: list[FieldError] = []
    if not usages:
        errors.append(required("spec.usages"))
    if not opts.allow_unknown_usages:
        errors += [not_supported(f"spec.usages[{i}]", u, VALID_USAGES)
                   for i, u in enumerate(usages) if u not in VALID_USAGES]
    if not opts.allow_duplicate_usages:
        seen: set[str] = set()
        for i, usage in enumerate(usages):
            if usage in seen:
                errors.append(FieldError("FieldValueDuplicate", f"spec.usages[{i}]", usage))
            seen.add(usage)
    return errors


_EXCLUSIVE = "Approved and Denied conditions are mutually exclusive"


def _validate_conditions(obj: Mapping[str, JSON], opts: Options) -> list[FieldError]:
    errors: list[FieldError] = []
    seen: set[str] = set()
    for i, condition in enumerate(conditions(obj)):
        path = f"status.conditions[{i}]"
        kind, status = _text(condition, "type"), _text(condition, "status")
        if not opts.allow_empty_condition_type and not kind:
            errors.append(required(f"{path}.type"))
        allowed = ("True",) if kind in _TRUE_ONLY else _ALL_STATUSES
        if not status:
            errors.append(required(f"{path}.status"))
        elif status not in allowed:
            errors.append(not_supported(f"{path}.status", status, allowed))
        # the second of an Approved and a Denied condition is the one named
        other = {APPROVED: DENIED, DENIED: APPROVED}.get(kind)
        if not opts.allow_both_approved_and_denied and other is not None and other in seen:
            errors.append(invalid(f"{path}.type", kind, _EXCLUSIVE))
        if not opts.allow_duplicate_condition_types and kind in seen:
            errors.append(FieldError("FieldValueDuplicate", f"{path}.type", kind))
        seen.add(kind)
    return errors


def _count(obj: Mapping[str, JSON], kind: str) -> int:
    return sum(1 for c in conditions(obj) if c.get("type") == kind)


def validate_csr_update(new: Mapping[str, JSON], old: Mapping[str, JSON],
                        subresource: str) -> list[FieldError]:
    """``validateCertificateSigningRequestUpdate`` for the endpoint ``subresource`` ("" for
    the object, ``status``, ``approval``)."""
    opts = options_for(new, old, subresource)
    errors = _validate(new, opts)
    for kind in (APPROVED, DENIED, FAILED):
        if _count(new, kind) < _count(old, kind):
            errors.append(forbidden(
                "status.conditions",
                f"updates may not remove a condition of type {_go_quote(kind)}"))
    if not opts.allow_setting_approval_conditions:
        for kind in (APPROVED, DENIED):
            # a change of an existing instance cannot reach here: every endpoint but
            # /approval puts the stored instances back (csr_strategy)
            if _count(new, kind) > _count(old, kind):
                errors.append(forbidden(
                    "status.conditions",
                    f"updates may not add a condition of type {_go_quote(kind)}"))
    new_cert = decoded_bytes(_dict(new, "status").get("certificate"))
    old_cert = decoded_bytes(_dict(old, "status").get("certificate"))
    if new_cert != old_cert:
        if not opts.allow_setting_certificate:
            errors.append(forbidden("status.certificate",
                                    "updates may not set certificate content"))
        elif old_cert:
            errors.append(forbidden("status.certificate",
                                    "updates may not modify existing certificate content"))
    return errors


def validate_certificate_signing_request(resource: Resource, obj: Mapping[str, JSON],
                                         old: Mapping[str, JSON] | None) -> list[FieldError]:
    """The main endpoint's create and update rules."""
    if old is None:
        return _validate(obj, Options())
    return validate_csr_update(obj, old, "")


def validate_certificate_signing_request_status(
        resource: Resource, obj: Mapping[str, JSON],
        old: Mapping[str, JSON] | None) -> list[FieldError]:
    return _validate(obj, Options()) if old is None else validate_csr_update(obj, old, "status")


def validate_certificate_signing_request_approval(
        resource: Resource, obj: Mapping[str, JSON],
        old: Mapping[str, JSON] | None) -> list[FieldError]:
    return _validate(obj, Options()) if old is None else validate_csr_update(obj, old,
                                                                              "approval")


def subject_organizations(csr: x509.CertificateSigningRequest) -> list[str]:
    return [str(a.value) for a in csr.subject.get_attributes_for_oid(
        x509.oid.NameOID.ORGANIZATION_NAME)]
