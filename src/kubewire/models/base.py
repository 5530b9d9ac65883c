"""Model base classes and the codec that keeps fields the models do not know.

Generated models (``core_v1.py``, ...) are msgspec Structs deriving from ``Model``; each kind
derives from ``KubeObject`` and carries its API facts as class variables. Decoding goes straight
from bytes into Structs with one cached ``Decoder`` per class.

Unknown fields survive a round trip: ``decode()`` keeps the bytes it read in the private field
``_source`` (a ``msgspec.Raw``, so no second parse on the read path). ``msgspec.structs.replace``
copies it like any field, and ``to_dict()``/``encode()`` lay every key of the source that the
models do not declare back onto the output, at every depth. Keys the models *do* declare follow
the Struct, so clearing a field clears it. Always write objects with ``encode()`` (the ``Api``
does): ``msgspec.json.encode`` would embed ``_source`` as is.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import ClassVar, TypeVar

import msgspec

from kubewire.json_types import JSON

Quantity = str | int | float
"""``resource.Quantity``: a string on the wire; numbers are accepted as users write them."""

IntOrString = int | str
"""``intstr.IntOrString``."""

_SOURCE = "_source"


class Model(msgspec.Struct, kw_only=True, omit_defaults=True, repr_omit_defaults=True):
    """Base of every generated type: keyword-only, absent fields omitted on output and in
    ``repr``."""


class KubeObject(Model, kw_only=True, omit_defaults=True):
    """Base of every kind. ``_source`` holds the JSON this object was decoded from."""

    API_VERSION: ClassVar[str] = ""
    KIND: ClassVar[str] = ""
    PLURAL: ClassVar[str] = ""
    NAMESPACED: ClassVar[bool] = True

    _source: msgspec.Raw | None = None


T = TypeVar("T", bound=KubeObject)


@cache
def decoder_for(cls: type[T]) -> msgspec.json.Decoder[T]:
    """One reusable decoder per model class (msgspec perf-tips)."""
    return msgspec.json.Decoder(cls)


def decode(cls: type[T], data: bytes | msgspec.Raw) -> T:
    """Decode one object of kind ``cls`` from JSON bytes, keeping them for unknown fields."""
    obj: T = decoder_for(cls).decode(data)
    obj._source = data if isinstance(data, msgspec.Raw) else msgspec.Raw(data)
    return obj


def _drop_raw(value: object) -> None:
    """``to_builtins`` hook: the only unsupported value in a model is ``_source``."""
    return None


def to_dict(obj: KubeObject) -> dict[str, JSON]:
    """The object as JSON-ready builtins: apiVersion and kind first, unknown fields restored."""
    out: dict[str, JSON] = msgspec.to_builtins(obj, enc_hook=_drop_raw)
    out.pop(_SOURCE, None)
    out = {"apiVersion": out.pop("apiVersion", None) or obj.API_VERSION,
           "kind": out.pop("kind", None) or obj.KIND, **out}
    if obj._source is not None:
        restore_unknown(obj, out, msgspec.json.decode(obj._source))
    return out


def encode(obj: KubeObject | dict[str, JSON]) -> bytes:
    """JSON bytes of a model (via ``to_dict``) or of a plain dict."""
    return msgspec.json.encode(to_dict(obj) if isinstance(obj, KubeObject) else obj)


def restore_unknown(obj: msgspec.Struct, out: dict[str, JSON], source: JSON) -> None:
    """Copy into ``out`` the keys of ``source`` that ``obj``'s class does not declare, and
    recurse into the declared fields that are still present."""
    if not isinstance(source, dict):
        return
    cls = type(obj)
    known = set(cls.__struct_encode_fields__)
    for key, value in source.items():
        if key not in known and key != _SOURCE:
            out.setdefault(key, value)
    for name, wire in zip(cls.__struct_fields__, cls.__struct_encode_fields__, strict=True):
        if wire in out and wire in source:
            _restore_value(getattr(obj, name), out[wire], source[wire])


def _restore_value(value: object, out: JSON, source: JSON) -> None:
    if isinstance(value, msgspec.Struct) and isinstance(out, dict):
        restore_unknown(value, out, source)
    elif isinstance(value, list) and isinstance(out, list) and isinstance(source, list):
        for item, item_out, item_source in _pair_items(value, out, source):
            _restore_value(item, item_out, item_source)
    elif isinstance(value, dict) and isinstance(out, dict) and isinstance(source, dict):
        for key, item in value.items():
            if key in out and key in source:
                _restore_value(item, out[key], source[key])


def _pair_items(values: Sequence[object], outs: Sequence[JSON], sources: Sequence[JSON],
                ) -> list[tuple[object, JSON, JSON]]:
    """Match list items to their source items: by ``name`` when every item has one (lists of
    containers, ports, ...: the merge key of most lists), else by position if the lengths agree.
    """
    names = [getattr(v, "name", None) for v in values]
    by_name = {s.get("name"): s for s in sources if isinstance(s, dict) and s.get("name")}
    if all(names) and len(by_name) == len(sources):
        return [(v, o, by_name[n]) for v, o, n in zip(values, outs, names, strict=True)
                if n in by_name]
    if len(values) == len(sources):
        return list(zip(values, outs, sources, strict=True))
    return []
