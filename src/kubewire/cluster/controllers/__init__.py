"""kube-controller-manager's control loops, as clients of the API (each a component with its
pure decisions in a module beside it)."""
