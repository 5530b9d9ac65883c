"""Cluster IPs and node ports for Services, allocated as kube's service registry does.

``rules`` holds the pure decisions (ranges, which address or port is free, kube's errors);
``ranges`` kube's stored form of a range (``v1 RangeAllocation`` bitmaps) and the repair's
decisions (pure); ``state`` binds them to the store: each allocation a compare-and-swap on the
stored ranges, so replicas on one etcd agree, and kube's repair at start and every 3 minutes.
It may import storage and the shared core.
"""
