"""kubewire.server.request.write_options: create/update/patch/apply options, kube's errors."""

from __future__ import annotations

from typing import Any

import pytest

from kubewire.server.request.write_options import WriteOptions, parse_write_options
from kubewire.status import Invalid


def q(**params: str | list[str]) -> dict[str, list[str]]:
    return {k: v if isinstance(v, list) else [v] for k, v in params.items()}


# --- writes -----------------------------------------------------------------------------------

def test_parse_write_options() -> None:
    assert parse_write_options({}) == WriteOptions()
    opts = parse_write_options(q(dryRun="All", fieldManager="kubectl", fieldValidation="Strict",
                                 force="true"), verb="apply")
    assert opts == WriteOptions(dry_run=True, field_manager="kubectl",
                                field_validation="Strict", force=True)


@pytest.mark.parametrize(("query", "verb", "message"), [
    (q(dryRun="foo"), "create", 'CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported '
                                'value: []string{"foo"}: supported values: "All"'),
    (q(dryRun=["All", ""]), "update", 'UpdateOptions.meta.k8s.io "" is invalid: dryRun: '
                                      'Unsupported value: []string{"All", ""}: supported values: '
                                      '"All"'),
    (q(fieldValidation="strict"), "create",
     'CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "strict": '
     'supported values: "", "Ignore", "Strict", "Warn"'),
    (q(fieldManager="a" * 129), "create",
     'CreateOptions.meta.k8s.io "" is invalid: fieldManager: Too long: may not be more than 128 '
     "bytes"),
    (q(fieldManager="ab\x07"), "create",
     'CreateOptions.meta.k8s.io "" is invalid: fieldManager: Invalid value: "ab\\a": invalid '
     "character U+0007 (at position 2)"),
    (q(force="false"), "patch", 'PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may '
                                "not be specified for non-apply patch"),
    ({}, "apply", 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is '
                  "required for apply patch"),
])
def test_invalid_write_options(query: dict[str, list[str]], verb: Any, message: str) -> None:
    with pytest.raises(Invalid) as info:
        parse_write_options(query, verb=verb)
    assert info.value.message == message
    assert info.value.details is not None and info.value.details["kind"].endswith("Options")
