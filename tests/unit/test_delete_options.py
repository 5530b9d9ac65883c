"""kubewire.server.request.delete_options: DELETE body and query options, kube's exact errors."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubewire.server.request.delete_options import DeleteOptions, parse_delete_options
from kubewire.status import BadRequest, Invalid, StatusError


def q(**params: str | list[str]) -> dict[str, list[str]]:
    return {k: v if isinstance(v, list) else [v] for k, v in params.items()}


# --- deletes ----------------------------------------------------------------------------------

@pytest.mark.parametrize("body", [
    b'{"propagationPolicy":"Background"}',
    b'{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Background"}',
    b'{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/v1","propagationPolicy":"Background"}',
])
def test_delete_body_kubectl_shapes(body: bytes) -> None:
    assert parse_delete_options(body, {}) == DeleteOptions(propagation_policy="Background")


def test_delete_body_fields() -> None:
    body = (b'{"gracePeriodSeconds":0,"dryRun":["All"],"orphanDependents":false,'
            b'"preconditions":{"uid":"u1","resourceVersion":"7"}}')
    assert parse_delete_options(body, q(gracePeriodSeconds="9")) == DeleteOptions(
        grace_period_seconds=0, dry_run=True, orphan_dependents=False, precondition_uid="u1",
        precondition_resource_version="7")
    assert parse_delete_options(b"{}", {}) == DeleteOptions()


def test_delete_query_when_body_is_empty() -> None:
    opts = parse_delete_options(b"", q(gracePeriodSeconds="5", propagationPolicy="Foreground",
                                       dryRun="All"))
    assert opts == DeleteOptions(grace_period_seconds=5, propagation_policy="Foreground",
                                 dry_run=True)
    assert parse_delete_options(b"", q(orphanDependents="true")).orphan_dependents is True
    with pytest.raises(BadRequest) as info:
        parse_delete_options(b"", q(gracePeriodSeconds="soon"))
    assert info.value.message == 'strconv.ParseInt: parsing "soon": invalid syntax'


DELETE_INVALID = 'DeleteOptions.meta.k8s.io "" is invalid: '


@pytest.mark.parametrize(("body", "query", "message"), [
    (b'{"propagationPolicy":"Foo"}', {}, 'propagationPolicy: Unsupported value: "Foo": supported '
                                         'values: "Foreground", "Background", "Orphan", "nil"'),
    (b'{"propagationPolicy":"Orphan","orphanDependents":true}', {},
     'propagationPolicy: Invalid value: "Orphan": orphanDependents and deletionPropagation '
     "cannot be both set"),
    (b'{"dryRun":["Some"]}', {},
     'dryRun: Unsupported value: []string{"Some"}: supported values: "All"'),
    (b"", q(propagationPolicy="x"), 'propagationPolicy: Unsupported value: "x": supported '
                                    'values: "Foreground", "Background", "Orphan", "nil"'),
])
def test_invalid_delete_options(body: bytes, query: dict[str, list[str]], message: str) -> None:
    with pytest.raises(Invalid) as info:
        parse_delete_options(body, query)
    assert info.value.message == DELETE_INVALID + message


@pytest.mark.parametrize(("body", "message"), [
    (b'{"gracePeriodSeconds":"x"}',
     "json: cannot unmarshal string into Go struct field DeleteOptions.gracePeriodSeconds of "
     "type int64"),
    (b'{"dryRun":"All"}',
     "json: cannot unmarshal string into Go struct field DeleteOptions.dryRun of type []string"),
    (b'{"dryRun":[1]}',
     "json: cannot unmarshal number into Go struct field DeleteOptions.dryRun of type string"),
    (b'{"orphanDependents":"yes"}',
     "json: cannot unmarshal string into Go struct field DeleteOptions.orphanDependents of type "
     "bool"),
    (b'{"preconditions":{"uid":1}}',
     "json: cannot unmarshal number into Go struct field DeleteOptions.preconditions.uid of "
     "type types.UID"),
    (b'{"apiVersion":true}', "couldn't get version/kind; json parse error: json: cannot "
                             "unmarshal bool into Go struct field .apiVersion of type string"),
    (b"[]", "couldn't get version/kind; json parse error: json: cannot unmarshal array into Go "
            'value of type struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind '
            'string "json:\\"kind,omitempty\\"" }'),
    (b"  ", "couldn't get version/kind; json parse error: unexpected end of JSON input"),
    (b'{"kind":"Pod","apiVersion":"v1"}',
     'no kind "Pod" is registered for version "v1" in scheme '
     '"k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme/register.go:28"'),
])
def test_undecodable_delete_bodies(body: bytes, message: str) -> None:
    with pytest.raises(BadRequest) as info:
        parse_delete_options(body, {})
    assert info.value.message == message


@given(st.binary())
def test_delete_body_only_raises_status_errors(body: bytes) -> None:
    with contextlib.suppress(StatusError):
        parse_delete_options(body, {})
