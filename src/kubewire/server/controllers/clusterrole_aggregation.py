"""kube-controller-manager's ClusterRole aggregation controller (``clusterrole-aggregation``,
pkg/controller/clusterroleaggregation): a ClusterRole with ``aggregationRule`` holds the union
of the rules of the ClusterRoles its ``clusterRoleSelectors`` match, kept up to date.

Any change of any ClusterRole (the feed) marks every aggregated ClusterRole, as kube's event
handlers enqueue them all; a sync computes the rules (``rbac_policy.aggregated_rules``: per
selector, the matching roles in name order, each distinct rule once) and writes them when they
differ semantically from the stored ones (null and [] alike), applied server-side as
``clusterrole-aggregation-controller`` with ``force``, as kube's does. It is part of
kube-controller-manager: it starts and stops with that part (``--controllers``, leader
election).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from kubewire.selectors import SelectorError, label_selector_from_match
from kubewire.server.context import ServerContext
from kubewire.server.controllers.rbac_policy import aggregated_rules, same_rules
from kubewire.server.controllers.work_queue import FeedController, WorkQueue
from kubewire.server.request.routes import Route
from kubewire.server.writes.create_update import apply_object
from kubewire.server.writes.rbac_writes import REQUESTER
from kubewire.status import StatusError
from kubewire.storage.base import Change

log = logging.getLogger(__name__)

MANAGER = "clusterrole-aggregation-controller"
GROUP = "rbac.authorization.k8s.io"

_decode = msgspec.json.Decoder(dict[str, Any]).decode


class ClusterRoleAggregation(FeedController):
    """``start()``/``await stop()``, possibly again (leader election)."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx
        roles = ctx.registry.lookup(GROUP, "v1", "clusterroles")
        assert roles is not None
        self.roles = roles
        self.queue = WorkQueue("clusterrole-aggregation", self._sync)

    def mark_initial(self) -> None:
        self._mark_aggregated()

    def changed(self, changes: Sequence[Change]) -> None:
        prefix = self.roles.storage_prefix()
        if any(change.key.startswith(prefix) for change in changes):
            self._mark_aggregated()

    def _all(self) -> list[tuple[str, dict[str, Any], Mapping[str, str]]]:
        cache = self.ctx.caches.for_resource(self.roles)
        return [(item.name, _decode(item.value), item.labels)
                for item in cache.scan(self.roles.storage_prefix())]

    def _mark_aggregated(self) -> None:
        cache = self.ctx.caches.for_resource(self.roles)
        for item in cache.scan(self.roles.storage_prefix()):
            if b'"aggregationRule"' in item.value and \
                    _decode(item.value).get("aggregationRule") is not None:
                self.queue.mark(item.name)

    async def _sync(self, name: str) -> None:
        REQUESTER.set(None)  # the controller's own writes (its queue task's context only)
        found = self.ctx.caches.for_resource(self.roles).get(self.roles.storage_key("", name))
        if found is None:
            return
        role = _decode(found.value)
        rule = role.get("aggregationRule")
        if not isinstance(rule, dict):
            return
        everything = self._all()
        matches: list[list[tuple[str, Mapping[str, Any]]]] = []
        for raw in rule.get("clusterRoleSelectors") or []:
            try:
                selector = label_selector_from_match(raw if isinstance(raw, dict) else {})
            except SelectorError as err:  # kube's sync returns the error: nothing written
                log.warning("clusterrole %s: bad aggregation selector: %s", name, err)
                return
            matches.append([(n, obj) for n, obj, labels in everything
                            if selector.matches(labels)])
        rules = aggregated_rules(name, matches)
        if same_rules(rules, role.get("rules")):
            return

        # kube's applyClusterRoles: an apply configuration of the name and the rules (each list
        # only when it has values: With*() of nothing leaves it unset), forced
        applied: dict[str, Any] = {"apiVersion": self.roles.api_version,
                                   "kind": self.roles.kind, "metadata": {"name": name}}
        if rules:
            applied["rules"] = [_apply_rule(rule) for rule in rules]
        route = Route(self.roles, "", name, "", False)
        if self.ctx.caches.for_resource(self.roles).get(self.roles.storage_key("", name)) is None:
            return  # deleted meanwhile: nothing to aggregate (an apply would create it)
        try:
            await apply_object(self.ctx, route, applied, MANAGER, force=True)
        except StatusError as err:
            if err.code != 404:
                raise


def _apply_rule(rule: Mapping[str, Any]) -> dict[str, Any]:
    """``toApplyPolicyRules``: the rule's lists that have values, in the Go struct's order."""
    return {key: list(rule[key]) for key in ("verbs", "apiGroups", "resources", "resourceNames",
                                             "nonResourceURLs")
            if isinstance(rule.get(key), list) and rule[key]}
