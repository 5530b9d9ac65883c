"""Who is asking and whether they may: authentication, impersonation, authorization, identities.

``authn`` (bearer tokens, client certificates, anonymous), ``service_accounts`` (bound
service-account tokens: signing and accepting them), ``client_certs`` (certificates
accepted at the handshake, verified per request), ``impersonation``, ``authorizers`` (the
``--authorization-mode`` chain), ``rbac_authorizer``, ``authz`` (ABAC files, decisions, the 403),
and ``chain``, which runs them in kube's filter order and sets up TLS. ``pki``, ``users`` and
``kubeconfig`` make the certificates, tokens and kubeconfigs of a data directory (``users`` also
lists and revokes them); ``user_bindings`` the RBAC bindings ``kubewire user add --role`` makes.
It may import the wire, ``request`` (routes, for authorization attributes), ``context`` and the
shared core. RBAC and service-account tokens belong here.
"""
