"""CertificateSigningRequests end to end: kubectl creates and approves, the signer issues a
certificate from the server's CA, and that certificate authenticates as the request's subject.

Real tools against the real server (kubectl, openssl-compatible keys from ``cryptography``,
raw HTTPS for exact Status bodies). Texts are kube v1.32's: the strategy and validation of
pkg/registry/certificates and pkg/apis/certificates/validation, the certificate admission
plugins, the in-tree signers of pkg/controller/certificates/signer and its cleaner.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

import kubewire
from kubewire.server.access.pki import ensure_server_pki, make_ca
from tests.integration.harness import ServerThread
from tests.integration.kubectl import needs_kubectl, ok, run
from tests.integration.test_access import POLICY, ensure_namespaces, forbidden, https, issue

CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client"
ABAC = "abac.authorization.kubernetes.io/v1beta1"
# POLICY (test_access), plus: carol may write CSRs (their /approval too) but approve no
# signer; dave may also approve for every kubernetes.io signer.
CSR_POLICY = POLICY + "\n" + "\n".join(json.dumps({"apiVersion": ABAC, "kind": "Policy",
                                                   "spec": spec}) for spec in [
    {"user": "carol", "namespace": "*", "resource": "certificatesigningrequests",
     "apiGroup": "certificates.k8s.io"},
    {"user": "dave", "namespace": "*", "resource": "certificatesigningrequests",
     "apiGroup": "certificates.k8s.io"},
    {"user": "dave", "namespace": "*", "resource": "signers", "apiGroup": "certificates.k8s.io"},
])


@pytest.fixture
def secure(make_server: Callable[..., ServerThread], tmp_path: Path) -> ServerThread:
    policy = tmp_path / "policy.jsonl"
    policy.write_text(CSR_POLICY + "\n")
    server = make_server(insecure_http=False, authorization_policy_file=policy)
    ensure_namespaces(server, "a")
    return server


def admin(server: ServerThread) -> tuple[Path, Path]:
    pki = server.config.data_dir / "pki"
    return pki / "admin.crt", pki / "admin.key"


def key_and_request(common_name: str, *orgs: str, rsa_key: bool = False,
                    dns: tuple[str, ...] = ()) -> tuple[bytes, bytes]:
    """A private key (PEM) and a PKCS#10 request for ``CN=common_name``, ``O=`` each org."""
    key: Any = (rsa.generate_private_key(public_exponent=65537, key_size=2048) if rsa_key
                else ec.generate_private_key(ec.SECP256R1()))
    subject = x509.Name([*(x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs),
                         x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    builder = x509.CertificateSigningRequestBuilder().subject_name(subject)
    if dns:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(d) for d in dns]), critical=False)
    request = builder.sign(key, hashes.SHA256())
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return key_pem, request.public_bytes(serialization.Encoding.PEM)


def csr_body(name: str, request: bytes, signer: str = CLIENT_SIGNER,
             usages: tuple[str, ...] = ("client auth",), **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"name": name},
            "spec": {"request": base64.b64encode(request).decode(), "signerName": signer,
                     "usages": list(usages), **spec}}


def get_csr(server: ServerThread, name: str) -> dict[str, Any]:
    reply = https(server, "GET", f"{CSRS}/{name}", cert=admin(server))
    assert reply.status == 200, reply.body
    return json.loads(reply.body)  # type: ignore[no-any-return]


def wait_for(server: ServerThread, name: str, done: Callable[[dict[str, Any]], bool],
             timeout: float = 10.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        csr = get_csr(server, name)
        if done(csr) or time.monotonic() > deadline:
            return csr
        time.sleep(0.05)


def issued(csr: dict[str, Any]) -> bool:
    return bool((csr.get("status") or {}).get("certificate"))


def condition_types(csr: dict[str, Any]) -> list[str]:
    return [c["type"] for c in (csr.get("status") or {}).get("conditions") or []]


def user_kubeconfig(server: ServerThread, tmp_path: Path, name: str, cert: bytes,
                    key: bytes) -> Path:
    """The admin kubeconfig with its user's certificate and key replaced."""
    (tmp_path / f"{name}.crt").write_bytes(cert)
    (tmp_path / f"{name}.key").write_bytes(key)
    path = tmp_path / f"{name}.kubeconfig"
    path.write_text(server.kubeconfig.read_text())
    ok(path, "config", "set-credentials", name, f"--client-certificate={tmp_path / name}.crt",
       f"--client-key={tmp_path / name}.key", "--embed-certs")
    ok(path, "config", "set-context", "--current", f"--user={name}")
    return path


# --- the whole way, with kubectl --------------------------------------------------------------

@needs_kubectl
def test_kubectl_creates_approves_and_the_certificate_authenticates(
        secure: ServerThread, tmp_path: Path) -> None:
    key, request = key_and_request("jane", "viewers", rsa_key=True)
    manifest = csr_body("jane", request, expirationSeconds=86400,
                        usages=("digital signature", "client auth"))
    manifest["spec"].update(username="mallory", groups=["system:masters"])  # not taken
    (tmp_path / "csr.yaml").write_text(json.dumps(manifest))
    assert ok(secure, "create", "-f", str(tmp_path / "csr.yaml")) == (
        "certificatesigningrequest.certificates.k8s.io/jane created\n")
    created = get_csr(secure, "jane")
    assert created["spec"]["username"] == "kubewire-admin"  # the requester, not the body's
    assert created["spec"]["groups"] == ["system:masters", "system:authenticated"]
    assert created["status"] == {}
    # kube takes the managed fields from the body, before the strategy sets the requester
    [entry] = created["metadata"]["managedFields"]
    assert entry["fieldsV1"] == {"f:spec": {
        "f:expirationSeconds": {}, "f:groups": {}, "f:request": {}, "f:signerName": {},
        "f:usages": {}, "f:username": {}}}
    table = ok(secure, "get", "csr", "jane").splitlines()
    assert table[0].split() == ["NAME", "AGE", "SIGNERNAME", "REQUESTOR", "REQUESTEDDURATION",
                                "CONDITION"]
    assert table[1].split()[2:] == [CLIENT_SIGNER, "kubewire-admin", "24h", "Pending"]
    time.sleep(0.3)
    assert not issued(get_csr(secure, "jane"))  # pending: never signed

    assert ok(secure, "certificate", "approve", "jane") == (
        "certificatesigningrequest.certificates.k8s.io/jane approved\n")
    csr = wait_for(secure, "jane", issued)
    assert issued(csr), csr
    approved = csr["status"]["conditions"][0]
    assert (approved["type"], approved["status"], approved["reason"]) == (
        "Approved", "True", "KubectlApprove")
    assert ok(secure, "get", "csr", "jane").splitlines()[1].split()[-1] == "Approved,Issued"

    pem = base64.b64decode(csr["status"]["certificate"])
    cert = x509.load_pem_x509_certificate(pem)
    ca = x509.load_pem_x509_certificate((secure.config.data_dir / "pki/ca.crt").read_bytes())
    cert.verify_directly_issued_by(ca)
    assert cert.subject.rfc4514_string() == "CN=jane,O=viewers"
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert lifetime == timedelta(hours=24)  # 5 min backdated, 24 h asked for: 24 h - 5 min + 5
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False

    # the certificate is jane in group viewers: pods she may read, secrets not
    jane = user_kubeconfig(secure, tmp_path, "jane", pem, key)
    allowed = run(jane, "get", "pods", "-n", "a")
    assert (allowed.returncode, allowed.stderr) == (0, "No resources found in a namespace.\n")
    denied = run(jane, "get", "secrets", "-n", "a")
    assert denied.returncode != 0
    assert ('secrets is forbidden: User "jane" cannot list resource "secrets" in API group "" '
            'in the namespace "a"') in denied.stderr


@needs_kubectl
def test_denied_requests_are_never_signed(secure: ServerThread, tmp_path: Path) -> None:
    _, request = key_and_request("eve")
    (tmp_path / "csr.json").write_text(json.dumps(csr_body("eve", request)))
    ok(secure, "create", "-f", str(tmp_path / "csr.json"))
    assert ok(secure, "certificate", "deny", "eve") == (
        "certificatesigningrequest.certificates.k8s.io/eve denied\n")
    time.sleep(0.5)
    csr = get_csr(secure, "eve")
    assert condition_types(csr) == ["Denied"] and not issued(csr)
    assert ok(secure, "get", "csr", "eve").splitlines()[1].split()[-1] == "Denied"
    # Approved and Denied are exclusive: approving it now is refused whole
    reply = https(secure, "PUT", f"{CSRS}/eve/approval", cert=admin(secure), body={
        **csr, "status": {"conditions": [*csr["status"]["conditions"],
                                         {"type": "Approved", "status": "True"}]}})
    assert reply.status == 422, reply.body
    assert json.loads(reply.body)["message"] == (
        'CertificateSigningRequest.certificates.k8s.io "eve" is invalid: status.conditions[1].'
        'type: Invalid value: "Approved": Approved and Denied conditions are mutually exclusive')
    time.sleep(0.3)
    assert not issued(get_csr(secure, "eve"))


def test_a_request_its_signer_refuses_gets_the_failed_condition(secure: ServerThread) -> None:
    cert = admin(secure)
    # the kubelet client signer takes O=system:nodes only
    _, request = key_and_request("system:node:n1", "devs")
    body = csr_body("kubelet", request, signer="kubernetes.io/kube-apiserver-client-kubelet",
                    usages=("digital signature", "client auth"))
    assert https(secure, "POST", CSRS, cert=cert, body=body).status == 201
    # and the apiserver client signer no server auth
    _, request = key_and_request("svc")
    body = csr_body("server", request, usages=("client auth", "server auth"))
    assert https(secure, "POST", CSRS, cert=cert, body=body).status == 201
    for name in ("kubelet", "server"):
        csr = get_csr(secure, name)
        csr["status"] = {"conditions": [{"type": "Approved", "status": "True"}]}
        reply = https(secure, "PUT", f"{CSRS}/{name}/approval", cert=cert, body=csr)
        assert reply.status == 200, reply.body
    messages = {}
    for name in ("kubelet", "server"):
        csr = wait_for(secure, name, lambda c: "Failed" in condition_types(c))
        failed = csr["status"]["conditions"][-1]
        assert (failed["type"], failed["status"], failed["reason"]) == (
            "Failed", "True", "SignerValidationFailure")
        assert failed["lastUpdateTime"] and failed["lastTransitionTime"]
        assert not issued(csr)
        messages[name] = failed["message"]
    assert messages == {"kubelet": "subject organization is not system:nodes",
                        "server": "invalid usage for client certificate: server auth"}


def test_kubelet_serving_requests_are_signed_with_their_names(secure: ServerThread) -> None:
    cert = admin(secure)
    _, request = key_and_request("system:node:n1", "system:nodes", dns=("n1.example",))
    body = csr_body("serving", request, signer="kubernetes.io/kubelet-serving",
                    usages=("digital signature", "server auth"), expirationSeconds=600)
    assert https(secure, "POST", CSRS, cert=cert, body=body).status == 201
    csr = get_csr(secure, "serving")
    csr["status"] = {"conditions": [{"type": "Approved", "status": "True"}]}
    assert https(secure, "PUT", f"{CSRS}/serving/approval", cert=cert, body=csr).status == 200
    csr = wait_for(secure, "serving", issued)
    issued_cert = x509.load_pem_x509_certificate(base64.b64decode(csr["status"]["certificate"]))
    sans = issued_cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["n1.example"]
    # 600 s asked: short-lived, so not backdated at its end (NotBefore is, by 5 minutes)
    lifetime = issued_cert.not_valid_after_utc - issued_cert.not_valid_before_utc
    assert lifetime == timedelta(minutes=15)


def test_the_signing_duration_caps_what_is_asked(make_server: Callable[..., ServerThread],
                                                 tmp_path: Path) -> None:
    policy = tmp_path / "policy.jsonl"
    policy.write_text(CSR_POLICY + "\n")
    server = make_server(insecure_http=False, authorization_policy_file=policy,
                         cluster_signing_duration_s=3 * 3600)
    cert = admin(server)
    lifetimes = {}
    for name, spec in (("default", {}), ("longer", {"expirationSeconds": 86400}),
                       ("shorter", {"expirationSeconds": 3600})):
        _, request = key_and_request(name)
        assert https(server, "POST", CSRS, cert=cert,
                     body=csr_body(name, request, **spec)).status == 201
        csr = get_csr(server, name)
        csr["status"] = {"conditions": [{"type": "Approved", "status": "True"}]}
        assert https(server, "PUT", f"{CSRS}/{name}/approval", cert=cert, body=csr).status == 200
        pem = base64.b64decode(wait_for(server, name, issued)["status"]["certificate"])
        made = x509.load_pem_x509_certificate(pem)
        lifetimes[name] = made.not_valid_after_utc - made.not_valid_before_utc
    # under 8 h: not backdated at the end, so NotBefore 5 min back makes it 5 min longer
    extra = timedelta(minutes=5)
    assert lifetimes == {"default": timedelta(hours=3) + extra,
                         "longer": timedelta(hours=3) + extra,
                         "shorter": timedelta(hours=1) + extra}


# --- bad input and what the strategy keeps ----------------------------------------------------

def _invalid(reply: Any, text: str) -> None:
    assert reply.status == 422, reply.body
    assert json.loads(reply.body)["message"] == (
        f'CertificateSigningRequest.certificates.k8s.io "bad" is invalid: {text}')


def test_bad_requests_get_kube_texts_and_nothing_is_stored(secure: ServerThread) -> None:
    cert = admin(secure)
    _, request = key_and_request("bad")
    cases = [
        (csr_body("bad", b"hello", usages=("client auth",)),
         "spec.request: Invalid value: []byte{0x68, 0x65, 0x6c, 0x6c, 0x6f}: "
         "PEM block type must be CERTIFICATE REQUEST"),
        (csr_body("bad", request, usages=()), "spec.usages: Required value"),
        (csr_body("bad", request, usages=("client auth", "flying")),
         'spec.usages[1]: Unsupported value: "flying": supported values: "any", "cert sign", '
         '"client auth", "code signing", "content commitment", "crl sign", "data encipherment", '
         '"decipher only", "digital signature", "email protection", "encipher only", '
         '"ipsec end system", "ipsec tunnel", "ipsec user", "key agreement", '
         '"key encipherment", "microsoft sgc", "netscape sgc", "ocsp signing", "s/mime", '
         '"server auth", "signing", "timestamping"'),
        (csr_body("bad", request, usages=("client auth", "client auth")),
         'spec.usages[1]: Duplicate value: "client auth"'),
        (csr_body("bad", request, signer="example"),
         'spec.signerName: Invalid value: "example": must be a fully qualified domain and path '
         "of the form 'example.com/signer-name'"),
        (csr_body("bad", request, signer="example/signer"),
         'spec.signerName: Invalid value: "example": should be a domain with at least two '
         "segments separated by dots"),
        (csr_body("bad", request, signer="kubernetes.io/legacy-unknown"),
         'spec.signerName: Invalid value: "kubernetes.io/legacy-unknown": the legacy signerName '
         "is not allowed via this API version"),
        (csr_body("bad", request, expirationSeconds=599),
         "spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 600 "
         "seconds (10 minutes)"),
    ]
    for body, text in cases:
        _invalid(https(secure, "POST", CSRS, cert=cert, body=body), text)
    # a request whose signature does not verify (its last byte changed)
    _, rsa_request = key_and_request("bad", rsa_key=True)
    der = bytearray(x509.load_pem_x509_csr(rsa_request).public_bytes(serialization.Encoding.DER))
    der[-1] ^= 1
    forged = (b"-----BEGIN CERTIFICATE REQUEST-----\n" + base64.encodebytes(bytes(der)) +
              b"-----END CERTIFICATE REQUEST-----\n")
    reply = https(secure, "POST", CSRS, cert=cert, body=csr_body("bad", forged))
    assert reply.status == 422, reply.body
    message = json.loads(reply.body)["message"]
    assert message.startswith('CertificateSigningRequest.certificates.k8s.io "bad" is invalid: '
                              "spec.request: Invalid value: []byte{0x2d, 0x2d, 0x2d")
    assert message.endswith("}: crypto/rsa: verification error")
    assert https(secure, "GET", f"{CSRS}/bad", cert=cert).status == 404
    assert json.loads(https(secure, "GET", CSRS, cert=cert).body)["items"] == []


def test_system_masters_may_not_ask_the_client_signer(secure: ServerThread) -> None:
    _, request = key_and_request("root", "system:masters")
    reply = https(secure, "POST", CSRS, cert=admin(secure), body=csr_body("root", request))
    assert reply.status == 403, reply.body
    assert json.loads(reply.body) == forbidden(
        'certificatesigningrequests.certificates.k8s.io "root" is forbidden: use of '
        "kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed",
        {"name": "root", "group": "certificates.k8s.io", "kind": "certificatesigningrequests"})
    assert https(secure, "GET", f"{CSRS}/root", cert=admin(secure)).status == 404


def test_spec_is_immutable_and_each_endpoint_changes_its_part(secure: ServerThread) -> None:
    cert = admin(secure)
    _, request = key_and_request("sam")
    assert https(secure, "POST", CSRS, cert=cert, body=csr_body("sam", request,
                 signer="example.com/custom")).status == 201
    csr = get_csr(secure, "sam")
    # the object: spec and status stay, labels change
    changed = {**csr, "metadata": {**csr["metadata"], "labels": {"team": "x"}},
               "spec": {**csr["spec"], "signerName": "example.com/other", "username": "x"},
               "status": {"conditions": [{"type": "Approved", "status": "True"}]}}
    reply = https(secure, "PUT", f"{CSRS}/sam", cert=cert, body=changed)
    assert reply.status == 200, reply.body
    after = json.loads(reply.body)
    assert after["spec"] == csr["spec"] and after["status"] == {}
    assert after["metadata"]["labels"] == {"team": "x"}
    # /status may not add an approval
    reply = https(secure, "PUT", f"{CSRS}/sam/status", cert=cert, body={
        **after, "status": {"conditions": [{"type": "Approved", "status": "True"}]}})
    assert reply.status == 422, reply.body
    assert json.loads(reply.body)["message"] == (
        'CertificateSigningRequest.certificates.k8s.io "sam" is invalid: status.conditions: '
        'Forbidden: updates may not add a condition of type "Approved"')
    # /status may add other conditions (timestamps filled) and set a certificate once
    ca = (secure.config.data_dir / "pki/ca.crt").read_bytes()
    reply = https(secure, "PUT", f"{CSRS}/sam/status", cert=cert, body={
        **after, "status": {"conditions": [{"type": "Working", "status": "Unknown"}],
                            "certificate": base64.b64encode(ca).decode()}})
    assert reply.status == 200, reply.body
    with_certificate = json.loads(reply.body)
    status = with_certificate["status"]
    assert status["certificate"] == base64.b64encode(ca).decode()
    assert status["conditions"][0]["lastTransitionTime"]
    # ... but not change it, nor write junk
    reply = https(secure, "PUT", f"{CSRS}/sam/status", cert=cert, body={
        **with_certificate,
        "status": {**status, "certificate": base64.b64encode(b"junk").decode()}})
    assert reply.status == 422, reply.body
    assert json.loads(reply.body)["message"] == (
        'CertificateSigningRequest.certificates.k8s.io "sam" is invalid: [status.certificate: '
        'Invalid value: "<certificate data>": must contain at least one CERTIFICATE PEM block, '
        "status.certificate: Forbidden: updates may not modify existing certificate content]")
    # /approval takes the conditions and nothing else; conditions may not be removed
    current = get_csr(secure, "sam")
    reply = https(secure, "PATCH", f"{CSRS}/sam/approval", cert=cert,
                  body=[{"op": "add", "path": "/status/conditions/-",
                         "value": {"type": "Approved", "status": "True", "reason": "R"}},
                        {"op": "replace", "path": "/spec/usages", "value": ["any"]}],
                  headers=[("Content-Type", "application/json-patch+json")])
    assert reply.status == 200, reply.body
    approved = json.loads(reply.body)
    assert approved["spec"] == current["spec"]
    assert condition_types(approved) == ["Working", "Approved"]
    reply = https(secure, "PUT", f"{CSRS}/sam/approval", cert=cert,
                  body={**approved, "status": {"conditions": []}})
    assert reply.status == 422, reply.body
    assert json.loads(reply.body)["message"] == (
        'CertificateSigningRequest.certificates.k8s.io "sam" is invalid: status.conditions: '
        'Forbidden: updates may not remove a condition of type "Approved"')


def test_field_selector_and_discovery(secure: ServerThread) -> None:
    cert = admin(secure)
    for name, signer in (("one", "example.com/a"), ("two", "example.com/b")):
        _, request = key_and_request(name)
        assert https(secure, "POST", CSRS, cert=cert,
                     body=csr_body(name, request, signer=signer)).status == 201
    reply = https(secure, "GET", f"{CSRS}?fieldSelector=spec.signerName%3Dexample.com/b",
                  cert=cert)
    assert [i["metadata"]["name"] for i in json.loads(reply.body)["items"]] == ["two"]
    reply = https(secure, "GET", f"{CSRS}?fieldSelector=spec.username%3Dx", cert=cert)
    assert reply.status == 400
    assert json.loads(reply.body)["message"] == "field label not supported: spec.username"


# --- who may approve --------------------------------------------------------------------------

@needs_kubectl
def test_approving_needs_approve_on_the_signer(secure: ServerThread) -> None:
    _, request = key_and_request("zed")
    assert https(secure, "POST", CSRS, cert=admin(secure),
                 body=csr_body("zed", request)).status == 201
    carol, dave = issue(secure, "carol"), issue(secure, "dave")
    refused = run(carol, "certificate", "approve", "zed")
    assert refused.returncode != 0
    assert ('certificatesigningrequests.certificates.k8s.io "zed" is forbidden: user not '
            'permitted to approve requests with signerName '
            '"kubernetes.io/kube-apiserver-client"') in refused.stderr
    assert condition_types(get_csr(secure, "zed")) == []
    assert ok(dave, "certificate", "approve", "zed") == (
        "certificatesigningrequest.certificates.k8s.io/zed approved\n")
    assert issued(wait_for(secure, "zed", issued))


# --- no signing key, and the cleaner ----------------------------------------------------------

def test_with_a_users_client_ca_nothing_is_signed(make_server: Callable[..., ServerThread],
                                                  tmp_path: Path) -> None:
    ca = tmp_path / "their-ca.crt"
    ca.write_bytes(kubewire_ca_pem())
    server = make_server(client_ca_file=ca)  # plain HTTP, open: everyone is admin
    _, request = key_and_request("nobody")
    body = csr_body("nobody", request)
    base = server.url + CSRS
    assert httpx.post(base, json=body).status_code == 201
    csr = httpx.get(f"{base}/nobody").json()
    csr["status"] = {"conditions": [{"type": "Approved", "status": "True"}]}
    assert httpx.put(f"{base}/nobody/approval", json=csr).status_code == 200
    time.sleep(0.5)
    after = httpx.get(f"{base}/nobody").json()
    assert condition_types(after) == ["Approved"] and not issued(after)


def test_a_client_ca_bundle_holding_the_servers_ca_keeps_the_signer(
        make_server: Callable[..., ServerThread], tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    made = ensure_server_pki(data_dir / "pki")  # the CA the server will find and sign with
    bundle = tmp_path / "bundle.crt"
    bundle.write_bytes(kubewire_ca_pem() + made.ca_cert.read_bytes())
    policy = tmp_path / "policy.jsonl"
    policy.write_text(CSR_POLICY + "\n")
    server = make_server(data_dir=data_dir, insecure_http=False, client_ca_file=bundle,
                         authorization_policy_file=policy)
    cert = admin(server)
    key, request = key_and_request("pat", "viewers")
    assert https(server, "POST", CSRS, cert=cert, body=csr_body("pat", request)).status == 201
    csr = get_csr(server, "pat")
    csr["status"] = {"conditions": [{"type": "Approved", "status": "True"}]}
    assert https(server, "PUT", f"{CSRS}/pat/approval", cert=cert, body=csr).status == 200
    pem = base64.b64decode(wait_for(server, "pat", issued)["status"]["certificate"])
    (tmp_path / "pat.crt").write_bytes(pem)
    (tmp_path / "pat.key").write_bytes(key)
    reply = https(server, "GET", "/api/v1/namespaces/a/secrets",
                  cert=(tmp_path / "pat.crt", tmp_path / "pat.key"))
    assert reply.status == 403, reply.body
    assert json.loads(reply.body)["message"].startswith('secrets is forbidden: User "pat"')


def kubewire_ca_pem() -> bytes:
    return make_ca("someone-elses-ca").cert


def test_the_cleaner_deletes_denied_requests_after_an_hour() -> None:
    _, request = key_and_request("old")
    with kubewire.Server(manual_clock=True) as server:
        base = server.url + CSRS
        for name in ("denied", "pending"):
            assert httpx.post(base, json=csr_body(name, request)).status_code == 201
        csr = httpx.get(f"{base}/denied").json()
        csr["status"] = {"conditions": [{"type": "Denied", "status": "True"}]}
        assert httpx.put(f"{base}/denied/approval", json=csr).status_code == 200
        time.sleep(0.2)  # the first sweep (at start) is over; the next in an hour
        assert httpx.get(f"{base}/denied").status_code == 200
        # an hour on (and the fraction of a second the condition's time lost): denied over
        # an hour ago, gone; pending for an hour, kept (a day)
        assert server.advance_clock(3600) == 1
        deadline = time.monotonic() + 5
        while httpx.get(f"{base}/denied").status_code != 404 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert httpx.get(f"{base}/denied").status_code == 404
        assert httpx.get(f"{base}/pending").status_code == 200


# --- under RBAC -------------------------------------------------------------------------------

def _grant(server: ServerThread, name: str, user: str, rules: list[dict[str, Any]]) -> None:
    group = "rbac.authorization.k8s.io"
    for path, body in (
            (f"/apis/{group}/v1/clusterroles",
             {"metadata": {"name": name}, "rules": rules}),
            (f"/apis/{group}/v1/clusterrolebindings",
             {"metadata": {"name": name},
              "roleRef": {"apiGroup": group, "kind": "ClusterRole", "name": name},
              "subjects": [{"kind": "User", "name": user, "apiGroup": group}]})):
        reply = https(server, "POST", path, cert=admin(server), body=body)
        assert reply.status == 201, reply.body


@needs_kubectl
def test_under_rbac_approving_needs_approve_on_the_signer_name_or_its_domain(
        make_server: Callable[..., ServerThread]) -> None:
    server = make_server(insecure_http=False, authorization_mode="RBAC")
    for name in ("one", "two"):
        _, request = key_and_request(name)
        assert https(server, "POST", CSRS, cert=admin(server),
                     body=csr_body(name, request)).status == 201
    amy = issue(server, "amy")
    _grant(server, "csr-approval", "amy", [
        {"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"],
         "verbs": ["get"]},
        {"apiGroups": ["certificates.k8s.io"],
         "resources": ["certificatesigningrequests/approval"], "verbs": ["update"]}])
    refused = run(amy, "certificate", "approve", "one")
    assert refused.returncode != 0
    assert ('certificatesigningrequests.certificates.k8s.io "one" is forbidden: user not '
            'permitted to approve requests with signerName '
            '"kubernetes.io/kube-apiserver-client"') in refused.stderr
    # approve on the signer's name
    _grant(server, "approve-client", "amy", [
        {"apiGroups": ["certificates.k8s.io"], "resources": ["signers"], "verbs": ["approve"],
         "resourceNames": [CLIENT_SIGNER]}])
    assert ok(amy, "certificate", "approve", "one") == (
        "certificatesigningrequest.certificates.k8s.io/one approved\n")
    assert issued(wait_for(server, "one", issued))
    # or on its domain's wildcard, for another user
    bob = issue(server, "bo")
    _grant(server, "csr-approval-bo", "bo", [
        {"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"],
         "verbs": ["get"]},
        {"apiGroups": ["certificates.k8s.io"],
         "resources": ["certificatesigningrequests/approval"], "verbs": ["update"]},
        {"apiGroups": ["certificates.k8s.io"], "resources": ["signers"], "verbs": ["approve"],
         "resourceNames": ["kubernetes.io/*"]}])
    assert ok(bob, "certificate", "approve", "two") == (
        "certificatesigningrequest.certificates.k8s.io/two approved\n")
