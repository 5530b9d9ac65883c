"""What every handler shares: configuration, the store, the watch caches, clock and chance."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from kubewire.clock import Clock, ManualClock, RealClock
from kubewire.resources import REGISTRY, Registry, Resource
from kubewire.server.allocation.rules import DEFAULT_NODE_PORT_RANGE, DEFAULT_SERVICE_CIDR
from kubewire.server.allocation.state import REPAIR_INTERVAL_S, AllocationState
from kubewire.server.wire.http_messages import Limits
from kubewire.status import not_found
from kubewire.storage.base import Retention, Store
from kubewire.storage.cache import DEFAULT_BOOKMARK_INTERVAL_S, DEFAULT_RING_CAPACITY, WatchCaches
from kubewire.storage.cached import CachedObject
from kubewire.storage.versioned_store import VersionedStore

MIN_REQUEST_TIMEOUT_S = 1800  # kube --min-request-timeout: watch timeout default in [1x, 2x)
DATABASE_NAME = "kubewire.db"  # the store, in the data dir
# A cluster's namespace controller starts on a deleted namespace after its informer, queue and
# discovery have run: about a second, long enough for ``kubectl delete -f`` to delete the rest.
DEFAULT_NAMESPACE_DELETION_DELAY_S = 1.0


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Everything ``kubewire serve`` can be told."""

    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 6443
    ring_capacity: int = DEFAULT_RING_CAPACITY
    bookmark_interval_s: float = DEFAULT_BOOKMARK_INTERVAL_S
    min_request_timeout_s: float = MIN_REQUEST_TIMEOUT_S
    retention: Retention = field(default_factory=Retention)
    durability: Literal["full", "normal"] = "full"
    # "sqlite": DATA_DIR/kubewire.db; "memory": no database file, nothing kept after a stop
    # (the data dir still holds the kubeconfig and the PKI); "etcd": the etcd cluster at
    # ``etcd_servers`` (kube-apiserver's --etcd-* flags), shared with any other replicas
    storage: Literal["sqlite", "memory", "etcd"] = "sqlite"
    etcd_servers: tuple[str, ...] = ()
    etcd_prefix: str = "/registry"
    etcd_cafile: Path | None = None
    etcd_certfile: Path | None = None
    etcd_keyfile: Path | None = None
    # how often a replica tries kube's compaction transaction (--etcd-compaction-interval);
    # what it compacts is what ``retention`` no longer keeps
    etcd_compaction_interval_s: float = 300.0
    limits: Limits = field(default_factory=Limits)
    pod_grace_cap_s: float | None = None  # finish graceful pod deletions sooner (tests)
    # how long the namespace controller leaves a Terminating namespace before emptying it
    namespace_deletion_delay_s: float = DEFAULT_NAMESPACE_DELETION_DELAY_S
    list_continue_ttl_s: float | None = None  # None: tokens live as long as the log retains
    # Access: HTTPS with certificates made in DIR/pki unless the user brings a pair.
    insecure_http: bool = False
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    tls_sans: tuple[str, ...] = ()
    client_ca_file: Path | None = None
    token_auth_file: Path | None = None
    # --anonymous-auth: a request without credentials is system:anonymous (in
    # system:unauthenticated) on every path and authorized as any other (kube's default is
    # true); off, only the public-info paths are served without credentials, the rest is 401
    anonymous_auth: bool = False
    # --service-account-issuer: the ``iss`` of the tokens the server issues and accepts (and,
    # kube's --api-audiences default, their audience); kubeadm's value
    service_account_issuer: str = "https://kubernetes.default.svc.cluster.local"
    # The other --service-account-issuer values (kube allows it repeated: the first issues,
    # all are accepted), --service-account-key-file (keys that verify tokens; default the
    # signing key), --service-account-signing-key-file (default DIR/pki/sa.key),
    # --api-audiences (default the issuer), --service-account-jwks-uri (default
    # https://<address>/openid/v1/jwks), --service-account-max-token-expiration (0: no cap)
    service_account_other_issuers: tuple[str, ...] = ()
    service_account_key_files: tuple[Path, ...] = ()
    service_account_signing_key_file: Path | None = None
    api_audiences: tuple[str, ...] = ()
    service_account_jwks_uri: str = ""
    service_account_max_token_expiration_s: int = 0
    # --authorization-mode, kube's comma-separated list (access/authorizers.py); "": ABAC
    # with a policy file, else AlwaysAllow
    authorization_mode: str = ""
    authorization_policy_file: Path | None = None
    audit_log_path: str | None = None  # a file, or "-" for standard output
    audit_policy_file: Path | None = None
    # The audit log's rotation (kube's --audit-log-maxsize MB, 0: 100; -maxbackup; -maxage
    # days): kubewire keeps 10 backups by default where kube keeps all, so the log is bounded.
    audit_log_maxsize_mb: int = 0
    audit_log_maxbackup: int = 10
    audit_log_maxage_days: int = 0
    # kubeadm's default; kube-apiserver's own built-in default is 10.0.0.0/24
    service_cluster_ip_range: str = DEFAULT_SERVICE_CIDR
    service_node_port_range: tuple[int, int] = DEFAULT_NODE_PORT_RANGE
    # how often the stored IP and port ranges are reconciled with the Services (kube's repair
    # controllers: every 3 minutes; 0: only at start)
    service_repair_interval_s: float = REPAIR_INTERVAL_S
    # Keep the ranges in the store as kube does (``/registry/ranges/serviceips`` ...: a bitmap
    # written with a compare-and-swap per allocation), which replicas need. None: only on a
    # shared store (etcd, SQLite workers); a store one process owns needs none: there the
    # bitmap of the
    # default /12 (128 KiB a write, each kept in the change log) would cost more than it gives.
    service_ranges_stored: bool | None = None
    # The request record's ring (observe/request_record): the newest entries kept; 0 records
    # nothing.
    request_record_capacity: int = 10_000
    # A clock that stands still until advanced (``ctx.clock.advance``, ``/kubewire/clock``):
    # ``ctx.now()`` and the deletion timers run on it (kubewire/clock.py)
    manual_clock: bool = False
    # kube-controller-manager's --controllers list ("*", "name", "-name"; controllers/selection):
    # which of kubewire's controllers run. The API server's own (CRDs, the ``kubernetes``
    # Service) always do.
    controllers: tuple[str, ...] = ("*",)
    # kube-controller-manager's --cluster-signing-duration: the longest certificate the CSR
    # signer issues (controllers/csr_signing); kube's default, a year
    cluster_signing_duration_s: float = 365 * 24 * 3600.0
    # kube-controller-manager's --leader-elect flags (controllers/leadership): when on, the
    # controller-manager part of the in-server controllers runs only while this server holds
    # the Lease ``leader_elect_resource_namespace/leader_elect_resource_name``. Seconds.
    # None: on where servers share the store (etcd, SQLite workers), off where one owns it.
    leader_elect: bool | None = None
    # kube-apiserver's --enable-garbage-collector: DELETE's propagationPolicy adds the GC
    # finalizers. None: when this server runs the garbage collector (``controllers``).
    enable_garbage_collector: bool | None = None
    # whether the cluster's components (kubewire.cluster: kube-controller-manager's workload
    # loops, the garbage collector, the scheduler, simulated kubelets) run, those of them
    # ``controllers`` selects: ``kubewire serve`` sets it (a cluster that runs, as kind);
    # embedded servers and kubewire.Server leave it off unless asked (``cluster=True``)
    cluster: bool = False
    # whether metrics.k8s.io (PodMetrics, NodeMetrics of the simulated usage) is served, as by
    # metrics-server on kind: None follows ``cluster`` (kube without metrics-server has no such
    # group); True serves it to a server whose pods a test's stand-in kubelet runs
    metrics_api: bool | None = None
    # kube-controller-manager's --horizontal-pod-autoscaler-sync-period, -tolerance and
    # -downscale-stabilization, for the HPA controller among the components
    hpa_sync_period_s: float = 15.0
    hpa_tolerance: float = 0.1
    hpa_downscale_stabilization_s: float = 300.0
    # ``serve --nodes``: simulated nodes (kubewire.cluster.nodes) the server runs
    nodes: int = 1
    # ``serve --node-*``: the simulated nodes' names, size, labels and lifecycle
    # (kubewire.cluster.nodes.FleetOptions' fields; None: its default). ``node_naming``:
    # "index" or "kind"; ``node_stages_file``: kwok Stage YAML for Pods
    node_name_prefix: str | None = None
    node_naming: str | None = None
    node_cpu: str | None = None
    node_memory: str | None = None
    node_pods: str | None = None
    node_ephemeral_storage: str | None = None
    node_labels: Mapping[str, str] | None = None
    node_pod_cidr: str | None = None
    node_stages_file: Path | None = None
    # where the cluster components (kubewire.cluster) run: "thread" (an event loop of their
    # own) or "loop" (the server's)
    components_loop: str = "thread"
    leader_elect_lease_duration_s: float = 15.0
    leader_elect_renew_deadline_s: float = 10.0
    leader_elect_retry_period_s: float = 2.0
    leader_elect_resource_name: str = "kube-controller-manager"
    leader_elect_resource_namespace: str = "kube-system"
    # One of ``serve --workers N``'s processes (server/daemon/workers): it listens with
    # SO_REUSEPORT beside the others, and leaves ``DIR/kubeconfig`` to the parent, which
    # wrote it once for all of them.
    worker: bool = False
    # A worker on the SQLite store: the Unix socket of the parent's writer hub
    # (storage/sqlite/writer_hub), through which every worker writes.
    sqlite_hub: str | None = None


def shares_store(config: ServerConfig) -> bool:
    """Whether other server processes write to this server's store: replicas and workers on
    etcd, workers on SQLite's writer hub."""
    return config.storage == "etcd" or config.sqlite_hub is not None


def elects_leader(config: ServerConfig) -> bool:
    """Whether the controller-manager controllers wait for the Lease (``leader_elect``)."""
    if config.leader_elect is not None:
        return config.leader_elect
    return shares_store(config)


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class ServerContext:
    config: ServerConfig
    store: Store
    caches: WatchCaches
    registry: Registry = REGISTRY
    rng: random.Random = field(default_factory=random.Random)
    now: Callable[[], datetime] = utc_now
    clock: Clock = field(default_factory=RealClock)
    # the running server's ``Faults`` (server/faults), set by ``APIServer``; None elsewhere
    faults: Any = None
    # a garbage collector finishes what ``propagationPolicy`` asks (kube-apiserver's
    # --enable-garbage-collector; ``ServerConfig.enable_garbage_collector``): DELETE adds the
    # ``orphan``/``foregroundDeletion`` finalizers. Set by the controller manager.
    garbage_collection: bool = False
    # Admission plugins' listers of small cluster-scoped kinds (PriorityClasses,
    # IngressClasses, StorageClasses; ``writes/listers``): by kind id, a ``listers.Lister``
    # (each object's key -> (its revision, its decoded form), rebuilt when the kind's cache
    # changed), so a pod create decodes a class only when it changed. Holds only what the cache
    # holds; the decoded objects are read, never changed.
    listers: dict[str, Any] = field(default_factory=dict)
    _allocations: AllocationState = field(init=False)

    def __post_init__(self) -> None:
        if self.config.manual_clock and not self.clock.manual:
            self.clock = ManualClock()
        if self.now is utc_now:  # one clock: ``now()`` reads the one timers run on
            self.now = self.clock.now
        # Writes in any served version of a kind are stored in its stored version.
        versioned = self.store = VersionedStore(self.store, self.registry)
        # Built here so a bad range fails at start; bound to the store by ``start_allocations``.
        self._allocations = AllocationState(self.config.service_cluster_ip_range,
                                            self.config.service_node_port_range, self.rng,
                                            self.config.service_repair_interval_s,
                                            persist=self.config.service_ranges_stored
                                            if self.config.service_ranges_stored is not None
                                            else shares_store(self.config))
        # what a committed write of this server lets go of goes back to the ranges
        versioned.after_write = self._allocations.after_write

    def live(self, resource: Resource, namespace: str, name: str) -> CachedObject:
        """The object the watch cache holds now, or kube's 404 (``resource "name" not found``)."""
        found = self.caches.for_resource(resource).get(resource.storage_key(namespace, name))
        if found is None:
            raise not_found(resource.group, resource.plural, name)
        return found

    async def caught_up(self, revision: int = 0) -> None:
        """Wait until the caches hold ``revision`` (0: the store's consistent revision, so all
        that any replica acknowledged). Write paths that miss an object in the cache, or whose
        compare failed on a stale one, look again after it, where kube reads etcd."""
        await self.caches.wait_for_revision(revision or await self.store.consistent_revision())

    async def was_stale(self, resource: Resource, key: str, revision: int) -> bool:
        """Whether the cached object at ``revision`` is not the store's latest (the caches
        caught up with the store first): kube's GuaranteedUpdate and Delete retry a failed
        precondition on fresh data when they checked it on cached data."""
        await self.caught_up()
        found = self.caches.for_resource(resource).get(key)
        return found is None or found.revision != revision

    async def live_now(self, resource: Resource, namespace: str, name: str) -> CachedObject:
        """``live``, with a miss looked at again once the caches caught up with the store
        (another replica may have just made it)."""
        key = resource.storage_key(namespace, name)
        found = self.caches.for_resource(resource).get(key)
        if found is None:
            await self.caught_up()
            found = self.caches.for_resource(resource).get(key)
        if found is None:
            raise not_found(resource.group, resource.plural, name)
        return found

    def serve(self, registry: Registry) -> None:
        """Serve ``registry``'s kinds from now on (custom resources come and go with their
        CRDs): each request reads ``self.registry`` once, so it sees one set of kinds."""
        self.registry = registry
        self.caches.registry = registry
        assert isinstance(self.store, VersionedStore)
        self.store.registry = registry

    @property
    def allocations(self) -> AllocationState:
        """Service IPs and ports, kept in the store's range objects once started."""
        return self._allocations

    async def start_allocations(self) -> None:
        """Read (or make) the stored ranges and reconcile them with the cached Services."""
        await self._allocations.start(self.store, self.caches, self.registry)


class HasContext(Protocol):
    """A running server as the admin endpoints see it (``APIServer``): its context."""

    @property
    def ctx(self) -> ServerContext: ...
