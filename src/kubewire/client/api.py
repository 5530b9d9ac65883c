"""``Api[T]``: the verbs of one kind — get, list, create, replace, patch, delete,
delete_collection, the status subresource, and watch.

``Api(Pod, client=client)`` works on typed models; ``Api(dict, client=client,
api_version="apps/v1", kind="Deployment")`` on plain dicts (any kind: pass ``plural`` and
``namespaced`` for kinds kubewire does not know). ``namespace`` defaults to the client's context
namespace; ``None`` means all namespaces. Every method raises the ``StatusError`` subclass of
the server's answer (``NotFound``, ``Conflict``, ...) or ``TransportError``.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar, Unpack, overload

import msgspec

from kubewire.client.client import Client
from kubewire.client.events import WatchEvent
from kubewire.client.params import (
    DeleteCollectionParams,
    DeleteParams,
    KindParams,
    ListParams,
    PatchParams,
    WatchParams,
    WriteParams,
)
from kubewire.client.resource import (
    Codec,
    DictCodec,
    ModelCodec,
    PatchType,
    ResourceInfo,
    delete_options,
    format_selector,
    is_status,
    page_decoder,
    query,
    resource_info,
    status_decoder,
)
from kubewire.client.transport import Request
from kubewire.client.watch import WatchSettings, WatchStream
from kubewire.client.watch_state import WatchOptions, WatchState
from kubewire.json_types import JSON
from kubewire.models import KubeObject, ListMeta, Status, encode

T = TypeVar("T")
M = TypeVar("M", bound=KubeObject)
DEFAULT_PAGE_SIZE = 500  # kubectl and client-go's pager use 500


class _Default(enum.Enum):
    NAMESPACE = "the Api's namespace"


DEFAULT_NAMESPACE = _Default.NAMESPACE
Namespace = str | None | Literal[_Default.NAMESPACE]


@dataclass(slots=True)
class ObjectList(Generic[T]):
    """All items of a list, and the resourceVersion to watch from."""

    items: list[T] = field(default_factory=list)
    resource_version: str = ""

    def __iter__(self) -> Iterator[T]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    @property
    def metadata(self) -> ListMeta:
        """The list's metadata, as list results carry it (``pods.metadata.resource_version``)."""
        return ListMeta(resource_version=self.resource_version)


class Api(Generic[T]):
    """The verbs of one kind, on one client, defaulting to one namespace."""

    @overload
    def __init__(self: Api[M], model: type[M], *, client: Client,
                 namespace: str | _Default | None = DEFAULT_NAMESPACE) -> None: ...

    @overload
    def __init__(self: Api[dict[str, JSON]], model: type[dict[Any, Any]], *, client: Client,
                 namespace: str | _Default | None = DEFAULT_NAMESPACE,
                 **kind: Unpack[KindParams]) -> None: ...

    def __init__(self, model: type[Any], *, client: Client,
                 namespace: str | _Default | None = DEFAULT_NAMESPACE,
                 **kind: Unpack[KindParams]) -> None:
        self.client = client
        self.codec: Codec[T]
        if isinstance(model, type) and issubclass(model, KubeObject):
            self.info = ResourceInfo(model.API_VERSION, model.KIND, model.PLURAL,
                                     model.NAMESPACED)
            self.codec = ModelCodec(model)  # type: ignore[assignment]
        else:
            if "api_version" not in kind:
                raise TypeError("dict mode needs api_version= and kind= or plural=")
            self.info = resource_info(kind["api_version"], kind.get("kind"), kind.get("plural"),
                                      kind.get("namespaced"))
            self.codec = DictCodec()  # type: ignore[assignment]
        self.namespace: str | None = (client.namespace if namespace is DEFAULT_NAMESPACE
                                      else namespace)

    # --- helpers ---------------------------------------------------------------------------

    def _ns(self, namespace: Namespace) -> str | None:
        if not self.info.namespaced:
            return None
        return self.namespace if namespace is DEFAULT_NAMESPACE else namespace

    def _obj_ns(self, obj: T, namespace: Namespace) -> tuple[str, str | None]:
        name, obj_ns = self.codec.name_and_namespace(obj)
        if namespace is DEFAULT_NAMESPACE and obj_ns:
            namespace = obj_ns
        return name, self._ns(namespace)

    async def _call(self, req: Request) -> T:
        return self.codec.decode(await self.client.request(req))

    # --- reads -----------------------------------------------------------------------------

    async def get(self, name: str, *, namespace: Namespace = DEFAULT_NAMESPACE,
                  resource_version: str | None = None) -> T:
        """One object. Raises ``NotFound``."""
        path = self.info.item_path(name, self._ns(namespace))
        return await self._call(Request("GET", path, query(resourceVersion=resource_version)))

    async def pages(self, *, namespace: Namespace = DEFAULT_NAMESPACE,
                    **opts: Unpack[ListParams]) -> AsyncIterator[ObjectList[T]]:
        """Yield the list page by page (``limit``/``continue``); every page carries the
        resourceVersion of the snapshot the first one was served from."""
        path = self.info.collection_path(self._ns(namespace))
        params = query(labelSelector=format_selector(opts.get("label_selector")),
                       fieldSelector=format_selector(opts.get("field_selector")),
                       limit=opts.get("limit", DEFAULT_PAGE_SIZE) or None,
                       resourceVersion=opts.get("resource_version"),
                       resourceVersionMatch=opts.get("resource_version_match"))
        snapshot = ""
        while True:
            page = page_decoder.decode(await self.client.request(Request("GET", path, params)))
            snapshot = snapshot or page.metadata.resource_version or ""
            yield ObjectList([self.codec.decode(item) for item in page.items or ()], snapshot)
            if not page.metadata.continue_:
                return
            # A continued page is read at the first page's snapshot: drop resourceVersion.
            params = {k: v for k, v in params.items()
                      if k not in ("resourceVersion", "resourceVersionMatch")}
            params["continue"] = page.metadata.continue_

    async def list(self, *, namespace: Namespace = DEFAULT_NAMESPACE,
                   **opts: Unpack[ListParams]) -> ObjectList[T]:
        """Every matching object (all pages) and the list's resourceVersion."""
        out: ObjectList[T] = ObjectList()
        async for page in self.pages(namespace=namespace, **opts):
            out.items.extend(page.items)
            out.resource_version = page.resource_version
        return out

    # --- writes ----------------------------------------------------------------------------

    async def create(self, obj: T, *, namespace: Namespace = DEFAULT_NAMESPACE,
                     **opts: Unpack[WriteParams]) -> T:
        """Create ``obj`` (in its own namespace if it names one). Raises ``AlreadyExists``,
        ``Invalid``."""
        _, ns = self._obj_ns(obj, namespace)
        return await self._call(Request("POST", self.info.collection_path(ns),
                                        _write_query(opts), self.codec.encode(obj)))

    async def replace(self, obj: T, *, namespace: Namespace = DEFAULT_NAMESPACE,
                      **opts: Unpack[WriteParams]) -> T:
        """PUT ``obj`` (its resourceVersion, if set, is a precondition: ``Conflict``)."""
        return await self._put(obj, namespace, "", opts)

    async def replace_status(self, obj: T, *, namespace: Namespace = DEFAULT_NAMESPACE,
                             **opts: Unpack[WriteParams]) -> T:
        """PUT the status subresource (the server keeps spec as stored)."""
        return await self._put(obj, namespace, "status", opts)

    async def _put(self, obj: T, namespace: Namespace, subresource: str,
                   opts: WriteParams) -> T:
        name, ns = self._obj_ns(obj, namespace)
        return await self._call(Request("PUT", self.info.item_path(name, ns, subresource),
                                        _write_query(opts), self.codec.encode(obj)))

    async def patch(self, name: str, patch: JSON, *, namespace: Namespace = DEFAULT_NAMESPACE,
                    **opts: Unpack[PatchParams]) -> T:
        """Patch ``name``. ``patch`` is a dict (merge/strategic/apply), a list of operations
        (JSON patch) or, for apply, a model. Apply needs ``field_manager``."""
        return await self._patch(name, patch, namespace, "", opts)

    async def patch_status(self, name: str, patch: JSON, *,
                           namespace: Namespace = DEFAULT_NAMESPACE,
                           **opts: Unpack[PatchParams]) -> T:
        """Patch the status subresource of ``name`` (default: a merge patch)."""
        opts.setdefault("type", PatchType.MERGE)
        return await self._patch(name, patch, namespace, "status", opts)

    async def get_status(self, name: str, *, namespace: Namespace = DEFAULT_NAMESPACE) -> T:
        """GET the status subresource (the whole object, as kube answers)."""
        return await self._call(Request("GET", self.info.item_path(name, self._ns(namespace),
                                                                     "status")))

    async def _patch(self, name: str, patch: JSON, namespace: Namespace, subresource: str,
                     opts: PatchParams) -> T:
        patch_type = opts.get("type", PatchType.STRATEGIC)
        if patch_type is PatchType.APPLY and not opts.get("field_manager"):
            raise ValueError("server-side apply needs field_manager")
        body = encode(patch) if isinstance(patch, KubeObject) else msgspec.json.encode(patch)
        params = query(fieldManager=opts.get("field_manager"), force=opts.get("force"),
                       dryRun="All" if opts.get("dry_run") else None)
        path = self.info.item_path(name, self._ns(namespace), subresource)
        return await self._call(Request("PATCH", path, params, body, patch_type.value))

    # --- deletes ---------------------------------------------------------------------------

    async def delete(self, name: str, *, namespace: Namespace = DEFAULT_NAMESPACE,
                     **opts: Unpack[DeleteParams]) -> T | Status:
        """Delete ``name``. Returns the object when the server answers with it (graceful
        deletion, finalizers, kinds that return it), else the success ``Status``."""
        path = self.info.item_path(name, self._ns(namespace))
        data = await self.client.request(Request("DELETE", path, body=delete_options(**opts)))
        return status_decoder.decode(data) if is_status(data) else self.codec.decode(data)

    async def delete_collection(self, *, namespace: Namespace = DEFAULT_NAMESPACE,
                                **opts: Unpack[DeleteCollectionParams]) -> ObjectList[T]:
        """Delete every matching object; returns the deleted objects as the server lists
        them (``namespace=None`` deletes across all namespaces)."""
        params = query(labelSelector=format_selector(opts.get("label_selector")),
                       fieldSelector=format_selector(opts.get("field_selector")))
        body = delete_options(grace_period_seconds=opts.get("grace_period_seconds"),
                              propagation_policy=opts.get("propagation_policy"))
        path = self.info.collection_path(self._ns(namespace))
        data = await self.client.request(Request("DELETE", path, params, body))
        if is_status(data):
            return ObjectList()
        page = page_decoder.decode(data)
        return ObjectList([self.codec.decode(i) for i in page.items or ()],
                          page.metadata.resource_version or "")


    # --- watch -----------------------------------------------------------------------------

    def watch(self, *, namespace: Namespace = DEFAULT_NAMESPACE,
              settings: WatchSettings | None = None,
              **opts: Unpack[WatchParams]) -> AsyncGenerator[WatchEvent[T], None]:
        """Stream changes as ``WatchEvent[T]`` (see ``kubewire.client.watch`` for the
        guarantees: resumes across reconnects, raises ``Gone`` on 410). Close it with
        ``aclose()`` (or ``contextlib.aclosing``) when you stop early."""
        ns = self._ns(namespace)
        state = WatchState(WatchOptions(**opts), (settings or WatchSettings()).rng)

        async def current_revision() -> str:
            return (await self.list(namespace=ns, limit=1)).resource_version

        stream = WatchStream(self.client, self.info.collection_path(ns), self.codec, state,
                             settings or WatchSettings(), current_revision)
        return stream.events()


def _write_query(opts: WriteParams) -> dict[str, str]:
    return query(fieldManager=opts.get("field_manager"),
                 dryRun="All" if opts.get("dry_run") else None)
