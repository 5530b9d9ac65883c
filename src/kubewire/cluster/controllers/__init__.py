"""kube-controller-manager's control loops, as clients of the API.

``garbage_collector`` (``garbage-collector-controller``, kube's
``pkg/controller/garbagecollector``) keeps a graph of owners and dependents over every served
kind and deletes or orphans dependents as their owners' deletions ask; ``gc_decisions`` holds
its pure decisions. The registry of runnable components (name → factory) is
``kubewire.cluster.components``.
"""
