"""Create, update, patch and delete: from a decoded object to a committed revision.

``create_update`` and ``deletes`` are the handlers; ``lifecycle`` holds the rules of object
metadata on each write (uid, generation, timestamps, finalizers, graceful deletion);
``defaults`` fills kube's defaults; ``admission`` what the default mutating admission plugins
write into pods; ``validate`` runs the Go decode checks and ``validation``
(one module per API group, kube's messages); ``scale`` and ``scale_subresource`` serve
``/scale``; ``json_copy`` copies decoded objects fast. The pod subresources with bodies of
their own kinds are ``pod_binding`` (and the ``bindings`` collection) and ``eviction``
(``payloads`` holds what they share); ``token_request`` answers ``serviceaccounts/token`` with
a token ``access`` signs; ``access_reviews`` answers authorization.k8s.io's reviews with the
server's authorizer (its pure parts in ``review_attributes``). Quota and limits admission:
``quota`` (ResourceQuota's evaluators and verdicts, pure), ``limit_ranger`` (LimitRanger's
defaults and bounds, pure), ``quota_admission`` (their I/O: reading LimitRanges and quotas,
charging ``status.used``); ``storage_admission`` is DefaultStorageClass; ``listers`` reads
the small cluster-scoped kinds those plugins consult (decoded once per revision). It may
import the wire, ``request``, ``patch``, ``allocation``, ``context``, ``access`` (met before
it), storage and the shared core. Admission (mutating and validating webhooks and policies)
becomes a stage beside these handlers.
"""
