"""Structural schemas of custom resources: the parsed tree, CRD-time rules, request-time
validation (kube-openapi's messages), pruning, defaulting, list and map types, embedded
resources, formats, ratcheting.

Part of ``server.apiextensions`` (pure; see its docstring for what it may import).
"""
