"""The service-account token controller (``serviceaccount-token-controller``, kube v1.32's
``pkg/controller/serviceaccount/tokens_controller.go``), run in the server.

A Secret of type ``kubernetes.io/service-account-token`` naming a ServiceAccount in its
``kubernetes.io/service-account.name`` annotation is filled in: ``token`` (a legacy token,
``access.service_accounts.legacy_claims`` signed with the service-account signing key, which
the server's authenticator accepts while the Secret holds it), ``ca.crt`` (the cluster CA, when
the server has one: as kube's ``--root-ca-file``), ``namespace``, and the
``kubernetes.io/service-account.uid`` annotation. A Secret whose account does not exist (or has
another uid than its annotation says) is deleted; when an account is deleted, its token Secrets
are (kube's ``deleteTokens``). Since kube 1.24 no Secret is made for an account by itself; a
user creates one and this fills it.

Why in the server and not in ``kubewire.cluster``: in kube it runs in kube-controller-manager
with ``--service-account-private-key-file``; kubewire's signing key is the server's own
(``pki/sa.key`` or ``--service-account-signing-key-file``), which a client of the API does not
hold, so it runs beside the other in-server controllers, on the commit feed, writing as
``kube-controller-manager`` through the ordinary update and delete paths.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Sequence
from typing import Any

import msgspec

from kubewire.resources import Resource
from kubewire.server.access.service_accounts import issuer_for, legacy_claims
from kubewire.server.context import ServerContext
from kubewire.server.controllers.work_queue import FeedController, WorkQueue
from kubewire.server.request.options import WriteOptions, parse_delete_options
from kubewire.server.request.routes import Route
from kubewire.server.writes.create_update import guaranteed_update
from kubewire.server.writes.deletes import delete_object
from kubewire.status import StatusError
from kubewire.storage.base import Change, ChangeType

log = logging.getLogger(__name__)
TOKEN_TYPE = "kubernetes.io/service-account-token"
NAME_ANNOTATION = "kubernetes.io/service-account.name"
UID_ANNOTATION = "kubernetes.io/service-account.uid"
CONTROLLER_MANAGER = WriteOptions(field_manager="kube-controller-manager")
SECRET = "secret:"
ACCOUNT = "account:"

_decode = msgspec.json.Decoder(dict[str, Any]).decode


def _b64(value: bytes | str) -> str:
    raw = value.encode() if isinstance(value, str) else value
    return base64.b64encode(raw).decode()


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def references(secret: dict[str, Any], account: dict[str, Any]) -> bool:
    """``IsServiceAccountToken``: the type, the account's name and (when set) uid."""
    notes = _meta(secret).get("annotations") or {}
    if secret.get("type") != TOKEN_TYPE or notes.get(NAME_ANNOTATION) != _meta(account).get(
            "name"):
        return False
    uid = notes.get(UID_ANNOTATION)
    return not uid or uid == _meta(account).get("uid")


class ServiceAccountTokens(FeedController):
    """Fills token Secrets and deletes those whose account is gone."""

    def __init__(self, ctx: ServerContext, root_ca: bytes | None) -> None:
        self.ctx = ctx
        self.root_ca = root_ca
        secrets = ctx.registry.lookup("", "v1", "secrets")
        accounts = ctx.registry.lookup("", "v1", "serviceaccounts")
        assert secrets is not None and accounts is not None
        self.secrets: Resource = secrets
        self.accounts: Resource = accounts
        self.queue = WorkQueue("serviceaccount-tokens", self._sync)

    def mark_initial(self) -> None:
        for item in self.ctx.caches.for_resource(self.secrets).scan(
                self.secrets.storage_prefix()):
            if b'"kubernetes.io/service-account-token"' in item.value:
                namespace = _meta(_decode(item.value)).get("namespace", "")
                self.queue.mark(f"{SECRET}{namespace}/{item.name}")

    def changed(self, changes: Sequence[Change]) -> None:
        secret_prefix = self.secrets.storage_prefix()
        account_prefix = self.accounts.storage_prefix()
        for change in changes:
            if change.key.startswith(secret_prefix):
                if change.type != ChangeType.DELETED:
                    self.queue.mark(SECRET + change.key[len(secret_prefix):])
            elif change.key.startswith(account_prefix):
                self.queue.mark(ACCOUNT + change.key[len(account_prefix):])

    def _current(self, resource: Resource, namespace: str, name: str) -> dict[str, Any] | None:
        found = self.ctx.caches.for_resource(resource).get(resource.storage_key(namespace, name))
        return None if found is None else _decode(found.value)

    def _secrets_of(self, namespace: str) -> list[dict[str, Any]]:
        prefix = self.secrets.storage_prefix() + namespace + "/"
        return [_decode(item.value) for item in
                self.ctx.caches.for_resource(self.secrets).scan(prefix)
                if b'"kubernetes.io/service-account-token"' in item.value]

    async def _sync(self, key: str) -> None:
        namespace, _, name = key.partition(":")[2].partition("/")
        if key.startswith(SECRET):
            await self._sync_secret(namespace, name)
            return
        account = self._current(self.accounts, namespace, name)
        for secret in self._secrets_of(namespace):
            notes = _meta(secret).get("annotations") or {}
            if notes.get(NAME_ANNOTATION) != name:
                continue
            if account is None:
                await self._delete(secret)  # ``deleteTokens``
            else:
                await self._sync_secret(namespace, str(_meta(secret).get("name", "")))

    async def _sync_secret(self, namespace: str, name: str) -> None:
        """``syncSecret``."""
        secret = self._current(self.secrets, namespace, name)
        if secret is None or secret.get("type") != TOKEN_TYPE \
                or _meta(secret).get("deletionTimestamp"):
            return
        notes = _meta(secret).get("annotations") or {}
        account = self._current(self.accounts, namespace, str(notes.get(NAME_ANNOTATION) or ""))
        if account is None or not references(secret, account) \
                or _meta(account).get("deletionTimestamp"):
            await self._delete(secret)
            return
        if not self._needs_filling(secret, namespace):
            return
        await self._fill(namespace, name, account)

    def _needs_filling(self, secret: dict[str, Any], namespace: str) -> bool:
        data = secret.get("data") or {}
        needs_ca = self.root_ca is not None and data.get("ca.crt") != _b64(self.root_ca)
        return needs_ca or not data.get("namespace") or not data.get("token")

    async def _fill(self, namespace: str, name: str, account: dict[str, Any]) -> None:
        """``generateTokenIfNeeded``: on the live Secret, what is missing."""
        account_name = str(_meta(account).get("name", ""))
        account_uid = str(_meta(account).get("uid", ""))

        def filled(secret: dict[str, Any]) -> dict[str, Any]:
            data = dict(secret.get("data") or {})
            if not self._needs_filling(secret, namespace):
                return secret
            if self.root_ca is not None:
                data["ca.crt"] = _b64(self.root_ca)
            if not data.get("namespace"):
                data["namespace"] = _b64(namespace)
            if not data.get("token"):
                issuer = issuer_for(self.ctx.config)
                data["token"] = _b64(issuer.sign(legacy_claims(namespace, account_name,
                                                               account_uid, name)))
            meta = secret.setdefault("metadata", {})
            meta["annotations"] = {**(meta.get("annotations") or {}),
                                   NAME_ANNOTATION: account_name, UID_ANNOTATION: account_uid}
            secret["data"] = data
            return secret

        try:
            await guaranteed_update(self.ctx, Route(self.secrets, namespace, name, "", False),
                                    filled, CONTROLLER_MANAGER)
        except StatusError as err:
            if err.code != 404:
                raise

    async def _delete(self, secret: dict[str, Any]) -> None:
        meta = _meta(secret)
        options = parse_delete_options(
            msgspec.json.encode({"preconditions": {"uid": meta.get("uid", "")}}), {})
        try:
            await delete_object(self.ctx, self.secrets, str(meta.get("namespace", "")),
                                str(meta.get("name", "")), options)
        except StatusError as err:
            if err.code not in (404, 409):
                raise
