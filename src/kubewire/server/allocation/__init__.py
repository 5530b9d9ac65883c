"""Cluster IPs and node ports for Services, allocated as kube's service registry does.

``rules`` holds the pure decisions (ranges, which address or port is free, kube's errors);
``state`` keeps what is allocated, rebuilt from the store and updated from its change feed.
It may import storage and the shared core.
"""
