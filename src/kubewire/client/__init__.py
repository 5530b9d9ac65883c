"""kubewire's async Kubernetes client.

    async with await create_client() as client:
        pods = Api(Pod, client=client, namespace="default")
        async for event in pods.watch(allow_bookmarks=True):
            print(event.type, event.object.metadata.name)

Custom resources: ``Api(dict, client=client, api_version="example.com/v1", kind="Widget")``
(or a msgspec Struct / dataclass of your own, or models ``kubewire models crd.yaml``
generates); see ``kubewire.client.api``.

Models live in ``kubewire.models``; exceptions are listed in ``kubewire.client.errors``.
Leader election on a Lease, as client-go's: ``kubewire.client.leaderelection``.
"""

from kubewire.client.api import Api, ObjectList
from kubewire.client.backoff import Backoff
from kubewire.client.client import Client, create_client
from kubewire.client.compat_watch import Watch
from kubewire.client.config import ClientConfig, in_cluster_config, load_config, load_kubeconfig
from kubewire.client.errors import (
    AlreadyExists,
    BadRequest,
    ClientError,
    ConfigError,
    Conflict,
    CredentialError,
    Expired,
    Forbidden,
    Gone,
    InternalError,
    Invalid,
    NoKindMatch,
    NotFound,
    ServiceUnavailable,
    StatusError,
    Timeout,
    TooManyRequests,
    TransportError,
    Unauthorized,
    UnsupportedMediaType,
)
from kubewire.client.events import Bookmark, EventType, WatchEvent
from kubewire.client.informers.informer import Informer, InformerEvent
from kubewire.client.informers.workqueue import ItemBackoff, QueueShutDown, WorkQueue
from kubewire.client.resource import PatchType, PropagationPolicy
from kubewire.client.scale import Scale
from kubewire.client.watch import WatchSettings

__all__ = [
    "AlreadyExists",
    "Api",
    "Backoff",
    "BadRequest",
    "Bookmark",
    "Client",
    "ClientConfig",
    "ClientError",
    "ConfigError",
    "Conflict",
    "CredentialError",
    "EventType",
    "Expired",
    "Forbidden",
    "Gone",
    "Informer",
    "InformerEvent",
    "InternalError",
    "Invalid",
    "ItemBackoff",
    "NoKindMatch",
    "NotFound",
    "ObjectList",
    "PatchType",
    "PropagationPolicy",
    "QueueShutDown",
    "Scale",
    "ServiceUnavailable",
    "StatusError",
    "Timeout",
    "TooManyRequests",
    "TransportError",
    "Unauthorized",
    "UnsupportedMediaType",
    "Watch",
    "WatchEvent",
    "WatchSettings",
    "WorkQueue",
    "create_client",
    "in_cluster_config",
    "load_config",
    "load_kubeconfig",
]
