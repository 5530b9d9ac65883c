"""The store: the durable, ordered record of every object and its history, and the watch caches
fed by it.

``base`` is the ``Store`` contract every backend meets (revisions, preconditions, the change
feed, compaction); ``sqlite*`` is the embedded backend, whose writes go through one writer
process; ``memory`` is the in-memory backend (no file, no writer: for tests); ``etcd`` is
the etcd v3 client layer (grpc.aio on generated stubs) the etcd backend stands on; ``cache``,
``cached``, ``watcher`` and ``version_view`` hold the current state per resource and fan events
out to watchers. Storage imports only the shared core; it knows nothing
of HTTP, the server or the client.
"""
