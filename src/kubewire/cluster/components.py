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

from kubewire.cluster.controllers.cronjob import make_cronjob_controller
from kubewire.cluster.controllers.daemonset import make_daemonset_controller
from kubewire.cluster.controllers.deployment import make_deployment_controller
from kubewire.cluster.controllers.disruption import make_disruption_controller
from kubewire.cluster.controllers.endpoints import make_endpoints_controller
from kubewire.cluster.controllers.endpointslice import make_endpointslice_controller
from kubewire.cluster.controllers.endpointslice_mirroring import (
    make_endpointslice_mirroring_controller,
)
from kubewire.cluster.controllers.garbage_collector import NAME as GARBAGE_COLLECTOR
from kubewire.cluster.controllers.garbage_collector import GarbageCollector
from kubewire.cluster.controllers.hpa import make_hpa_controller
from kubewire.cluster.controllers.job import make_job_controller
from kubewire.cluster.controllers.node_lifecycle import make_node_lifecycle_controller
from kubewire.cluster.controllers.persistentvolume import make_persistentvolume_binder
from kubewire.cluster.controllers.provisioner import NAME as LOCAL_PATH_PROVISIONER
from kubewire.cluster.controllers.provisioner import make_local_path_provisioner
from kubewire.cluster.controllers.replicaset import (
    make_replicaset_controller,
    make_replication_controller_controller,
)
from kubewire.cluster.controllers.statefulset import make_statefulset_controller
from kubewire.cluster.controllers.taint_eviction import make_taint_eviction_controller
from kubewire.cluster.controllers.ttl_after_finished import make_ttl_after_finished_controller
from kubewire.cluster.nodes.fleet import make_fleet
from kubewire.cluster.nodes.node_status import FleetOptions
from kubewire.cluster.runtime import ClusterContext, Component
from kubewire.cluster.scheduler.scheduler import make_scheduler

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
# kube authorizes kubelets with its Node authorizer (each node its own objects), which kubewire
# does not have; RBAC's system:node role is bound to no one by default, as in kube. The
# simulated kubelets, which are the server's own, run in system:masters instead.
KUBELET_USER = Identity("system:node:kubewire-kubelets", ("system:nodes", "system:masters"))
# kind's local-path-provisioner is an addon whose manifest brings its own RBAC; kubewire's
# stand-in for it is the server's own and runs in system:masters, as the kubelets do.
PROVISIONER_USER = Identity("system:serviceaccount:local-path-storage:"
                            "local-path-provisioner-service-account",
                            ("system:serviceaccounts", "system:masters"))


@dataclass(frozen=True, slots=True)
class ComponentOptions:
    """What the command line passes to every factory (``--nodes``; more as components land)."""

    nodes: int = 1
    extra: dict[str, Any] = field(default_factory=dict)
    fleet: FleetOptions | None = None  # the simulated nodes' settings; None: ``nodes`` default


Factory = Callable[[ClusterContext, ComponentOptions], Component]


@dataclass(frozen=True, slots=True)
class Registration:
    name: str
    factory: Factory
    part: str = KUBE_CONTROLLER_MANAGER
    identity: Identity = CONTROLLER_MANAGER_USER
    # whether the options call for it at all (the kubelets: only with nodes to simulate)
    wanted: Callable[[ComponentOptions], bool] = lambda _options: True


def _garbage_collector(ctx: ClusterContext, _options: ComponentOptions) -> Component:
    return GarbageCollector(ctx)


def _kubelets(ctx: ClusterContext, options: ComponentOptions) -> Component:
    return make_fleet(ctx, options.fleet or FleetOptions(count=options.nodes))


def _controller(name: str, factory: Factory, account: str) -> Registration:
    """One of kube-controller-manager's loops, as its service account (kube's
    ``--use-service-account-credentials``; the ``system:controller:<account>`` roles)."""
    return Registration(name, factory, identity=service_account(account))


COMPONENTS: dict[str, Registration] = {r.name: r for r in (
    Registration(GARBAGE_COLLECTOR, _garbage_collector,
                 identity=service_account("generic-garbage-collector")),
    _controller("replicaset-controller", make_replicaset_controller, "replicaset-controller"),
    # kube's startReplicationController runs as the replication-controller service account
    _controller("replicationcontroller-controller", make_replication_controller_controller,
                "replication-controller"),
    _controller("deployment-controller", make_deployment_controller, "deployment-controller"),
    _controller("statefulset-controller", make_statefulset_controller,
                "statefulset-controller"),
    _controller("daemonset-controller", make_daemonset_controller, "daemon-set-controller"),
    _controller("endpointslice-controller", make_endpointslice_controller,
                "endpointslice-controller"),
    _controller("endpoints-controller", make_endpoints_controller, "endpoint-controller"),
    _controller("endpointslice-mirroring-controller", make_endpointslice_mirroring_controller,
                "endpointslicemirroring-controller"),
    _controller("job-controller", make_job_controller, "job-controller"),
    _controller("cronjob-controller", make_cronjob_controller, "cronjob-controller"),
    _controller("ttl-after-finished-controller", make_ttl_after_finished_controller,
                "ttl-after-finished-controller"),
    _controller("node-lifecycle-controller", make_node_lifecycle_controller, "node-controller"),
    _controller("taint-eviction-controller", make_taint_eviction_controller, "node-controller"),
    _controller("disruption-controller", make_disruption_controller, "disruption-controller"),
    _controller("persistentvolume-binder-controller", make_persistentvolume_binder,
                "persistent-volume-binder"),
    Registration(LOCAL_PATH_PROVISIONER, make_local_path_provisioner,
                 identity=PROVISIONER_USER),
    _controller("horizontal-pod-autoscaler-controller", make_hpa_controller,
                "horizontal-pod-autoscaler"),
    Registration(KUBE_SCHEDULER, make_scheduler, part=KUBE_SCHEDULER, identity=SCHEDULER_USER),
    Registration(KUBELET, _kubelets, part=KUBELET, identity=KUBELET_USER,
                 wanted=lambda options: options.nodes > 0),
)}


def selected(enabled: Callable[[str], bool],
             options: ComponentOptions | None = None) -> list[Registration]:
    """The registrations ``enabled(name)`` (a ``--controllers`` selection) turns on and
    ``options`` call for."""
    chosen = options or ComponentOptions()
    return [r for r in COMPONENTS.values() if enabled(r.name) and r.wanted(chosen)]
