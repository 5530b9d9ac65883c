"""Table output for ``kubectl get``: Accept negotiation, columns, cells and Table bodies.

``output`` negotiates a Table and builds rows; ``columns`` holds each kind's printer columns,
with ``cells``, ``kind_cells``, ``pod_cells``, ``storage_cells`` (quotas, claims, volumes,
storage classes) and ``jsonpath`` computing their values as kube's
printers do; ``bodies`` encodes Tables for lists and ``sink`` for watch streams. It may import
the wire (media types), ``request`` (query values), storage (cached events) and the shared core.
"""
