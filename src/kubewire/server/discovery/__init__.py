"""What the server serves, described: discovery documents and OpenAPI, pure functions of the
registry.

``documents`` builds legacy and aggregated discovery; ``openapi`` serves the OpenAPI v3
documents and ``openapi_v2`` the Swagger 2.0 one (JSON, or gnostic protobuf through
``openapi_v2_proto``), all built from the schema facts. It imports only the shared core
(``resources``, ``schema``). Kinds added at run time (custom resources) show up here because
they are registry entries.
"""
