"""Every way to change an object by describing the change: pure functions, objects in and out.

``json_patch`` (RFC 6902 and RFC 7386 merge patch), ``strategic`` (strategic merge patch, with
the list keys and strategies of the schema), ``apply`` and ``apply_request`` (server-side apply
and its request), ``field_paths``, ``managed_fields`` and ``field_ownership`` (who owns which
field, conflicts, ``managedFields``); values printed as Go prints them, for kube's patch error
texts and the last-applied annotation, come from the core's ``kubewire.go_print``. It may
import the wire's body decoders, ``request`` (write options) and the shared core; nothing here
does I/O.
"""
