"""A cluster that runs: kube-controller-manager's workload control loops, kube-scheduler and
simulated kubelets (in kwok's manner: no containers, objects move through the states a kubelet
reports), written as clients of the Kubernetes API.

Every component here talks to the API server only through ``kubewire.client`` (informers, work
queues, the verbs), as kube-controller-manager talks to kube-apiserver: it could run in another
process against any Kubernetes-compatible server, and ``kubewire serve`` runs them against
itself. ``runtime`` holds what components share (``ClusterContext``: the client, shared
informers, the event recorders, the clock; the ``Component`` protocol); ``controllers/``
kube-controller-manager's loops; ``scheduler/`` the scheduler; ``nodes/`` the simulated nodes and
kubelets; ``churn`` (pure) and ``churn_runner`` are ``kubewire simulate``, a client that
creates, scales, updates and deletes objects at a set rate. Decisions (rollout arithmetic,
scheduling filters and scores, pod status from a stage, the churn plan) are pure modules beside
the loops that apply them.

It may import the client and the shared core; never the server or storage.
"""
