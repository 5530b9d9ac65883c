"""Bad values of CRD field errors as Go's ``%#v`` prints them.

Some CRD errors carry a Go struct or slice as the bad value (``spec.versions: Invalid value:
[]apiextensions.CustomResourceDefinitionVersion{...}: must have exactly one version marked as
storage version``); ``field.Error.ErrorBody`` prints those with ``%#v``. These build the same
text from the internal form (``crd_internal``), field order from
``apiextensions-apiserver:pkg/apis/apiextensions/types.go``. A set pointer prints as Go prints an
address; kubewire prints a fixed one (``meta.GO_POINTER_ADDRESS`` does the same for metadata).
The whole-schema value of the status-subresource root rule is printed as a stand-in: the
struct has forty-odd fields and nested maps no client reads (crds.md §1.4 says to match on the
detail).
"""

from __future__ import annotations

from collections.abc import Sequence

from kubewire.go_text import GoLiteral, go_quote
from kubewire.json_types import JSON
from kubewire.server.apiextensions.crd.crd_internal import InternalVersion, as_dict, as_str

GO_POINTER_ADDRESS = "0xc000000000"
_PKG = "apiextensions."


def _pointer(type_name: str, is_set: bool) -> str:
    return f"(*{type_name})({GO_POINTER_ADDRESS if is_set else 'nil'})"


def _int32(value: JSON) -> str:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else "0"


def _column(col: JSON) -> str:
    c = as_dict(col)
    return (f"{_PKG}CustomResourceColumnDefinition{{Name:{go_quote(as_str(c.get('name')))}, "
            f"Type:{go_quote(as_str(c.get('type')))}, Format:{go_quote(as_str(c.get('format')))}, "
            f"Description:{go_quote(as_str(c.get('description')))}, "
            f"Priority:{_int32(c.get('priority'))}, "
            f"JSONPath:{go_quote(as_str(c.get('jsonPath')))}}}")


def _slice(type_name: str, items: Sequence[str]) -> str:
    if not items:
        return f"[]{_PKG}{type_name}(nil)"
    return f"[]{_PKG}{type_name}{{" + ", ".join(items) + "}"


def _version(v: InternalVersion) -> str:
    fields = [
        f"Name:{go_quote(v.name)}",
        f"Served:{'true' if v.served else 'false'}",
        f"Storage:{'true' if v.storage else 'false'}",
        f"Deprecated:{'true' if v.deprecated else 'false'}",
        f"DeprecationWarning:{_pointer('string', v.has_deprecation_warning)}",
        f"Schema:{_pointer(_PKG + 'CustomResourceValidation', v.schema is not None)}",
        f"Subresources:{_pointer(_PKG + 'CustomResourceSubresources', v.subresources is not None)}",
        "AdditionalPrinterColumns:" + _slice("CustomResourceColumnDefinition",
                                             [_column(c) for c in v.columns]),
        "SelectableFields:" + _slice(
            "SelectableField",
            [f"{_PKG}SelectableField{{JSONPath:{go_quote(as_str(as_dict(f).get('jsonPath')))}}}"
             for f in v.selectable_fields]),
    ]
    return f"{_PKG}CustomResourceDefinitionVersion{{" + ", ".join(fields) + "}"


def go_versions(versions: Sequence[InternalVersion]) -> GoLiteral:
    """``%#v`` of the internal ``[]CustomResourceDefinitionVersion``."""
    return GoLiteral(_slice("CustomResourceDefinitionVersion", [_version(v) for v in versions]))


def go_bytes(data: bytes) -> GoLiteral:
    """``%#v`` of a ``[]byte``: ``[]byte{0x2d, 0x2d}``."""
    return GoLiteral("[]byte{" + ", ".join(f"0x{b:x}" for b in data) + "}")


def go_schema_props() -> GoLiteral:
    """The stand-in for a whole ``apiextensions.JSONSchemaProps`` value (module docstring)."""
    return GoLiteral(f"{_PKG}JSONSchemaProps{{...}}")
