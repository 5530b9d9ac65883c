"""Validation of built-in kinds with kube-apiserver v1.32's exact messages: pure functions.

``meta`` validates object metadata; ``kinds`` maps each kind to its validator; the other
modules each hold one API group's rules (``pod``, ``service``, ``apps``, ``networking``, ...),
after kube's ``pkg/apis/<group>/validation``; the pod spec's are split over ``pod`` and its
``pod_*`` siblings. Objects in, ``FieldError`` lists out; it imports
only the shared core.
"""
