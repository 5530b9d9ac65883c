"""CertificateSigningRequest rules as pure functions: validation texts (signer names, PEM),
the endpoints' strategies, the signers' checks and durations, and the cleaner's deadlines
(kube v1.32: pkg/apis/certificates, pkg/registry/certificates, pkg/controller/certificates)."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kubewire.cli import build_parser, config_from_args
from kubewire.server.controllers import csr_policy
from kubewire.server.controllers.csr_policy import RequestFacts, signer_problem
from kubewire.server.writes import csr_strategy
from kubewire.server.writes.validation.certificates import (
    certificate_problem,
    check_csr,
    pem_blocks,
    validate_csr_update,
    validate_signer_name,
)

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _request_pem() -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "u")])
    csr = x509.CertificateSigningRequestBuilder().subject_name(name).sign(key, hashes.SHA256())
    return csr.public_bytes(serialization.Encoding.PEM)


def _csr(conditions: list[dict[str, Any]] | None = None, **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "x"},
            "spec": {"request": base64.b64encode(_PEM).decode(), "signerName": "example.com/s",
                     "usages": ["client auth"]},
            "status": {**({"conditions": conditions} if conditions else {}), **status}}


_PEM = _request_pem()


@pytest.mark.parametrize(("signer", "texts"), [
    ("", ["spec.signerName: Required value"]),
    ("a/b/c", ["spec.signerName: Invalid value: \"a/b/c\": must be a fully qualified domain and "
               "path of the form 'example.com/signer-name'"]),
    ("Example.com/x", ['spec.signerName: Invalid value: "Example.com": validating label '
                       '"Example": a lowercase RFC 1123 label must consist of lower case '
                       "alphanumeric characters or '-', and must start and end with an "
                       "alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
                       "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"]),
    ("example.com/Signer", ['spec.signerName: Invalid value: "Signer": validating label '
                            '"Signer": a lowercase RFC 1123 subdomain must consist of lower case '
                            "alphanumeric characters, '-' or '.', and must start and end with "
                            "an alphanumeric character (e.g. 'example.com', regex used for "
                            "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]"
                            "*[a-z0-9])?)*')"]),
    ("example.com/" + "a" * 600, ["spec.signerName: Invalid value: \"" + "a" * 600 +
                                  "\": validating label \"" + "a" * 600 + "\": must be no more "
                                  "than 253 characters",
                                  "spec.signerName: Too long: must have at most 571 bytes"]),
    ("kubernetes.io/kube-apiserver-client", []),
])
def test_signer_names(signer: str, texts: list[str]) -> None:
    assert [str(e) for e in validate_signer_name("spec.signerName", signer)] == texts


def test_pem_is_read_as_go_reads_it() -> None:
    # text before the block is skipped; the first block decides the type
    assert check_csr(b"junk\n" + _PEM).subject.rfc4514_string() == "CN=u"
    with pytest.raises(ValueError, match=r"^PEM block type must be CERTIFICATE REQUEST$"):
        check_csr(_PEM.replace(b"CERTIFICATE REQUEST", b"NEW CERTIFICATE REQUEST"))
    headers = _PEM.replace(b"-----\n", b"-----\nProc-Type: 4,ENCRYPTED\n\n", 1)
    assert [b.has_headers for b in pem_blocks(headers)] == [True]
    assert certificate_problem(b"") is None
    assert certificate_problem(b"nothing") == "must contain at least one CERTIFICATE PEM block"
    assert certificate_problem(_PEM) == (
        'only CERTIFICATE PEM blocks are allowed, found "CERTIFICATE REQUEST"')


def test_status_strategy_keeps_approvals_and_stamps_new_conditions() -> None:
    approved = {"type": "Approved", "status": "True", "reason": "A",
                "lastUpdateTime": "2025-01-01T00:00:00Z",
                "lastTransitionTime": "2025-01-01T00:00:00Z"}
    old = _csr([approved])
    new = _csr([{"type": "Approved", "status": "True", "reason": "changed"},
                {"type": "Working", "status": "True"}])
    new["spec"]["usages"] = ["any"]
    out = csr_strategy.prepare_update(old, new, "status", NOW)
    assert out["spec"] == old["spec"]
    assert out["status"]["conditions"] == [approved, {
        "type": "Working", "status": "True", "lastUpdateTime": "2026-01-02T03:04:05Z",
        "lastTransitionTime": "2026-01-02T03:04:05Z"}]
    assert validate_csr_update(out, old, "status") == []


def test_approval_strategy_takes_only_the_conditions() -> None:
    old = _csr(certificate="Y2VydA==")
    new = _csr([{"type": "Approved", "status": "True"}])
    out = csr_strategy.prepare_update(old, new, "approval", NOW)
    assert out["status"]["certificate"] == "Y2VydA=="
    assert [c["type"] for c in out["status"]["conditions"]] == ["Approved"]
    # the main endpoint changes neither
    main = csr_strategy.prepare_update(old, _csr([{"type": "Denied", "status": "True"}]), "",
                                       NOW)
    assert main["status"] == old["status"]


def test_create_takes_the_requester_in_go_order() -> None:
    body = _csr([{"type": "Approved", "status": "True"}])
    body["spec"].update(username="mallory", uid="1", groups=["system:masters"],
                        extra={"x": ["y"]})
    out = csr_strategy.prepare_create(body, "jane", "", ("devs",), (("k", ("v",)),))
    assert list(out["spec"]) == ["request", "signerName", "usages", "username", "groups",
                                 "extra"]
    assert (out["spec"]["username"], out["spec"]["groups"], out["spec"]["extra"]) == (
        "jane", ["devs"], {"k": ["v"]})
    assert out["status"] == {}


def test_update_validation_tolerates_what_the_stored_object_already_breaks() -> None:
    both = _csr([{"type": "Approved", "status": "True"}, {"type": "Denied", "status": "True"}])
    assert validate_csr_update(both, both, "") == []
    assert [str(e) for e in validate_csr_update(both, _csr(), "")] == [
        'status.conditions[1].type: Invalid value: "Denied": Approved and Denied conditions '
        "are mutually exclusive",
        'status.conditions: Forbidden: updates may not add a condition of type "Approved"',
        'status.conditions: Forbidden: updates may not add a condition of type "Denied"']
    failed = _csr([{"type": "Failed", "status": "False"}])
    assert [str(e) for e in validate_csr_update(failed, _csr(), "status")] == [
        'status.conditions[0].status: Unsupported value: "False": supported values: "True"']


@pytest.mark.parametrize(("signer", "facts", "usages", "problem"), [
    (csr_policy.KUBE_APISERVER_CLIENT, RequestFacts("u", ()), ["client auth"], None),
    (csr_policy.KUBE_APISERVER_CLIENT, RequestFacts("u", ()), ["digital signature"],
     "missing required usage for client certificate: client auth"),
    (csr_policy.KUBELET_CLIENT, RequestFacts("system:node:a", ("system:nodes",)),
     ["digital signature", "client auth"], None),
    (csr_policy.KUBELET_CLIENT, RequestFacts("system:node:a", ("system:nodes",), dns_names=1),
     ["digital signature", "client auth"], "DNS subjectAltNames are not allowed"),
    (csr_policy.KUBELET_CLIENT, RequestFacts("system:node:a", ("system:nodes",)),
     ["client auth"], "usages did not match [client auth digital signature key encipherment]"),
    (csr_policy.KUBELET_SERVING, RequestFacts("system:node:a", ("system:nodes",)),
     ["digital signature", "server auth"], "DNS or IP subjectAltName is required"),
    (csr_policy.KUBELET_SERVING, RequestFacts("node", ("system:nodes",), ip_addresses=1),
     ["digital signature", "server auth"],
     "subject common name does not begin with system:node:"),
])
def test_signer_checks(signer: str, facts: RequestFacts, usages: list[str],
                       problem: str | None) -> None:
    assert signer_problem(signer, facts, usages) == problem


def test_durations_and_validity() -> None:
    year = csr_policy.DEFAULT_SIGNING_DURATION_S
    assert csr_policy.certificate_duration(None, year) == timedelta(days=365)
    assert csr_policy.certificate_duration(10 ** 9, year) == timedelta(days=365)
    assert csr_policy.certificate_duration(3600, year) == timedelta(hours=1)
    start, end = csr_policy.validity(NOW, timedelta(hours=1), NOW + timedelta(days=1))
    assert (start, end) == (NOW - timedelta(minutes=5), NOW + timedelta(hours=1))
    start, end = csr_policy.validity(NOW, timedelta(hours=10), NOW + timedelta(hours=2))
    assert end == NOW + timedelta(hours=2)  # capped by the CA
    with pytest.raises(ValueError, match="the signer has expired"):
        csr_policy.validity(NOW, timedelta(hours=1), NOW - timedelta(minutes=10))
    bits, extended = csr_policy.key_usages(["client auth", "signing", "server auth", "any"])
    assert bits == {"digital_signature"}
    assert extended == ["2.5.29.37.0", "1.3.6.1.5.5.7.3.1", "1.3.6.1.5.5.7.3.2"]
    with pytest.raises(ValueError, match=r'^unrecognized usage values: \["x" "y"\]$'):
        csr_policy.key_usages(["x", "y"])


def test_cleaner_deadlines() -> None:
    def csr(created: datetime, *conditions: tuple[str, datetime],
            certificate: str = "") -> dict[str, Any]:
        return {"metadata": {"creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ")},
                "status": {"certificate": certificate, "conditions": [
                    {"type": t, "lastUpdateTime": when.strftime("%Y-%m-%dT%H:%M:%SZ")}
                    for t, when in conditions]}}

    hour, day = timedelta(hours=1), timedelta(days=1)
    clean = csr_policy.should_clean
    assert not clean(csr(NOW - day), NOW, None)
    assert clean(csr(NOW - day - hour), NOW, None)  # pending for over a day
    assert not clean(csr(NOW, ("Approved", NOW - 2 * hour)), NOW, None)  # not issued
    assert clean(csr(NOW, ("Approved", NOW - 2 * hour), certificate="x"), NOW, None)
    assert clean(csr(NOW, ("Denied", NOW - 2 * hour)), NOW, None)
    assert clean(csr(NOW, ("Failed", NOW - 2 * hour)), NOW, None)
    assert not clean(csr(NOW, ("Denied", NOW - hour)), NOW, None)
    assert clean(csr(NOW, ("Approved", NOW), certificate="x"), NOW, NOW - hour)  # expired


def test_cluster_signing_duration_flag() -> None:
    def duration(*flags: str) -> float:
        args = build_parser().parse_args(["serve", "--insecure-http", *flags])
        return config_from_args(args).cluster_signing_duration_s

    assert duration() == 365 * 24 * 3600  # kube's 8760h0m0s
    assert duration("--cluster-signing-duration", "1h30m") == 5400
