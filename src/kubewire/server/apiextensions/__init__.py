"""apiextensions: what a CustomResourceDefinition means, as pure decisions.

Holds apiextensions-apiserver v1.32's rules: the CRD object's defaults and validation, the naming
decisions behind its conditions, the structural schema of a custom resource (its CRD-time rules,
request-time validation with kube-openapi's messages, pruning, defaulting, list and map types),
CEL validation rules (compiled and evaluated with a PyPI CEL library, kube's libraries added), the
registry entries a CRD serves, and the OpenAPI documents built from its schema. Objects in, field
errors, entries and documents out: no I/O, so it imports only the shared core (and
``server.request`` for query facts). ``server.writes`` calls it for custom resources,
``server.controllers`` for the CRD's status and cleanup, ``server.discovery`` for its documents.
"""
