"""Create, update, patch and apply options, decoded and validated as kube does.

Sources: apimachinery ``pkg/apis/meta/v1/validation`` (``ValidateCreateOptions``,
``ValidateUpdateOptions``, ``ValidatePatchOptions``, ``ValidateFieldManager``,
``ValidateDryRun``); objects-and-clients.md §1.12, §2.7. Failures raise Invalid (422) with
kube-apiserver v1.32's exact texts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from kubewire.go_text import GoLiteral, go_byte_len, go_quote, go_string_slice
from kubewire.server.request.query_params import Query, first_value, optional_bool
from kubewire.status import (
    FieldError,
    forbidden,
    invalid,
    invalid_object,
    not_supported,
    required,
)

WriteVerb = Literal["create", "update", "patch", "apply"]
MAX_FIELD_MANAGER_BYTES = 128  # apimachinery validation.FieldManagerMaxLength


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteOptions:
    """Create/update/patch options; ``field_validation`` ``""`` means the server default (Warn)."""

    dry_run: bool = False
    field_manager: str = ""
    field_validation: str = ""
    force: bool = False


_OPTIONS_KIND = {"create": "CreateOptions", "update": "UpdateOptions", "patch": "PatchOptions",
                 "apply": "PatchOptions"}
_FIELD_VALIDATION = ("", "Ignore", "Strict", "Warn")


def _field_manager_errors(manager: str) -> list[FieldError]:
    """``ValidateFieldManager`` (apimachinery pkg/apis/meta/v1/validation)."""
    errs: list[FieldError] = []
    if go_byte_len(manager) > MAX_FIELD_MANAGER_BYTES:
        errs.append(FieldError("FieldValueTooLong", "fieldManager",
                               detail=f"may not be more than {MAX_FIELD_MANAGER_BYTES} bytes"))
    offset = 0
    for ch in manager:
        if not ch.isprintable():
            errs.append(invalid("fieldManager", GoLiteral(go_quote(manager)),
                                f"invalid character U+{ord(ch):04X} (at position {offset})"))
        offset += len(ch.encode("utf-8", "surrogatepass"))
    return errs


def dry_run_errors(values: Sequence[str]) -> list[FieldError]:
    """``ValidateDryRun``: only ``All`` is a valid dryRun value (writes and deletes alike)."""
    if all(v == "All" for v in values):
        return []
    return [not_supported("dryRun", go_string_slice(values), ["All"])]


def parse_write_options(query: Query, *, verb: WriteVerb = "create") -> WriteOptions:
    """Decode and validate write options as ``Validate{Create,Update,Patch}Options`` do.

    Raises Invalid (422, ``<Kind>Options.meta.k8s.io "" is invalid: ...``) for a dryRun other
    than ``All``, a bad fieldManager or fieldValidation, ``force`` on a non-apply patch, or an
    apply without fieldManager.
    """
    dry_run = list(query.get("dryRun", ()))
    manager = first_value(query, "fieldManager") or ""
    validation = first_value(query, "fieldValidation") or ""
    force = optional_bool(query, "force")
    errs: list[FieldError] = []
    if verb == "patch" and force is not None:
        errs.append(forbidden("force", "may not be specified for non-apply patch"))
    if verb == "apply" and not manager:
        errs.append(required("fieldManager", "is required for apply patch"))
    errs += _field_manager_errors(manager) + dry_run_errors(dry_run)
    if validation not in _FIELD_VALIDATION:
        errs.append(not_supported("fieldValidation", validation, _FIELD_VALIDATION))
    if errs:
        raise invalid_object("meta.k8s.io", _OPTIONS_KIND[verb], "", errs)
    return WriteOptions(dry_run=bool(dry_run), field_manager=manager,
                        field_validation=validation, force=bool(force) and verb == "apply")
