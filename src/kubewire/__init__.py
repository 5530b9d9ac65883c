"""kubewire: the Kubernetes Watch API in Python, server and client."""

__version__ = "0.1.0"
