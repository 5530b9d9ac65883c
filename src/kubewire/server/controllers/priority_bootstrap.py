"""kube-apiserver's ``scheduling/bootstrap-system-priority-classes`` post-start hook
(pkg/registry/scheduling/rest/storage_scheduling.go ``AddSystemPriorityClasses``): at start,
each of kube's two system PriorityClasses that does not exist is created through the ordinary
write path (defaults, validation, admission) as ``kube-apiserver``. An existing one is left as
it is (kube does not reconcile them); a create another replica made first is fine.
"""

from __future__ import annotations

import logging

from kubewire.server.context import ServerContext
from kubewire.server.request.options import WriteOptions
from kubewire.server.request.routes import Route
from kubewire.server.writes.create_update import create_object
from kubewire.server.writes.priority_classes import system_classes
from kubewire.status import StatusError
from kubewire.storage.base import StorageError

log = logging.getLogger(__name__)

API_SERVER = WriteOptions(field_manager="kube-apiserver")


class PriorityClassBootstrap:
    """``await ensure()`` once the caches are filled; ``done`` when it has run."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx
        self.done = False

    async def ensure(self) -> None:
        try:
            resource = self.ctx.registry.lookup("scheduling.k8s.io", "v1", "priorityclasses")
            if resource is None:
                return
            cache = self.ctx.caches.for_resource(resource)
            for body in system_classes():
                name = body["metadata"]["name"]
                if cache.get(resource.storage_key("", name)) is not None:
                    continue
                try:
                    await create_object(self.ctx, Route(resource, "", "", "", False), body,
                                        API_SERVER)
                except StatusError as err:
                    if err.code != 409:  # another replica made it first: fine
                        log.error("creating PriorityClass %s failed: %s", name, err)
                except StorageError as err:
                    log.error("creating PriorityClass %s failed: %s", name, err)
        finally:
            self.done = True
