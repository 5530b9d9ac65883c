"""kube-controller-manager's control loops, as clients of the API.

``node_lifecycle`` (``node-lifecycle-controller``) and ``taint_eviction``
(``taint-eviction-controller``) keep node health, condition taints and NoExecute evictions;
``*_decisions`` modules beside the loops hold their pure decisions.
"""
