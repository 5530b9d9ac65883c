"""Control loops that finish what writes start, standing in for kube-controller-manager,
kube-apiserver's own bootstrap controller and kubelets.

``deletion`` empties terminating namespaces (``namespace_conditions`` holds the conditions it
records) and removes gracefully deleted pods when their grace period ends;
``namespace_defaults`` keeps the ``default`` ServiceAccount and ``kube-root-ca.crt`` in every
namespace; ``bootstrap`` keeps the ``default/kubernetes`` Service and EndpointSlice;
``resource_quota`` keeps ResourceQuotas' status; ``storage_protection`` releases claims and
volumes nothing uses any more; ``service_account_tokens`` fills legacy token Secrets (it signs
with the server's key, hence here); ``manager``
starts and stops them together, running those ``selection`` (kube-controller-manager's
``--controllers``, pure) turns on; ``leadership`` runs the controller-manager part only while
this server holds its Lease (``--leader-elect``); ``work_queue`` is their queue of keys. It may
import ``writes``, ``request``, ``context``, ``access`` (the token signer), storage, the client
(its leader elector) and the shared core. The workload controllers and simulated nodes join here.
"""
