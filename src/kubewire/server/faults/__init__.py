"""Faults on demand and the admin endpoints for them and the clock.

``rules`` (pure) parses fault specs and makes the decisions: which request or watch stream a
fault matches, whether its rate fires (drawn with the server's rng), which Status an injected
error answers. ``faults`` holds the running server's active set (``APIServer.faults``, also
``ServerContext.faults``) with its typed Python API, and the hooks that act: on requests (from
``server/app.py``), on watch streams (through the watch cache's fault hooks in
``storage/cache.py``), on the store's health (``observe/health``). ``endpoint`` serves
``/kubewire/faults`` and ``/kubewire/clock`` (listed in ``server/admin/endpoints.HANDLERS``).

It may import the wire, ``request``, ``observe``, ``context``, storage and the shared core (the
clock is ``kubewire/clock.py``).
"""
