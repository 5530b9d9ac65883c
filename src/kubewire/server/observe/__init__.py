"""What the server bounds and records about every request: in-flight limits, metrics, audit.

``per_request`` wraps each handler (max-in-flight limits with kube's 429, request metrics);
``loop_slices`` has requests begin in slices of the loop's time, so I/O and timers are served
between the requests of a burst;
``metrics`` renders them in the Prometheus text format, with ``runtime_metrics`` (process and
Python); ``health`` answers ``/healthz``, ``/livez``, ``/readyz``; ``httplog`` logs each request
and gives it its ``Audit-Id``; ``audit`` decides audit levels from a kube audit policy,
``audit_log`` writes kube's audit events and ``log_rotation`` decides when its file rotates;
``request_record`` keeps the newest requests (who, verb, resource, body digest, code, fault)
for tests and ``/kubewire/requests``.
It may import the wire, ``request``, ``access``, ``context``, storage (for cache sizes) and the
shared core.
"""
