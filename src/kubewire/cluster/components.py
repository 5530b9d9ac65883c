"""The registry of the cluster's components: name → how to make it, which part of a cluster
runs it, and as whom.

``COMPONENTS`` maps a name (kube's: ``garbage-collector-controller``, ``kube-scheduler``,
``kubelet``) to a ``Registration``: ``factory(ctx, options) -> Component``, the ``part`` that
runs it (``kube-controller-manager``: while that part holds its Lease; ``kube-scheduler``:
its own Lease; ``kubelet``: always) and the ``identity`` its client authenticates as: the
controller's service account for kube-controller-manager's loops, as kube-controller-manager
runs them with ``--use-service-account-credentials`` (kube's ``system:controller:<name>``
roles are bound to those accounts), ``system:kube-scheduler`` for the scheduler. ``kubewire
serve`` (``server/controllers/components``) and ``kubewire controller-manager`` run what
``--controllers`` selects from here. A new component is one ``Registration`` line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubewire.cluster.controllers.garbage_collector import NAME as GARBAGE_COLLECTOR
from kubewire.cluster.controllers.garbage_collector import GarbageCollector
from kubewire.cluster.runtime import ClusterContext, Component

KUBE_CONTROLLER_MANAGER = "kube-controller-manager"
KUBE_SCHEDULER = "kube-scheduler"
KUBELET = "kubelet"


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a component's client is: a user name and its groups."""

    user: str
    groups: tuple[str, ...] = ()


def service_account(name: str, namespace: str = "kube-system") -> Identity:
    """A service account's user name and groups, as kube's token authenticator makes them."""
    return Identity(f"system:serviceaccount:{namespace}:{name}",
                    ("system:serviceaccounts", f"system:serviceaccounts:{namespace}"))


CONTROLLER_MANAGER_USER = Identity("system:kube-controller-manager")
SCHEDULER_USER = Identity("system:kube-scheduler")


@dataclass(frozen=True, slots=True)
class ComponentOptions:
    """What the command line passes to every factory (``--nodes``; more as components land)."""

    nodes: int = 1
    extra: dict[str, Any] = field(default_factory=dict)


Factory = Callable[[ClusterContext, ComponentOptions], Component]


@dataclass(frozen=True, slots=True)
class Registration:
    name: str
    factory: Factory
    part: str = KUBE_CONTROLLER_MANAGER
    identity: Identity = CONTROLLER_MANAGER_USER


def _garbage_collector(ctx: ClusterContext, _options: ComponentOptions) -> Component:
    return GarbageCollector(ctx)


COMPONENTS: dict[str, Registration] = {r.name: r for r in (
    Registration(GARBAGE_COLLECTOR, _garbage_collector,
                 identity=service_account("generic-garbage-collector")),
)}


def selected(enabled: Callable[[str], bool]) -> list[Registration]:
    """The registrations ``enabled(name)`` (a ``--controllers`` selection) turns on."""
    return [r for r in COMPONENTS.values() if enabled(r.name)]
