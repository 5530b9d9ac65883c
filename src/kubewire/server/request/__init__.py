"""What a request asks for, decoded as kube-apiserver decodes it: pure functions of the path
and query.

``routes`` maps a path to a resource, namespace, name and subresource (and decides once whether
a request is a watch); ``query_params`` reads query strings as Go's ``url.Values``; ``options``
(list, watch and get), ``write_options`` and ``delete_options`` turn them into frozen option
values with kube's exact error texts; ``continue_tokens`` encodes and checks paging tokens;
``timeout`` works out each request's deadline. It may import the wire (for JSON nesting
limits) and the shared core; nothing here does I/O.
"""
