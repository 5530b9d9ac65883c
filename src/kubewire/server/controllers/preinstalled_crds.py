"""The CustomResourceDefinitions a kubewire server comes with: the Gateway API v1.2.1 standard
channel (GatewayClass, Gateway, GRPCRoute, HTTPRoute, ReferenceGrant; the package data of
``server.apiextensions.crd.gateway_crds``), as a cluster with that channel installed has them.

They are ordinary CRDs. At start, each one the store does not hold is created through the
ordinary create path as ``kube-apiserver`` (the upstream object as ``kubectl apply -f`` sends
it, annotations included); the CRD controller (``crds``) then names, establishes and serves it
like any CRD a user creates, and ``settled`` waits until it is served, so a server whose
``start()`` returned serves Gateways.

The rule for a user's changes: the store's CRD wins. A CRD that exists at start, whatever it
holds (a user's edit, another bundle version), is left alone; a user who deletes or replaces
one gets what a cluster gives them, and kubewire does not re-create it behind their back while
it runs. A deleted one is created again at the next start of a server on that data directory
(as if the install were re-applied), so delete a pre-installed CRD for the rest of the run
only. Applying upstream's own files over them (``kubectl apply -f standard-install.yaml``) is
an update that changes nothing but the client's annotation and managed fields.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec

from kubewire.server.apiextensions.crd import crd_strategy
from kubewire.server.apiextensions.crd.crd_internal import find_condition, is_condition_true
from kubewire.server.apiextensions.crd.gateway_crds import gateway_crds
from kubewire.server.context import ServerContext
from kubewire.server.request.options import WriteOptions
from kubewire.server.request.routes import Route
from kubewire.server.writes.create_update import create_object
from kubewire.status import StatusError
from kubewire.storage.base import StorageError

log = logging.getLogger(__name__)

API_SERVER = WriteOptions(field_manager="kube-apiserver")

_decode = msgspec.json.Decoder(dict[str, Any]).decode


class PreinstalledCRDs:
    """``await install()`` once the caches are filled and the CRD controller listens to the feed;
    ``served`` says whether every CRD it created is established and served (or gone again)."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx
        crd_kind = ctx.registry.by_id(crd_strategy.CRD_ID)
        assert crd_kind is not None
        self.kind = crd_kind
        self.created: list[str] = []  # the names this start created
        self.done = False
        # name -> the revision at which that CRD was last seen established and served: the
        # check (polled while settling) decodes a CRD, hundreds of KB, only when it changed
        self._served_at: dict[str, int] = {}

    async def install(self) -> None:
        """Create each pre-installed CRD the store does not hold (a failure is logged: the
        server serves without it rather than not at all)."""
        cache = self.ctx.caches.for_resource(self.kind)
        route = Route(self.kind, "", "", "", False)
        try:
            for crd in gateway_crds():
                name = crd["metadata"]["name"]
                assert isinstance(name, str)
                if cache.get(self.kind.storage_key("", name)) is not None:
                    continue
                try:
                    await create_object(self.ctx, route, crd, API_SERVER)
                except StatusError as err:
                    if err.code != 409:  # made meanwhile (a client was quicker): theirs stands
                        log.error("pre-installing CRD %s failed: %s", name, err)
                    continue
                except StorageError as err:
                    log.error("pre-installing CRD %s failed: %s", name, err)
                    continue
                self.created.append(name)
        finally:
            self.done = True

    @property
    def served(self) -> bool:
        """Every CRD this start created reads ``Established`` and is served by the registry,
        or never will be (its names conflict with a CRD of the user's), or is no longer
        stored."""
        if not self.done:
            return False
        serving = {res.crd_name for res in self.ctx.registry.custom()}
        cache = self.ctx.caches.for_resource(self.kind)
        for name in self.created:
            found = cache.get(self.kind.storage_key("", name))
            if found is None:
                continue
            if name in serving and self._served_at.get(name) == found.revision:
                continue
            crd = _decode(found.value)
            names = find_condition(crd, "NamesAccepted") or {}
            if names.get("status") == "False":
                continue
            if name not in serving or not is_condition_true(crd, "Established"):
                return False
            self._served_at[name] = found.revision
        return True
