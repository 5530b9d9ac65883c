"""Reads: GET, LIST and WATCH, with kube's resourceVersion semantics.

``get_list`` answers gets and lists from the watch cache, or from the durable history for exact
older revisions and continue tokens; ``watch`` opens watch streams (chunked HTTP or WebSocket)
with bookmarks, initial events and selectors; ``pod_connect`` answers the pod subresources
kube proxies to a kubelet (log, exec, attach, portforward). It may import the wire,
``request``, ``tables``, ``context``, ``conversion`` (webhook-converted CRD versions), storage
and the shared core.
"""
