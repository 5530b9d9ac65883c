"""Types of ``kubewire/__init__.py``, whose ``Server`` is imported on first use."""

from kubewire.testing.server import Server as Server

__version__: str
__all__ = ["Server", "__version__"]
