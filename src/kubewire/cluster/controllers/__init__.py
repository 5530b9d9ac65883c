"""kube-controller-manager's control loops, as clients of the API.

``replicaset`` (``replicaset-controller``) and ``deployment`` (``deployment-controller``) with
their pure decisions in ``replica_rules`` and ``rollout``; ``statefulset``
(``statefulset-controller``) and ``daemonset`` (``daemonset-controller``) with theirs in
``statefulset_rules`` and ``daemonset_rules``, sharing ``history`` (ControllerRevisions),
``adoption`` (claiming pods) and ``pod_state`` (Ready, available).
"""
