"""kube-controller-manager's control loops, as clients of the API.

``replicaset`` (``replicaset-controller``, and on ReplicationControllers
``replicationcontroller-controller``, as kube's replication manager is the ReplicaSet controller
behind an adapter) and ``deployment`` (``deployment-controller``) with their pure decisions in
``replica_rules`` and ``rollout``; ``node_lifecycle``
(``node-lifecycle-controller``) and ``taint_eviction`` (``taint-eviction-controller``) with
theirs in ``node_lifecycle_decisions`` and ``taint_eviction_decisions`` (``options`` reads a
component's settings); ``statefulset`` (``statefulset-controller``) and ``daemonset``
(``daemonset-controller``) with theirs in ``statefulset_rules`` and ``daemonset_rules``,
sharing ``history`` (ControllerRevisions), ``adoption`` (claiming pods) and ``pod_state``
(Ready, available), and with the ReplicaSet and Deployment controllers ``owner_keys`` (which
owner a child's change wakes); ``endpointslice`` (``endpointslice-controller``), ``endpoints``
(``endpoints-controller``) and ``endpointslice_mirroring``
(``endpointslice-mirroring-controller``) with theirs in ``endpointslice_rules``,
``endpoints_rules`` and ``endpointslice_mirroring_rules``.
``garbage_collector`` (``garbage-collector-controller``, kube's
``pkg/controller/garbagecollector``) keeps a graph of owners and dependents over every served
kind and deletes or orphans dependents as their owners' deletions ask; ``gc_decisions`` holds
its pure decisions. The registry of runnable components (name → factory) is
``kubewire.cluster.components``.
``job`` (``job-controller``), ``cronjob`` (``cronjob-controller``) and ``ttl_after_finished``
(``ttl-after-finished-controller``), with the pure ``job_rules`` and ``cron_schedule``
(robfig/cron schedules, ``mostRecentScheduleTime``).
"""
