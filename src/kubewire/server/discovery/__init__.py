"""What the server serves, described: discovery documents and OpenAPI, pure functions of the
registry.

``documents`` builds legacy and aggregated discovery; ``openapi`` serves the OpenAPI v3
documents and ``openapi_v2`` the Swagger 2.0 one (JSON, or gnostic protobuf through
``openapi_v2_proto``), built from the schema facts. Kinds added at run time (custom resources)
show up here because they are registry entries; the OpenAPI of one served from a CRD is built
from the CRD by ``server.apiextensions.crd.openapi_docs``. It imports the shared core
(``resources``, ``schema``) and ``server.apiextensions``.
"""
