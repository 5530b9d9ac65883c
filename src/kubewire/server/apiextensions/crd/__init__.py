"""The CustomResourceDefinition object: defaults, strategy, validation, the naming and
establishing decisions, the registry entries and OpenAPI documents a CRD serves, its versions'
storage codec and ConversionReview, and the Gateway API CRDs as package data.

Part of ``server.apiextensions`` (pure; see its docstring for what it may import).
"""
