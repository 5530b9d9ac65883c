"""kubewire.server.options: list/watch, get, write and delete options with kube's exact errors."""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubewire.resources import REGISTRY, Resource
from kubewire.server.options import (
    DeleteOptions,
    ListOptions,
    WriteOptions,
    decode_continue,
    encode_continue,
    parse_bool,
    parse_delete_options,
    parse_get_options,
    parse_list_options,
    parse_write_options,
)
from kubewire.status import BadRequest, Invalid, StatusError


def lookup(group: str, plural: str) -> Resource:
    found = REGISTRY.lookup(group, "v1", plural)
    assert found is not None
    return found


PODS = lookup("", "pods")
DEPLOYMENTS = lookup("apps", "deployments")
LIST_INVALID = 'ListOptions.meta.k8s.io "" is invalid: '


def q(**params: str | list[str]) -> dict[str, list[str]]:
    return {k: v if isinstance(v, list) else [v] for k, v in params.items()}


def list_error(query: Mapping[str, Sequence[str]], resource: Resource = PODS,
               **kwargs: Any) -> StatusError:
    with pytest.raises(StatusError) as info:
        parse_list_options(query, resource, **kwargs)
    return info.value


def token(doc: Any) -> str:
    raw = json.dumps(doc, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


# --- bool parsing (§1.2) ----------------------------------------------------------------------

@pytest.mark.parametrize(("value", "expected"), [
    ("false", False), ("FALSE", False), ("False", False), ("0", False),
    ("true", True), ("True", True), ("1", True), ("", True), ("no", True), ("00", True),
])
def test_parse_bool(value: str, expected: bool) -> None:
    assert parse_bool(value) is expected


# --- decoding ---------------------------------------------------------------------------------

def test_defaults_for_an_empty_query() -> None:
    assert parse_list_options({}, PODS) == ListOptions()


def test_decodes_every_parameter_and_takes_the_first_value() -> None:
    opts = parse_list_options(q(watch="true", resourceVersion=["12", "13"],
                                allowWatchBookmarks="1", timeoutSeconds="300",
                                labelSelector="app=web", fieldSelector="spec.host=n1",
                                limit="500", pretty="", unknownParam="x"), PODS)
    assert opts.watch and opts.allow_watch_bookmarks and opts.pretty is True
    assert opts.resource_version == "12" and opts.resource_version_int == 12
    assert opts.timeout_seconds == 300 and opts.limit == 500
    assert str(opts.label_selector) == "app=web"
    assert str(opts.field_selector) == "spec.nodeName=n1"
    assert opts.send_initial_events is None and opts.resource_version_match == ""


@pytest.mark.parametrize(("query", "message"), [
    (q(timeoutSeconds="abc"), 'strconv.ParseInt: parsing "abc": invalid syntax'),
    (q(timeoutSeconds="1.5"), 'strconv.ParseInt: parsing "1.5": invalid syntax'),
    (q(limit=""), 'strconv.ParseInt: parsing "": invalid syntax'),
    (q(limit="9223372036854775808"),
     'strconv.ParseInt: parsing "9223372036854775808": value out of range'),
    (q(timeoutSeconds="x", limit="y"), 'strconv.ParseInt: parsing "x": invalid syntax'),
    (q(limit="y", labelSelector="a b"), 'strconv.ParseInt: parsing "y": invalid syntax'),
    (q(labelSelector="a in b", fieldSelector="x"),
     "unable to parse requirement: found 'b' expected: '('"),
    (q(fieldSelector="a=b=c"), "invalid field selector: unescaped character in value: 61"),
    (q(fieldSelector="spec.foo=x"), "field label not supported: spec.foo"),
    (q(resourceVersion="abc"),
     'resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax'),
    (q(resourceVersion="-1", watch="1"),
     'resourceVersion: Invalid value: "-1": strconv.ParseUint: parsing "-1": invalid syntax'),
    (q(resourceVersion="18446744073709551616"),
     'resourceVersion: Invalid value: "18446744073709551616": strconv.ParseUint: parsing '
     '"18446744073709551616": value out of range'),
    (q(resourceVersion="5", **{"continue": encode_continue(3, "a\x00")}),
     "specifying resource version is not allowed when using continue"),
])
def test_bad_requests(query: dict[str, list[str]], message: str) -> None:
    err = list_error(query)
    assert isinstance(err, BadRequest) and err.code == 400
    assert err.message == message


def test_default_style_field_label_message() -> None:
    err = list_error(q(fieldSelector="spec.replicas=1"), DEPLOYMENTS)
    assert err.message == ('"spec.replicas" is not a known field selector: only '
                           '"metadata.name", "metadata.namespace"')


def test_continue_with_rv_zero_is_allowed_and_watch_ignores_continue() -> None:
    tok = encode_continue(3, "a\x00")
    assert parse_list_options(q(resourceVersion="0", **{"continue": tok}), PODS).continue_token
    opts = parse_list_options(q(watch="1", resourceVersion="5", **{"continue": "junk"}), PODS)
    assert opts.watch and opts.continue_token == "junk"


def test_list_validates_the_continue_token_first() -> None:
    err = list_error(q(resourceVersion="5", **{"continue": "!"}))
    assert err.message == ("invalid continue token: continue key is not valid: illegal base64 "
                           "data at input byte 0")


# --- v1.32 defaulting (§2.2) ------------------------------------------------------------------

@pytest.mark.parametrize("rv", ["", "0"])
def test_legacy_watch_is_defaulted_to_watch_list(rv: str) -> None:
    opts = parse_list_options(q(watch="true", resourceVersion=rv), PODS)
    assert opts.send_initial_events is True
    assert opts.resource_version_match == "NotOlderThan"


@pytest.mark.parametrize("query", [
    q(watch="true", resourceVersion="7"),
    q(watch="false"),
    q(),
])
def test_no_defaulting(query: dict[str, list[str]]) -> None:
    opts = parse_list_options(query, PODS)
    assert opts.send_initial_events is None and opts.resource_version_match == ""


def test_explicit_send_initial_events_false_is_kept() -> None:
    opts = parse_list_options(q(watch="1", sendInitialEvents="false",
                                resourceVersionMatch="NotOlderThan"), PODS)
    assert opts.send_initial_events is False


def test_legacy_watch_path_forces_watch_without_defaulting() -> None:
    opts = parse_list_options({}, PODS, force_watch=True)
    assert opts.watch and opts.send_initial_events is None
    err = list_error(q(sendInitialEvents="true", resourceVersionMatch="NotOlderThan"),
                     force_watch=True)
    # kube validates a /watch/ path request as a list unless ?watch is also set
    assert err.message == LIST_INVALID + (
        "[resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless "
        "resourceVersion is provided, sendInitialEvents: Forbidden: sendInitialEvents is "
        "forbidden for list]")


# --- validation (§1.3) ------------------------------------------------------------------------

@pytest.mark.parametrize(("query", "body"), [
    (q(watch="1", resourceVersion="5", sendInitialEvents="true"),
     "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch "
     "to NotOlderThan"),
    (q(watch="1", resourceVersion="5", resourceVersionMatch="NotOlderThan"),
     "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless "
     "sendInitialEvents is provided"),
    (q(watch="1", sendInitialEvents="true", resourceVersionMatch="Exact"),
     '[resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch '
     'to NotOlderThan, resourceVersionMatch: Unsupported value: "Exact": supported values: '
     '"NotOlderThan"]'),
    (q(watch="1", sendInitialEvents="true", resourceVersionMatch="NotOlderThan",
       **{"continue": "x"}),
     "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is "
     "provided"),
    (q(resourceVersionMatch="NotOlderThan"),
     "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion "
     "is provided"),
    (q(resourceVersion="5", resourceVersionMatch="Exact", **{"continue": "x"}),
     "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is "
     "provided"),
    (q(resourceVersion="5", resourceVersionMatch="Foo"),
     'resourceVersionMatch: Unsupported value: "Foo": supported values: "Exact", '
     '"NotOlderThan", ""'),
    (q(resourceVersion="0", resourceVersionMatch="Exact"),
     'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for '
     'resourceVersion "0"'),
    (q(sendInitialEvents="false"),
     "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"),
])
def test_invalid_list_options(query: dict[str, list[str]], body: str) -> None:
    err = list_error(query)
    assert isinstance(err, Invalid) and err.code == 422
    assert err.message == LIST_INVALID + body


def test_invalid_status_shape() -> None:
    err = list_error(q(watch="1", resourceVersion="5", sendInitialEvents="true"))
    assert err.to_status() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": LIST_INVALID + "resourceVersionMatch: Forbidden: sendInitialEvents requires "
                                  "setting resourceVersionMatch to NotOlderThan",
        "reason": "Invalid",
        "details": {"group": "meta.k8s.io", "kind": "ListOptions", "causes": [
            {"reason": "FieldValueForbidden", "field": "resourceVersionMatch",
             "message": "Forbidden: sendInitialEvents requires setting resourceVersionMatch to "
                        "NotOlderThan"}]},
        "code": 422}


def test_watch_accepts_initial_events_without_bookmarks() -> None:
    opts = parse_list_options(q(watch="1", sendInitialEvents="true",
                                resourceVersionMatch="NotOlderThan"), PODS)
    assert opts.send_initial_events is True and not opts.allow_watch_bookmarks


# --- single-object watch (§1.4) ---------------------------------------------------------------

def test_path_name_becomes_a_field_selector() -> None:
    opts = parse_list_options({}, PODS, force_watch=True, path_name="web")
    assert opts.field_selector.exact("metadata.name") == "web"
    same = parse_list_options(q(fieldSelector="metadata.name=web"), PODS, force_watch=True,
                              path_name="web")
    assert str(same.field_selector) == "metadata.name=web"


@pytest.mark.parametrize("selector", ["metadata.name=other", "status.phase=Running",
                                      "metadata.name!=web"])
def test_path_name_mismatch(selector: str) -> None:
    err = list_error(q(fieldSelector=selector), force_watch=True, path_name="web")
    assert err.code == 400
    assert err.message == "fieldSelector metadata.name doesn't match requested name"


# --- continue tokens (§10.2) ------------------------------------------------------------------

def test_encode_continue_is_kube_format() -> None:
    assert encode_continue(12345, "web-2\x00") == (
        "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTIzNDUsInN0YXJ0Ijoid2ViLTJcdTAwMDAifQ")
    assert encode_continue(-1, "web-2\x00") == (
        "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6LTEsInN0YXJ0Ijoid2ViLTJcdTAwMDAifQ")
    decoded = base64.urlsafe_b64decode(encode_continue(1, "<a&b>") + "==")
    assert decoded == b'{"v":"meta.k8s.io/v1","rv":1,"start":"\\u003ca\\u0026b\\u003e"}'


def test_decode_continue_accepts_kube_tokens() -> None:
    assert decode_continue(encode_continue(-1, "demo/web-2\x00")) == (-1, "demo/web-2\x00")
    assert decode_continue(token({"v": "meta.k8s.io/v1", "rv": 5, "start": "/a\x00"})) == (
        5, "a\x00")
    assert decode_continue(token({"V": "meta.k8s.io/v1", "RV": 5, "Start": "a", "x": 1})) == (
        5, "a")


PREFIX = "invalid continue token: continue key is not valid: "


@pytest.mark.parametrize(("tok", "reason"), [
    (token({"v": "meta.k8s.io/v1", "rv": 0, "start": "a"}),
     "incorrect encoded start resourceVersion (version meta.k8s.io/v1)"),
    (token({"v": "meta.k8s.io/v1", "start": "a"}),
     "incorrect encoded start resourceVersion (version meta.k8s.io/v1)"),
    (token({"v": "meta.k8s.io/v1", "rv": 3, "start": ""}),
     "encoded start key empty (version meta.k8s.io/v1)"),
    (token({"v": "meta.k8s.io/v2", "rv": 3, "start": "a"}),
     "server does not recognize this encoded version meta.k8s.io/v2"),
    (token({}), "server does not recognize this encoded version "),
    (token(None), "server does not recognize this encoded version "),
    (token({"v": "meta.k8s.io/v1", "rv": 3, "start": "../secrets/x"}), "../secrets/x"),
    (token({"v": "meta.k8s.io/v1", "rv": 3, "start": "a/../../b"}), "a/../../b"),
    (token({"v": "meta.k8s.io/v1", "rv": 3, "start": "a//b"}), "a//b"),
    (token([1]), "json: cannot unmarshal array into Go value of type storage.continueToken"),
    (token({"v": "meta.k8s.io/v1", "rv": "3", "start": "a"}),
     "json: cannot unmarshal string into Go struct field continueToken.rv of type int64"),
    (token({"v": "meta.k8s.io/v1", "rv": 1.5, "start": "a"}),
     "json: cannot unmarshal number 1.5 into Go struct field continueToken.rv of type int64"),
    (token({"v": 1, "rv": 3, "start": "a"}),
     "json: cannot unmarshal number into Go struct field continueToken.v of type string"),
    ("", "unexpected end of JSON input"),
    ("!!!!", "illegal base64 data at input byte 0"),
    ("abcde", "illegal base64 data at input byte 4"),
    ("abc=", "illegal base64 data at input byte 3"),
    (base64.urlsafe_b64encode(b"x").rstrip(b"=").decode(),
     "invalid character 'x' looking for beginning of value"),
])
def test_decode_continue_rejections(tok: str, reason: str) -> None:
    with pytest.raises(BadRequest) as info:
        decode_continue(tok)
    assert info.value.message == PREFIX + reason


@given(st.integers(min_value=-1, max_value=2**63 - 1).filter(lambda rv: rv != 0),
       st.text(min_size=1).filter(lambda s: "/" not in s and s not in (".", "..")))
def test_continue_round_trip(rv: int, start: str) -> None:
    assert decode_continue(encode_continue(rv, start + "\x00")) == (rv, start + "\x00")


@given(st.text())
def test_decode_continue_only_raises_bad_request(tok: str) -> None:
    try:
        decode_continue(tok)
    except BadRequest as exc:
        assert exc.message.startswith(PREFIX)


# --- get --------------------------------------------------------------------------------------

def test_parse_get_options() -> None:
    assert parse_get_options({}) == ""
    assert parse_get_options(q(resourceVersion="42", other="x")) == "42"
    assert parse_get_options(q(export="false")) == ""
    with pytest.raises(BadRequest) as info:
        parse_get_options(q(resourceVersion="abc"))
    assert info.value.message == ('resourceVersion: Invalid value: "abc": strconv.ParseUint: '
                                  'parsing "abc": invalid syntax')
    with pytest.raises(BadRequest) as info:
        parse_get_options(q(export="true"))
    assert info.value.message == ("the export parameter, deprecated since v1.14, is no longer "
                                  "supported")


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


@given(st.dictionaries(st.sampled_from(["watch", "resourceVersion", "resourceVersionMatch",
                                        "sendInitialEvents", "allowWatchBookmarks",
                                        "timeoutSeconds", "limit", "continue", "labelSelector",
                                        "fieldSelector", "pretty"]),
                       st.lists(st.text(max_size=12), min_size=1, max_size=2)))
def test_list_parser_only_raises_status_errors(query: dict[str, list[str]]) -> None:
    try:
        opts = parse_list_options(query, PODS)
    except StatusError as exc:
        assert exc.code in (400, 422)
        return
    if opts.watch and opts.resource_version in ("", "0") and "sendInitialEvents" not in query:
        assert opts.send_initial_events is True
