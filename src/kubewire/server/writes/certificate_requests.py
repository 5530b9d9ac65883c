"""What the write path does for CertificateSigningRequests beyond their strategies: the
requester's identity on create, and kube's three certificate admission plugins.

- ``CertificateSubjectRestriction`` (plugin/pkg/admission/certificates/subjectrestriction):
  a create for ``kubernetes.io/kube-apiserver-client`` may not ask for ``system:masters``;
- ``CertificateApproval`` (…/certificates/approval): a write to ``/approval`` needs the
  ``approve`` verb on ``signers`` (certificates.k8s.io) named by the new object's signer, or
  its ``<domain>/*`` wildcard (``IsAuthorizedForSignerName``);
- ``CertificateSigning`` (…/certificates/signing): a ``/status`` write that changes
  ``status.certificate`` needs ``sign`` on the stored object's signer the same way.

Validating admission runs after the strategy's validation, so these come after a 422. The
authorization questions go to the server's authorizers through ``REQUESTER`` (the same hook
the RBAC escalation checks use): they decide as the authorization mode does (AlwaysAllow,
ABAC, RBAC). The server's own writes (no requester) are not checked, as kube's loopback client
is ``system:masters``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubewire.server.access.rbac_escalation import Check
from kubewire.server.request.routes import Route
from kubewire.server.writes import csr_strategy
from kubewire.server.writes.rbac_writes import REQUESTER
from kubewire.server.writes.validation.certificates import (
    CSR_ID,
    KUBE_APISERVER_CLIENT_SIGNER,
    decoded_bytes,
    parse_csr,
    subject_organizations,
)
from kubewire.status import Forbidden, forbidden_resource

GROUP = "certificates.k8s.io"
SYSTEM_MASTERS = "system:masters"


def is_csr(route: Route) -> bool:
    return route.resource.id == CSR_ID


def with_requester(route: Route, obj: dict[str, Any]) -> dict[str, Any]:
    """``PrepareForCreate`` of a CSR: the requester's name, uid, groups and extra in the spec
    (other kinds: ``obj``)."""
    if not is_csr(route):
        return obj
    requester = REQUESTER.get()
    if requester is None:
        return csr_strategy.prepare_create(obj, None)
    user = requester.user
    return csr_strategy.prepare_create(obj, user.name, user.uid, user.groups, user.extra)


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def _refused(name: str, why: str) -> Forbidden:
    return forbidden_resource(GROUP, "certificatesigningrequests", name, why)


def admit_create(route: Route, obj: Mapping[str, Any], name: str) -> None:
    """``CertificateSubjectRestriction`` on a create (of a CSR; nothing for other kinds)."""
    if not is_csr(route):
        return
    spec = _spec(obj)
    if spec.get("signerName") != KUBE_APISERVER_CLIENT_SIGNER:
        return
    try:
        csr = parse_csr(decoded_bytes(spec.get("request")))
    except ValueError as err:
        raise _refused(name, f"failed to parse CSR: {err}") from None
    if SYSTEM_MASTERS in subject_organizations(csr):
        raise _refused(name, f"use of {KUBE_APISERVER_CLIENT_SIGNER} signer with "
                             f"{SYSTEM_MASTERS} group is not allowed")


def admit_update(route: Route, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    """``CertificateApproval`` on ``/approval``, ``CertificateSigning`` on ``/status`` (of a
    CSR; nothing for other kinds)."""
    if not is_csr(route):
        return
    if route.subresource == "approval":
        signer = str(_spec(new).get("signerName") or "")
        if not authorized_for_signer("approve", signer):
            raise _refused(route.name, f"user not permitted to approve requests with "
                                       f"signerName {_quote(signer)}")
    elif route.subresource == "status":
        before = decoded_bytes((old.get("status") or {}).get("certificate"))
        after = decoded_bytes((new.get("status") or {}).get("certificate"))
        if before == after:
            return
        signer = str(_spec(old).get("signerName") or "")
        if not authorized_for_signer("sign", signer):
            raise _refused(route.name, f"user not permitted to sign requests with "
                                       f"signerName {_quote(signer)}")


def authorized_for_signer(verb: str, signer: str) -> bool:
    """``IsAuthorizedForSignerName``: ``verb`` on ``signers/<signer>``, else on
    ``signers/<domain>/*``. True for the server's own writes."""
    requester = REQUESTER.get()
    if requester is None:
        return True
    exact = Check(verb, "", GROUP, "signers", signer)
    if requester.authorize(exact):
        return True
    domain = signer.split("/")[0]
    return requester.authorize(Check(verb, "", GROUP, "signers", f"{domain}/*"))


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
