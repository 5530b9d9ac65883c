"""What a controller is built from, after client-go's ``tools/cache`` and ``util/workqueue``.

``informer`` lists and watches one resource into a local cache and calls handlers on changes
(resyncs, relists on 410 Gone); ``indexer`` is its cache with secondary indexes (namespace,
owner, any function); ``workqueue`` is the rate-limited, de-duplicating queue of keys a
controller works from. Everything here is exported by ``kubewire.client``. It imports the rest
of the client and the shared core; never the server or storage.
"""
