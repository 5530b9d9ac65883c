"""``Api[T]``: the verbs of one kind — get, list, create, replace, patch, delete,
delete_collection, the status and scale subresources, and watch.

Any kind, built-in or custom, is data here (a ``ResourceInfo``), in one of three shapes:

- ``Api(Pod, client=client)``: kubewire's typed models, or models ``kubewire models crd.yaml``
  generated for custom resources (``KubeObject`` subclasses; fields they do not declare are kept);
- ``Api(dict, client=client, api_version="example.com/v1", kind="Widget")``: plain dicts;
- ``Api(Widget, client=client, api_version=..., kind=...)``: a user's own msgspec Struct or
  dataclass (``API_VERSION``/``KIND`` class variables may stand for the keywords).

A kind kube builds in is known from kubewire's registry; any other (custom resources, even
those kubewire itself serves as such) is found in the server's discovery documents on first
use (cached per client, ``Client.discovery``), unless ``plural`` and ``namespaced`` are given.
Custom resources take no strategic merge patch (kube answers 415): their ``patch`` defaults
to a JSON merge patch, and asking for a strategic one raises ``ValueError`` before sending.
``namespace`` defaults to the client's context namespace; ``None`` means all namespaces. Every
method raises the ``StatusError`` subclass of the server's answer (``NotFound``, ``Conflict``,
...), ``TransportError``, or ``NoKindMatch`` for a kind the server does not serve.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar, Unpack, cast, overload

import msgspec

from kubewire.client.client import Client
from kubewire.client.errors import UnsupportedMediaType
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
    StructCodec,
    delete_options,
    format_selector,
    is_status,
    is_user_type,
    page_decoder,
    query,
    registered,
    resource_info,
    status_decoder,
    with_type_fields,
)
from kubewire.client.scale import Scale
from kubewire.client.transport import Request
from kubewire.client.watch import WatchSettings, WatchStream
from kubewire.client.watch_state import WatchOptions, WatchState
from kubewire.json_types import JSON
from kubewire.models import KubeObject, ListMeta, Status, decode, encode

T = TypeVar("T")
M = TypeVar("M", bound=KubeObject)
DEFAULT_PAGE_SIZE = 500  # kubectl and client-go's pager use 500
NO_STRATEGIC_MERGE = ("strategic merge patch is not supported for custom resources ({}): use "
                      "PatchType.MERGE, PatchType.JSON or PatchType.APPLY")


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

    @overload
    def __init__(self: Api[T], model: type[T], *, client: Client,
                 namespace: str | _Default | None = DEFAULT_NAMESPACE,
                 **kind: Unpack[KindParams]) -> None: ...

    def __init__(self, model: type[Any], *, client: Client,
                 namespace: str | _Default | None = DEFAULT_NAMESPACE,
                 **kind: Unpack[KindParams]) -> None:
        self.client = client
        self.codec: Codec[T]
        self._custom: bool | None = None  # what an unregistered kind is taken for
        if isinstance(model, type) and issubclass(model, KubeObject):
            kind = KindParams(api_version=model.API_VERSION, kind=model.KIND)
            if model.PLURAL:
                kind["plural"], kind["namespaced"] = model.PLURAL, model.NAMESPACED
            self.codec = ModelCodec(model)  # type: ignore[assignment]
            # A model kubewire does not serve was generated from a CRD.
            self._custom = True
        elif model is dict:
            self.codec = DictCodec()  # type: ignore[assignment]
        elif is_user_type(model):
            kind.setdefault("api_version", getattr(model, "API_VERSION", ""))
            if getattr(model, "KIND", ""):
                kind.setdefault("kind", model.KIND)
            self.codec = StructCodec(model)
        else:
            raise TypeError(f"{model!r} is not a kubewire model, dict, msgspec Struct or "
                            "dataclass")
        if not kind.get("api_version"):
            raise TypeError("an Api needs api_version= and kind= or plural= (a model: its "
                            "API_VERSION and KIND)")
        self._wanted = (kind["api_version"], kind.get("kind"), kind.get("plural"))
        self._info: ResourceInfo | None = None
        info = resource_info(kind["api_version"], kind.get("kind"), kind.get("plural"),
                             kind.get("namespaced"))
        if info is not None:
            self._set_info(info)
        self.namespace: str | None = (client.namespace if namespace is DEFAULT_NAMESPACE
                                      else namespace)

    # --- the kind --------------------------------------------------------------------------

    def _set_info(self, info: ResourceInfo) -> None:
        if info.custom is None:
            res = registered(info.api_version, info.kind or None, info.plural)
            custom = False if res is not None else self._custom
            info = ResourceInfo(info.api_version, info.kind, info.plural, info.namespaced,
                                custom)
        self._info = info
        type_fields = getattr(self.codec, "type_fields", None)
        if isinstance(type_fields, dict) and info.kind:
            type_fields.update(apiVersion=info.api_version, kind=info.kind)

    async def resolve(self) -> ResourceInfo:
        """Where the kind is served: known at once, or found in discovery on first use (every
        verb calls this). Raises ``NoKindMatch`` when the server does not serve it."""
        if self._info is None:
            self._set_info(await self.client.discovery.resolve(*self._wanted))
        assert self._info is not None
        return self._info

    @property
    def info(self) -> ResourceInfo:
        """Where the kind is served (after ``resolve()`` for a kind found by discovery)."""
        if self._info is None:
            raise RuntimeError(f"{self.resource_name} is found by discovery: await resolve() "
                               "(or any verb) first")
        return self._info

    @property
    def resource_name(self) -> str:
        """What logs call the kind: its plural, or the kind as given before discovery."""
        if self._info is not None:
            return self._info.plural
        api_version, kind, plural = self._wanted
        return f"{plural or kind} ({api_version})"

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
        await self.resolve()
        path = self.info.item_path(name, self._ns(namespace))
        return await self._call(Request("GET", path, query(resourceVersion=resource_version)))

    async def pages(self, *, namespace: Namespace = DEFAULT_NAMESPACE,
                    **opts: Unpack[ListParams]) -> AsyncIterator[ObjectList[T]]:
        """Yield the list page by page (``limit``/``continue``); every page carries the
        resourceVersion of the snapshot the first one was served from."""
        await self.resolve()
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
        await self.resolve()
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
        await self.resolve()
        name, ns = self._obj_ns(obj, namespace)
        return await self._call(Request("PUT", self.info.item_path(name, ns, subresource),
                                        _write_query(opts), self.codec.encode(obj)))

    async def patch(self, name: str, patch: JSON | T, *,
                    namespace: Namespace = DEFAULT_NAMESPACE, **opts: Unpack[PatchParams]) -> T:
        """Patch ``name``. ``patch`` is a dict (merge/strategic/apply), a list of operations
        (JSON patch) or, for apply, an object of this Api's type. Apply needs
        ``field_manager``. The default type is strategic merge for built-in kinds and JSON
        merge for custom resources (which refuse strategic merge: ``ValueError``)."""
        return await self._patch(name, patch, namespace, "", opts)

    async def patch_status(self, name: str, patch: JSON | T, *,
                           namespace: Namespace = DEFAULT_NAMESPACE,
                           **opts: Unpack[PatchParams]) -> T:
        """Patch the status subresource of ``name`` (default: a merge patch)."""
        opts.setdefault("type", PatchType.MERGE)
        return await self._patch(name, patch, namespace, "status", opts)

    async def get_status(self, name: str, *, namespace: Namespace = DEFAULT_NAMESPACE) -> T:
        """GET the status subresource (the whole object, as kube answers)."""
        await self.resolve()
        return await self._call(Request("GET", self.info.item_path(name, self._ns(namespace),
                                                                     "status")))

    async def _patch(self, name: str, patch: JSON | T, namespace: Namespace, subresource: str,
                     opts: PatchParams) -> T:
        await self.resolve()
        patch_type = self._patch_type(opts)
        body = self._patch_body(patch, patch_type)
        params = query(fieldManager=opts.get("field_manager"), force=opts.get("force"),
                       dryRun="All" if opts.get("dry_run") else None)
        path = self.info.item_path(name, self._ns(namespace), subresource)
        try:
            return await self._call(Request("PATCH", path, params, body, patch_type.value))
        except UnsupportedMediaType as err:
            raise self._explained(err, patch_type) from err

    def _patch_type(self, opts: PatchParams) -> PatchType:
        custom = self.info.custom
        patch_type = opts.get("type") or (PatchType.MERGE if custom is not False
                                          else PatchType.STRATEGIC)
        if patch_type is PatchType.STRATEGIC and custom:
            raise ValueError(NO_STRATEGIC_MERGE.format(self._group_resource()))
        if patch_type is PatchType.APPLY and not opts.get("field_manager"):
            raise ValueError("server-side apply needs field_manager")
        return patch_type

    def _patch_body(self, patch: object, patch_type: PatchType) -> bytes:
        if isinstance(patch, KubeObject):
            return encode(patch)
        if isinstance(patch, dict):
            if patch_type is PatchType.APPLY and self.info.kind:
                # Apply configurations name their kind (kubectl's always do).
                patch = with_type_fields(patch, {"apiVersion": self.info.api_version,
                                                 "kind": self.info.kind})
            return msgspec.json.encode(patch)
        if isinstance(patch, list | str | int | float | bool) or patch is None:
            return msgspec.json.encode(patch)
        return self.codec.encode(cast(T, patch))  # an object of a user's type

    def _explained(self, err: UnsupportedMediaType, patch_type: PatchType,
                   ) -> UnsupportedMediaType:
        """The server's 415 for a strategic merge patch, saying what it means: the kind is
        a custom resource (a kind the client could not tell was one)."""
        if patch_type is not PatchType.STRATEGIC:
            return err
        note = NO_STRATEGIC_MERGE.format(self._group_resource())
        return UnsupportedMediaType(f"{err.message} ({note})", err.details,
                                    metadata=err.metadata)

    def _group_resource(self) -> str:
        group = self.info.api_version.rpartition("/")[0]
        return f"{self.info.plural}.{group}" if group else self.info.plural

    # --- scale -----------------------------------------------------------------------------

    async def get_scale(self, name: str, *, namespace: Namespace = DEFAULT_NAMESPACE) -> Scale:
        """The ``autoscaling/v1`` Scale of ``name`` (kinds with a ``/scale`` subresource)."""
        return await self._scale(Request("GET", await self._scale_path(name, namespace)))

    async def replace_scale(self, name: str, scale: Scale | dict[str, JSON], *,
                            namespace: Namespace = DEFAULT_NAMESPACE,
                            **opts: Unpack[WriteParams]) -> Scale:
        """PUT a Scale (its resourceVersion, if set, is a precondition)."""
        body = encode(scale) if isinstance(scale, Scale) else msgspec.json.encode(
            with_type_fields(scale, {"apiVersion": Scale.API_VERSION, "kind": Scale.KIND}))
        return await self._scale(Request("PUT", await self._scale_path(name, namespace),
                                         _write_query(opts), body))

    async def patch_scale(self, name: str, patch: JSON, *,
                          namespace: Namespace = DEFAULT_NAMESPACE,
                          **opts: Unpack[PatchParams]) -> Scale:
        """Patch the Scale of ``name`` (default: a merge patch, as ``kubectl scale``)."""
        patch_type = opts.get("type") or PatchType.MERGE
        params = query(fieldManager=opts.get("field_manager"), force=opts.get("force"),
                       dryRun="All" if opts.get("dry_run") else None)
        return await self._scale(Request("PATCH", await self._scale_path(name, namespace),
                                         params, msgspec.json.encode(patch), patch_type.value))

    async def scale(self, name: str, replicas: int, *,
                    namespace: Namespace = DEFAULT_NAMESPACE) -> Scale:
        """Set ``spec.replicas`` through ``/scale``, as ``kubectl scale`` does."""
        return await self.patch_scale(name, {"spec": {"replicas": replicas}},
                                      namespace=namespace)

    async def _scale_path(self, name: str, namespace: Namespace) -> str:
        await self.resolve()
        return self.info.item_path(name, self._ns(namespace), "scale")

    async def _scale(self, req: Request) -> Scale:
        return decode(Scale, await self.client.request(req))

    # --- deletes ---------------------------------------------------------------------------

    async def delete(self, name: str, *, namespace: Namespace = DEFAULT_NAMESPACE,
                     **opts: Unpack[DeleteParams]) -> T | Status:
        """Delete ``name``. Returns the object when the server answers with it (graceful
        deletion, finalizers, kinds that return it), else the success ``Status``."""
        await self.resolve()
        path = self.info.item_path(name, self._ns(namespace))
        data = await self.client.request(Request("DELETE", path, body=delete_options(**opts)))
        return status_decoder.decode(data) if is_status(data) else self.codec.decode(data)

    async def delete_collection(self, *, namespace: Namespace = DEFAULT_NAMESPACE,
                                **opts: Unpack[DeleteCollectionParams]) -> ObjectList[T]:
        """Delete every matching object; returns the deleted objects as the server lists
        them (``namespace=None`` deletes across all namespaces)."""
        await self.resolve()
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
        if self._info is not None:
            return self._stream(namespace, settings, opts).events()
        return self._watch_after_discovery(namespace, settings, opts)

    async def _watch_after_discovery(self, namespace: Namespace,
                                     settings: WatchSettings | None, opts: WatchParams,
                                     ) -> AsyncGenerator[WatchEvent[T], None]:
        await self.resolve()
        async with aclosing(self._stream(namespace, settings, opts).events()) as events:
            async for event in events:
                yield event

    def _stream(self, namespace: Namespace, settings: WatchSettings | None,
                opts: WatchParams) -> WatchStream[T]:
        ns = self._ns(namespace)
        state = WatchState(WatchOptions(**opts), (settings or WatchSettings()).rng)

        async def current_revision() -> str:
            return (await self.list(namespace=ns, limit=1)).resource_version

        return WatchStream(self.client, self.info.collection_path(ns), self.codec, state,
                           settings or WatchSettings(), current_revision)


def _write_query(opts: WriteParams) -> dict[str, str]:
    return query(fieldManager=opts.get("field_manager"),
                 dryRun="All" if opts.get("dry_run") else None)
