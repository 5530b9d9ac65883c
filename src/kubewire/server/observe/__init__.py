"""What the server bounds and records about every request: in-flight limits, metrics, audit.

``per_request`` wraps each handler (max-in-flight limits with kube's 429, request metrics);
``metrics`` renders them in the Prometheus text format; ``audit`` decides audit levels from a
kube audit policy and ``audit_log`` writes kube's audit events. It may import the wire,
``request``, ``access``, ``context``, storage (for cache sizes) and the shared core.
"""
