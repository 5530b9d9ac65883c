"""kubewire's own admin API, under ``/kubewire/``: what tests and operators ask of a running
server that kube-apiserver has no endpoint for (faults on demand, the request record, reset,
snapshots and trace imports).

``endpoints`` routes ``/kubewire/<name>`` to one handler per endpoint and holds the rule they
share: only members of ``system:masters`` (the admin kubeconfig, or everyone on an
``--insecure-http`` server) may call them; anyone else gets kube's 403 for a non-resource path.
Each endpoint's handler lives in the room that owns what it changes and is listed in
``endpoints.HANDLERS``. It may import the wire, ``request``, ``access``, ``observe``,
``context``, storage and the shared core.
"""
