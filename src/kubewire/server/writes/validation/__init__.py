"""Validation of built-in kinds with kube-apiserver v1.32's exact messages: pure functions.

``meta`` validates object metadata; ``kinds`` maps each kind to its validator; the other
modules each hold one API group's rules (``service``, ``apps``, ``networking``, ``node``, ...),
after kube's ``pkg/apis/<group>/validation``, and the package ``pods`` holds the Pod's, split in
parts. Objects in, ``FieldError`` lists out; it imports only the shared core.
"""
