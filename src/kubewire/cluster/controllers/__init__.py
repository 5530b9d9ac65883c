"""kube-controller-manager's control loops, as clients of the API.

``replicaset`` (``replicaset-controller``) and ``deployment`` (``deployment-controller``) with
their pure decisions in ``replica_rules`` and ``rollout``.
"""
