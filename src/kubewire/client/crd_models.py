"""``kubewire models crd.yaml > models.py``: typed msgspec models of custom resources, made
from their CustomResourceDefinitions' schemas, in the style of ``kubewire.models``.

Each served version of each CRD becomes a ``KubeObject`` class (``API_VERSION``, ``KIND``,
``PLURAL``, ``NAMESPACED``), usable as ``Api(Widget, client=client)``; fields the model does not
declare survive a round trip, as with the built-in models. The storage version's class is named
after the kind (``Widget``), other served versions add theirs (``WidgetV1beta1``). Schema to
Python, as a structural schema means it:

- ``properties`` → fields (snake_case, renamed to the wire name), sorted; ``required`` ones
  have no default, the rest are ``X | None = None``; ``nullable`` adds ``| None``;
- a nested object with properties → its own Struct, named after its path
  (``WidgetSpecTemplate``); classes of the same shape are written once;
- ``enum`` of strings or integers → ``Literal[...]``; ``x-kubernetes-int-or-string`` →
  ``IntOrString``; ``number`` → ``int | float`` (so ``1`` stays ``1``);
- ``additionalProperties`` → ``dict[str, X]``; ``x-kubernetes-embedded-resource``, an object
  without properties, and ``x-kubernetes-preserve-unknown-fields`` without a type →
  ``dict[str, JSON]`` / ``JSON``;
- ``metadata`` is ``ObjectMeta``, ``apiVersion``/``kind`` plain strings.

Written by hand (no code generator library): the output must match ``tools/gen_models.py``'s
style, and the input is only the handful of structural-schema keys above. Pure: text in, text
out (``generate_from_yaml``); ``kubewire.cli`` does the file reading.
"""

from __future__ import annotations

import json
import keyword
import re
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

LINE_LIMIT = 100
CRD_API_VERSION = "apiextensions.k8s.io/v1"
# Names the generated module imports or uses in annotations: a class or field may not take them.
RESERVED_CLASSES = frozenset({"ClassVar", "IntOrString", "JSON", "KubeObject", "Literal",
                              "Model", "ObjectMeta", "KINDS"})
ANNOTATION_NAMES = frozenset({"bool", "dict", "float", "int", "list", "str", "msgspec"})
SCALARS = {"string": "str", "integer": "int", "number": "int | float", "boolean": "bool"}


class CRDError(ValueError):
    """The input is not a usable CustomResourceDefinition (said in one line)."""


def snake_case(name: str) -> str:
    """``podIPs`` → ``pod_ips``, ``hostIPC`` → ``host_ipc``; keywords, builtins the module's
    annotations use, and ``_source`` get a trailing ``_`` (as ``tools/gen_models.py``)."""
    s = re.sub(r"([A-Z]{2,})s(?=[A-Z]|$)", lambda m: m.group(1) + "S", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s)
    s = re.sub(r"\W", "_", s).lower() or "field"
    if s[:1].isdigit():
        s = "f_" + s
    reserved = keyword.iskeyword(s) or s in ANNOTATION_NAMES or s == "_source"
    return s + "_" if reserved else s


def pascal_case(name: str) -> str:
    """``spec`` → ``Spec``, ``tls-config`` → ``TlsConfig``, ``v1beta1`` → ``V1beta1``."""
    out = "".join(part[:1].upper() + part[1:] for part in re.split(r"[\W_]+", name) if part)
    return out if out[:1].isalpha() else "X" + out


@dataclass(frozen=True)
class FieldDef:
    py_name: str
    wire_name: str
    annotation: str
    required: bool


@dataclass
class ClassDef:
    name: str
    fields: tuple[FieldDef, ...]
    base: str = "Model"
    class_vars: list[str] = field(default_factory=list)
    doc: str = ""


@dataclass
class KindVersion:
    """One served version of one CRD: what its kind class says."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    schema: Mapping[str, Any]
    crd_name: str
    primary: bool  # the storage version (or the first served one): named after the kind

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


def load_crds(text: str, source: str = "<input>") -> list[Mapping[str, Any]]:
    """The CRDs in a YAML stream (several documents, ``kind: List`` items too); other
    objects are skipped. Raises ``CRDError`` when it is not YAML or holds no CRD."""
    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        raise CRDError(f"{source}: not YAML: {str(exc).splitlines()[0]}") from None
    crds: list[Mapping[str, Any]] = []
    for doc in _flatten(documents):
        if doc.get("kind") == "CustomResourceDefinition":
            if doc.get("apiVersion") != CRD_API_VERSION:
                raise CRDError(f"{source}: {doc.get('apiVersion')} CustomResourceDefinition: "
                               f"only {CRD_API_VERSION} is read")
            crds.append(doc)
    if not crds:
        raise CRDError(f"{source}: no CustomResourceDefinition in it")
    return crds


def _flatten(documents: Iterable[Any]) -> Iterable[Mapping[str, Any]]:
    for doc in documents:
        if not isinstance(doc, Mapping):
            continue
        if doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            yield from _flatten(doc["items"])
        else:
            yield doc


def kind_versions(crd: Mapping[str, Any]) -> list[KindVersion]:
    """The served versions of ``crd``, the primary one first. Raises ``CRDError`` for a CRD
    without the fields a model needs."""
    spec = crd.get("spec")
    name = str((crd.get("metadata") or {}).get("name") or "")
    if not isinstance(spec, Mapping):
        raise CRDError(f"CustomResourceDefinition {name!r}: no spec")
    names = spec.get("names") or {}
    group, kind, plural = spec.get("group"), names.get("kind"), names.get("plural")
    if not (isinstance(group, str) and group and isinstance(kind, str) and kind
            and isinstance(plural, str) and plural):
        raise CRDError(f"CustomResourceDefinition {name!r}: spec.group, spec.names.kind and "
                       "spec.names.plural are required")
    served = [v for v in spec.get("versions") or () if isinstance(v, Mapping)
              and v.get("served", False) and isinstance(v.get("name"), str)]
    if not served:
        raise CRDError(f"CustomResourceDefinition {name!r}: no served version")
    primary = next((v for v in served if v.get("storage")), served[0])
    served.sort(key=lambda v: v is not primary)
    namespaced = spec.get("scope", "Namespaced") == "Namespaced"
    out = []
    for version in served:
        schema = ((version.get("schema") or spec.get("validation") or {})
                  .get("openAPIV3Schema") or {})
        out.append(KindVersion(group, version["name"], kind, plural, namespaced, schema,
                               name or f"{plural}.{group}", version is primary))
    return out


class Generator:
    """Classes in definition order (each after the classes its fields name)."""

    def __init__(self) -> None:
        self.classes: dict[str, ClassDef] = {}
        self._by_shape: dict[tuple[FieldDef, ...], str] = {}
        self.kinds: list[str] = []

    def add_kind(self, kv: KindVersion) -> str:
        base = pascal_case(kv.kind) + ("" if kv.primary else pascal_case(kv.version))
        props = dict(kv.schema.get("properties") or {})
        for meta in ("apiVersion", "kind", "metadata"):
            props.pop(meta, None)
        required = set(kv.schema.get("required") or ()) - {"apiVersion", "kind", "metadata"}
        fields = [FieldDef("api_version", "apiVersion", "str", False),
                  FieldDef("kind", "kind", "str", False),
                  FieldDef("metadata", "metadata", "ObjectMeta", False),
                  *self._fields(props, required, base, taken={"api_version", "kind",
                                                               "metadata"})]
        name = self._unique(base)
        scope = "namespaced" if kv.namespaced else "cluster-scoped"
        self.classes[name] = ClassDef(
            name, tuple(fields), "KubeObject",
            [f'API_VERSION: ClassVar[str] = "{kv.api_version}"',
             f'KIND: ClassVar[str] = "{kv.kind}"',
             f'PLURAL: ClassVar[str] = "{kv.plural}"',
             f"NAMESPACED: ClassVar[bool] = {kv.namespaced}"],
            f"{kv.kind} ({kv.api_version}, {scope}).\n\n    From the CRD {kv.crd_name}.\n    ")
        self.kinds.append(name)
        return name

    def _fields(self, props: Mapping[str, Any], required: set[str], hint: str,
                taken: set[str] | None = None) -> list[FieldDef]:
        used = set(taken or ())
        out = []
        for wire in sorted(props):
            py = snake_case(wire)
            while py in used:
                py += "_"
            used.add(py)
            node = props[wire] if isinstance(props[wire], Mapping) else {}
            annotation = self.annotation(node, hint + pascal_case(wire))
            if node.get("nullable") and wire in required:
                annotation += " | None"
            out.append(FieldDef(py, wire, annotation, wire in required))
        return out

    def annotation(self, node: Mapping[str, Any], hint: str) -> str:
        """The Python type of a schema node; nested objects become classes named ``hint``."""
        if node.get("x-kubernetes-embedded-resource"):
            return "dict[str, JSON]"
        if node.get("x-kubernetes-int-or-string"):
            return "IntOrString"
        kind = node.get("type")
        literal = _literal(node.get("enum"), kind)
        if literal:
            return literal
        if kind in SCALARS:
            return SCALARS[kind]
        if kind == "array":
            items = node.get("items")
            return f"list[{self.annotation(items, hint) if isinstance(items, Mapping) else 'JSON'}]"
        props = node.get("properties")
        if kind in ("object", None) and isinstance(props, Mapping) and props:
            return self._object_class(node, props, hint)
        if kind == "object":
            values = node.get("additionalProperties")
            if isinstance(values, Mapping):
                return f"dict[str, {self.annotation(values, hint)}]"
            return "dict[str, JSON]"
        return "JSON"

    def _object_class(self, node: Mapping[str, Any], props: Mapping[str, Any], hint: str) -> str:
        fields = tuple(self._fields(props, set(node.get("required") or ()), hint))
        if fields in self._by_shape:  # the same shape elsewhere: one class
            return self._by_shape[fields]
        name = self._unique(hint)
        self.classes[name] = ClassDef(name, fields)
        self._by_shape[fields] = name
        return name

    def _unique(self, name: str) -> str:
        if name in RESERVED_CLASSES:
            name += "_"
        candidate, n = name, 2
        while candidate in self.classes:
            candidate, n = f"{name}{n}", n + 1
        return candidate


def _literal(values: object, kind: object) -> str | None:
    """``Literal[...]`` of an enum of strings or of integers (None values mean nullable, and
    ``| None`` is added anyway); None for other enums, which keep their type."""
    if not isinstance(values, list):
        return None
    present = [v for v in values if v is not None]
    if not present:
        return None
    if kind == "string" and all(isinstance(v, str) for v in present):
        return f"Literal[{', '.join(json.dumps(v) for v in dict.fromkeys(present))}]"
    if kind == "integer" and all(type(v) is int for v in present):
        return f"Literal[{', '.join(str(v) for v in dict.fromkeys(present))}]"
    return None


# --- rendering -------------------------------------------------------------------------------


def render_field(f: FieldDef) -> str:
    """One field line, wrapped at the first break that fits ``LINE_LIMIT``."""
    annotation = f.annotation if f.required else f"{f.annotation} | None"
    if f.required:
        value = "" if f.py_name == f.wire_name else f'msgspec.field(name="{f.wire_name}")'
    else:
        value = ("None" if f.py_name == f.wire_name
                 else f'msgspec.field(default=None, name="{f.wire_name}")')
    start = f"    {f.py_name}: {annotation}"
    tail = f" = {value}" if value else ""
    candidates = [start + tail]
    if value.startswith("msgspec.field(default=None"):
        candidates.append(f'{start} = msgspec.field(\n        default=None, name="{f.wire_name}")')
    if value:
        candidates.append(f"{start} = (\n        {value})")
    for line in candidates:
        if max(len(part) for part in line.split("\n")) <= LINE_LIMIT:
            return line
    return f"    {f.py_name}: (\n{_wrap_annotation(annotation, 8)}\n    ){tail}"


def _wrap_annotation(annotation: str, indent: int) -> str:
    """A long annotation over several lines: a ``Literal[...]`` one value a line."""
    pad = " " * indent
    if len(annotation) + indent <= LINE_LIMIT or "Literal[" not in annotation:
        return pad + annotation
    head, _, rest = annotation.partition("Literal[")
    end = _closing_bracket(rest)
    values = json.loads(f"[{rest[:end]}]")  # the values are JSON literals (``_literal``)
    inner = "\n".join(f"{pad}    {json.dumps(v)}," for v in values)
    return f"{pad}{head}Literal[\n{inner}\n{pad}]{rest[end + 1:]}"


def _closing_bracket(text: str) -> int:
    """Where the ``]`` that closes a Literal's values is (``]`` in a string does not)."""
    quoted = escaped = False
    for i, char in enumerate(text):
        if quoted:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                quoted = False
        elif char == '"':
            quoted = True
        elif char == "]":
            return i
    return len(text)


def render_class(cls: ClassDef) -> str:
    head = f"class {cls.name}({cls.base}, kw_only=True, omit_defaults=True):"
    if len(head) > LINE_LIMIT:
        head = f"class {cls.name}(\n    {cls.base}, kw_only=True, omit_defaults=True\n):"
    out = [head]
    if cls.doc:
        out += [f'    """{cls.doc}"""', ""]
    out += [f"    {cv}" for cv in cls.class_vars]
    if cls.class_vars and cls.fields:
        out.append("")
    out += [render_field(f) for f in cls.fields]
    if len(out) == 1:
        out.append("    pass")
    return "\n".join(out) + "\n"


def render_module(gen: Generator, crds: Sequence[KindVersion], sources: Sequence[str]) -> str:
    text = "\n\n".join(render_class(cls) for cls in gen.classes.values())
    base_names = [n for n in ("IntOrString", "KubeObject", "Model")
                  if re.search(rf"\b{n}\b", text)]
    typing_names = [n for n in ("ClassVar", "Literal") if re.search(rf"\b{n}\b", text)]
    kinds = ", ".join(sorted({f"{kv.kind} ({kv.group})" for kv in crds}))
    head = [*textwrap.wrap(f"Generated by `kubewire models` from {', '.join(sources)}; do not "
                           "edit.", LINE_LIMIT - 2, initial_indent="# ",
                           subsequent_indent="# ", break_on_hyphens=False), "",
            *textwrap.wrap(f'"""Models of the custom resources {kinds}.', LINE_LIMIT,
                           break_on_hyphens=False), "",
            "Use them as ``kubewire.client.Api(Kind, client=client)``; ``KINDS`` lists every",
            'served version\'s class."""', "",
            f"from typing import {', '.join(typing_names or ['ClassVar'])}", "",
            # One block: in the project that uses the models, kubewire is a third party.
            "import msgspec"]
    if re.search(r"\bJSON\b", text):
        head.append("from kubewire.json_types import JSON")
    head += [f"from kubewire.models.base import {', '.join(base_names)}",
             "from kubewire.models.meta_v1 import ObjectMeta", "", "", ""]
    tail = ["", "", "KINDS: tuple[type[KubeObject], ...] = ("]
    tail += [f"    {name}," for name in gen.kinds]
    tail += [")", '"""Every served version\'s class, storage versions first."""', ""]
    return "\n".join(head) + text + "\n".join(tail)


def generate(crds: Iterable[Mapping[str, Any]], sources: Sequence[str] = ("<input>",)) -> str:
    """The Python module of models for every served version of ``crds``."""
    gen = Generator()
    versions = [kv for crd in crds for kv in kind_versions(crd)]
    for kv in sorted(versions, key=lambda kv: not kv.primary):
        gen.add_kind(kv)
    return render_module(gen, versions, sources)


def generate_from_yaml(texts: Sequence[tuple[str, str]]) -> str:
    """``[(source name, YAML text), ...]`` → the module (``CRDError`` for bad input)."""
    crds = [crd for source, text in texts for crd in load_crds(text, source)]
    return generate(crds, [source for source, _ in texts])


__all__ = ["CRDError", "generate", "generate_from_yaml", "load_crds"]
