"""Pure request building: where a kind lives, its URLs, query parameters, and how its objects
are decoded (typed models, plain dicts, or a user's own msgspec Struct or dataclass types).
No I/O here."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from kubewire.client.errors import ConfigError
from kubewire.json_types import JSON
from kubewire.models import KubeObject, ListMeta, Status, decode, encode
from kubewire.resources import REGISTRY, Resource

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
    """Where a kind is served, and whether it is a custom resource: ``custom`` is True for a
    kind known to be served from a CRD (no strategic merge patch), False for a known built-in,
    None when the client cannot tell (a kind found by discovery that kubewire does not know).
    ``kind`` is ``""`` for a kind given by plural alone."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool
    custom: bool | None = None

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
                  namespaced: bool | None = None) -> ResourceInfo | None:
    """Facts for a kind: a kind kube builds in from kubewire's registry; any other (custom
    resources, whose CRD a cluster may or may not have, such as the Gateway API kinds kubewire
    pre-installs) as given, when ``plural`` and ``namespaced`` are; None when discovery has to
    find it."""
    if not api_version or api_version.count("/") > 1:
        raise ConfigError(f"invalid api_version {api_version!r}: 'v1' or 'group/version'")
    if not kind and not plural:
        raise ConfigError("a kind needs kind= or plural= besides api_version=")
    res = registered(api_version, kind, plural)
    if res is not None:
        return ResourceInfo(api_version, res.kind, res.plural, res.namespaced, custom=False)
    if plural is None or namespaced is None:
        return None
    return ResourceInfo(api_version, kind or "", plural, namespaced, custom=None)


def registered(api_version: str, kind: str | None, plural: str | None) -> Resource | None:
    """kubewire's registry entry of a kind (by kind, else by plural), if it has one."""
    group, _, version = api_version.rpartition("/")
    return (REGISTRY.by_kind(api_version, kind) if kind
            else REGISTRY.lookup(group, version, plural or ""))


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


def with_type_fields(obj: dict[str, Any], type_fields: Mapping[str, str]) -> dict[str, Any]:
    """``obj`` with ``apiVersion`` and ``kind`` first, filled from ``type_fields`` where it
    lacks them (kube needs both in every body; a user's dict or dataclass may leave them out).
    """
    if all(obj.get(key) for key in type_fields):
        return obj
    head = {key: obj.get(key) or value for key, value in type_fields.items()}
    return {**head, **{k: v for k, v in obj.items() if k not in head}}


def _meta_value(meta: object, wire: str, attr: str) -> Any:
    """One ``metadata`` field of a dict, a Struct or a dataclass (by wire or Python name)."""
    if meta is None:
        return None
    if isinstance(meta, Mapping):
        return meta.get(wire)
    return getattr(meta, attr, None) if hasattr(meta, attr) else getattr(meta, wire, None)


class _MetaAccess:
    """``name_and_namespace``, ``key`` and ``labels`` of objects whose ``metadata`` is a dict
    (plain dicts) or an attribute of any shape (a user's Struct or dataclass)."""

    def _meta(self, obj: Any) -> object:
        return obj.get("metadata") if isinstance(obj, Mapping) else getattr(obj, "metadata", None)

    def name_and_namespace(self, obj: Any) -> tuple[str, str | None]:
        meta = self._meta(obj)
        return (str(_meta_value(meta, "name", "name") or ""),
                _meta_value(meta, "namespace", "namespace") or None)

    def key(self, obj: Any) -> tuple[str | None, str, str]:
        meta = self._meta(obj)
        return (_meta_value(meta, "namespace", "namespace") or None,
                str(_meta_value(meta, "name", "name") or ""),
                str(_meta_value(meta, "resourceVersion", "resource_version") or ""))

    def labels(self, obj: Any) -> Mapping[str, str]:
        labels: Mapping[str, str] = _meta_value(self._meta(obj), "labels", "labels") or {}
        return labels


class DictCodec(_MetaAccess):
    """Plain dicts, for any kind (including kinds without a model). ``type_fields``
    (``apiVersion``/``kind``) fill what a written dict leaves out."""

    def __init__(self) -> None:
        self.type_fields: dict[str, str] = {}

    def decode(self, data: bytes | msgspec.Raw) -> dict[str, JSON]:
        obj: dict[str, JSON] = msgspec.json.decode(data)
        return obj

    def encode(self, obj: dict[str, JSON]) -> bytes:
        return msgspec.json.encode(with_type_fields(obj, self.type_fields))


@dataclass(slots=True)
class StructCodec(_MetaAccess, Generic[T]):
    """A user's own msgspec Struct or dataclass type: decoded with msgspec (fields the type
    does not declare are dropped, so a read-modify-write loses them: use a ``KubeObject``
    model, such as those ``kubewire models`` generates, to keep them). ``type_fields``
    (``apiVersion``/``kind``) fill what a written object leaves unset."""

    model: type[T]
    type_fields: dict[str, str] = field(default_factory=dict)
    _decoder: msgspec.json.Decoder[T] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._decoder = msgspec.json.Decoder(self.model)

    def decode(self, data: bytes | msgspec.Raw) -> T:
        return self._decoder.decode(data)

    def encode(self, obj: T) -> bytes:
        out = msgspec.to_builtins(obj)
        if isinstance(out, dict):
            out = with_type_fields(out, self.type_fields)
        return msgspec.json.encode(out)


def is_user_type(model: object) -> bool:
    """Whether ``model`` is a type ``StructCodec`` can serve: a msgspec Struct (not one of
    kubewire's models, which ``ModelCodec`` serves) or a dataclass."""
    return isinstance(model, type) and (
        (issubclass(model, msgspec.Struct) and not issubclass(model, KubeObject))
        or dataclasses.is_dataclass(model))


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
