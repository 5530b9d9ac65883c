"""The client's public names are deliberate, and the client never reaches into the server."""

from __future__ import annotations

import ast
from pathlib import Path

import kubewire.client

INTENDED = {
    "AlreadyExists", "Api", "Backoff", "BadRequest", "Bookmark", "Client", "ClientConfig",
    "ClientError", "ConfigError", "Conflict", "CredentialError", "EventType", "Expired",
    "Forbidden", "Gone", "Informer", "InformerEvent", "InternalError", "Invalid", "NotFound",
    "ItemBackoff", "ObjectList", "PatchType", "QueueShutDown", "WorkQueue",
    "PropagationPolicy", "ServiceUnavailable", "StatusError", "Timeout", "TooManyRequests",
    "TransportError", "Unauthorized", "Watch", "WatchEvent", "WatchSettings", "create_client",
    "in_cluster_config", "load_config", "load_kubeconfig", "NoKindMatch", "Scale",
    "UnsupportedMediaType",
}
CLIENT = Path(kubewire.client.__file__).parent
FORBIDDEN_PREFIXES = ("kubewire.server", "kubewire.storage")


def test_exported_names_are_the_intended_ones() -> None:
    assert set(kubewire.client.__all__) == INTENDED
    for name in INTENDED:
        obj = getattr(kubewire.client, name)
        if obj.__module__.startswith("kubewire.client"):  # status.py's classes are shared
            assert obj.__doc__, f"{name} has no docstring"


def test_client_and_models_import_neither_server_nor_storage() -> None:
    for path in [*CLIENT.glob("*.py"), *(CLIENT.parent / "models").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                assert not name.startswith(FORBIDDEN_PREFIXES), f"{path.name} imports {name}"
