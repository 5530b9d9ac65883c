"""kube-controller-manager's control loops, as clients of the API (one module per controller,
its pure decisions in modules beside it)."""
