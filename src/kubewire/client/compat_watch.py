"""``Watch``: the kubernetes_asyncio ``watch.Watch`` interface over ``Api.watch()``.

    w = Watch()
    async for event in w.stream(pods.list, namespace="default", timeout_seconds=60):
        print(event["type"], event["object"].metadata.name)
        if done:
            w.stop()

``func`` is any bound method of an ``Api`` (``pods.list`` reads as in kubernetes_asyncio).
Events are dicts with ``type``, ``object`` (a model, or a dict in dict mode) and
``raw_object`` (the JSON dict). Unlike kubernetes_asyncio the stream resumes across
reconnects; it raises ``Gone`` on 410 like kubernetes_asyncio raises its ApiException(410).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from typing import Any

import msgspec

from kubewire.client.api import Api
from kubewire.client.events import Bookmark, parse_line
from kubewire.client.resource import ModelCodec
from kubewire.json_types import JSON
from kubewire.models import KubeObject, decode, to_dict

# kubernetes_asyncio keyword → Api.watch keyword.
_KEYWORDS = {"label_selector": "label_selector", "field_selector": "field_selector",
             "resource_version": "resource_version", "timeout_seconds": "timeout_seconds",
             "allow_watch_bookmarks": "allow_bookmarks",
             "send_initial_events": "send_initial_events"}


class Watch:
    """Streams a list call's changes as kubernetes_asyncio does; ``stop()`` ends it."""

    def __init__(self, return_type: type[Any] | None = None) -> None:
        self._return_type = return_type
        self._stopped = False
        self.resource_version: str | None = None  # of the last event streamed

    async def __aenter__(self) -> Watch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """End the stream after the event being handled."""
        self._stopped = True

    def get_return_type(self, func: Callable[..., Any]) -> type[Any] | None:
        """The model class the events of ``func``'s Api carry (None in dict mode)."""
        if self._return_type is not None:
            return self._return_type
        codec = _api_of(func).codec
        return codec.model if isinstance(codec, ModelCodec) else None

    def get_watch_argument_name(self, func: Callable[..., Any]) -> str:
        """Kept for interface parity: watches are requested with ``watch``."""
        return "watch"

    def unmarshal_event(self, data: str | bytes,
                        return_type: type[Any] | None) -> dict[str, JSON]:
        """One raw event line → ``{"type", "object", "raw_object"}``."""
        raw = parse_line(data.encode() if isinstance(data, str) else data)
        raw_object: JSON = msgspec.json.decode(raw.object)
        obj: JSON = raw_object
        if (raw.type not in ("ERROR", "BOOKMARK") and isinstance(return_type, type)
                and issubclass(return_type, KubeObject)):
            obj = decode(return_type, raw.object)
        return {"type": raw.type, "object": obj, "raw_object": raw_object}

    async def stream(self, func: Callable[..., Any], *args: Any,
                     **kwargs: Any) -> AsyncIterator[dict[str, JSON]]:
        """Yield the changes ``func``'s Api sees, as event dicts. Positional arguments are
        taken as the namespace (``list_namespaced_pod(namespace)``)."""
        api = _api_of(func)
        namespace = kwargs.pop("namespace", args[0] if args else api.namespace)
        params = {_KEYWORDS[k]: v for k, v in kwargs.items() if k in _KEYWORDS}
        self._stopped = False
        watch = api.watch(namespace=namespace, **params)
        async with aclosing(watch) as events:
            async for event in events:
                obj = event.object
                raw_object = (msgspec.to_builtins(obj) if isinstance(obj, Bookmark)
                              else to_dict(obj) if isinstance(obj, KubeObject) else obj)
                version = (raw_object.get("metadata") or {}).get("resourceVersion")
                if version:
                    self.resource_version = version
                yield {"type": event.type.value, "object": obj, "raw_object": raw_object}
                if self._stopped:
                    return


def _api_of(func: Callable[..., Any]) -> Api[Any]:
    api = func if isinstance(func, Api) else getattr(func, "__self__", None)
    if not isinstance(api, Api):
        raise TypeError(f"{func!r} is not an Api or a method of one")
    return api
