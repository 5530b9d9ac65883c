"""Conversion webhooks: custom resources of a CRD with ``conversion.strategy: Webhook``.

Converting such an object to another version is an HTTPS call to the user's webhook
(``webhook``), so it cannot happen where kubewire converts other objects: the watch cache and
its views convert synchronously while they fold in a commit or frame a watch line. Those leave
a webhook CRD's objects in the version they are stored in (``apiextensions/crd/versions.py``), and
this room converts them on the way out, in the request's own task: ``objects`` for GET, LIST
and writes (one ConversionReview per page or write, at most ``MAX_BATCH`` objects each), ``sink``
for watch streams (a sink that converts each flush before it reaches the client, in order,
bounded like a slow client). No webhook is called while the store's writer holds a write: a
written object is converted before it is queued, its answer after it committed.

It may import the wire, ``context``, ``apiextensions``, storage and the shared core.
"""
