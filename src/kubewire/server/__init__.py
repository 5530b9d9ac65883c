"""The API server, in rooms that follow a request through it.

``wire`` reads HTTP/1.1 and WebSocket bytes into requests and writes responses and watch
streams back; ``request`` decodes what is asked (route, query options, continue tokens,
deadline); ``access`` decides who asks and whether they may; ``observe`` bounds, counts and
audits each request; then ``reads`` (get, list, watch, with ``tables`` for ``kubectl get``),
``writes`` (create, update, delete, validation, defaults, with ``patch`` for every patch type
and server-side apply, and ``allocation`` for cluster IPs and node ports) or ``discovery``
(discovery and OpenAPI documents) answer it, over ``kubewire.storage``. ``controllers`` are the
loops that finish what writes start. ``context`` is the state handlers share; ``app`` wires the
rooms together and is the only module that may import all of them. Which room may import which
is the table ``ROOMS`` in ``tests/unit/test_import_rules.py`` (and docs/architecture.md).
Admission (webhooks, CEL policies) and custom resources get rooms of their own beside
``writes`` and ``discovery``.
"""
