"""Pure request building: where a kind lives, its URLs, query parameters, and how its objects
are decoded (typed models or plain dicts). No I/O here."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import msgspec

from kubewire.client.errors import ConfigError
from kubewire.json_types import JSON
from kubewire.models import KubeObject, ListMeta, Status, decode, encode
from kubewire.resources import REGISTRY

T = TypeVar("T")
M = TypeVar("M", bound=KubeObject)
Selector = str | Mapping[str, str]
"""A selector as kube's string (``app=web,tier!=db``) or a mapping of equalities."""


class PatchType(enum.Enum):
    """Patch flavours by Content-Type (objects-and-clients.md, patch)."""

    JSON = "application/json-patch+json"
    MERGE = "application/merge-patch+json"
    STRATEGIC = "application/strategic-merge-patch+json"
    APPLY = "application/apply-patch+yaml"


class PropagationPolicy(enum.Enum):
    """How a delete treats dependents (``DeleteOptions.propagationPolicy``)."""

    ORPHAN = "Orphan"
    BACKGROUND = "Background"
    FOREGROUND = "Foreground"


@dataclass(frozen=True, slots=True)
class ResourceInfo:
    """Where a kind is served."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def base(self) -> str:
        prefix = "/apis" if "/" in self.api_version else "/api"
        return f"{prefix}/{self.api_version}"

    def collection_path(self, namespace: str | None) -> str:
        if self.namespaced and namespace:
            return f"{self.base}/namespaces/{namespace}/{self.plural}"
        return f"{self.base}/{self.plural}"

    def item_path(self, name: str, namespace: str | None, subresource: str = "") -> str:
        if not name:
            raise ValueError("an object name is required")
        path = f"{self.collection_path(namespace)}/{name}"
        return f"{path}/{subresource}" if subresource else path


def resource_info(api_version: str, kind: str | None = None, plural: str | None = None,
                  namespaced: bool | None = None) -> ResourceInfo:
    """Facts for a kind from the registry, or as given (kinds kubewire does not know)."""
    group, _, version = api_version.rpartition("/")
    res = (REGISTRY.by_kind(api_version, kind) if kind
           else REGISTRY.lookup(group, version, plural or ""))
    if res is not None:
        return ResourceInfo(api_version, res.kind, res.plural, res.namespaced)
    if kind is None or plural is None or namespaced is None:
        raise ConfigError(f"unknown kind {api_version} {kind or plural}: "
                          "pass kind, plural and namespaced")
    return ResourceInfo(api_version, kind, plural, namespaced)


def format_selector(selector: Selector | None) -> str | None:
    """``{"app": "web"}`` → ``app=web``; strings pass through."""
    if selector is None or isinstance(selector, str):
        return selector or None
    return ",".join(f"{k}={v}" for k, v in selector.items()) or None


def query(**params: object) -> dict[str, str]:
    """Query parameters in kube's spelling: None dropped, booleans ``true``/``false``."""
    out: dict[str, str] = {}
    for key, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        elif isinstance(value, enum.Enum):
            out[key] = str(value.value)
        else:
            out[key] = str(value)
    return out


def delete_options(*, grace_period_seconds: int | None = None,
                   propagation_policy: PropagationPolicy | str | None = None,
                   preconditions: Mapping[str, str] | None = None,
                   dry_run: bool = False) -> bytes:
    """A ``DeleteOptions`` body (preconditions: ``{"uid": ..., "resourceVersion": ...}``)."""
    body: dict[str, JSON] = {"kind": "DeleteOptions", "apiVersion": "v1"}
    if grace_period_seconds is not None:
        body["gracePeriodSeconds"] = grace_period_seconds
    if propagation_policy is not None:
        body["propagationPolicy"] = (propagation_policy.value
                                     if isinstance(propagation_policy, PropagationPolicy)
                                     else propagation_policy)
    if preconditions:
        body["preconditions"] = dict(preconditions)
    if dry_run:
        body["dryRun"] = ["All"]
    return msgspec.json.encode(body)


class Codec(Protocol[T]):
    """How one ``Api`` turns bytes into its objects and back."""

    def decode(self, data: bytes | msgspec.Raw) -> T: ...

    def encode(self, obj: T) -> bytes: ...

    def name_and_namespace(self, obj: T) -> tuple[str, str | None]: ...

    def key(self, obj: T) -> tuple[str | None, str, str]:
        """namespace, name and resourceVersion (what a watch tracks)."""
        ...

    def labels(self, obj: T) -> Mapping[str, str]:
        """``metadata.labels`` (empty when unset)."""
        ...


@dataclass(frozen=True, slots=True)
class ModelCodec(Generic[M]):
    """Typed models; unknown fields are kept (``kubewire.models.base``)."""

    model: type[M]

    def decode(self, data: bytes | msgspec.Raw) -> M:
        return decode(self.model, data)

    def encode(self, obj: M) -> bytes:
        return encode(obj)

    def name_and_namespace(self, obj: M) -> tuple[str, str | None]:
        meta = getattr(obj, "metadata", None)
        if meta is None:
            return "", None
        return meta.name or "", meta.namespace

    def key(self, obj: M) -> tuple[str | None, str, str]:
        meta = getattr(obj, "metadata", None)
        if meta is None:
            return None, "", ""
        return meta.namespace, meta.name or "", meta.resource_version or ""

    def labels(self, obj: M) -> Mapping[str, str]:
        meta = getattr(obj, "metadata", None)
        return (meta.labels if meta is not None else None) or {}


class DictCodec:
    """Plain dicts, for any kind (including kinds without a model)."""

    def decode(self, data: bytes | msgspec.Raw) -> dict[str, JSON]:
        obj: dict[str, JSON] = msgspec.json.decode(data)
        return obj

    def encode(self, obj: dict[str, JSON]) -> bytes:
        return msgspec.json.encode(obj)

    def name_and_namespace(self, obj: dict[str, JSON]) -> tuple[str, str | None]:
        meta = obj.get("metadata") or {}
        return str(meta.get("name") or ""), meta.get("namespace")

    def key(self, obj: dict[str, JSON]) -> tuple[str | None, str, str]:
        meta = obj.get("metadata") or {}
        return (meta.get("namespace"), str(meta.get("name") or ""),
                str(meta.get("resourceVersion") or ""))

    def labels(self, obj: dict[str, JSON]) -> Mapping[str, str]:
        labels: Mapping[str, str] = (obj.get("metadata") or {}).get("labels") or {}
        return labels


class ListPage(msgspec.Struct):
    """One page of a list: items left undecoded until the codec reads them."""

    metadata: ListMeta = msgspec.field(default_factory=ListMeta)
    items: list[msgspec.Raw] | None = None


class _KindView(msgspec.Struct):
    kind: str = ""


def is_status(data: bytes) -> bool:
    """Whether a 2xx body is a ``Status`` (a delete answers Status or the object)."""
    try:
        return msgspec.json.decode(data, type=_KindView).kind == "Status"
    except msgspec.DecodeError:
        return False


status_decoder = msgspec.json.Decoder(Status)
page_decoder = msgspec.json.Decoder(ListPage)
