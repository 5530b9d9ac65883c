"""Control loops that finish what writes start, standing in for kube-controller-manager and
kubelets.

``deletion`` empties terminating namespaces and removes gracefully deleted pods when their
grace period ends. It may import ``writes``, ``request``, ``context``, storage and the shared
core. The workload controllers and simulated nodes join here.
"""
